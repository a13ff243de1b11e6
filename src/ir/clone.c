/* clone.c -- copying graphs: plain clones and clones with a new batch size.
 *
 * A copy re-runs the builder for every node, so the copy's types are
 * inferred afresh; that is what lets `evtc train --batch B` take a model
 * written for another batch size.
 */
#include <stdlib.h>

#include "ir/ir.h"

evtc_node *evtc_node_copy(evtc_graph *g, const evtc_node *n, evtc_node *const *inputs) {
  const evtc_op_info *info = evtc_op_get(n->op);
  if (evtc_op_is_leaf(n->op)) return evtc_leaf_add(g, n->op, n->type, n->attrs, info->n_attrs, n->name);
  return evtc_node_add(g, n->op, inputs, n->n_inputs, n->attrs, info->n_attrs, n->name);
}

/* Copies g into a new graph; with batch >= 0, INPUT dim 0 becomes batch. */
static evtc_graph *copy_graph(const evtc_graph *g, int64_t batch, evtc_diag *d) {
  evtc_graph *c = evtc_graph_new(g->name);
  c->file = g->file ? evtc_arena_strdup(c->arena, g->file) : NULL;
  evtc_node **map = calloc((size_t)g->n_nodes + 1, sizeof *map);
  evtc_node **ins = NULL;
  int cap = 0;
  for (int32_t i = 0; i < g->n_nodes && c->diag.status == EVTC_OK; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->n_inputs > cap) {
      cap = n->n_inputs * 2;
      ins = realloc(ins, sizeof *ins * (size_t)cap);
    }
    for (int k = 0; k < n->n_inputs; k++) ins[k] = map[n->inputs[k]->id];
    if (n->op == EVTC_OP_INPUT && batch >= 0 && n->type.rank > 0) {
      evtc_type t = n->type;
      t.shape[0] = batch;
      t = evtc_type_make(t.dtype, t.rank, t.shape);
      map[i] = evtc_leaf_add(c, n->op, t, NULL, 0, n->name);
    } else {
      map[i] = evtc_node_copy(c, n, ins);
    }
    if (map[i]) {
      map[i]->line = n->line;
      map[i]->col = n->col;
    }
  }
  free(ins);
  if (c->diag.status != EVTC_OK) {
    if (d) evtc_diag_set(d, c->diag.status, "%s", c->diag.msg);
    else EVTC_ASSERT(!"a plain clone cannot fail");
    free(map);
    evtc_graph_free(c);
    return NULL;
  }
  for (int32_t i = 0; i < g->n_outputs; i++)
    evtc_graph_add_output(c, map[g->outputs[i].node->id],
                          g->outputs[i].updates ? map[g->outputs[i].updates->id] : NULL);
  c->loss = g->loss ? map[g->loss->id] : NULL;
  free(map);
  return c;
}

evtc_graph *evtc_graph_clone(const evtc_graph *g) { return copy_graph(g, -1, NULL); }

evtc_graph *evtc_graph_rebatch(const evtc_graph *g, int64_t batch, evtc_diag *d) {
  return copy_graph(g, batch, d);
}
