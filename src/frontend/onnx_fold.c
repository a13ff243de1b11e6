/* onnx_fold.c -- evaluating at import the nodes whose inputs are all known.
 *
 * Exporters compute shapes inside the graph (Shape -> Gather -> Unsqueeze
 * -> Concat -> Reshape); evtc shapes are static, so such chains must become
 * constants.  Rather than a second implementation of every op, the node's
 * own mapper runs on a scratch graph whose inputs are CONST leaves, and the
 * float64 reference interpreter evaluates what it built.
 */
#include <string.h>

#include "frontend/onnx_internal.h"
#include "runtime/interp.h"

int64_t evtc_onnx_max_known(const evtc_onnx_ctx *c) {
  return c->opt && c->opt->max_known > 0 ? c->opt->max_known : EVTC_ONNX_DEFAULT_MAX_KNOWN;
}

bool evtc_onnx_fold(evtc_onnx_ctx *c, const evtc_onnx_op *op) {
  evtc_graph *scratch = evtc_graph_new("fold");
  c->g = scratch;
  c->folding = true;
  bool ok = op->map(c);
  c->g = c->model;
  c->folding = false;
  if (scratch->diag.status != EVTC_OK) {
    evtc_onnx_fail(c, scratch->diag.status, "%s", scratch->diag.msg);
    ok = false;
  }
  for (int32_t i = 0; ok && i < scratch->n_nodes; i++) {
    int64_t numel = evtc_type_numel(&scratch->nodes[i]->type);
    if (numel < 0 || numel > evtc_onnx_max_known(c))
      ok = evtc_onnx_unsupported(c, "evaluating at import a value of more than %lld elements",
                                 (long long)evtc_onnx_max_known(c));
  }
  if (ok) {
    evtc_interp *it = evtc_interp_new(scratch);
    evtc_diag d = {0};
    if (evtc_interp_run(it, 0, &d) != EVTC_OK) {
      ok = evtc_onnx_fail(c, d.status, "evaluating at import: %s", d.msg);
    } else {
      for (int i = 0; i < c->n_out; i++)
        if (c->fold_out[i]) evtc_onnx_out_const(c, i, c->fold_out[i]->type, evtc_interp_value(it, c->fold_out[i]));
    }
    evtc_interp_free(it);
  }
  evtc_graph_free(scratch);
  return ok;
}
