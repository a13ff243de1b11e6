/* rows_emit.h -- a CUDA rows kernel planned for an H200 (132 SMs, 227 KiB of shared memory a block) and emitted,
 * for the tests that read its source without a GPU (test_rows_*), and a count of what that source says. */
#ifndef EVTC_TESTS_ROWS_EMIT_H
#define EVTC_TESTS_ROWS_EMIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"

/* Kernel k, named `name`, planned into *pl and emitted; the source, to free (NULL if it could not be built). */
static inline char *rows_emit_h200(evtc_kernel *k, const char *name, evtc_cuda_rows_plan *pl) {
  *pl = evtc_cuda_rows_plan_of(k, 132, 227 * 1024);
  snprintf(k->name, sizeof k->name, "%s", name);
  evtc_sb src = {0};
  evtc_cuda_emit_rows(&src, k, pl);
  return src.s;
}

/* The same with the environment variable `var` of the rows planner or emitter set to `value` (NULL: unset) while it
 * plans and emits, unset after. */
static inline char *rows_emit_h200_with(evtc_kernel *k, const char *name, evtc_cuda_rows_plan *pl, const char *var,
                                        const char *value) {
  if (value) setenv(var, value, 1);
  else unsetenv(var);
  char *src = rows_emit_h200(k, name, pl);
  unsetenv(var);
  return src;
}

/* Occurrences of needle in the source text [from, to). */
static inline int count_in(const char *from, const char *to, const char *needle) {
  int n = 0;
  for (const char *p = strstr(from, needle); p && p < to; p = strstr(p + 1, needle)) n++;
  return n;
}

#endif
