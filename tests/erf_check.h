/* erf_check.h -- a backend's f32 erf and GELU against libm's double erf,
 * shared by the CPU and GPU kernel tests (each backend emits its own erf:
 * a vectorisable polynomial on the CPU, a polynomial and the hardware exp2
 * on the GPU).
 *
 * erf within 3 ulp of the float result over a dense sweep of [-6, 6], the
 * special values (signed zeros, infinities, NaN, a tiny and a subnormal
 * input) and the edges of the backends' branches; GELU through it within
 * 4 x 2^-23 max(1, |x|) (absolute: 1 + erf(x) cancels for large negative
 * x, as with libm).  check_erf1p_bf16: 1 + erf of every bf16 value of
 * [-6, 6] as a bf16 value, for a backend with its own cheaper polynomial
 * there.  Outputs are poisoned before the run.  Include after
 * cpu_oracle.h (CHECK, oracle_parse).
 */
#ifndef EVTC_TEST_ERF_CHECK_H
#define EVTC_TEST_ERF_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unary_run.h"

static void check_erf_gelu(const evtc_backend *be, const char *what) {
  enum { N = 1 << 20 };
  static const char text[] = "graph erf {\n  %x = input() : f32[1048576]\n  %y = erf(%x) : f32[1048576]\n"
                             "  %z = gelu(%x) : f32[1048576]\n  output %y\n  output %z\n}\n";
  static const double edges[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-30, 1e-40, 0.5, 0.99999994, 1.0,
                                 1.0000001, -1.0, 3.9199998, 3.92, 3.9200001, 3.9374999, 3.9375, 10.0, -10.0};
  enum { N_EDGES = sizeof edges / sizeof edges[0] };
  evtc_graph *g = oracle_parse(text, what);
  double *x = malloc(sizeof(double) * N), *y = malloc(sizeof(double) * N), *z = malloc(sizeof(double) * N);
  evtc_diag d = {0};
  evtc_program *p = g && x && y && z ? evtc_program_new(g, NULL, 0, be, NULL, &d) : NULL;
  CHECK(p != NULL, "%s: %s", what, d.msg);
  if (p) {
    for (int i = 0; i < N; i++) x[i] = i < N_EDGES ? edges[i] : (double)(float)(-6.0 + 12.0 * i / N);
    evtc_program_set(p, evtc_graph_find(g, "x"), x);
    evtc_program_poison(p);
    CHECK(evtc_program_run(p, 0, &d) == EVTC_OK, "%s: %s", what, d.msg);
    CHECK(evtc_program_get(p, evtc_graph_find(g, "y"), y) && evtc_program_get(p, evtc_graph_find(g, "z"), z),
          "%s: the outputs read back", what);
    double worst = 0, worst_x = 0, worst_gelu = 0;
    int bad_nan = 0;
    for (int i = 0; i < N; i++) {
      if (isnan(x[i])) {
        bad_nan += !isnan(y[i]) || !isnan(z[i]);
        continue;
      }
      const double want = erf(x[i]), ulp = nextafterf((float)fabs(want), INFINITY) - (float)fabs(want);
      const double err = fabs(y[i] - want) / (ulp > 0 ? ulp : 0x1p-149);
      if (err > worst) worst = err, worst_x = x[i];
      if (isinf(x[i])) continue;
      const double gw = 0.5 * x[i] * (1.0 + erf(x[i] * 0.70710678118654752));
      const double ge = fabs(z[i] - gw) / (0x1p-23 * fmax(1.0, fabs(x[i])));
      if (ge > worst_gelu) worst_gelu = ge;
    }
    CHECK(worst <= 3.0, "%s: erf %.2f ulp at %.9g (want <= 3)", what, worst, worst_x);
    CHECK(y[0] == 0.0 && !signbit(y[0]) && y[1] == 0.0 && signbit(y[1]) && y[2] == 1.0 && y[3] == -1.0 && !bad_nan,
          "%s: erf of 0, -0, inf, -inf: %g %g %g %g; %d NaN inputs without NaN outputs", what, y[0], y[1], y[2], y[3],
          bad_nan);
    CHECK(worst_gelu <= 4.0, "%s: gelu error %.2f x 2^-23 max(1, |x|)", what, worst_gelu);
    printf("%s: erf max %.2f ulp (at %.9g) over %d points; gelu max error %.2f x 2^-23 max(1, |x|)\n", what, worst,
           worst_x, N, worst_gelu);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
  free(x);
  free(y);
  free(z);
}

/* The special values of check_erf1p_bf16's inputs: +-0 are in the sweep (1 within the bound). */
static const double erf1p_bf16_special[] = {INFINITY, -INFINITY, NAN};
enum { ERF1P_BF16_N_SPECIAL = sizeof erf1p_bf16_special / sizeof erf1p_bf16_special[0] };

/* y = 1 + erf(x) of bf16 inputs x (bf16_sweep_inputs over [-6, 6] after erf1p_bf16_special, `used` of them):
 * within 2^-17 of it relative for x >= -4 and 2^-15 below (the exp2's rounding of x^2); 2, 0 and NaN for inf,
 * -inf, NaN.  Also for the CUDA prelude's evtc_erf1p_bf16f on the CPU emulation (tests/gemm_emu). */
static inline void check_erf1p_bf16_values(const char *what, const double *x, const double *y, int used) {
  double worst = 0, worst_x = 0;
  int bad = 0;
  for (int i = ERF1P_BF16_N_SPECIAL; i < used; i++) {
    const double want = x[i] < 0 ? erfc(-x[i]) : 1.0 + erf(x[i]);     /* 1 + erf cancels in double too */
    const double rel = fabs(y[i] - want) / want / (x[i] >= -4 ? 0x1p-17 : 0x1p-15);
    bad += !(rel <= 1.0);
    if (rel > worst) worst = rel, worst_x = x[i];
  }
  CHECK(bad == 0, "%s: 1 + erf beyond its bound at %d of %d bf16 values (worst %.3g of it at %.9g)", what, bad,
        used - ERF1P_BF16_N_SPECIAL, worst, worst_x);
  CHECK(y[0] == 2.0 && y[1] == 0.0 && isnan(y[2]), "%s: 1 + erf of inf, -inf, NaN: %.9g %.9g %.9g", what, y[0], y[1],
        y[2]);
  printf("%s: 1 + erf (bf16) at most %.3f of its bound (at %.9g) over %d bf16 values\n", what, worst, worst_x,
         used - ERF1P_BF16_N_SPECIAL);
}

/* 1 + erf(x) as a bf16 value (erf and the sum typed bf16, read through a cast to f32 in the same kernel, so
 * unrounded) over every bf16 value of [-6, 6] and the special values, within check_erf1p_bf16_values's bounds.
 * For a backend with a polynomial of its own for bf16 (the CUDA prelude's evtc_erf1p_bf16f); the CPU's is its f32
 * 1 + erf, which check_erf_gelu covers. */
static inline void check_erf1p_bf16(const evtc_backend *be, const char *what) {
  static const char text[] = "graph erf1p_bf16 {\n  %x = input() : f32[65536]\n"
                             "  %xb = cast(%x) {dtype=bf16} : bf16[65536]\n  %e = erf(%xb) : bf16[65536]\n"
                             "  %one = const() {value=1.0} : bf16[]\n  %e1 = add(%e, %one) : bf16[65536]\n"
                             "  %o = cast(%e1) {dtype=f32} : f32[65536]\n  output %o\n}\n";
  double *x, *y;
  const int used = bf16_sweep(be, what, text, erf1p_bf16_special, ERF1P_BF16_N_SPECIAL, 6.0f, false, &x, &y);
  if (used >= 0) check_erf1p_bf16_values(what, x, y, used);
  free(x);
  free(y);
}

#endif
