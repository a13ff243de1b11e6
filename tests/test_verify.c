/* test_verify.c -- the verifier accepts well-formed graphs and names the
 * first violation in graphs corrupted after building: wrong types, duplicate
 * or invalid names, inputs out of order, bad ids, arities, attribute kinds,
 * init schemes, update targets and losses.  It never changes the graph. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/text.h"

/* x[4,3] input, w[3,5] param, h = matmul(x, w), r = relu(h), l = reduce_mean(r);
 * outputs r and l, loss l.  Node ids: x 0, w 1, h 2, r 3, l 4. */
static evtc_graph *build_named(void) {
  evtc_graph *g = evtc_graph_new("v");
  evtc_node *x = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_F32, 2, (int64_t[]){4, 3}), NULL, 0, "x");
  evtc_node *w = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F32, 2, (int64_t[]){3, 5}), NULL, 0, "w");
  evtc_node *xw[] = {x, w};
  evtc_node *h = evtc_node_add(g, EVTC_OP_MATMUL, xw, 2, NULL, 0, "h");
  evtc_node *r = evtc_node_add(g, EVTC_OP_RELU, &h, 1, NULL, 0, "r");
  evtc_node *l = evtc_node_add(g, EVTC_OP_REDUCE_MEAN, &r, 1, NULL, 0, "l");
  evtc_graph_add_output(g, r, NULL);
  evtc_graph_add_output(g, l, NULL);
  g->loss = l;
  EVTC_ASSERT(g->diag.status == EVTC_OK);
  return g;
}

/* Verifies g, expects failure with a message containing `needle` and the
 * offending node `node` (NULL: no node) reported by evtc_graph_verify_at. */
static void expect_fail(evtc_graph *g, const char *node, const char *needle, const char *what) {
  const evtc_node *where = NULL;
  evtc_status st = evtc_graph_verify_at(g, &where);
  CHECK(st != EVTC_OK, "%s: verifier accepted the graph", what);
  CHECK(strstr(g->diag.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, g->diag.msg, needle);
  if (node) CHECK(where && strcmp(where->name, node) == 0, "%s: blamed %s", what, where ? where->name : "nothing");
  else CHECK(where == NULL, "%s: blamed node %s", what, where ? where->name : "");
  evtc_graph_free(g);
}

static void test_valid(void) {
  evtc_graph *g = build_named();
  char *before = evtc_graph_to_string(g);
  CHECK(evtc_graph_verify(g) == EVTC_OK, "valid graph rejected: %s", g->diag.msg);
  CHECK(evtc_graph_verify(g) == EVTC_OK, "second verify rejected: %s", g->diag.msg);
  char *after = evtc_graph_to_string(g);
  CHECK(strcmp(before, after) == 0, "verify changed the graph:\n%s", after);
  free(before);
  free(after);
  evtc_graph_free(g);
  /* A node renamed in place, so that the name table misses it, is caught too. */
  g = build_named();
  evtc_graph_find(g, "h")->name = "hh";
  expect_fail(g, "hh", "node %hh (matmul): name is not unique (or not in the name table)", "renamed");
}

static void test_types(void) {
  evtc_graph *g = build_named();
  evtc_graph_find(g, "r")->type = evtc_type_make(EVTC_F32, 2, (int64_t[]){4, 6});
  expect_fail(g, "r", "node %r (relu): type f32[4,6] differs from the inferred f32[4,5]", "wrong shape");
  g = build_named();
  evtc_graph_find(g, "h")->type.dtype = EVTC_F64;
  expect_fail(g, "h", "node %h (matmul): type f64[4,5] differs from the inferred f32[4,5]", "wrong dtype");
  g = build_named();
  evtc_node *r = evtc_graph_find(g, "r");
  r->type.strides[0] = 7;
  expect_fail(g, "r", "type f32[4,5]@[7,1] differs from the inferred f32[4,5]", "wrong strides");
  g = build_named();
  evtc_graph_find(g, "x")->type.shape[1] = 2;   /* now matmul's inputs no longer fit */
  expect_fail(g, "h", "node %h (matmul): inner dims differ: 2 vs 3", "input type changed");
  g = build_named();
  evtc_graph_find(g, "x")->type.rank = 7;
  expect_fail(g, "x", "node %x (input): rank 7 is outside 0..6", "rank");
  g = build_named();
  evtc_graph_find(g, "w")->type.shape[0] = -3;
  expect_fail(g, "w", "node %w (param): dimension 0 has a negative size or stride", "negative dim");
}

static void test_names_and_order(void) {
  evtc_graph *g = build_named();
  evtc_graph_find(g, "r")->name = "h";
  expect_fail(g, "h", "node %h (relu): name is not unique", "duplicate name");
  g = build_named();
  evtc_graph_find(g, "h")->name = "a b";
  expect_fail(g, "a b", "name \"a b\" is not one or more of [A-Za-z0-9_.]", "invalid name");
  g = build_named();
  evtc_node *h = evtc_graph_find(g, "h");
  h->inputs[0] = evtc_graph_find(g, "r");
  expect_fail(g, "h", "node %h (matmul): input 0 (%r) is not a node defined before it", "input out of order");
  g = build_named();
  evtc_node *r = evtc_graph_find(g, "r"), *l = evtc_graph_find(g, "l");
  g->nodes[3] = l;
  g->nodes[4] = r;
  expect_fail(g, "l", "node %l (reduce_mean): id 4 but index 3 in the graph", "swapped nodes");
  g = build_named();
  evtc_graph_find(g, "h")->n_inputs = 1;
  expect_fail(g, "h", "node %h (matmul): has 1 inputs, the op takes 2..2", "arity");
  g = build_named();
  evtc_graph *other = build_named();
  evtc_graph_find(g, "r")->inputs[0] = evtc_graph_find(other, "h");   /* same id, another graph */
  expect_fail(g, "r", "input 0 (%h) is not a node defined before it", "foreign input");
  evtc_graph_free(other);
}

static void test_attributes(void) {
  evtc_graph *g = build_named();
  evtc_graph_find(g, "h")->attrs[0].kind = EVTC_ATTR_FLOAT;
  expect_fail(g, "h", "node %h (matmul): attribute 'trans_a' has the wrong kind", "attr kind");
  g = build_named();
  evtc_attr bad = evtc_attr_str("init", "bogus");
  evtc_leaf_add(g, EVTC_OP_STATE, evtc_type_make(EVTC_F32, 0, NULL), &bad, 1, "s");
  expect_fail(g, "s", "node %s (state): init \"bogus\" is not one of zeros", "init scheme");
  g = build_named();
  evtc_attr quote = evtc_attr_str("init", "a\"b");
  evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F32, 0, NULL), &quote, 1, "p");
  expect_fail(g, "p", "attribute 'init' contains a '\"' or a newline", "unprintable string");
  g = build_named();
  evtc_node *c = evtc_scalar(g, EVTC_F32, 1.0);
  c->attrs[1] = evtc_attr_floats("data", 2, (double[]){1, 2});
  expect_fail(g, c->name, "data has 2 values but the type holds 1", "const data");
  g = build_named();
  evtc_graph_find(g, "l")->attrs[0].n = -1;
  expect_fail(g, "l", "attribute 'axes' has no values", "negative list length");
}

static void test_outputs_and_loss(void) {
  evtc_graph *g = build_named();
  evtc_graph_add_output(g, evtc_graph_find(g, "r"), evtc_graph_find(g, "x"));
  expect_fail(g, NULL, "output 2 (%r) updates %x (input), which is not a param or state", "update an input");
  g = build_named();
  evtc_graph_add_output(g, evtc_graph_find(g, "r"), evtc_graph_find(g, "w"));
  expect_fail(g, NULL, "output 2 (%r) has type f32[4,5] but updates %w of type f32[3,5]", "update type");
  g = build_named();
  evtc_node *w = evtc_graph_find(g, "w");
  evtc_graph_add_output(g, w, w);
  evtc_graph_add_output(g, w, w);
  expect_fail(g, NULL, "outputs 2 and 3 both update %w", "double update");
  g = build_named();
  g->outputs[0].node = NULL;
  expect_fail(g, NULL, "output 0 is not a node of the graph", "null output");
  g = build_named();
  g->loss = evtc_graph_find(g, "r");
  expect_fail(g, NULL, "loss %r must be a scalar float, not f32[4,5]", "loss rank");
  g = build_named();
  evtc_node *i = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_I64, 0, NULL), NULL, 0, "i");
  g->loss = i;
  expect_fail(g, NULL, "loss %i must be a scalar float, not i64[]", "loss dtype");
  g = build_named();
  evtc_diag_set(&g->diag, EVTC_ERR_TYPE, "earlier failure");
  expect_fail(g, NULL, "earlier failure", "diag already set");
}

int main(void) {
  test_valid();
  test_types();
  test_names_and_order();
  test_attributes();
  test_outputs_and_loss();
  return check_summary();
}
