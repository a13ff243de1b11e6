/* bf16_sweep.h -- a unary function of bf16 values run on a backend over every bf16 value of an interval, for the
 * checks of functions a backend computes its own way for bf16 (erf_check.h, tanh_check.h).  Include after
 * cpu_oracle.h (CHECK, oracle_parse). */
#ifndef EVTC_TEST_BF16_SWEEP_H
#define EVTC_TEST_BF16_SWEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { BF16_SWEEP_N = 1 << 16 };

/* Runs graph `text` (input %x and output %o, both f32[65536]) on backend be, its outputs poisoned first, with x =
 * the n_special special values, then every bf16 of [0, lim] (of (0, lim] without_zero) and its negative, the rest
 * 0.5.  *xo and *yo get the inputs and outputs (free both, also after a failure); returns how many inputs are
 * special or swept, or -1 after a failed check. */
static inline int bf16_sweep(const evtc_backend *be, const char *what, const char *text, const double *special,
                             int n_special, float lim, bool without_zero, double **xo, double **yo) {
  double *x = malloc(sizeof(double) * BF16_SWEEP_N), *y = malloc(sizeof(double) * BF16_SWEEP_N);
  *xo = x, *yo = y;
  evtc_graph *g = oracle_parse(text, what);
  evtc_diag d = {0};
  evtc_program *p = g && x && y ? evtc_program_new(g, NULL, 0, be, NULL, &d) : NULL;
  CHECK(p != NULL, "%s: %s", what, d.msg);
  int n = 0;
  if (p) {
    for (; n < n_special; n++) x[n] = special[n];
    for (uint32_t bits = without_zero ? 1 : 0; bits < 0x8000u && n + 1 < BF16_SWEEP_N; bits++) {
      const uint32_t w = bits << 16;
      float f;
      memcpy(&f, &w, sizeof f);
      if (f <= lim) x[n++] = f, x[n++] = -f;
    }
    for (int i = n; i < BF16_SWEEP_N; i++) x[i] = 0.5;
    evtc_program_set(p, evtc_graph_find(g, "x"), x);
    evtc_program_poison(p);
    CHECK(evtc_program_run(p, 0, &d) == EVTC_OK, "%s: %s", what, d.msg);
    CHECK(evtc_program_get(p, evtc_graph_find(g, "o"), y), "%s: the output read back", what);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
  return p ? n : -1;
}

#endif
