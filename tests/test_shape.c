/* test_shape.c -- shape inference and the builder: result types of every op
 * family, and the messages for mismatches (node, op and cause named). */
#include <string.h>

#include "check.h"
#include "ir/ir.h"

static evtc_node *leaf(evtc_graph *g, const char *name, evtc_dtype dt, int rank, const int64_t *shape) {
  return evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(dt, rank, shape), NULL, 0, name);
}

/* Checks that n has dtype dt and the given shape. */
static void expect_type(evtc_node *n, evtc_dtype dt, int rank, const int64_t *shape, const char *what) {
  CHECK(n != NULL, "%s: builder failed", what);
  if (!n) return;
  evtc_type want = evtc_type_make(dt, rank, shape);
  char a[96], b[96];
  CHECK(evtc_type_equal(&n->type, &want), "%s: got %s, want %s", what, evtc_type_str(&n->type, a, sizeof a),
        evtc_type_str(&want, b, sizeof b));
}

/* Checks that the graph's first error contains `needle`, then clears it. */
static void expect_error(evtc_graph *g, evtc_node *n, const char *needle) {
  CHECK(n == NULL, "expected a failure mentioning '%s'", needle);
  CHECK(g->diag.status == EVTC_ERR_TYPE, "status %d for '%s'", g->diag.status, needle);
  CHECK(strstr(g->diag.msg, needle) != NULL, "message '%s' lacks '%s'", g->diag.msg, needle);
  evtc_diag_clear(&g->diag);
}

static void test_elementwise_and_broadcast(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *a = leaf(g, "a", EVTC_F32, 3, (int64_t[]){4, 1, 5});
  evtc_node *b = leaf(g, "b", EVTC_F32, 2, (int64_t[]){3, 1});
  expect_type(evtc_binary(g, EVTC_OP_ADD, a, b), EVTC_F32, 3, (int64_t[]){4, 3, 5}, "broadcast add");
  expect_type(evtc_binary(g, EVTC_OP_LT, a, b), EVTC_BOOL, 3, (int64_t[]){4, 3, 5}, "compare gives bool");
  evtc_node *c = leaf(g, "c", EVTC_F32, 1, (int64_t[]){7});
  evtc_node *in[] = {a, c};
  expect_error(g, evtc_node_add(g, EVTC_OP_MUL, in, 2, NULL, 0, "bad"), "node %bad (mul): shapes f32[4,1,5]");
  evtc_node *i = leaf(g, "i", EVTC_I64, 1, (int64_t[]){5});
  expect_error(g, evtc_unary(g, EVTC_OP_EXP, i), "must be a float tensor, not i64");
  expect_error(g, evtc_binary(g, EVTC_OP_ADD, a, i), "different dtypes (f32 vs i64)");
  evtc_attr to = evtc_attr_dtype("dtype", EVTC_F64);
  expect_type(evtc_node_add(g, EVTC_OP_CAST, &i, 1, &to, 1, NULL), EVTC_F64, 1, (int64_t[]){5}, "cast");
  evtc_node *cond = evtc_binary(g, EVTC_OP_GT, a, b);
  evtc_node *w[] = {cond, a, b};
  expect_type(evtc_node_add(g, EVTC_OP_WHERE, w, 3, NULL, 0, NULL), EVTC_F32, 3, (int64_t[]){4, 3, 5}, "where");
  evtc_node *w2[] = {a, a, b};
  expect_error(g, evtc_node_add(g, EVTC_OP_WHERE, w2, 3, NULL, 0, NULL), "must be bool");
  expect_error(g, evtc_node_add(g, EVTC_OP_ADD, &a, 1, NULL, 0, "one"), "node %one (add): takes 2 inputs, got 1");
  evtc_graph_free(g);
}

static void test_reduce_and_layout(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = leaf(g, "x", EVTC_F32, 3, (int64_t[]){2, 3, 4});
  evtc_attr r[] = {evtc_attr_ints("axes", 2, (int64_t[]){-1, 0}), evtc_attr_int("keepdims", 1)};
  expect_type(evtc_node_add(g, EVTC_OP_REDUCE_SUM, &x, 1, r, 2, NULL), EVTC_F32, 3, (int64_t[]){1, 3, 1},
              "reduce keepdims");
  expect_type(evtc_node_add(g, EVTC_OP_REDUCE_MAX, &x, 1, NULL, 0, NULL), EVTC_F32, 0, NULL, "reduce all");
  evtc_attr bad_axes = evtc_attr_ints("axes", 1, (int64_t[]){3});
  expect_error(g, evtc_node_add(g, EVTC_OP_REDUCE_SUM, &x, 1, &bad_axes, 1, NULL), "axis 3 is out of range");
  evtc_attr rs = evtc_attr_ints("shape", 2, (int64_t[]){-1, 4});
  expect_type(evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &rs, 1, NULL), EVTC_F32, 2, (int64_t[]){6, 4}, "reshape");
  evtc_attr rs_bad = evtc_attr_ints("shape", 2, (int64_t[]){5, 5});
  expect_error(g, evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &rs_bad, 1, NULL), "holds 25 elements, the input 24");
  evtc_attr huge = evtc_attr_ints("shape", 4, (int64_t[]){1, 1, (int64_t)1 << 40, (int64_t)1 << 40});
  evtc_attr ex_huge = evtc_attr_ints("shape", 3, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40, 4});
  expect_error(g, evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &huge, 1, NULL), "more than");
  evtc_node *one = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &x, 1, (evtc_attr[]){evtc_attr_int("keepdims", 1)}, 1, NULL);
  expect_error(g, evtc_node_add(g, EVTC_OP_EXPAND, &one, 1, &ex_huge, 1, NULL), "result has more than");
  evtc_attr sl_big[] = {evtc_attr_ints("starts", 3, (int64_t[]){0, 0, 0}),
                        evtc_attr_ints("ends", 3, (int64_t[]){INT64_MAX, INT64_MAX, INT64_MAX}),
                        evtc_attr_ints("steps", 3, (int64_t[]){INT64_MAX, 1, 1})};
  expect_type(evtc_node_add(g, EVTC_OP_SLICE, &x, 1, sl_big, 3, NULL), EVTC_F32, 3, (int64_t[]){1, 3, 4},
              "slice with a huge step does not overflow");
  evtc_attr pm = evtc_attr_ints("perm", 3, (int64_t[]){2, 0, 1});
  expect_type(evtc_node_add(g, EVTC_OP_PERMUTE, &x, 1, &pm, 1, NULL), EVTC_F32, 3, (int64_t[]){4, 2, 3}, "permute");
  evtc_attr pm_bad = evtc_attr_ints("perm", 3, (int64_t[]){0, 0, 1});
  expect_error(g, evtc_node_add(g, EVTC_OP_PERMUTE, &x, 1, &pm_bad, 1, NULL), "not a permutation");
  evtc_attr ex = evtc_attr_ints("shape", 4, (int64_t[]){5, 2, 3, 4});
  expect_type(evtc_node_add(g, EVTC_OP_EXPAND, &x, 1, &ex, 1, NULL), EVTC_F32, 4, (int64_t[]){5, 2, 3, 4}, "expand");
  evtc_attr sl[] = {evtc_attr_ints("axes", 2, (int64_t[]){1, 2}), evtc_attr_ints("starts", 2, (int64_t[]){-2, 0}),
                    evtc_attr_ints("ends", 2, (int64_t[]){100, 4}), evtc_attr_ints("steps", 2, (int64_t[]){1, 3})};
  expect_type(evtc_node_add(g, EVTC_OP_SLICE, &x, 1, sl, 4, NULL), EVTC_F32, 3, (int64_t[]){2, 2, 2},
              "slice clamps and steps");
  evtc_attr ax = evtc_attr_int("axis", 1);
  evtc_node *cat[] = {x, x, x};
  expect_type(evtc_node_add(g, EVTC_OP_CONCAT, cat, 3, &ax, 1, NULL), EVTC_F32, 3, (int64_t[]){2, 9, 4}, "concat");
  evtc_attr pd[] = {evtc_attr_ints("pads", 6, (int64_t[]){0, 1, 2, 0, 1, 0}),
                    evtc_attr_ints("interior", 3, (int64_t[]){0, 0, 1})};
  expect_type(evtc_node_add(g, EVTC_OP_PAD, &x, 1, pd, 2, NULL), EVTC_F32, 3, (int64_t[]){2, 5, 9}, "pad");
  evtc_node *idx = leaf(g, "idx", EVTC_I64, 2, (int64_t[]){5, 6});
  evtc_attr ga = evtc_attr_int("axis", 1);
  evtc_node *gin[] = {x, idx};
  evtc_node *gat = evtc_node_add(g, EVTC_OP_GATHER, gin, 2, &ga, 1, NULL);
  expect_type(gat, EVTC_F32, 4, (int64_t[]){2, 5, 6, 4}, "gather");
  evtc_attr sc[] = {evtc_attr_int("axis", 1), evtc_attr_int("size", 3)};
  evtc_node *sin[] = {gat, idx};
  expect_type(evtc_node_add(g, EVTC_OP_SCATTER_ADD, sin, 2, sc, 2, NULL), EVTC_F32, 3, (int64_t[]){2, 3, 4},
              "scatter_add inverts gather's shape");
  evtc_node *base = leaf(g, "base", EVTC_F32, 3, (int64_t[]){2, 7, 4}), *short_base = leaf(g, "sb", EVTC_F32, 3,
                                                                                           (int64_t[]){2, 2, 4});
  evtc_node *bin[] = {gat, idx, base}, *sbin[] = {gat, idx, short_base};
  expect_type(evtc_node_add(g, EVTC_OP_SCATTER_ADD, bin, 3, sc, 2, NULL), EVTC_F32, 3, (int64_t[]){2, 7, 4},
              "scatter_add into a base with rows beyond size");
  expect_error(g, evtc_node_add(g, EVTC_OP_SCATTER_ADD, sbin, 3, sc, 2, "sa"),
               "base f32[2,2,4] is not f32[2,3,4] (at least 3 along axis 1)");
  evtc_attr oh = evtc_attr_int("depth", 10);
  expect_type(evtc_node_add(g, EVTC_OP_ONE_HOT, &idx, 1, &oh, 1, NULL), EVTC_F32, 3, (int64_t[]){5, 6, 10},
              "one_hot");
  evtc_attr unknown = evtc_attr_int("depht", 10);
  expect_error(g, evtc_node_add(g, EVTC_OP_ONE_HOT, &idx, 1, &unknown, 1, "oh"), "unknown attribute 'depht'");
  expect_error(g, evtc_node_add(g, EVTC_OP_ONE_HOT, &idx, 1, NULL, 0, "oh"), "missing required attribute 'depth'");
  evtc_graph_free(g);
}

static void test_mainloops(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *a = leaf(g, "a", EVTC_F32, 2, (int64_t[]){8, 3});
  evtc_node *b = leaf(g, "b", EVTC_F32, 2, (int64_t[]){5, 3});
  evtc_attr tb = evtc_attr_int("trans_b", 1);
  evtc_node *ab[] = {a, b};
  expect_type(evtc_node_add(g, EVTC_OP_MATMUL, ab, 2, &tb, 1, NULL), EVTC_F32, 2, (int64_t[]){8, 5}, "matmul^T");
  expect_error(g, evtc_node_add(g, EVTC_OP_MATMUL, ab, 2, NULL, 0, "mm"), "node %mm (matmul): inner dims differ: 3 vs 5");
  evtc_node *p = leaf(g, "p", EVTC_F32, 4, (int64_t[]){2, 1, 8, 3});
  evtc_node *q = leaf(g, "q", EVTC_F32, 3, (int64_t[]){7, 3, 4});
  evtc_node *pq[] = {p, q};
  expect_type(evtc_node_add(g, EVTC_OP_BATCH_MATMUL, pq, 2, NULL, 0, NULL), EVTC_F32, 4, (int64_t[]){2, 7, 8, 4},
              "batch_matmul broadcasts batch dims");
  evtc_node *x = leaf(g, "x", EVTC_F32, 4, (int64_t[]){2, 6, 11, 9});
  evtc_node *w = leaf(g, "w", EVTC_F32, 4, (int64_t[]){4, 3, 3, 2});
  evtc_attr cv[] = {evtc_attr_ints("stride", 2, (int64_t[]){2, 1}), evtc_attr_ints("padding", 4, (int64_t[]){1, 0, 1, 1}),
                    evtc_attr_ints("dilation", 2, (int64_t[]){1, 2}), evtc_attr_int("groups", 2)};
  evtc_node *xw[] = {x, w};
  evtc_node *y = evtc_node_add(g, EVTC_OP_CONV2D, xw, 2, cv, 4, NULL);
  /* H: (11+2-3)/2+1 = 6; W: (9+1-(2*1+1))/1+1 = 8 */
  expect_type(y, EVTC_F32, 4, (int64_t[]){2, 4, 6, 8}, "conv2d");
  evtc_attr cvb[] = {cv[0], cv[1], cv[2], cv[3], evtc_attr_ints("shape", 4, (int64_t[]){2, 6, 11, 9})};
  evtc_node *yw[] = {y, w};
  expect_type(evtc_node_add(g, EVTC_OP_CONV2D_BACKWARD_INPUT, yw, 2, cvb, 5, NULL), EVTC_F32, 4,
              (int64_t[]){2, 6, 11, 9}, "conv2d_backward_input");
  evtc_attr g3 = evtc_attr_int("groups", 4);
  expect_error(g, evtc_node_add(g, EVTC_OP_CONV2D, xw, 2, &g3, 1, NULL), "groups 4 must divide");
  evtc_attr pk[] = {evtc_attr_ints("kernel", 2, (int64_t[]){3, 3}), evtc_attr_ints("stride", 2, (int64_t[]){2, 2}),
                    evtc_attr_ints("padding", 4, (int64_t[]){1, 1, 1, 1})};
  evtc_node *mp = evtc_node_add(g, EVTC_OP_MAXPOOL2D, &x, 1, pk, 3, NULL);
  expect_type(mp, EVTC_F32, 4, (int64_t[]){2, 6, 6, 5}, "maxpool2d");
  evtc_node *mb[] = {mp, x};
  expect_type(evtc_node_add(g, EVTC_OP_MAXPOOL2D_BACKWARD, mb, 2, pk, 3, NULL), EVTC_F32, 4,
              (int64_t[]){2, 6, 11, 9}, "maxpool2d_backward");
  expect_type(evtc_unary(g, EVTC_OP_GLOBAL_AVGPOOL, x), EVTC_F32, 4, (int64_t[]){2, 6, 1, 1}, "global_avgpool");
  evtc_graph_free(g);
}

static void test_composites(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = leaf(g, "x", EVTC_F32, 3, (int64_t[]){4, 5, 6});
  evtc_node *gm = leaf(g, "gm", EVTC_F32, 2, (int64_t[]){5, 6});
  evtc_attr ax = evtc_attr_int("axis", 1);
  evtc_node *ln[] = {x, gm, gm};
  expect_type(evtc_node_add(g, EVTC_OP_LAYERNORM, ln, 3, &ax, 1, NULL), EVTC_F32, 3, (int64_t[]){4, 5, 6},
              "layernorm over the last two dims");
  expect_error(g, evtc_node_add(g, EVTC_OP_LAYERNORM, ln, 3, NULL, 0, "ln"), "the normalised dims needs f32[6]");
  evtc_node *c = leaf(g, "c", EVTC_F32, 1, (int64_t[]){5});
  evtc_node *bn[] = {x, c, c};
  expect_type(evtc_node_add(g, EVTC_OP_BATCHNORM, bn, 3, NULL, 0, NULL), EVTC_F32, 3, (int64_t[]){4, 5, 6},
              "batchnorm");
  evtc_node *rm[] = {x, c};
  expect_type(evtc_node_add(g, EVTC_OP_BATCHNORM_RUNNING_VAR, rm, 2, NULL, 0, NULL), EVTC_F32, 1, (int64_t[]){5},
              "running var");
  evtc_node *logits = leaf(g, "logits", EVTC_F32, 2, (int64_t[]){8, 10});
  evtc_node *labels = leaf(g, "labels", EVTC_I64, 1, (int64_t[]){8});
  evtc_node *ce[] = {logits, labels};
  expect_type(evtc_node_add(g, EVTC_OP_CROSS_ENTROPY, ce, 2, NULL, 0, NULL), EVTC_F32, 0, NULL, "cross_entropy");
  evtc_node *bad_labels = leaf(g, "bl", EVTC_I64, 1, (int64_t[]){7});
  evtc_node *ce2[] = {logits, bad_labels};
  expect_error(g, evtc_node_add(g, EVTC_OP_CROSS_ENTROPY, ce2, 2, NULL, 0, NULL), "one label per row");
  evtc_node *table = leaf(g, "table", EVTC_F32, 2, (int64_t[]){100, 16});
  evtc_node *ids = leaf(g, "ids", EVTC_I32, 2, (int64_t[]){3, 7});
  evtc_node *em[] = {table, ids};
  expect_type(evtc_node_add(g, EVTC_OP_EMBEDDING, em, 2, NULL, 0, NULL), EVTC_F32, 3, (int64_t[]){3, 7, 16},
              "embedding");
  evtc_attr p = evtc_attr_float("p", 1.0);
  expect_error(g, evtc_node_add(g, EVTC_OP_DROPOUT, &x, 1, &p, 1, NULL), "must be in [0, 1)");
  evtc_graph_free(g);
}

static void test_names_and_rebatch(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = leaf(g, "x", EVTC_F32, 2, (int64_t[]){32, 64});
  evtc_node *x2 = leaf(g, "x", EVTC_F32, 2, (int64_t[]){32, 64});
  CHECK(x2 && strcmp(x2->name, "x.1") == 0, "a taken name gets a suffix, got %s", x2 ? x2->name : "(null)");
  CHECK(evtc_graph_find(g, "x") == x, "lookup by name");
  evtc_attr rs = evtc_attr_ints("shape", 3, (int64_t[]){-1, 8, 8});
  evtc_node *r = evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &rs, 1, "r");
  evtc_node *s = evtc_unary(g, EVTC_OP_TANH, r);
  evtc_graph_add_output(g, s, NULL);
  evtc_diag d = {0};
  evtc_graph *b = evtc_graph_rebatch(g, 5, &d);
  CHECK(b != NULL, "rebatch: %s", d.msg);
  if (b) {
    expect_type(b->nodes[s->id], EVTC_F32, 3, (int64_t[]){5, 8, 8}, "rebatched output");
    CHECK(b->n_outputs == 1 && b->outputs[0].node == b->nodes[s->id], "outputs mapped");
    evtc_graph_free(b);
  }
  evtc_attr fixed = evtc_attr_ints("shape", 3, (int64_t[]){32, 8, 8});
  evtc_node *r2 = evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &fixed, 1, "fixed");
  CHECK(r2 != NULL, "fixed reshape builds at batch 32");
  b = evtc_graph_rebatch(g, 5, &d);
  CHECK(b == NULL && strstr(d.msg, "node %fixed (reshape)") != NULL, "rebatch names the node: %s", d.msg);
  evtc_graph_free(g);
}

/* A type whose element count passes INT64_MAX (the shape of a fuzzed ONNX file): its numel saturates, and its
 * strides, saturated as evtc_type_make writes them, read as contiguous without a signed overflow (which the
 * sanitised build stops on). */
static void test_huge_shapes(void) {
  const int64_t huge[] = {16911429696, 34359729920, 2};
  evtc_type t = evtc_type_make(EVTC_F32, 3, huge);
  CHECK(evtc_type_numel(&t) == INT64_MAX, "numel saturates: %lld", (long long)evtc_type_numel(&t));
  CHECK(evtc_type_is_contiguous(&t), "the made type reads as contiguous");
  t.strides[0] = 7;
  CHECK(!evtc_type_is_contiguous(&t), "an outer stride that differs does not");
}

int main(void) {
  test_huge_shapes();
  test_elementwise_and_broadcast();
  test_reduce_and_layout();
  test_mainloops();
  test_composites();
  test_names_and_rebatch();
  return check_summary();
}
