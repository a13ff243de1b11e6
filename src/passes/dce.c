/* dce.c -- the `dce` pass: dead-code elimination.
 *
 * Keeps the nodes that an output, an output's `updates` target or the loss
 * depends on, plus every INPUT, PARAM and STATE leaf (they are the graph's
 * interface: callers bind them by name, and dropping one would change what
 * a training loop must feed); drops everything else, dead CONSTs included.
 * Kept nodes keep their names and relative order.
 */
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/rewrite.h"

static evtc_graph *dce_run(const evtc_graph *g, evtc_diag *d) {
  bool *live = evtc_graph_live(g);
  evtc_graph *out = evtc_graph_new(g->name);
  out->file = g->file ? evtc_arena_strdup(out->arena, g->file) : NULL;
  evtc_node **map = calloc((size_t)g->n_nodes + 1, sizeof *map);
  evtc_node **ins = NULL;
  int cap = 0;
  for (int32_t i = 0; i < g->n_nodes && out->diag.status == EVTC_OK; i++) {
    const evtc_node *n = g->nodes[i];
    if (!live[i] && !(evtc_op_is_leaf(n->op) && n->op != EVTC_OP_CONST)) continue;
    if (n->n_inputs > cap) {
      cap = 2 * n->n_inputs;
      ins = realloc(ins, sizeof *ins * (size_t)cap);
    }
    for (int k = 0; k < n->n_inputs; k++) ins[k] = map[n->inputs[k]->id];
    map[i] = evtc_node_copy(out, n, ins);
    if (map[i]) {
      map[i]->line = n->line;
      map[i]->col = n->col;
    }
  }
  free(ins);
  free(live);
  if (out->diag.status != EVTC_OK) {
    evtc_diag_set(d, out->diag.status, "%s", out->diag.msg);
    free(map);
    evtc_graph_free(out);
    return NULL;
  }
  for (int32_t i = 0; i < g->n_outputs; i++)
    evtc_graph_add_output(out, map[g->outputs[i].node->id],
                          g->outputs[i].updates ? map[g->outputs[i].updates->id] : NULL);
  out->loss = g->loss ? map[g->loss->id] : NULL;
  free(map);
  return out;
}

const evtc_pass evtc_pass_dce = {
    .name = "dce",
    .summary = "drop nodes no output, update or loss depends on (INPUT/PARAM/STATE leaves are kept)",
    .run = dce_run,
};
