/* test_cpu_kernels.c -- every kernel kind and visitor node kind of the CPU
 * backend against the float64 interpreter, on fresh random inputs with
 * poisoned outputs, at odd sizes (1, 17, 67, 129: multiples of no tile).
 *
 * Many cases share one graph so that one module (one compiler run) covers
 * them; kernels are cached in a temporary XDG_CACHE_HOME.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu_oracle.h"
#include "erf_check.h"
#include "exp_check.h"
#include "kernel/kernel.h"
#include "step_const.h"
#include "tanh_check.h"

static const double TOL = 2e-5;

static const char gemm_text[] =
    "graph gemm {\n"
    "  %x = input() : f32[17,67]\n  %w = param() : f32[67,129]\n  %b = param() : f32[129]\n"
    "  %cb = input() : f32[17,1]\n  %aux = input() : f32[17,129]\n"
    "  %h = matmul(%x, %w) : f32[17,129]\n  %hb = add(%h, %b) : f32[17,129]\n  %hc = add(%hb, %cb) : f32[17,129]\n"
    "  %s = const() {value=0.5} : f32[]\n  %hs = mul(%hc, %s) : f32[17,129]\n  %ha = sub(%hs, %aux) : f32[17,129]\n"
    "  %g = gelu(%ha) : f32[17,129]\n  %dr = dropout(%g) {p=0.25, seed=3} : f32[17,129]\n"
    "  %xt = input() : f32[67,1]\n  %w2 = input() : f32[129,67]\n"
    "  %m2 = matmul(%xt, %w2) {trans_a=1, trans_b=1} : f32[1,129]\n"
    "  %ba = input() : f32[3,17,67]\n  %bm = batch_matmul(%ba, %w) : f32[3,17,129]\n  %bt = tanh(%bm) : f32[3,17,129]\n"
    "  %p = input() : f32[2,1,5,7]\n  %q = input() : f32[3,7,9]\n  %pq = batch_matmul(%p, %q) : f32[2,3,5,9]\n"
    "  %k1 = input() : f32[129,1]\n  %k2 = input() : f32[1,17]\n  %kk = matmul(%k1, %k2) : f32[129,17]\n"
    "  %big = input() : f32[129,300]\n  %bw = input() : f32[300,67]\n  %bigm = matmul(%big, %bw) : f32[129,67]\n"
    "  %d1 = input() : f64[17,67]\n  %d2 = input() : f64[67,17]\n  %dm = matmul(%d1, %d2) : f64[17,17]\n"
    "  output %hb\n  output %dr\n  output %m2\n  output %bt\n  output %pq\n  output %kk\n  output %bigm\n  output %dm\n"
    "}\n";

static const char conv_text[] =
    "graph conv {\n"
    "  %x = input() : f32[2,4,9,11]\n  %w = param() : f32[6,2,3,3]\n  %cb = param() : f32[6,1,1]\n"
    "  %y = conv2d(%x, %w) {stride=[2,1], padding=[1,0,1,2], groups=2} : f32[2,6,5,11]\n"
    "  %yb = add(%y, %cb) : f32[2,6,5,11]\n  %yr = relu(%yb) : f32[2,6,5,11]\n"
    "  %x2 = input() : f32[1,3,8,8]\n  %w2 = param() : f32[5,3,3,3]\n"
    "  %y2 = conv2d(%x2, %w2) {padding=[2,2,2,2], dilation=[2,2]} : f32[1,5,8,8]\n"
    "  output %yr\n  output %y2\n"
    "}\n";

static const char rows_text[] =
    "graph rows {\n"
    "  %a = input() : f32[17,67]\n  %a2 = input() : f32[17,67]\n  %bb = input() : f32[67]\n  %c = input() : f32[17,1]\n"
    "  %e1 = add(%a, %bb) : f32[17,67]\n  %e2 = mul(%e1, %c) : f32[17,67]\n  %e3 = sigmoid(%e2) : f32[17,67]\n"
    "  %sm = softmax(%a) : f32[17,67]\n  %ls = log_softmax(%a2) {axis=1} : f32[17,67]\n"
    "  %g = input() : f32[67]\n  %be = input() : f32[67]\n  %ln = layernorm(%a, %g, %be) : f32[17,67]\n"
    "  %lab = input() : i64[17]\n  %ce = cross_entropy(%a2, %lab) : f32[]\n  %ms = mse(%a, %a2) : f32[]\n"
    "  %rs0 = reduce_sum(%e3) {axes=[0]} : f32[67]\n  %rs1 = reduce_max(%a) {axes=[1], keepdims=1} : f32[17,1]\n"
    "  %rsub = sub(%a, %rs1) : f32[17,67]\n  %rall = reduce_mean(%a2) : f32[]\n"
    "  %a3 = input() : f32[4,17,5]\n  %rmin = reduce_min(%a3) {axes=[2]} : f32[4,17]\n"
    "  %rmean = reduce_mean(%a3) {axes=[0,1], keepdims=1} : f32[1,1,5]\n"
    "  %x4 = input() : f32[2,3,5,7]\n  %gap = global_avgpool(%x4) : f32[2,3,1,1]\n"
    "  %pm = permute(%a) {perm=[1,0]} : f32[67,17]\n  %pr = relu(%pm) : f32[67,17]\n"
    "  %sl = slice(%a) {axes=[1], starts=[3], ends=[60], steps=[2]} : f32[17,29]\n  %sle = exp(%sl) : f32[17,29]\n"
    "  %ex = expand(%c) {shape=[17,67]} : f32[17,67]\n  %exa = add(%ex, %a2) : f32[17,67]\n"
    "  %rh = reshape(%a) {shape=[67,17]} : f32[67,17]\n  %rhn = neg(%rh) : f32[67,17]\n"
    "  %oh = one_hot(%lab) {depth=67} : f32[17,67]\n  %ohm = mul(%oh, %a) : f32[17,67]\n"
    "  %ci = cast(%a) {dtype=i32} : i32[17,67]\n  %cf = cast(%ci) {dtype=f32} : f32[17,67]\n"
    "  %cmp = gt(%a, %a2) : bool[17,67]\n  %wh = where(%cmp, %a, %a2) : f32[17,67]\n"
    "  %iv = input() : i64[17,67]\n  %three = const() {value=3.0} : i64[]\n  %idv = div(%iv, %three) : i64[17,67]\n"
    "  %dp = dropout(%a) {p=0.5, seed=11} : f32[17,67]\n  %dps = reduce_sum(%dp) {axes=[1]} : f32[17]\n"
    "  %cat = concat(%a, %a2) {axis=0} : f32[34,67]\n"
    /* reshapes of sliced views: an attention head split of a fused qkv, a vocabulary slice into rows */
    "  %qkv = input() : f32[2,5,24]\n  %qs = slice(%qkv) {axes=[2], starts=[8], ends=[16], steps=[1]} : f32[2,5,8]\n"
    "  %qh = reshape(%qs) {shape=[2,5,2,4]} : f32[2,5,2,4]\n  %qt = permute(%qh) {perm=[0,2,1,3]} : f32[2,2,5,4]\n"
    "  %qe = exp(%qt) : f32[2,2,5,4]\n"
    "  %vs = slice(%qkv) {axes=[2], starts=[0], ends=[21], steps=[1]} : f32[2,5,21]\n"
    "  %vr = reshape(%vs) {shape=[10,21]} : f32[10,21]\n  %vsm = softmax(%vr) : f32[10,21]\n"
    "  output %e3\n  output %sm\n  output %ls\n  output %ln\n  output %ce\n  output %ms\n  output %rs0\n"
    "  output %rsub\n  output %rall\n  output %rmin\n  output %rmean\n  output %gap\n  output %pr\n  output %sle\n"
    "  output %exa\n  output %rhn\n  output %ohm\n  output %cf\n  output %cmp\n  output %wh\n  output %idv\n"
    "  output %dps\n  output %cat\n  output %qe\n  output %vsm\n"
    "}\n";

/* The graph under the greedy plan and one kernel per node. */
static void both_plans(const char *text, const char *name, int64_t int_hi, int want_interpreted) {
  evtc_graph *g = oracle_parse(text, name);
  if (!g) return;
  evtc_program *p = cpu_compare(g, NULL, 0, TOL, int_hi, name);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted == want_interpreted, "%s: %d kernels interpreted, want %d", name, st.interpreted,
          want_interpreted);
    CHECK(st.arena_bytes <= st.unplanned_bytes, "%s: planned %zu bytes > unplanned %zu", name, st.arena_bytes,
          st.unplanned_bytes);
    evtc_program_free(p);
  }
  int nk;
  int32_t *plan = evtc_plan_single(g, &nk);
  char what[64];
  snprintf(what, sizeof what, "%s (one node per kernel)", name);
  evtc_program_free(cpu_compare(g, plan, nk, TOL, int_hi, what));
  free(plan);
  evtc_graph_free(g);
}

/* The greedy plan fuses a GEMM with its bias, activation and dropout epilogue. */
static void test_epilogue_fused(void) {
  evtc_graph *g = oracle_parse(gemm_text, "gemm");
  if (!g) return;
  int nk;
  int32_t *plan = evtc_plan_greedy(g, NULL, NULL, &nk);
  const evtc_node *h = evtc_graph_find(g, "h"), *dr = evtc_graph_find(g, "dr");
  CHECK(plan[h->id] == plan[dr->id], "matmul %%h and dropout %%dr share a kernel (%d vs %d)", plan[h->id],
        plan[dr->id]);
  int32_t ids[16], n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (plan[i] == plan[h->id]) ids[n++] = i;
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, ids, n, &d);
  CHECK(k && k->kind == EVTC_ML_GEMM && k->gemm.M == 17 && k->gemm.N == 129 && k->gemm.K == 67, "a 17x129x67 GEMM");
  if (k) {
    int kinds[EVTC_V_STEP + 1] = {0};
    for (int i = 0; i < k->n_v; i++) kinds[k->v[i].kind]++;
    CHECK(kinds[EVTC_V_ACC] == 1 && kinds[EVTC_V_RNG] == 1 && kinds[EVTC_V_STORE] == 2 && kinds[EVTC_V_LOAD] == 3,
          "acc, rng, 2 stores, 3 loads: %d %d %d %d", kinds[EVTC_V_ACC], kinds[EVTC_V_RNG], kinds[EVTC_V_STORE],
          kinds[EVTC_V_LOAD]);
    evtc_kernel_free(k);
  }
  free(plan);
  evtc_graph_free(g);
}

/* The vnode kinds kernel {node} of g reads its constant operand as: 1 when a STEP (depth, below, value as given),
 * 0 when a load, -1 otherwise. */
static int const_as(const evtc_graph *g, const char *node, int64_t depth, double below, double value) {
  int32_t id = evtc_graph_find(g, node)->id;
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, &id, 1, &d);
  CHECK(k != NULL, "kernel %%%s: %s", node, d.msg);
  int as = -1;
  for (int i = 0; k && i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_STEP && v->depth == depth && v->below == below && v->value == value) as = 1;
    if (v->kind == EVTC_V_LOAD && k->args[v->arg].node->op == EVTC_OP_CONST) as = 0;
  }
  evtc_kernel_free(k);
  return as;
}

/* A constant of two values along one axis (gemm-pad's mask) is a STEP vnode, computed from the coordinate instead
 * of loaded; one of more values stays a load.  Against the interpreter: along the columns of a rows kernel, along
 * its rows, in a GEMM's epilogue, and the load. */
static void test_step_constants(void) {
  evtc_sb b = {0};
  evtc_sb_printf(&b, "graph steps {\n  %%a = input() : f32[17,67]\n  %%x = input() : f32[17,67]\n"
                     "  %%w = param() : f32[67,129]\n");
  step_const_line(&b, "cs", "f32", 67, 60, 0, -5, "67");
  step_const_line(&b, "rs", "f32", 17, 4, 2, 0.5, "17,1");
  step_const_line(&b, "gs", "f32", 129, 125, 0, -3.5, "129");
  step_const_line(&b, "alt", "f32", 67, 0, 0, 0, "67");
  evtc_sb_printf(&b, "  %%am = add(%%a, %%cs) : f32[17,67]\n  %%asm = softmax(%%am) : f32[17,67]\n"
                     "  %%ar = mul(%%a, %%rs) : f32[17,67]\n  %%ars = reduce_sum(%%ar) {axes=[0]} : f32[67]\n"
                     "  %%h = matmul(%%x, %%w) : f32[17,129]\n  %%hm = add(%%h, %%gs) : f32[17,129]\n"
                     "  %%hg = gelu(%%hm) : f32[17,129]\n  %%aa = sub(%%a, %%alt) : f32[17,67]\n"
                     "  output %%asm\n  output %%ars\n  output %%hg\n  output %%aa\n}\n");
  evtc_graph *g = oracle_parse(b.s, "steps");
  if (g) {
    CHECK(const_as(g, "am", 60, 0, -5) == 1, "a step along the columns is a STEP vnode");
    CHECK(const_as(g, "ar", 4, 2, 0.5) == 1, "a step along the rows is a STEP vnode");
    CHECK(const_as(g, "hm", 125, 0, -3.5) == 1, "the step added to the GEMM's output is a STEP vnode");
    CHECK(const_as(g, "aa", 0, 0, 0) == 0, "alternating values stay a load");
    evtc_graph_free(g);
    both_plans(b.s, "steps", 3, 0);
  }
  free(b.s);
}

/* A row's max and min, its softmax, and the max over everything (each row's share in a local accumulator),
 * computed over vector lanes (cpu_emit_rows.c's simd_pragma), keep NaN winning wherever the NaN stands in the
 * row (the first column, one in the middle, the last) and otherwise give the row's exact max and min, a -0 among
 * the values included. */
static void test_nan_reductions(void) {
  enum { R = 6, C = 70 };
  evtc_graph *g = oracle_parse("graph nan_rows {\n  %x = input() : f32[6,70]\n"
                               "  %mx = reduce_max(%x) {axes=[1]} : f32[6]\n  %mn = reduce_min(%x) {axes=[1]} : f32[6]\n"
                               "  %sm = softmax(%x) : f32[6,70]\n  %all = reduce_max(%x) : f32[]\n"
                               "  output %mx\n  output %mn\n  output %sm\n  output %all\n}\n",
                               "nan_rows");
  if (!g) return;
  static double x[R * C], mx[R], mn[R], sm[R * C], all;
  for (int i = 0; i < R * C; i++) x[i] = (double)((i * 37) % 101) / 8.0 - 6.0;
  x[1 * C + 0] = NAN, x[2 * C + 33] = NAN, x[3 * C + C - 1] = NAN, x[4 * C + 5] = -0.0;
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, evtc_backend_cpu(), NULL, &d);
  CHECK(p != NULL, "nan_rows: program: %s", d.msg);
  if (p) {
    evtc_program_set(p, evtc_graph_find(g, "x"), x);
    CHECK(evtc_program_run(p, 1, &d) == EVTC_OK, "nan_rows: run: %s", d.msg);
    CHECK(evtc_program_get(p, evtc_graph_find(g, "mx"), mx) && evtc_program_get(p, evtc_graph_find(g, "mn"), mn) &&
              evtc_program_get(p, evtc_graph_find(g, "sm"), sm) && evtc_program_get(p, evtc_graph_find(g, "all"), &all),
          "nan_rows: outputs");
    CHECK(isnan(all), "the max over everything: %g, want NaN", all);
    for (int r = 0; r < R; r++) {
      const bool has_nan = r >= 1 && r <= 3;
      double want_max = -INFINITY, want_min = INFINITY;
      for (int c = 0; c < C; c++) {
        want_max = fmax(want_max, x[r * C + c]);
        want_min = fmin(want_min, x[r * C + c]);
      }
      CHECK(has_nan ? isnan(mx[r]) && isnan(mn[r]) : mx[r] == (double)(float)want_max && mn[r] == (double)(float)want_min,
            "row %d: max %g min %g (%s)", r, mx[r], mn[r], has_nan ? "NaN wins" : "exact");
      CHECK(has_nan == (isnan(sm[r * C]) != 0), "row %d: softmax %g", r, sm[r * C]);
    }
    evtc_program_free(p);
  }
  evtc_graph_free(g);
}

/* Rows kernels that keep a row's erf for a later column loop (cpu_emit_rows.c: choose_kept): normalised by its
 * row sum, it is computed once; as 1 + erf normalised the same way, the sum reads x through the erf
 * (evtc_cpu_erf_plus_one), so x must still be computed in both loops. */
static const char erf_rows_text[] =
    "graph erf_rows {\n  %x = input() : f32[17,67]\n  %e = erf(%x) : f32[17,67]\n"
    "  %s = reduce_sum(%e) {axes=[1], keepdims=1} : f32[17,1]\n  %y = div(%e, %s) : f32[17,67]\n"
    "  %x2 = input() : f32[17,67]\n  %e2 = erf(%x2) : f32[17,67]\n  %one = const() {value=1.0} : f32[]\n"
    "  %e21 = add(%e2, %one) : f32[17,67]\n  %s2 = reduce_sum(%e21) {axes=[1], keepdims=1} : f32[17,1]\n"
    "  %y2 = div(%e21, %s2) : f32[17,67]\n  output %y\n  output %y2\n}\n";

int main(int argc, char **argv) {
  char dir[] = "/tmp/evtc-cpu-kernels-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  both_plans(gemm_text, "gemm", 3, 0);
  both_plans(conv_text, "conv", 3, 0);
  both_plans(rows_text, "rows", 17, 0);
  both_plans(erf_rows_text, "erf rows", 17, 0);
  test_epilogue_fused();
  test_step_constants();
  test_nan_reductions();
  check_exp(evtc_backend_cpu(), "CPU exp", 2.0, 0.0, false);
  check_exp_shift_bf16(evtc_backend_cpu(), "CPU exp of a shift");
  check_erf_gelu(evtc_backend_cpu(), "CPU erf and gelu");
  check_tanh_bf16(evtc_backend_cpu(), "CPU tanh of bf16");
  check_gelu_tanh_bf16(evtc_backend_cpu(), "CPU tanh-GELU of bf16");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
