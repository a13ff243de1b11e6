/* tile_stamps_run.c -- runs a one-GEMM-kernel graph (a bench/epilogue graph) on the CUDA backend 50 times
 * ($STAMP_RUNS) with random inputs, then prints, for each output of at least 40 rows x 24 columns, "# NAME"
 * and those rows' first 24 columns, one value a line: where a kernel instrumented by tile_stamps.py leaves its
 * clock stamps, in the output it stores first (a measuring tool).
 *
 *   tile_stamps_run GRAPH.evt > values.txt
 */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tile_stamps_run GRAPH.evt\n");
    return 2;
  }
  char err[512];
  evtc_graph *g = evtc_graph_parse_file(argv[1], err, sizeof err);
  evtc_diag d = {0};
  const evtc_backend *be = g ? evtc_backend_cuda(&d) : NULL;
  if (!g || !be) {
    fprintf(stderr, "tile_stamps_run: %s\n", g ? d.msg : err);
    return 1;
  }
  int32_t *plan = malloc(sizeof(int32_t) * (size_t)g->n_nodes);
  for (int32_t i = 0; i < g->n_nodes; i++) plan[i] = evtc_op_is_leaf(g->nodes[i]->op) ? -1 : 0;
  evtc_program *p = evtc_program_new(g, plan, 1, be, NULL, &d);
  if (!p) {
    fprintf(stderr, "tile_stamps_run: %s\n", d.msg);
    return 1;
  }
  srand(1);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *nd = g->nodes[i];
    if (nd->op != EVTC_OP_INPUT && nd->op != EVTC_OP_PARAM) continue;
    int64_t numel = evtc_type_numel(&nd->type);
    double *v = malloc(sizeof(double) * (size_t)numel);
    for (int64_t e = 0; e < numel; e++) v[e] = 2.0 * rand() / RAND_MAX - 1;
    evtc_program_set(p, nd, v);
    free(v);
  }
  const int runs = getenv("STAMP_RUNS") ? atoi(getenv("STAMP_RUNS")) : 50;
  for (int r = 0; r < runs; r++)
    if (evtc_program_run(p, 1, &d) != EVTC_OK) {
      fprintf(stderr, "tile_stamps_run: %s\n", d.msg);
      return 1;
    }
  /* every output big enough to hold the stamps: tile_stamps.py finds the one the instrumented kernel wrote */
  for (int i = 0; i < g->n_outputs; i++) {
    const evtc_node *o = g->outputs[i].node;
    const int rank = o->type.rank;
    if (rank < 2 || o->type.shape[rank - 1] < 24 || evtc_type_numel(&o->type) / o->type.shape[rank - 1] < 40) continue;
    double *out = malloc(sizeof(double) * (size_t)evtc_type_numel(&o->type));
    if (!out || !evtc_program_get(p, o, out)) return 1;
    const int64_t cols = o->type.shape[rank - 1];
    printf("# %s\n", o->name);
    for (int r = 0; r < 40; r++)
      for (int c = 0; c < 24; c++) printf("%.9g\n", out[r * cols + c]);
    free(out);
  }
  return 0;
}
