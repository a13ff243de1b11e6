/* unary_run.h -- a graph of one input %x and one output %o run on a backend, for the checks of functions a backend
 * computes its own way (exp_check.h, erf_check.h, tanh_check.h): on given inputs, or over every bf16 value of an
 * interval.  Include after cpu_oracle.h (CHECK, oracle_parse). */
#ifndef EVTC_TEST_UNARY_RUN_H
#define EVTC_TEST_UNARY_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Runs graph `text` on backend be with input %x = x, its outputs poisoned first, and reads output %o into y (each
 * the size the graph gives them); false after a failed check. */
static inline bool unary_run(const evtc_backend *be, const char *what, const char *text, const double *x, double *y) {
  evtc_graph *g = oracle_parse(text, what);
  evtc_diag d = {0};
  evtc_program *p = g ? evtc_program_new(g, NULL, 0, be, NULL, &d) : NULL;
  CHECK(p != NULL, "%s: %s", what, d.msg);
  bool ok = false;
  if (p) {
    evtc_program_set(p, evtc_graph_find(g, "x"), x);
    evtc_program_poison(p);
    ok = evtc_program_run(p, 0, &d) == EVTC_OK;
    CHECK(ok, "%s: %s", what, d.msg);
    ok = ok && evtc_program_get(p, evtc_graph_find(g, "o"), y);
    CHECK(ok, "%s: the output read back", what);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
  return ok;
}

enum { BF16_SWEEP_N = 1 << 16 };

/* x[0 .. BF16_SWEEP_N) = the n_special special values, then every bf16 of [0, lim] (of (0, lim] without_zero) and its
 * negative, the rest 0.5; returns how many inputs are special or swept. */
static inline int bf16_sweep_inputs(const double *special, int n_special, float lim, bool without_zero, double *x) {
  int n = 0;
  for (; n < n_special; n++) x[n] = special[n];
  for (uint32_t bits = without_zero ? 1 : 0; bits < 0x8000u && n + 1 < BF16_SWEEP_N; bits++) {
    const uint32_t w = bits << 16;
    float f;
    memcpy(&f, &w, sizeof f);
    if (f <= lim) x[n++] = f, x[n++] = -f;
  }
  for (int i = n; i < BF16_SWEEP_N; i++) x[i] = 0.5;
  return n;
}

/* unary_run of `text` (%x and %o both f32[65536]) on bf16_sweep_inputs.  *xo and *yo get the inputs and outputs
 * (free both, also after a failure); returns how many inputs are special or swept, or -1 after a failed check. */
static inline int bf16_sweep(const evtc_backend *be, const char *what, const char *text, const double *special,
                             int n_special, float lim, bool without_zero, double **xo, double **yo) {
  double *x = malloc(sizeof(double) * BF16_SWEEP_N), *y = malloc(sizeof(double) * BF16_SWEEP_N);
  *xo = x, *yo = y;
  if (!x || !y) return -1;
  const int n = bf16_sweep_inputs(special, n_special, lim, without_zero, x);
  return unary_run(be, what, text, x, y) ? n : -1;
}

#endif
