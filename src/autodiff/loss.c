/* loss.c -- attaching a loss to a forward graph.
 *
 * A model file or builder graph may end at its predictions; the loss node
 * (named "loss") turns them into the scalar that autodiff minimises, and
 * becomes g->loss and an output of g.
 */
#include <string.h>

#include "autodiff/autodiff.h"

/* Whether labels' shape is pred's without its last axis. */
static bool leading_dims(const evtc_node *labels, const evtc_node *pred) {
  if (labels->type.rank != pred->type.rank - 1) return false;
  for (int i = 0; i < labels->type.rank; i++)
    if (labels->type.shape[i] != pred->type.shape[i]) return false;
  return true;
}

/* Cross-entropy over logits [..., C] with labels [...] (a sequence model's
 * tokens): in[0] becomes the logits reshaped to rows [N, C], in[1] the
 * labels to [N] (NULL with the cause in g->diag). */
static void flatten_rows(evtc_graph *g, evtc_node *in[2]) {
  int64_t rows[2] = {-1, in[0]->type.shape[in[0]->type.rank - 1]};
  evtc_attr to_rows = evtc_attr_ints("shape", 2, rows), to_labels = evtc_attr_ints("shape", 1, rows);
  in[0] = evtc_node_add(g, EVTC_OP_RESHAPE, &in[0], 1, &to_rows, 1, "loss.logits");
  in[1] = evtc_node_add(g, EVTC_OP_RESHAPE, &in[1], 1, &to_labels, 1, "loss.labels");
}

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
    if (op == EVTC_OP_CROSS_ENTROPY && pred->type.rank > 2 && leading_dims(labels, pred)) flatten_rows(g, in);
    loss = in[0] && in[1] ? evtc_node_add(g, op, in, 2, NULL, 0, "loss") : NULL;
  }
  if (!loss) {
    evtc_diag_set(d, g->diag.status, "%s", g->diag.msg);
    return NULL;
  }
  g->loss = loss;
  evtc_graph_add_output(g, loss, NULL);
  return loss;
}
