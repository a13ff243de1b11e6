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
 */
#ifndef EVTC_TEST_EXP_CHECK_H
#define EVTC_TEST_EXP_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
