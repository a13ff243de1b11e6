/* rewrite.c -- the node-by-node graph rewriter (see rewrite.h). */
#include "passes/rewrite.h"

#include <stdlib.h>

evtc_graph *evtc_rewrite_graph(const evtc_graph *g, evtc_rewrite_fn fn, void *ctx, evtc_diag *d) {
  evtc_rewrite rw = {.src = g, .dst = evtc_graph_new(g->name), .ctx = ctx};
  rw.dst->file = g->file ? evtc_arena_strdup(rw.dst->arena, g->file) : NULL;
  rw.map = calloc((size_t)g->n_nodes + 1, sizeof *rw.map);
  evtc_node **ins = NULL;
  int cap = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->n_inputs > cap) {
      cap = 2 * n->n_inputs;
      ins = realloc(ins, sizeof *ins * (size_t)cap);
    }
    for (int k = 0; k < n->n_inputs; k++) ins[k] = rw.map[n->inputs[k]->id];
    evtc_node *r = fn ? fn(&rw, n, ins) : NULL;
    if (!r && rw.dst->diag.status == EVTC_OK) r = evtc_node_copy(rw.dst, n, ins);
    if (!r) break;
    bool same = r->type.dtype == n->type.dtype && r->type.rank == n->type.rank;
    for (int k = 0; same && k < n->type.rank; k++) same = r->type.shape[k] == n->type.shape[k];
    if (!same) {
      char a[96], b[96];
      evtc_diag_set(&rw.dst->diag, EVTC_ERR_INVALID, "internal: rewrite of %%%s (%s) changed its type %s to %s",
                    n->name, evtc_op_get(n->op)->name, evtc_type_str(&n->type, a, sizeof a),
                    evtc_type_str(&r->type, b, sizeof b));
      break;
    }
    if (r->line == 0) {
      r->line = n->line;
      r->col = n->col;
    }
    rw.map[i] = r;
  }
  free(ins);
  if (rw.dst->diag.status != EVTC_OK) {
    evtc_diag_set(d, rw.dst->diag.status, "%s", rw.dst->diag.msg);
    free(rw.map);
    evtc_graph_free(rw.dst);
    return NULL;
  }
  for (int32_t i = 0; i < g->n_outputs; i++)
    evtc_graph_add_output(rw.dst, rw.map[g->outputs[i].node->id],
                          g->outputs[i].updates ? rw.map[g->outputs[i].updates->id] : NULL);
  rw.dst->loss = g->loss ? rw.map[g->loss->id] : NULL;
  free(rw.map);
  return rw.dst;
}

bool *evtc_graph_live(const evtc_graph *g) {
  bool *live = calloc((size_t)g->n_nodes + 1, sizeof *live);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    live[g->outputs[i].node->id] = true;
    if (g->outputs[i].updates) live[g->outputs[i].updates->id] = true;
  }
  if (g->loss) live[g->loss->id] = true;
  for (int32_t i = g->n_nodes - 1; i >= 0; i--)
    if (live[i])
      for (int k = 0; k < g->nodes[i]->n_inputs; k++) live[g->nodes[i]->inputs[k]->id] = true;
  return live;
}
