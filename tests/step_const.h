/* step_const.h -- the text of a constant vector of two values along one axis, the kernel IR's STEP (gemm-pad's
 * mask is one), for tests that build such graphs. */
#ifndef EVTC_TEST_STEP_CONST_H
#define EVTC_TEST_STEP_CONST_H

#include "backend/cpu/cpu_emit.h"

/* "  %NAME = const() {data=[...]} : DTYPE[SHAPE]" of n values: lo for the first `depth`, hi from there on, or, with
 * depth 0, alternating 0 and 1 (no step). */
static inline void step_const_line(evtc_sb *b, const char *name, const char *dtype, int n, int depth, double lo,
                                   double hi, const char *shape) {
  evtc_sb_printf(b, "  %%%s = const() {data=[", name);
  for (int j = 0; j < n; j++) evtc_sb_printf(b, "%s%.17g", j ? "," : "", depth ? (j < depth ? lo : hi) : (double)(j % 2));
  evtc_sb_printf(b, "]} : %s[%s]\n", dtype, shape);
}

#endif
