/* train_eval.c -- after training: test-set evaluation and checkpoints.
 *
 * Evaluation runs the forward model once over the whole test split (the
 * model rebatched to the split's size) with the trained values; the
 * prediction is the model's first output that is not the loss and does not
 * update a leaf, the labels the integer INPUT shaped like the prediction
 * without its last axis (class scores over the last axis).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/interp.h"
#include "runtime/safetensors.h"
#include "runtime/train.h"

/* The integer INPUT of g whose shape is pred's without the last axis, or NULL. */
static const evtc_node *find_labels(const evtc_graph *g, const evtc_node *pred) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT || !evtc_dtype_is_int(n->type.dtype) || n->type.rank != pred->type.rank - 1) continue;
    bool same = true;
    for (int k = 0; k < n->type.rank; k++) same &= n->type.shape[k] == pred->type.shape[k];
    if (same) return n;
  }
  return NULL;
}

/* Fraction of rows of pred ([..., C] flattened to rows of C) whose first
 * maximum is at the index given by labels. */
static double accuracy(const double *pred, const double *labels, int64_t rows, int64_t classes) {
  int64_t right = 0;
  for (int64_t r = 0; r < rows; r++) {
    const double *p = pred + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; c++)
      if (p[c] > p[best]) best = c;
    right += (double)best == labels[r];
  }
  return rows ? (double)right / (double)rows : 0.0;
}

evtc_status evtc_train_evaluate(const evtc_graph *model, const evtc_dataset *test, const evtc_leaf_values *params,
                                double *loss, double *acc, evtc_diag *d) {
  *loss = NAN;
  *acc = -1;
  evtc_graph *g = evtc_graph_rebatch(model, test->n_samples, d);
  if (!g) return d->status;
  evtc_interp *it = evtc_interp_new(g);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    const double *v;
    if (n->op == EVTC_OP_INPUT) {
      const evtc_dataset_column *c = evtc_dataset_column_find(test, n->name);
      EVTC_ASSERT(c != NULL);      /* the test split was loaded for this model */
      v = c->data;
    } else if (n->op == EVTC_OP_PARAM || n->op == EVTC_OP_STATE) {
      v = evtc_leaf_values_find(params, n->name);
      EVTC_ASSERT(v != NULL);      /* the joint graph holds every leaf of the model */
    } else {
      continue;
    }
    evtc_interp_set(it, n, v);
  }
  if (evtc_interp_run(it, 0, d) == EVTC_OK) {
    if (g->loss) *loss = evtc_interp_value(it, g->loss)[0];
    const evtc_node *pred = NULL;
    for (int32_t k = 0; k < g->n_outputs && !pred; k++)
      if (g->outputs[k].node != g->loss && !g->outputs[k].updates && g->outputs[k].node->type.rank >= 1)
        pred = g->outputs[k].node;
    const evtc_node *labels = pred ? find_labels(g, pred) : NULL;
    if (labels) {
      int64_t classes = pred->type.shape[pred->type.rank - 1];
      *acc = accuracy(evtc_interp_value(it, pred), evtc_interp_value(it, labels), evtc_type_numel(&labels->type),
                      classes);
    }
  }
  evtc_interp_free(it);
  evtc_graph_free(g);
  return d->status;
}

int evtc_train_save(const char *path, const evtc_graph *model, const evtc_leaf_values *params, evtc_diag *d) {
  evtc_named_tensor *ts = calloc((size_t)model->n_nodes + 1, sizeof *ts);
  int n = 0;
  for (int32_t i = 0; i < model->n_nodes; i++) {
    const evtc_node *node = model->nodes[i];
    if (node->op != EVTC_OP_PARAM && node->op != EVTC_OP_STATE) continue;
    const double *v = evtc_leaf_values_find(params, node->name);
    if (!v) continue;
    ts[n++] = (evtc_named_tensor){node->name, evtc_type_make(node->type.dtype, node->type.rank, node->type.shape), v};
  }
  evtc_status st = evtc_safetensors_write(path, ts, n, d);
  free(ts);
  return st == EVTC_OK ? n : -1;
}
