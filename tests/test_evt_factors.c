/* test_evt_factors.c -- the constant factors a GEMM epilogue carries through
 * its float arithmetic (src/backend/cuda/cuda_evt_factors.c), checked on the
 * CPU: no GPU needed.
 *
 * Random elementwise graphs over one f32 input -- products, quotients and
 * sums with constants on either side, negations, products, sums and
 * differences of two values, e^x, 1 + erf(x), some values stored -- are
 * planned, and for every carried value the w its kind makes (cuda_emit.h:
 * EVTC_FX_*) is evaluated in double on random inputs: F w must equal the
 * value itself (within 1e-6: constants rounded to float, as the epilogue
 * writes them), the factors must stay in [2^-12, 2^12], and a value not
 * carried has factor 1.  test_gpu_evt runs the emitted code on the GPU;
 * this checks the bookkeeping it is emitted from.  Plus BERT-Large's fc
 * epilogue (GELU and its gradient's coefficient): 1 + erf comes out scaled
 * by 0.5, so that both stored values have factor 1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_emit.h"
#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "runtime/precision.h"

enum { N_GRAPHS = 300, N_STEPS = 14, N_SAMPLES = 16 };

/* Value i of k at input x, in double (IMM: its dtype's value as the epilogue writes it). */
static double value_of(const evtc_kernel *k, int i, double x, const double *val) {
  const evtc_vnode *v = &k->v[i];
  if (v->kind == EVTC_V_LOAD) return x;
  if (v->kind == EVTC_V_IMM) return (float)(v->node ? evtc_round_to(v->dtype, v->value) : v->value);
  if (v->kind != EVTC_V_COMPUTE) return NAN;
  const double a = val[v->args[0]], b = v->n_args > 1 ? val[v->args[1]] : NAN;
  switch (v->op) {
    case EVTC_OP_ADD: return a + b;
    case EVTC_OP_SUB: return a - b;
    case EVTC_OP_MUL: return a * b;
    case EVTC_OP_DIV: return a / b;
    case EVTC_OP_RECIPROCAL: return 1 / a;
    case EVTC_OP_NEG: return -a;
    case EVTC_OP_EXP: return exp(a);
    case EVTC_OP_ERF: return erf(a);
    default: return NAN;
  }
}

/* w of carried value i as its kind makes it (cuda_emit.h), from the w and F of its operands. */
static double w_of(const evtc_kernel *k, const evtc_cuda_factors *fx, int i, const double *w, const double *val) {
  const evtc_vnode *v = &k->v[i];
  const int a = v->args[0], b = v->n_args > 1 ? v->args[1] : -1;
  const double sub = v->op == EVTC_OP_SUB ? -1 : 1;
  switch (fx->how[i]) {
    case EVTC_FX_ALIAS: return w[a];
    case EVTC_FX_ALIAS_B: return w[b];
    case EVTC_FX_MUL: return w[a] * w[b];
    case EVTC_FX_ADD: {     /* w_p + (F_o / F_p) w_o, F of the second operand signed by a SUB */
      const double fa = fx->f[a], fb = sub * fx->f[b];
      return fx->pivot[i] ? w[b] + fa / fx->f[i] * w[a] : w[a] + fb / fx->f[i] * w[b];
    }
    case EVTC_FX_ADD_IMM:     /* F_val w_val + c, as v itself */
      return k->v[a].kind == EVTC_V_IMM ? val[a] + sub * fx->f[b] * w[b] : fx->f[a] * w[a] + sub * val[b];
    case EVTC_FX_EXP: return exp(fx->f[a] * w[a]);
    case EVTC_FX_ERF1P: {
      const int x = evtc_cpu_erf_plus_one(k, v);
      return fx->erf_k[i] * (1 + erf(fx->f[x] * w[x]));
    }
    default: return val[i];
  }
}

/* Checks the plan of k on N_SAMPLES inputs in [-1.5, 1.5]; the number of carried values. */
static int check_plan(const evtc_kernel *k, const char *what) {
  evtc_cuda_factors fx;
  evtc_cuda_factors_plan(&fx, k, -1);
  double *val = calloc((size_t)k->n_v, sizeof *val), *w = calloc((size_t)k->n_v, sizeof *w);
  int carried = 0, bad = 0;
  for (int i = 0; i < k->n_v; i++) {
    carried += fx.how[i] != EVTC_FX_NONE;
    if (fx.how[i] == EVTC_FX_NONE) bad += fx.f[i] != 1;
    else bad += !(fabs(fx.f[i]) >= 0x1p-12 && fabs(fx.f[i]) <= 0x1p12);
  }
  CHECK(bad == 0, "%s: %d factors out of range, or not 1 on a value not carried", what, bad);
  for (int s = 0; s < N_SAMPLES; s++) {
    const double x = 3 * check_urand() - 1.5;
    for (int i = 0; i < k->n_v; i++) {
      val[i] = value_of(k, i, x, val);
      w[i] = w_of(k, &fx, i, w, val);
      if (k->v[i].kind != EVTC_V_COMPUTE || isnan(val[i]) || fabs(val[i]) > 1e30) continue;
      const double got = fx.f[i] * w[i];
      CHECK(fabs(got - val[i]) <= 1e-6 * (1 + fabs(val[i])), "%s: value %d (kind %d): F w = %.17g, the value %.17g (x %g)",
            what, i, (int)fx.how[i], got, val[i], x);
    }
  }
  free(val);
  free(w);
  evtc_cuda_factors_free(&fx);
  return carried;
}

/* A random graph: steps over a pool of values, each a constant product or sum on either side, a quotient by a
 * constant, a negation, a product or sum or difference of two values, an exp of a small multiple, or 1 + erf;
 * every fourth value stored. */
static char *random_graph(int n) {
  static const double consts[] = {0.5, 2.0, -0.75, 1.25, 3.0, 0.70710678118654752, -1.0};
  enum { N_CONSTS = sizeof consts / sizeof consts[0] };
  evtc_sb b = {0};
  evtc_sb_printf(&b, "graph g%d {\n  %%x = input() : bf16[64]\n  %%v0 = mul(%%x, %%x) : bf16[64]\n", n);
  for (int c = 0; c < N_CONSTS; c++) evtc_sb_printf(&b, "  %%c%d = const() {value=%.17g} : bf16[]\n", c, consts[c]);
  evtc_sb_printf(&b, "  %%one = const() {value=1.0} : bf16[]\n  %%small = const() {value=0.125} : bf16[]\n");
  for (int j = 1; j <= N_STEPS; j++) {
    const int p = (int)(check_urand() * j), q = (int)(check_urand() * j), c = (int)(check_urand() * N_CONSTS);
    switch ((int)(check_urand() * 10)) {
      case 0: evtc_sb_printf(&b, "  %%v%d = mul(%%v%d, %%c%d) : bf16[64]\n", j, p, c); break;
      case 1: evtc_sb_printf(&b, "  %%v%d = mul(%%c%d, %%v%d) : bf16[64]\n", j, c, p); break;
      case 2: evtc_sb_printf(&b, "  %%v%d = div(%%v%d, %%c%d) : bf16[64]\n", j, p, c); break;
      case 3: evtc_sb_printf(&b, "  %%v%d = %s(%%v%d, %%c%d) : bf16[64]\n", j, check_urand() < 0.5 ? "add" : "sub", p, c); break;
      case 4: evtc_sb_printf(&b, "  %%v%d = %s(%%c%d, %%v%d) : bf16[64]\n", j, check_urand() < 0.5 ? "add" : "sub", c, p); break;
      case 5: evtc_sb_printf(&b, "  %%v%d = neg(%%v%d) : bf16[64]\n", j, p); break;
      case 6: evtc_sb_printf(&b, "  %%v%d = mul(%%v%d, %%v%d) : bf16[64]\n", j, p, q); break;
      case 7: evtc_sb_printf(&b, "  %%v%d = %s(%%v%d, %%v%d) : bf16[64]\n", j, check_urand() < 0.5 ? "add" : "sub", p, q); break;
      case 8:
        evtc_sb_printf(&b, "  %%s%d = mul(%%v%d, %%small) : bf16[64]\n  %%v%d = exp(%%s%d) : bf16[64]\n", j, p, j, j);
        break;
      default:
        evtc_sb_printf(&b, "  %%e%d = erf(%%v%d) : bf16[64]\n  %%v%d = add(%%e%d, %%one) : bf16[64]\n", j, p, j, j);
        break;
    }
    if (j % 4 == 0 || j == N_STEPS) evtc_sb_printf(&b, "  output %%v%d\n", j);
  }
  evtc_sb_printf(&b, "}\n");
  return b.s;
}

/* BERT-Large's fc epilogue after the passes (bench/epilogue/bert_fc.evt through evtc opt), without its GEMM. */
static const char fc_text[] =
    "graph fc {\n  %h = input() : bf16[64]\n  %one = const() {value=1.0} : bf16[]\n"
    "  %half = const() {value=0.5} : bf16[]\n  %r = const() {value=0.7071067811865475} : bf16[]\n"
    "  %a = mul(%h, %r) : bf16[64]\n  %e = erf(%a) : bf16[64]\n  %e1 = add(%e, %one) : bf16[64]\n"
    "  %m = mul(%h, %e1) : bf16[64]\n  %g = mul(%m, %half) : bf16[64]\n  %aa = mul(%a, %a) : bf16[64]\n"
    "  %na = neg(%aa) : bf16[64]\n  %ex = exp(%na) : bf16[64]\n  %c = const() {value=0.7978845608028653} : bf16[]\n"
    "  %da = mul(%ex, %c) : bf16[64]\n  %hd = mul(%h, %da) : bf16[64]\n  %sum = add(%e1, %hd) : bf16[64]\n"
    "  %coef = mul(%sum, %half) : bf16[64]\n  output %g\n  output %coef\n}\n";

static void check_fc(void) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(fc_text, "fc", &g);
  if (k) {
    check_plan(k, "fc");
    evtc_cuda_factors fx;
    evtc_cuda_factors_plan(&fx, k, -1);
    int erf1p = 0, stored = 0, stored_at_1 = 0;
    for (int i = 0; i < k->n_v; i++) {
      if (fx.how[i] == EVTC_FX_ERF1P) {
        erf1p++;
        CHECK(fx.erf_k[i] == 0.5, "fc: 1 + erf scaled by %g, want 0.5", fx.erf_k[i]);
      }
      if (k->v[i].kind == EVTC_V_STORE) {
        stored++;
        stored_at_1 += fx.f[k->v[i].args[0]] == 1;
      }
    }
    CHECK(erf1p == 1 && stored == 2 && stored_at_1 == 2,
          "fc: %d carried 1 + erf (want 1), %d of %d stored values with factor 1 (want 2 of 2)", erf1p, stored_at_1, stored);
    evtc_cuda_factors_free(&fx);
  }
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

int main(void) {
  check_rng = 20261130;
  check_fc();
  int carried = 0, graphs = 0;
  for (int n = 0; n < N_GRAPHS; n++) {
    char *text = random_graph(n), what[32];
    snprintf(what, sizeof what, "random graph %d", n);
    evtc_graph *g;
    evtc_kernel *k = oracle_kernel(text, what, &g);
    if (k) {
      carried += check_plan(k, what);
      graphs++;
    }
    evtc_kernel_free(k);
    evtc_graph_free(g);
    free(text);
  }
  printf("%d random graphs, %d carried values\n", graphs, carried);
  CHECK(carried > graphs * N_STEPS / 2, "only %d carried values in %d graphs: the generator misses the kinds", carried, graphs);
  return check_summary();
}
