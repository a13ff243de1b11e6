/* exp_check.h -- a backend's f32 exp against libm's double exp, shared by
 * the CPU and GPU kernel tests (each backend emits its own: a vectorisable
 * polynomial on the CPU, the hardware exp2 of x log2(e) on the GPU).
 *
 * Over a sweep of [-110, 90] (overflow, underflow to subnormals and zero)
 * and the special values (infinities, NaN, 0, the overflow and underflow
 * edges) the error in ulp of the float result must stay within
 * base + slope |x|: the CPU's polynomial 2 + 0 |x|; the GPU's product
 * x log2(e) is rounded before the exp2 (2 ulp, PTX ISA), so its error
 * grows with |x|: up to 1.22 |x| ulp from the product (simulated in
 * double over [-87, 88.7]), tested as 2 + 1.25 |x|.  With
 * ftz, results below 2^-126 may also be zero (ex2.approx.ftz flushes
 * them).  Outputs are poisoned before the run.  Include after
 * cpu_oracle.h (CHECK, oracle_parse).
 *
 * check_exp_shift_bf16: e^(x - max) of bf16 rows, a softmax's numerator,
 * read back through a cast to f32 in the same rows kernel (the value before
 * its bf16 rounding; the shift itself may be rounded to bf16 where a kernel
 * keeps it).  The CUDA backend computes it as 2^(x log2 e - max
 * log2 e) with the rounded max log2 e (evtc_exp_shiftf), whose error grows
 * with |max|; rows with maxima of magnitude up to 8000, each within 2^-21 +
 * 6.5e-8 (|max| + |x - max|) relative of exp in double: at |max| 8000 about
 * a quarter of bf16's rounding.
 */
#ifndef EVTC_TEST_EXP_CHECK_H
#define EVTC_TEST_EXP_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/precision.h"
#include "unary_run.h"

static void check_exp(const evtc_backend *be, const char *what, double base, double slope, bool ftz) {
  enum { N = 1 << 18 };
  evtc_graph *g = oracle_parse("graph e {\n  %ex = input() : f32[262144]\n  %e = exp(%ex) : f32[262144]\n"
                               "  output %e\n}\n", what);
  if (!g) return;
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, be, NULL, &d);
  CHECK(p != NULL, "%s program: %s", what, d.msg);
  double *ex = malloc(sizeof(double) * N), *e = malloc(sizeof(double) * N);
  for (int i = 0; i < N; i++) ex[i] = (float)(-110.0 + 200.0 * i / (N - 1));
  ex[0] = -INFINITY, ex[1] = INFINITY, ex[2] = NAN, ex[3] = 0.0, ex[4] = 88.72f, ex[5] = 88.73f, ex[6] = -87.33f;
  if (p) {
    evtc_program_set(p, evtc_graph_find(g, "ex"), ex);
    evtc_program_poison(p);
    CHECK(evtc_program_run(p, 0, &d) == EVTC_OK, "%s run: %s", what, d.msg);
    evtc_program_get(p, evtc_graph_find(g, "e"), e);
    double worst = 0, worst_ex = 0, worst_ulp = 0;
    int bad = 0, flushed = 0;
    for (int i = 0; i < N; i++) {
      double want = exp(ex[i]);
      if (isnan(ex[i]) || isinf(ex[i]) || (float)want == INFINITY || (float)want == 0.0f) {
        bad += !(isnan(ex[i]) ? isnan(e[i]) : e[i] == (double)(float)want);
        continue;
      }
      if (ftz && want < 0x1p-126 && e[i] == 0.0) {
        flushed++;
        continue;
      }
      double ulp = nextafterf((float)want, INFINITY) - (float)want;
      if (want < 0x1p-126) ulp = 0x1p-149;                /* subnormal results: absolute ulp */
      const double err = fabs(e[i] - want) / ulp, rel = err / (base + slope * fabs(ex[i]));
      if (rel > worst) worst = rel, worst_ex = ex[i], worst_ulp = err;
    }
    CHECK(worst <= 1.0 && !bad, "%s: %.2f ulp at %.9g (bound %.3g + %.3g |x|), %d special values wrong", what,
          worst_ulp, worst_ex, base, slope, bad);
    printf("%s: worst %.2f ulp at %.9g, %.2f of the bound %.3g + %.3g |x|; %d subnormal results flushed\n", what,
           worst_ulp, worst_ex, worst, base, slope, flushed);
  }
  evtc_program_free(p);
  free(ex);
  free(e);
  evtc_graph_free(g);
}

static inline void check_exp_shift_bf16(const evtc_backend *be, const char *what) {
  enum { R = 64, C = 1024 };
  static const char text[] =
      "graph exp_shift {\n  %x = input() : f32[64,1024]\n  %xb = cast(%x) {dtype=bf16} : bf16[64,1024]\n"
      "  %m = reduce_max(%xb) {axes=[1], keepdims=1} : bf16[64,1]\n  %s = sub(%xb, %m) : bf16[64,1024]\n"
      "  %e = exp(%s) : bf16[64,1024]\n  %o = cast(%e) {dtype=f32} : f32[64,1024]\n  output %o\n}\n";
  static const double maxima[] = {0, 0.75, -3.5, 17, -100, 750, -2000, 4096, -8000, 8000};
  enum { N_MAX = sizeof maxima / sizeof maxima[0] };
  double *x = malloc(sizeof(double) * R * C), *y = malloc(sizeof(double) * R * C);
  uint32_t state = 12345;
  for (int r = 0; r < R && x; r++) {
    const double m = maxima[r % N_MAX] * (1.0 + (r / N_MAX) * 0.0078125);     /* exact in bf16 */
    x[(size_t)r * C] = m;
    for (int c = 1; c < C; c++) {
      state = state * 1664525u + 1013904223u;
      x[(size_t)r * C + c] = m - 20.0 * (state >> 8) / 16777216.0;   /* rounded to bf16 by the graph: at most m */
    }
  }
  if (x && y && unary_run(be, what, text, x, y)) {
    double worst = 0, worst_x = 0, worst_m = 0;
    int bad = 0;
    for (int r = 0; r < R; r++) {
      const double m = evtc_round_to(EVTC_BF16, x[(size_t)r * C]);
      for (int c = 0; c < C; c++) {
        const double xb = evtc_round_to(EVTC_BF16, (float)x[(size_t)r * C + c]);   /* an f32 input */
        /* the shift may be rounded to bf16 where a kernel keeps it (the CPU backend's row buffers) */
        const double bound = 0x1p-21 + 6.5e-8 * (fabs(m) + fabs(xb - m)), got = y[(size_t)r * C + c];
        const double want = exp(xb - m), want_kept = exp(evtc_round_to(EVTC_BF16, xb - m));
        const double rel = fmin(fabs(got - want) / want, fabs(got - want_kept) / want_kept) / bound;
        bad += !(rel <= 1.0);
        if (rel > worst) worst = rel, worst_x = xb, worst_m = m;
      }
    }
    CHECK(bad == 0, "%s: e^(x - max) beyond its bound at %d of %d values (worst %.3g of it, x %.9g, max %.9g)", what,
          bad, R * C, worst, worst_x, worst_m);
    printf("%s: e^(x - max) (bf16) at most %.3f of its bound (x %.9g, max %.9g)\n", what, worst, worst_x, worst_m);
  }
  free(x);
  free(y);
}

#endif
