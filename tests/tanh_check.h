/* tanh_check.h -- a backend's tanh of bf16 values against a double tanh.
 *
 * check_tanh_bf16: tanh of every bf16 value of [-10, 10] (and inf, -inf,
 * NaN) as a bf16 node, read back through a cast to f32 in the same kernel,
 * so that the value before its bf16 rounding is seen.  It must be within
 * 2^-10.5 relative of tanh: a third of the bf16 rounding the graph applies
 * to it (the CUDA backend computes it with the hardware's approximate tanh,
 * 2^-10.99 in the PTX ISA).
 * check_gelu_tanh_bf16: gelu_tanh of every bf16 value of [-10, 10] (and inf,
 * -inf, NaN) as a bf16 node, read the same way.  It must be within
 * 2^-10.5 |x| / 2 absolute plus 2^-20 relative of the float64 GELU: the CUDA
 * backend computes x / 2 + x / 2 tanh(u) with the hardware's tanh, which
 * cancels in the negative tail; the bound is a quarter of what the decompose
 * pass's form (the tanh rounded to bf16) allows.  Outputs are poisoned before
 * the runs.  Include after cpu_oracle.h (CHECK, oracle_parse).
 */
#ifndef EVTC_TEST_TANH_CHECK_H
#define EVTC_TEST_TANH_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unary_run.h"

static inline void check_tanh_bf16(const evtc_backend *be, const char *what) {
  static const char text[] = "graph tanh_bf16 {\n  %x = input() : f32[65536]\n"
                             "  %xb = cast(%x) {dtype=bf16} : bf16[65536]\n  %t = tanh(%xb) : bf16[65536]\n"
                             "  %o = cast(%t) {dtype=f32} : f32[65536]\n  output %o\n}\n";
  static const double special[] = {INFINITY, -INFINITY, NAN};
  enum { N_SPECIAL = sizeof special / sizeof special[0] };
  double *x, *y;
  const int used = bf16_sweep(be, what, text, special, N_SPECIAL, 10.0f, true, &x, &y);   /* tanh(0) = 0: no ratio */
  if (used >= 0) {
    double worst = 0, worst_x = 0;
    int bad = 0;
    for (int i = N_SPECIAL; i < used; i++) {
      const double want = tanh(x[i]), rel = fabs(y[i] - want) / fabs(want) / exp2(-10.5);
      bad += !(rel <= 1.0);
      if (rel > worst) worst = rel, worst_x = x[i];
    }
    CHECK(bad == 0, "%s: tanh beyond 2^-10.5 relative at %d of %d bf16 values (worst %.3g of it at %.9g)", what, bad,
          used - N_SPECIAL, worst, worst_x);
    CHECK(y[0] == 1.0 && y[1] == -1.0 && isnan(y[2]), "%s: tanh of inf, -inf, NaN: %.9g %.9g %.9g", what, y[0], y[1],
          y[2]);
    printf("%s: tanh (bf16) at most %.3f of 2^-10.5 relative (at %.9g) over %d bf16 values\n", what, worst, worst_x,
           used - N_SPECIAL);
  }
  free(x);
  free(y);
}

static inline void check_gelu_tanh_bf16(const evtc_backend *be, const char *what) {
  static const char text[] = "graph gelu_tanh_bf16 {\n  %x = input() : f32[65536]\n"
                             "  %xb = cast(%x) {dtype=bf16} : bf16[65536]\n  %t = gelu_tanh(%xb) : bf16[65536]\n"
                             "  %o = cast(%t) {dtype=f32} : f32[65536]\n  output %o\n}\n";
  static const double special[] = {INFINITY, -INFINITY, NAN};
  enum { N_SPECIAL = sizeof special / sizeof special[0] };
  double *x, *y;
  const int used = bf16_sweep(be, what, text, special, N_SPECIAL, 10.0f, false, &x, &y);
  if (used >= 0) {
    double worst = 0, worst_x = 0;
    int bad = 0;
    for (int i = N_SPECIAL; i < used; i++) {
      const double u = 0.79788456080286536 * (x[i] + 0.044715 * x[i] * x[i] * x[i]), want = 0.5 * x[i] * (1 + tanh(u));
      const double rel = fabs(y[i] - want) / (exp2(-10.5) * 0.5 * fabs(x[i]) + exp2(-20) * fabs(want) + 0x1p-140);
      bad += !(rel <= 1.0);
      if (rel > worst) worst = rel, worst_x = x[i];
    }
    CHECK(bad == 0, "%s: gelu_tanh beyond 2^-10.5 |x| / 2 at %d of %d bf16 values (worst %.3g of it at %.9g)", what,
          bad, used - N_SPECIAL, worst, worst_x);
    CHECK(y[0] == INFINITY && isnan(y[1]) && isnan(y[2]), "%s: gelu_tanh of inf, -inf, NaN: %.9g %.9g %.9g", what,
          y[0], y[1], y[2]);
    printf("%s: gelu_tanh (bf16) at most %.3f of 2^-10.5 |x| / 2 (at %.9g) over %d bf16 values\n", what, worst,
           worst_x, used - N_SPECIAL);
  }
  free(x);
  free(y);
}

#endif
