/* cleanup.c -- the `cleanup` pass: drop views and ops that do nothing.
 *
 * The counterpart of the EVT artifact's frontend cleanup.  It forwards a
 * node's input in place of the node when the node cannot change the data:
 *   reshape, expand, slice, pad, cast whose output type (dtype and shape)
 *     equals the input's (for slice and pad an unchanged shape implies a
 *     full range and zero padding, since steps >= 1 and pads >= 0);
 *   permute whose perm keeps every dim of size > 1 in order and whose
 *     output shape equals the input's (the identity on the data);
 *   concat of one input.
 * It also folds reshape(reshape(x)) into one reshape(x) with the outer
 * attribute (into x itself when that has the outer shape), and turns a permute that moves only size-1 dims into a reshape.
 * Nodes that lose their consumers stay in the graph for dce.
 */
#include "passes/pass.h"
#include "passes/rewrite.h"

static bool same_shape(const evtc_type *a, const evtc_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* True when perm keeps the order of the input dims of size > 1. */
static bool perm_keeps_data(const evtc_node *n, const evtc_node *in) {
  const evtc_attr *perm = evtc_node_attr(n, "perm");
  int64_t last = -1;
  for (int i = 0; i < perm->n; i++) {
    int64_t p = perm->v.ints[i];
    if (in->type.shape[p] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

static evtc_node *cleanup_node(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  switch (n->op) {
    case EVTC_OP_RESHAPE:
      if (same_shape(&in[0]->type, &n->type)) return in[0];
      if (in[0]->op == EVTC_OP_RESHAPE) {
        if (same_shape(&in[0]->inputs[0]->type, &n->type)) return in[0]->inputs[0];
        evtc_attr shape = *evtc_node_attr(n, "shape");
        return evtc_node_add(rw->dst, EVTC_OP_RESHAPE, in[0]->inputs, 1, &shape, 1, n->name);
      }
      return NULL;
    case EVTC_OP_PERMUTE:
      if (!perm_keeps_data(n, in[0])) return NULL;
      if (same_shape(&in[0]->type, &n->type)) return in[0];
      {
        evtc_attr shape = evtc_attr_ints("shape", n->type.rank, n->type.shape);
        return evtc_node_add(rw->dst, EVTC_OP_RESHAPE, in, 1, &shape, 1, n->name);
      }
    case EVTC_OP_EXPAND:
    case EVTC_OP_SLICE:
    case EVTC_OP_PAD:
    case EVTC_OP_CAST:
      return same_shape(&in[0]->type, &n->type) ? in[0] : NULL;
    case EVTC_OP_CONCAT:
      return n->n_inputs == 1 ? in[0] : NULL;
    default:
      return NULL;
  }
}

static evtc_graph *cleanup_run(const evtc_graph *g, evtc_diag *d) {
  return evtc_rewrite_graph(g, cleanup_node, NULL, d);
}

const evtc_pass evtc_pass_cleanup = {
    .name = "cleanup",
    .summary = "drop no-op views and ops (identity reshape/permute/expand/slice/pad/cast, 1-input concat), "
               "fold reshape of reshape",
    .run = cleanup_run,
};
