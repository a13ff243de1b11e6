/* test_interp.c -- the reference interpreter, precision rounding, Philox
 * and parameter initialisation, checked against hand-computed values and
 * the Random123 known-answer vectors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/ir.h"
#include "runtime/init.h"
#include "runtime/interp.h"
#include "runtime/philox.h"
#include "runtime/precision.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * (1.0 + fabs(b)); }

static bool all_near(const double *got, const double *want, int n) {
  for (int i = 0; i < n; i++)
    if (!near(got[i], want[i])) {
      fprintf(stderr, "  element %d: got %.17g, want %.17g\n", i, got[i], want[i]);
      return false;
    }
  return true;
}

static evtc_node *input(evtc_graph *g, const char *name, evtc_dtype dt, int rank, const int64_t *shape) {
  return evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(dt, rank, shape), NULL, 0, name);
}

static void test_precision(void) {
  /* f16: ties to even, subnormals, overflow */
  CHECK(evtc_round_to(EVTC_F16, 1.0 + ldexp(1, -11)) == 1.0, "f16 tie rounds to even (down)");
  CHECK(evtc_round_to(EVTC_F16, 1.0 + 3 * ldexp(1, -11)) == 1.0 + ldexp(1, -9), "f16 tie rounds to even (up)");
  CHECK(evtc_round_to(EVTC_F16, 0.1) == 0.0999755859375, "f16(0.1) = %.17g", evtc_round_to(EVTC_F16, 0.1));
  CHECK(evtc_round_to(EVTC_F16, 65504.0) == 65504.0, "f16 max");
  CHECK(evtc_round_to(EVTC_F16, 65519.0) == 65504.0, "f16 below the overflow threshold");
  CHECK(isinf(evtc_round_to(EVTC_F16, 65520.0)) && evtc_round_to(EVTC_F16, -65520.0) < 0, "f16 overflow");
  CHECK(evtc_round_to(EVTC_F16, ldexp(1, -24)) == ldexp(1, -24), "f16 smallest subnormal");
  CHECK(evtc_round_to(EVTC_F16, ldexp(1, -25)) == 0.0, "f16 half the smallest subnormal ties to 0");
  CHECK(evtc_round_to(EVTC_F16, 3 * ldexp(1, -25)) == ldexp(1, -23), "f16 subnormal tie to even");
  CHECK(evtc_round_to(EVTC_F16, -5 * ldexp(1, -25) * 0.9) == -ldexp(1, -24) * 2, "f16 negative subnormal");
  CHECK(isnan(evtc_round_to(EVTC_F16, NAN)), "f16 NaN");
  /* bf16 */
  CHECK(evtc_round_to(EVTC_BF16, 0.1) == 0.10009765625, "bf16(0.1) = %.17g", evtc_round_to(EVTC_BF16, 0.1));
  CHECK(evtc_round_to(EVTC_BF16, 1.0 + ldexp(1, -8)) == 1.0, "bf16 tie to even");
  CHECK(evtc_round_to(EVTC_BF16, 1.0 + 3 * ldexp(1, -8)) == 1.0 + ldexp(1, -6), "bf16 tie to even (up)");
  CHECK(evtc_round_to(EVTC_BF16, ldexp(255, 120)) == ldexp(255, 120), "bf16 max");
  CHECK(isinf(evtc_round_to(EVTC_BF16, 3.4e38)), "bf16 overflow");
  /* f32, ints, bool */
  CHECK(evtc_round_to(EVTC_F32, 0.1) == (double)0.1f, "f32 cast");
  CHECK(evtc_round_to(EVTC_I64, -2.7) == -2.0 && evtc_round_to(EVTC_I32, 2.7) == 2.0, "ints truncate");
  CHECK(evtc_round_to(EVTC_BOOL, 0.5) == 1.0 && evtc_round_to(EVTC_BOOL, 0.0) == 0.0, "bool");
  CHECK(evtc_round_to(EVTC_F64, 0.1) == 0.1, "f64 unchanged");
}

static void test_philox(void) {
  /* Random123 tests/kat_vectors, the three philox4x32 10 lines */
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
       0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420,
       0x24126ea1},
  };
  for (int v = 0; v < 3; v++) {
    uint32_t out[4];
    evtc_philox4x32_10(kat[v], kat[v] + 4, out);
    CHECK(memcmp(out, kat[v] + 6, sizeof out) == 0, "philox KAT %d: %08x %08x %08x %08x", v, out[0], out[1],
          out[2], out[3]);
  }
  /* u = (out[0] >> 8) * 2^-24 with counter {index, offset}, key seed */
  CHECK(evtc_philox_uniform(0, 0, 0) == (double)(0x6627e8d5u >> 8) / 16777216.0, "uniform from the KAT block");
  double lo = 1, hi = 0;
  for (uint64_t i = 0; i < 1000; i++) {
    double u = evtc_philox_uniform(7, 3, i);
    lo = u < lo ? u : lo;
    hi = u > hi ? u : hi;
  }
  CHECK(lo >= 0 && lo < 0.01 && hi < 1 && hi > 0.99, "uniform range [%g, %g]", lo, hi);
}

/* A graph with x[2,3] @ w[3,2] (+ trans_b) + broadcast bias, reductions, softmax, cross entropy. */
static void test_dense_ops(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = input(g, "x", EVTC_F64, 2, (int64_t[]){2, 3});
  evtc_node *w = input(g, "w", EVTC_F64, 2, (int64_t[]){3, 2});
  evtc_node *wt = input(g, "wt", EVTC_F64, 2, (int64_t[]){2, 3});
  evtc_node *b = input(g, "b", EVTC_F64, 1, (int64_t[]){2});
  evtc_node *lab = input(g, "lab", EVTC_I64, 1, (int64_t[]){2});
  evtc_node *mm = evtc_binary(g, EVTC_OP_MATMUL, x, w);
  evtc_attr tb = evtc_attr_int("trans_b", 1);
  evtc_node *mmt = evtc_node_add(g, EVTC_OP_MATMUL, (evtc_node *[]){x, wt}, 2, &tb, 1, "mmt");
  evtc_node *y = evtc_binary(g, EVTC_OP_ADD, mm, b);
  evtc_attr ax0 = evtc_attr_ints("axes", 1, (int64_t[]){0});
  evtc_node *cs = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &x, 1, &ax0, 1, "cs");
  evtc_node *mx = evtc_node_add(g, EVTC_OP_REDUCE_MAX, &x, 1, NULL, 0, "mx");
  evtc_node *sm = evtc_node_add(g, EVTC_OP_SOFTMAX, &y, 1, NULL, 0, "sm");
  evtc_node *ce = evtc_node_add(g, EVTC_OP_CROSS_ENTROPY, (evtc_node *[]){y, lab}, 2, NULL, 0, "ce");
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  double xv[] = {1, 2, 3, 4, 5, 6}, wv[] = {1, -1, 0, 2, 0.5, 0}, wtv[] = {1, 0, 0.5, -1, 2, 0}, bv[] = {0.25, -1};
  double labv[] = {1, 0};
  evtc_interp *it = evtc_interp_new(g);
  evtc_interp_set(it, x, xv);
  evtc_interp_set(it, w, wv);
  evtc_interp_set(it, wt, wtv);
  evtc_interp_set(it, b, bv);
  evtc_interp_set(it, lab, labv);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  /* [1 2 3; 4 5 6] @ [1 -1; 0 2; .5 0] = [2.5 3; 7 6] */
  CHECK(all_near(evtc_interp_value(it, mm), (double[]){2.5, 3, 7, 6}, 4), "matmul");
  CHECK(all_near(evtc_interp_value(it, mmt), (double[]){2.5, 3, 7, 6}, 4), "matmul trans_b");
  CHECK(all_near(evtc_interp_value(it, y), (double[]){2.75, 2, 7.25, 5}, 4), "add broadcast");
  CHECK(all_near(evtc_interp_value(it, cs), (double[]){5, 7, 9}, 3), "reduce_sum axes=[0]");
  CHECK(evtc_interp_value(it, mx)[0] == 6, "reduce_max all");
  double e = exp(-0.75), s0 = 1 / (1 + e);  /* softmax([2.75, 2]) = [1/(1+e^-.75), ...] */
  CHECK(all_near(evtc_interp_value(it, sm), (double[]){s0, 1 - s0}, 2), "softmax");
  /* rows: label 1 of [2.75,2]: -log(1-s0); label 0 of [7.25,5]: -log(1/(1+e^-2.25)) */
  double want = (-log(1 - s0) + log(1 + exp(-2.25))) / 2;
  CHECK(near(evtc_interp_value(it, ce)[0], want), "cross_entropy %.17g vs %.17g", evtc_interp_value(it, ce)[0],
        want);
  /* an out-of-range label is a runtime error naming the node */
  labv[1] = 2;
  evtc_diag_clear(&d);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_ERR_RUNTIME && strstr(d.msg, "%ce (cross_entropy)"), "label: %s", d.msg);
  evtc_interp_free(it);
  evtc_graph_free(g);
}

static void test_gather_and_errors(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = input(g, "x", EVTC_F32, 2, (int64_t[]){3, 2});
  evtc_node *idx = input(g, "idx", EVTC_I64, 1, (int64_t[]){3});
  evtc_node *gat = evtc_node_add(g, EVTC_OP_GATHER, (evtc_node *[]){x, idx}, 2, NULL, 0, "picked");
  evtc_node *a = input(g, "a", EVTC_I32, 1, (int64_t[]){2});
  evtc_node *q = evtc_node_add(g, EVTC_OP_DIV, (evtc_node *[]){a, a}, 2, NULL, 0, "q");
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  double xv[] = {0.1, 1, 2, 3, 4, 5}, iv[] = {2, -3, -1}, av[] = {-7, 3};
  evtc_interp *it = evtc_interp_new(g);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_ERR_RUNTIME && strstr(d.msg, "%x (input)"), "unset input: %s", d.msg);
  evtc_interp_set(it, x, xv);
  evtc_interp_set(it, idx, iv);
  evtc_interp_set(it, a, av);
  evtc_diag_clear(&d);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  /* rows 2, 0 (= -3), 2 (= -1); the f32 input 0.1 is rounded */
  CHECK(all_near(evtc_interp_value(it, gat), (double[]){4, 5, (double)0.1f, 1, 4, 5}, 6), "gather wraps negatives");
  CHECK(all_near(evtc_interp_value(it, q), (double[]){1, 1}, 2), "int division");
  iv[1] = 3;
  evtc_diag_clear(&d);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_ERR_RUNTIME && strstr(d.msg, "%picked (gather)") &&
            strstr(d.msg, "index 3"), "gather out of range: %s", d.msg);
  iv[1] = -4;
  evtc_diag_clear(&d);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_ERR_RUNTIME && strstr(d.msg, "index -4"), "gather -n-1: %s", d.msg);
  iv[1] = 0;
  av[1] = 0;
  evtc_diag_clear(&d);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_ERR_RUNTIME && strstr(d.msg, "%q (div)") && strstr(d.msg, "zero"),
        "div by zero: %s", d.msg);
  evtc_interp_free(it);
  evtc_graph_free(g);
}

/* conv2d with padding, and maxpool backward routing on ties. */
static void test_conv_pool(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = input(g, "x", EVTC_F64, 4, (int64_t[]){1, 1, 2, 3});
  evtc_node *w = input(g, "w", EVTC_F64, 4, (int64_t[]){1, 1, 2, 2});
  evtc_attr pad = evtc_attr_ints("padding", 4, (int64_t[]){0, 1, 0, 0});   /* one column on the left */
  evtc_node *y = evtc_node_add(g, EVTC_OP_CONV2D, (evtc_node *[]){x, w}, 2, &pad, 1, "y");
  evtc_attr kern = evtc_attr_ints("kernel", 2, (int64_t[]){2, 2});
  evtc_attr st = evtc_attr_ints("stride", 2, (int64_t[]){1, 1});
  evtc_node *mp = evtc_node_add(g, EVTC_OP_MAXPOOL2D, &x, 1, (evtc_attr[]){kern, st}, 2, "mp");
  evtc_node *dy = input(g, "dy", EVTC_F64, 4, (int64_t[]){1, 1, 1, 2});
  evtc_node *dx = evtc_node_add(g, EVTC_OP_MAXPOOL2D_BACKWARD, (evtc_node *[]){dy, x}, 2,
                                (evtc_attr[]){kern, st}, 2, "dx");
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  /* x = [[1 2 3],[4 5 6]], w = [[1 0],[0 -1]]; padded x = [[0 1 2 3],[0 4 5 6]];
   * y[0,j] = xp[0,j] - xp[1,j+1] -> [0-4, 1-5, 2-6] */
  double xv[] = {1, 2, 3, 4, 5, 6}, wv[] = {1, 0, 0, -1}, dyv[] = {10, 20};
  evtc_interp *it = evtc_interp_new(g);
  evtc_interp_set(it, x, xv);
  evtc_interp_set(it, w, wv);
  evtc_interp_set(it, dy, dyv);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  CHECK(all_near(evtc_interp_value(it, y), (double[]){-4, -4, -4}, 3), "conv2d with left padding");
  CHECK(all_near(evtc_interp_value(it, mp), (double[]){5, 6}, 2), "maxpool2d");
  CHECK(all_near(evtc_interp_value(it, dx), (double[]){0, 0, 0, 0, 10, 20}, 6), "maxpool2d_backward");
  /* ties: all equal -> the first (top-left) position of each window wins */
  for (int i = 0; i < 6; i++) xv[i] = 1;
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  CHECK(all_near(evtc_interp_value(it, dx), (double[]){10, 20, 0, 0, 0, 0}, 6), "maxpool tie routing");
  evtc_interp_free(it);
  evtc_graph_free(g);
}

static void test_dropout(void) {
  enum { N = 20000 };
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = input(g, "x", EVTC_F64, 1, (int64_t[]){N});
  evtc_attr at[2] = {evtc_attr_float("p", 0.25), evtc_attr_int("seed", 42)};
  evtc_node *y = evtc_node_add(g, EVTC_OP_DROPOUT, &x, 1, at, 2, "drop");
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  double *xv = malloc(sizeof(double) * N), *first = malloc(sizeof(double) * N);
  for (int i = 0; i < N; i++) xv[i] = 1.0 + i % 7;
  evtc_interp *it = evtc_interp_new(g);
  evtc_interp_set(it, x, xv);
  evtc_diag d = {0};
  evtc_interp_run(it, 5, &d);
  memcpy(first, evtc_interp_value(it, y), sizeof(double) * N);
  int kept = 0, scaled_ok = 1;
  for (int i = 0; i < N; i++) {
    if (first[i] != 0) {
      kept++;
      scaled_ok &= near(first[i], xv[i] / 0.75);
    }
    scaled_ok &= (first[i] != 0) == (evtc_philox_uniform(42, 5, (uint64_t)i) >= 0.25);
  }
  CHECK(scaled_ok, "kept elements are x/(1-p), exactly where philox >= p");
  CHECK(fabs(kept / (double)N - 0.75) < 0.015, "keep rate %g", kept / (double)N);
  evtc_interp_run(it, 5, &d);
  CHECK(memcmp(first, evtc_interp_value(it, y), sizeof(double) * N) == 0, "same seed and step: same mask");
  evtc_interp_run(it, 6, &d);
  int differ = 0;
  for (int i = 0; i < N; i++) differ += (first[i] == 0) != (evtc_interp_value(it, y)[i] == 0);
  CHECK(differ > N / 10, "another step gives another mask (%d differ)", differ);
  evtc_interp_free(it);
  evtc_graph_free(g);
  free(xv);
  free(first);
}

static void test_init(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *w = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F64, 2, (int64_t[]){64, 32}), NULL, 0, "w");
  evtc_node *w2 = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F64, 2, (int64_t[]){64, 32}), NULL, 0, "w2");
  evtc_attr ka[2] = {evtc_attr_str("init", "kaiming"), evtc_attr_float("scale", 2.0)};
  evtc_node *kc = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F32, 4, (int64_t[]){16, 8, 3, 3}), ka, 2, "k");
  evtc_attr on[2] = {evtc_attr_str("init", "ones"), evtc_attr_float("scale", 0.5)};
  evtc_node *o = evtc_leaf_add(g, EVTC_OP_STATE, evtc_type_make(EVTC_F64, 1, (int64_t[]){3}), on, 2, "o");
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  enum { NW = 64 * 32, NK = 16 * 8 * 9 };
  static double a[NW], b[NW], c[NW], kv[NK], ov[3];
  evtc_init_leaf(w, a, 1);
  evtc_init_leaf(w, b, 1);
  evtc_init_leaf(w2, c, 1);
  CHECK(memcmp(a, b, sizeof a) == 0, "same seed and name: same values");
  CHECK(memcmp(a, c, sizeof a) != 0, "another name: other values");
  evtc_init_leaf(w, c, 2);
  CHECK(memcmp(a, c, sizeof a) != 0, "another seed: other values");
  double lim = sqrt(6.0 / (64 + 32)), mx = 0;
  for (int i = 0; i < NW; i++) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
  CHECK(mx <= lim && mx > 0.95 * lim, "glorot bound %g vs %g", mx, lim);
  evtc_init_leaf(kc, kv, 3);
  double ss = 0;
  int f32_ok = 1;
  for (int i = 0; i < NK; i++) {
    ss += kv[i] * kv[i];
    f32_ok &= kv[i] == (double)(float)kv[i];
  }
  double sd = 2.0 * sqrt(2.0 / (8 * 9)), got = sqrt(ss / NK);
  CHECK(fabs(got / sd - 1) < 0.08, "kaiming std %g vs %g", got, sd);
  CHECK(f32_ok, "f32 parameters are rounded to f32");
  evtc_init_leaf(o, ov, 9);
  CHECK(ov[0] == 0.5 && ov[2] == 0.5, "ones times scale");
  evtc_graph_free(g);
}

/* An f16 graph: outputs are rounded to f16 after every op. */
static void test_f16_rounding(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *x = input(g, "x", EVTC_F16, 1, (int64_t[]){2});
  evtc_node *y = evtc_binary(g, EVTC_OP_MUL, x, x);
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  double xv[] = {1.0 + ldexp(1, -10), 300};     /* squares: 1 + 2^-9 + 2^-20, 90000 */
  evtc_interp *it = evtc_interp_new(g);
  evtc_interp_set(it, x, xv);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  const double *v = evtc_interp_value(it, y);
  CHECK(v[0] == 1.0 + ldexp(1, -9) && isinf(v[1]), "f16 products %.17g %g", v[0], v[1]);
  evtc_interp_free(it);
  evtc_graph_free(g);
}

/* A broadcast whose output is empty along its last axis but 2^40 rows long walks no rows: it used to walk them
 * all with no columns each (a fuzzed ONNX file's fold ran for minutes; with this shape, for much longer). */
static void test_empty_broadcast(void) {
  evtc_graph *g = evtc_graph_new("t");
  evtc_node *a = input(g, "a", EVTC_F32, 2, (int64_t[]){(int64_t)1 << 40, 0});
  evtc_node *b = input(g, "b", EVTC_F32, 1, (int64_t[]){0});
  evtc_node *c = evtc_binary(g, EVTC_OP_ADD, a, b);
  CHECK(g->diag.status == EVTC_OK && c != NULL, "build: %s", g->diag.msg);
  if (g->diag.status != EVTC_OK) return;
  evtc_interp *it = evtc_interp_new(g);
  static const double empty[1];   /* no element is read */
  evtc_interp_set(it, a, empty);
  evtc_interp_set(it, b, empty);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "run: %s", d.msg);
  evtc_interp_free(it);
  evtc_graph_free(g);
}

int main(void) {
  test_empty_broadcast();
  test_precision();
  test_philox();
  test_dense_ops();
  test_gather_and_errors();
  test_conv_pool();
  test_dropout();
  test_init();
  test_f16_rounding();
  return check_summary();
}
