/* cmd_check.c -- `evtc check FILE`: parse and verify a model, then describe it.
 *
 * Prints "nodes: N", one line "  OP COUNT" per op that occurs (in op-table
 * order), "outputs: N" and, when the graph has one, "loss: %NAME".
 */
#include <stdio.h>

#include "cli.h"

int evtc_cmd_check(int argc, char **argv) {
  if (argc != 1) {
    fprintf(stderr, "evtc: usage: evtc check FILE\n");
    return EVTC_EXIT_BAD_INPUT;
  }
  evtc_graph *g = evtc_cli_load_model(argv[0]);
  if (!g) return EVTC_EXIT_BAD_INPUT;
  int count[EVTC_OP_COUNT] = {0};
  for (int32_t i = 0; i < g->n_nodes; i++) count[g->nodes[i]->op]++;
  printf("nodes: %d\n", (int)g->n_nodes);
  for (int op = 0; op < EVTC_OP_COUNT; op++)
    if (count[op]) printf("  %s %d\n", evtc_op_get((evtc_op)op)->name, count[op]);
  printf("outputs: %d\n", (int)g->n_outputs);
  if (g->loss) printf("loss: %%%s\n", g->loss->name);
  evtc_graph_free(g);
  return EVTC_EXIT_OK;
}
