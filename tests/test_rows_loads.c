/* test_rows_loads.c -- which row-invariant loads a CUDA rows kernel
 * hoists out of its row loop, checked on the CPU in its emitted source
 * (src/backend/cuda/cuda_emit_rows.c's decide_hoists): no GPU needed.
 *
 * A layernorm's gamma and beta read the same columns in every row: a
 * persistent plan loads them once, before its row loop, into registers
 * (lh<i>), 8 registers a thread of them, 32 where the launch bounds leave
 * 192 or more.  In the kernel of a layernorm's forward and backward over
 * 4096 f32 columns (256 threads, one block an SM: 256 registers) both go
 * there, 16 registers each; over 1024 (256 threads of one vector, 2 blocks
 * an SM: 128 registers) both, 4 registers each, and with 128 threads of two
 * vectors (EVTC_CUDA_ROW_COLS=8, 4 blocks an SM: 128 registers) gamma
 * alone; over 32000 (1024 threads: 64 registers) neither, and they are
 * read in the passes.  test_gpu_kernels runs such kernels against the
 * interpreter on the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "kernel_values.h"
#include "passes/manager.h"
#include "rows_emit.h"

/* The one kernel of a layernorm's forward and backward over R x C f32 (output y, loss sum(y dy), gradients of x,
 * gamma and beta), as `evtc train` builds it: autodiff, then the h200 pass pipeline; NULL after a failed check. */
static evtc_kernel *layernorm_kernel(int rows, int cols, evtc_graph **out) {
  char text[512];
  snprintf(text, sizeof text,
           "graph ln {\n  %%x = input() : f32[%d,%d]\n  %%dy = input() : f32[%d,%d]\n  %%g = input() : f32[%d]\n"
           "  %%b = input() : f32[%d]\n  %%y = layernorm(%%x, %%g, %%b) : f32[%d,%d]\n  %%p = mul(%%y, %%dy) : f32[%d,%d]\n"
           "  %%loss = reduce_sum(%%p) : f32[]\n  output %%y\n  loss %%loss\n}\n",
           rows, cols, rows, cols, cols, cols, rows, cols, rows, cols);
  char err[256];
  evtc_diag d = {0};
  evtc_graph *g = evtc_graph_parse_string(text, "ln", err, sizeof err);
  CHECK(g != NULL, "layernorm graph: %s", err);
  if (!g) return NULL;
  const char *wrt[] = {"x", "g", "b"};
  evtc_optim_config none = evtc_optim_default(EVTC_OPTIM_NONE);
  evtc_graph *j = evtc_autodiff(g, wrt, 3, &none, &d);
  evtc_graph_free(g);
  CHECK(j != NULL, "layernorm autodiff: %s", d.msg);
  if (!j) return NULL;
  const evtc_pipeline *pl = evtc_pipeline_find("h200");
  *out = evtc_pipeline_run(j, pl->passes, pl->n_passes, NULL, &d);
  evtc_graph_free(j);
  CHECK(*out != NULL, "layernorm passes: %s", d.msg);
  if (!*out) return NULL;
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*out)->n_nodes);
  int n = 0;
  for (int32_t i = 0; i < (*out)->n_nodes; i++)
    if (!evtc_op_is_leaf((*out)->nodes[i]->op) && strcmp((*out)->nodes[i]->name, "loss") != 0) ids[n++] = i;
  evtc_kernel *k = evtc_kernel_build(*out, ids, n, &d);
  free(ids);
  CHECK(k != NULL, "layernorm kernel: %s", d.msg);
  return k;
}

/* How many of gamma and beta the layernorm over `cols` columns loads before its row loop (with EVTC_CUDA_ROW_COLS as
 * `row_cols`, NULL: unset). */
static void check_hoists(int cols, const char *row_cols, int want) {
  char what[96];
  snprintf(what, sizeof what, "f32 layernorm over %d columns (EVTC_CUDA_ROW_COLS=%s)", cols, row_cols ? row_cols : "");
  evtc_graph *g = NULL;
  evtc_kernel *k = layernorm_kernel(16384, cols, &g);
  if (!k) {
    evtc_graph_free(g);
    return;
  }
  evtc_cuda_rows_plan pl;
  char *src = rows_emit_h200_with(k, "loads", &pl, "EVTC_CUDA_ROW_COLS", row_cols);
  int hoisted = 0;
  const int loads[2] = {value_of(k, "g"), value_of(k, "b")};
  for (int n = 0; n < 2; n++) {
    char line[64];
    snprintf(line, sizeof line, "lh%d[j] = *(const evtc_vec<float", loads[n]);
    hoisted += loads[n] >= 0 && src && strstr(src, line) != NULL;
  }
  CHECK(hoisted == want, "%s (%d threads, blocks an SM: %d): %d of gamma and beta hoisted, not %d", what, pl.threads,
        pl.min_blocks, hoisted, want);
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

int main(void) {
  check_hoists(1024, NULL, 2);
  check_hoists(1024, "8", 1);
  check_hoists(4096, NULL, 2);
  check_hoists(32000, NULL, 0);
  return check_summary();
}
