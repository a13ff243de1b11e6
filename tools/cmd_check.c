/* cmd_check.c -- `evtc check FILE [model options]`: read and verify a model,
 * then describe it.
 *
 * Prints "nodes: N", one line "  OP COUNT" per op that occurs (in op-table
 * order), "inputs: N" and one line "  %NAME TYPE" per INPUT, "outputs: N"
 * and one line "  %NAME TYPE" per output ("-> %P" when it updates P),
 * "params: N (T tensors)" -- the trainable scalars, i.e. the elements of
 * float PARAM leaves -- and, when the graph has one, "loss: %NAME".
 */
#include <stdio.h>

#include "cli.h"

static const char check_usage[] = "usage: evtc check FILE [model options]\n";

int evtc_cmd_check(int argc, char **argv) {
  const char *file = NULL;
  evtc_cli_model_options mo = {0};
  int rc = EVTC_EXIT_BAD_INPUT;
  evtc_graph *g = NULL;
  if (evtc_cli_help(argc, argv, check_usage)) return EVTC_EXIT_OK;
  for (int i = 0; i < argc; i++) {
    int k = evtc_cli_model_option(argc, argv, &i, &mo);
    if (k < 0) goto out;
    if (k > 0) continue;
    if ((argv[i][0] == '-' && argv[i][1]) || file) {
      fprintf(stderr, "evtc: check: unexpected argument '%s'\n%s%s", argv[i], check_usage, evtc_cli_model_usage);
      goto out;
    }
    file = argv[i];
  }
  if (!file) {
    fprintf(stderr, "evtc: %s", check_usage);
    goto out;
  }
  if (!(g = evtc_cli_load_model(file, &mo, NULL)) || !evtc_cli_attach_loss(g, &mo, false)) goto out;
  int count[EVTC_OP_COUNT] = {0};
  int64_t params = 0;
  int param_tensors = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    count[n->op]++;
    if (n->op == EVTC_OP_PARAM && evtc_dtype_is_float(n->type.dtype)) {
      params += evtc_type_numel(&n->type);
      param_tensors++;
    }
  }
  char t[128];
  printf("nodes: %d\n", (int)g->n_nodes);
  for (int op = 0; op < EVTC_OP_COUNT; op++)
    if (count[op]) printf("  %s %d\n", evtc_op_get((evtc_op)op)->name, count[op]);
  printf("inputs: %d\n", count[EVTC_OP_INPUT]);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->op == EVTC_OP_INPUT)
      printf("  %%%s %s\n", g->nodes[i]->name, evtc_type_str(&g->nodes[i]->type, t, sizeof t));
  printf("outputs: %d\n", (int)g->n_outputs);
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const evtc_output *o = &g->outputs[i];
    printf("  %%%s %s", o->node->name, evtc_type_str(&o->node->type, t, sizeof t));
    if (o->updates) printf(" -> %%%s", o->updates->name);
    putchar('\n');
  }
  printf("params: %lld (%d tensor%s)\n", (long long)params, param_tensors, param_tensors == 1 ? "" : "s");
  if (g->loss) printf("loss: %%%s\n", g->loss->name);
  rc = EVTC_EXIT_OK;
out:
  evtc_graph_free(g);
  evtc_cli_model_options_free(&mo);
  return rc;
}
