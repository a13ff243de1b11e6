/* loss_elimination.c -- the `loss-elimination` pass: stop computing the
 * loss value in a training-step graph.
 *
 * EVT's artifact replaces the loss output by a constant and lets dead-code
 * elimination drop the loss computation, because the backward never reads
 * the loss value: it starts from the seed gradient dL/dL = 1.  In evtc the
 * seed is already a constant (autodiff emits `grad.<loss> = const 1.0`) and
 * no backward rule reads the loss node, so what remains is the value itself:
 * on a graph with at least one output that `updates` a PARAM or STATE (a
 * training step), this pass removes every plain output that is the loss
 * node and clears the graph's loss mark; the nodes that only the loss
 * needed (the final reduction of cross_entropy / mse and what feeds only
 * it) become dead and dce drops them.  Graphs without update outputs
 * (forward models, gradient-only graphs) are returned unchanged.
 *
 * This is the one pass that changes a graph's interface (one output fewer,
 * no loss), so the default pipelines, which keep the reported loss, do not
 * run it; the `*-noloss` pipeline variants do (pipelines.c).
 */
#include "passes/pass.h"
#include "passes/rewrite.h"

static evtc_graph *loss_elimination_run(const evtc_graph *g, evtc_diag *d) {
  evtc_graph *out = evtc_rewrite_graph(g, NULL, NULL, d);
  if (!out || !out->loss) return out;
  bool training = false;
  for (int32_t i = 0; i < out->n_outputs; i++) training |= out->outputs[i].updates != NULL;
  if (!training) return out;
  int32_t kept = 0;
  for (int32_t i = 0; i < out->n_outputs; i++)
    if (out->outputs[i].node != out->loss || out->outputs[i].updates) out->outputs[kept++] = out->outputs[i];
  out->n_outputs = kept;
  out->loss = NULL;
  return out;
}

const evtc_pass evtc_pass_loss_elimination = {
    .name = "loss-elimination",
    .summary = "in a training-step graph, drop the loss output and loss mark so the loss value goes dead "
               "(the backward seed is already a constant)",
    .run = loss_elimination_run,
};
