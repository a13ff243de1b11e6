/* graph_outputs.h -- a test graph's outputs in the float64 interpreter, on
 * leaves drawn from a seed and the leaf's name, so that two graphs (one
 * before a pass, one after) get the same values for the same leaf: float
 * leaves uniform in [-1, 1), integer ones in {0, 1, 2}.  For the pass tests
 * (test_passes_numeric.c, test_conv_patchify.c); include after check.h.
 */
#ifndef EVTC_TEST_GRAPH_OUTPUTS_H
#define EVTC_TEST_GRAPH_OUTPUTS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/interp.h"

/* Runs g (step 3) on leaves drawn from seed; malloc'd copies of its outputs, NULL after a failed check. */
static double **graph_outputs(const evtc_graph *g, uint64_t seed) {
  evtc_interp *it = evtc_interp_new(g);
  double **leaf = calloc((size_t)g->n_nodes, sizeof *leaf);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    check_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (const char *s = n->name; *s; s++)
      check_rng = (check_rng ^ (uint64_t)(unsigned char)*s) * 0x100000001B3ull + 1;
    int64_t k = evtc_type_numel(&n->type);
    leaf[i] = malloc(sizeof(double) * (size_t)(k ? k : 1));
    for (int64_t j = 0; j < k; j++)
      leaf[i][j] = evtc_dtype_is_float(n->type.dtype) ? 2 * check_urand() - 1 : floor(3 * check_urand());
    evtc_interp_set(it, n, leaf[i]);
  }
  evtc_diag d = {0};
  evtc_status st = evtc_interp_run(it, 3, &d);
  CHECK(st == EVTC_OK, "run of %s: %s", g->name, d.msg);
  double **out = NULL;
  if (st == EVTC_OK) {
    out = calloc((size_t)g->n_outputs + 1, sizeof *out);
    for (int32_t o = 0; o < g->n_outputs; o++) {
      int64_t k = evtc_type_numel(&g->outputs[o].node->type);
      out[o] = malloc(sizeof(double) * (size_t)(k ? k : 1));
      memcpy(out[o], evtc_interp_value(it, g->outputs[o].node), sizeof(double) * (size_t)k);
    }
  }
  for (int32_t i = 0; i < g->n_nodes; i++) free(leaf[i]);
  free(leaf);
  evtc_interp_free(it);
  return out;
}

static void graph_outputs_free(double **o, int n) {
  for (int i = 0; o && i < n; i++) free(o[i]);
  free(o);
}

#endif
