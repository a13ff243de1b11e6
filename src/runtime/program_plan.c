/* program_plan.c -- the backend's veto on fused node sets (program_plan.h).
 *
 * Kept apart from program_partition.c because the kernel IR and the fusion
 * module each name their kernel type evtc_kernel: a translation unit sees
 * one of them.
 */
#include "runtime/program_plan.h"

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

static int cmp_id(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

bool evtc_program_plan_accept(const evtc_graph *g, const int32_t *nodes, int n, void *ctx) {
  const evtc_backend *be = ctx;
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
  memcpy(ids, nodes, sizeof(int32_t) * (size_t)n);
  qsort(ids, (size_t)n, sizeof(int32_t), cmp_id);
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, ids, n, &d);
  char why[160];
  bool ok = k && k->kind != EVTC_ML_OPAQUE && be->supports(be, k, why, sizeof why);
  evtc_kernel_free(k);
  free(ids);
  return ok;
}
