/* loss.c -- attaching a loss to a forward graph.
 *
 * A model file or builder graph may end at its predictions; the loss node
 * (named "loss") turns them into the scalar that autodiff minimises, and
 * becomes g->loss and an output of g.
 */
#include <string.h>

#include "autodiff/autodiff.h"

evtc_node *evtc_loss_attach(evtc_graph *g, const char *kind, evtc_node *pred, evtc_node *labels, evtc_diag *d) {
  if (g->loss) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "graph '%s' already has a loss (%%%s)", g->name, g->loss->name);
    return NULL;
  }
  if (!pred) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "loss '%s': no prediction node given", kind);
    return NULL;
  }
  bool mean_square = strcmp(kind, "mean_square") == 0;
  evtc_op op = strcmp(kind, "cross_entropy") == 0 ? EVTC_OP_CROSS_ENTROPY : EVTC_OP_MSE;
  if (!mean_square && op == EVTC_OP_MSE && strcmp(kind, "mse") != 0) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "unknown loss '%s' (cross_entropy, mse or mean_square)", kind);
    return NULL;
  }
  if (mean_square != (labels == NULL)) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "loss '%s' %s labels", kind, mean_square ? "takes no" : "needs");
    return NULL;
  }
  evtc_node *loss;
  if (mean_square) {
    evtc_node *sq = evtc_binary(g, EVTC_OP_MUL, pred, pred);
    loss = evtc_node_add(g, EVTC_OP_REDUCE_MEAN, &sq, 1, NULL, 0, "loss");
  } else {
    evtc_node *in[2] = {pred, labels};
    loss = evtc_node_add(g, op, in, 2, NULL, 0, "loss");
  }
  if (!loss) {
    evtc_diag_set(d, g->diag.status, "%s", g->diag.msg);
    return NULL;
  }
  g->loss = loss;
  evtc_graph_add_output(g, loss, NULL);
  return loss;
}
