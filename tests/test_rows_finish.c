/* test_rows_finish.c -- where a CUDA rows kernel combines its reductions' partial slots (grid_finish_plan,
 * src/backend/cuda/cuda_rows_plan.c), checked on the CPU: no GPU needed.
 *
 * By default a finishing kernel NAME_fin combines them.  With EVTC_CUDA_GRID_FINISH=1, BERT-Large's layernorm
 * gradient (16384 x 1024 bf16: two column sums over a persistent wave of blocks) and the MLM loss (a sum of
 * everything beside a column sum), which run in one wave of resident blocks, have their blocks meet at a grid-wide
 * barrier after writing their partials and combine them themselves: no NAME_fin kernel, the barrier's two words
 * after the partials in scratch; clusters keep NAME_fin.  test_gpu_kernels
 * runs both kinds against the interpreter, and the f32 layernorm gradient 1500 x 1024 41 times (the barrier's reuse).
 * NAME_fin's own rounds: the warp's slot groups by shuffles, the warps of every reduction at one barrier; NAME_fin a
 * dependent launch of the main kernel (griddepcontrol), except with EVTC_CUDA_FIN_PDL=0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "ln_grad_graph.h"
#include "mlm_loss_graph.h"
#include "rows_emit.h"

/* Kernel text t planned for an H200 (132 SMs) and emitted as "kf": whether the plan finishes in the main kernel
 * (want_grid) and the source says so -- the barrier call at the plan's offset and no NAME_fin, or NAME_fin and no
 * barrier call. */
static void check_finish(const char *t, const char *what, bool want_grid) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(t, what, &g);
  if (!k) return;
  evtc_cuda_rows_plan pl;
  char *src = rows_emit_h200(k, "kf", &pl);
  char call[96];
  snprintf(call, sizeof call, "evtc_grid_barrier((unsigned *)(red + %lldLL));", (long long)pl.barrier_offset);
  const bool fin = src && strstr(src, " kf_fin(") != NULL, barrier = src && strstr(src, call) != NULL;
  if (want_grid) {
    CHECK(pl.grid_finish && !pl.has_fin, "%s: grid_finish %d, has_fin %d, not finished in the main kernel", what,
          pl.grid_finish, pl.has_fin);
    CHECK(pl.grid <= 132u * (unsigned)pl.min_blocks, "%s: %u blocks, more than one wave of %d an SM", what, pl.grid,
          pl.min_blocks);
    CHECK(pl.barrier_offset == pl.scratch_doubles - 1, "%s: the barrier at %lld, not after the %lld partials", what,
          (long long)pl.barrier_offset, (long long)pl.scratch_doubles - 1);
    CHECK(barrier && !fin, "%s: the source has %s the barrier call and %s kf_fin", what, barrier ? "" : "not",
          fin ? "" : "no");
  } else {
    CHECK(!pl.grid_finish && pl.has_fin, "%s: grid_finish %d, has_fin %d, not finished by NAME_fin", what,
          pl.grid_finish, pl.has_fin);
    CHECK(fin && !strstr(src, "evtc_grid_barrier((unsigned"), "%s: the source has %s kf_fin and %s barrier call",
          what, fin ? "" : "no", fin ? "a" : "no");
  }
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* NAME_fin of kernel text t (n_row ROW reductions) combines each reduction's slot groups within a warp by
 * shuffles and the warps of every reduction at one barrier: two barriers in all, where it had waited twice for
 * each reduction and walked all 64 groups on one thread a column.  It is a dependent launch of the main kernel,
 * and with EVTC_CUDA_FIN_PDL=0 an ordinary launch after it: neither kernel says otherwise. */
static void check_fin_rounds(const char *t, const char *what, int n_row) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(t, what, &g);
  if (!k) return;
  evtc_cuda_rows_plan pl, pl0;
  char *src = rows_emit_h200(k, "kf", &pl), *src0 = rows_emit_h200_with(k, "kf", &pl0, "EVTC_CUDA_FIN_PDL", "0");
  const char *fin = src ? strstr(src, " kf_fin(") : NULL;
  CHECK(fin != NULL, "%s: no kf_fin", what);
  if (fin) {
    const char *end = fin + strlen(fin);
    CHECK(count_in(fin, end, "__shfl_xor_sync") == n_row, "%s: %d warp shuffle rounds in kf_fin, want %d", what,
          count_in(fin, end, "__shfl_xor_sync"), n_row);
    CHECK(count_in(fin, end, "__syncthreads();") == 2, "%s: %d barriers in kf_fin, want 2", what,
          count_in(fin, end, "__syncthreads();"));
    CHECK(count_in(fin, end, "for (int w = 1; w < 8; w++)") == n_row, "%s: not %d walks over the 8 warps' sums", what,
          n_row);
    /* a dependent launch of the main kernel (fin_dependent_plan): the main kernel lets it launch, and it waits
       for the main kernel's end before its first load of a partial */
    const char *wait = strstr(fin, "griddepcontrol.wait;"), *load = strstr(fin, "__ldcg(");
    CHECK(pl.fin_dependent && wait && load && wait < load, "%s: kf_fin does not wait for the main kernel first", what);
    const char *trigger = strstr(src, "griddepcontrol.launch_dependents;");
    CHECK(trigger && trigger < fin, "%s: the main kernel does not let kf_fin launch", what);
  }
  CHECK(src0 && pl0.has_fin && !pl0.fin_dependent && !strstr(src0, "griddepcontrol"),
        "%s: with EVTC_CUDA_FIN_PDL=0, has_fin %d, fin_dependent %d, griddepcontrol in the source: %d", what,
        pl0.has_fin, pl0.fin_dependent, src0 && strstr(src0, "griddepcontrol"));
  free(src);
  free(src0);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

int main(void) {
  const char *ln = LN_GRAD_TEXT("bf16", 16384, 1024);
  check_finish(ln, "BERT-Large's layernorm gradient (by default)", false);
  check_fin_rounds(ln, "BERT-Large's layernorm gradient", 2);
  setenv("EVTC_CUDA_GRID_FINISH", "1", 1);
  check_finish(ln, "BERT-Large's layernorm gradient with EVTC_CUDA_GRID_FINISH=1", true);
  check_finish(MLM_LOSS_TEXT("bf16"), "MLM loss, a sum of everything and a column sum, with EVTC_CUDA_GRID_FINISH=1", true);
  /* the kernel test_gpu_kernels runs 40 times over */
  check_finish(LN_GRAD_TEXT("f32", 1500, 1024), "layernorm gradient 1500x1024 (f32) with EVTC_CUDA_GRID_FINISH=1", true);
  setenv("EVTC_CUDA_CLUSTER", "2", 1);
  check_finish(MLM_LOSS_TEXT("bf16"), "MLM loss in clusters of 2 with EVTC_CUDA_GRID_FINISH=1", false);
  unsetenv("EVTC_CUDA_CLUSTER");
  unsetenv("EVTC_CUDA_GRID_FINISH");
  return check_summary();
}
