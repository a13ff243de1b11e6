/* cuda_gemm.h -- GEMM main loops through cuBLASLt (the "no EVT" baseline),
 * and the choice between it and evtc's own GEMM (EVTC_GEMM, below).
 *
 * evtc's row-major C[b] = A[b] @ B[b] is computed as the column-major
 * C^T = B^T A^T, each operand described by a cuBLASLt layout (transposed
 * or not, leading dimension) taken from the kernel's operand strides, and
 * batches by one strided-batch offset per operand over the longest suffix
 * of batch dims that collapses for both operands; the remaining outer
 * batch dims (broadcasts like [2,1,...] @ [3,...]) are one call each.  The visitor epilogue
 * runs afterwards as an elementwise kernel reading the result; a GEMM
 * whose epilogue is a plain store of its result writes the output
 * directly.  Math is true f32 (CUBLAS_COMPUTE_32F, no TF32) or f64; f16
 * and bf16 operands are multiplied in f32 into an f32 result, which the
 * epilogue kernel rounds at its store (never a direct GEMM).
 */
#ifndef EVTC_CUDA_GEMM_H
#define EVTC_CUDA_GEMM_H

#include <stdbool.h>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "kernel/kernel.h"

typedef struct evtc_cuda_gemm {
  const evtc_cuda_cublaslt *lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  evtc_cublasLtHeuristic algo;
  bool f64;                             /* f64 operands and result; else an f32 result */
  size_t in_elem;                       /* bytes per operand element */
  int outer_rank;                       /* batch dims [0, outer_rank) are looped over */
  int64_t outer_shape[EVTC_MAX_RANK], a_outer[EVTC_MAX_RANK], b_outer[EVTC_MAX_RANK]; /* element strides */
  int64_t outer_count, d_outer;         /* calls; elements of D per call */
} evtc_cuda_gemm;

/* Whether cuBLASLt can run k's main loop; else a reason in why. */
bool evtc_cuda_gemm_fits(const evtc_kernel *k, char *why, size_t cap);
/* Describes k's GEMM and picks an algorithm using at most `workspace` bytes. */
evtc_status evtc_cuda_gemm_init(evtc_cuda_gemm *g, const evtc_cuda_cublaslt *lt, cublasLtHandle_t h,
                                const evtc_kernel *k, size_t workspace, evtc_diag *d);
/* D = A @ B (a, b: the kernel's A and B operands) queued on stream s. */
evtc_status evtc_cuda_gemm_run(const evtc_cuda_gemm *g, cublasLtHandle_t h, const void *a, const void *b, void *dd,
                               void *workspace, size_t workspace_bytes, CUstream s, const char *name, evtc_diag *d);
void evtc_cuda_gemm_free(evtc_cuda_gemm *g);

/* Which GEMM runs a GEMM kernel: the environment variable EVTC_GEMM
 * (`--gemm` of evtc train / run sets it): "evtc" (the default: evtc's own
 * GEMM with the visitor DAG in its epilogue, cuda_emit_evt.c, where the
 * template fits: the sm_90a template on an H100 / H200, the sm_80 one on
 * an sm_8x GPU), "sm80" (evtc's GEMM on its sm_80 template on any GPU from
 * sm_80 on: how an H200 tests and times the A100's path) or "cublaslt" (the
 * baseline without EVT: cuBLASLt into f32 scratch, then the epilogue
 * kernel).  Another value is reported once on stderr and means evtc. */
typedef enum evtc_cuda_gemm_mode { EVTC_CUDA_GEMM_EVTC, EVTC_CUDA_GEMM_CUBLASLT, EVTC_CUDA_GEMM_SM80 } evtc_cuda_gemm_mode;
evtc_cuda_gemm_mode evtc_cuda_gemm_mode_get(void);
/* Whether evtc's GEMM takes its sm_80 template on dev (EVTC_GEMM=sm80, or a device from sm_80 on without
 * wgmma: sm_8x, and the sm_90a template's successors that dropped it; dev may be NULL: the H200 the tests
 * mirror). */
bool evtc_cuda_gemm_sm80_template(const evtc_cuda_device *dev);
/* A 2x1-cluster config's persistent grid (launch_init: sm_count / 2 clusters) clamped to the clusters of kernel k
 * that run at once with L's block and shared memory: where a device's GPCs cannot place them all, the rest would
 * run as a second wave.  The kernel walks its tiles by gridDim, so a smaller grid is correct.  *fit (when not
 * NULL): the clusters that run at once, 0 for a config without clusters (nothing to do). */
evtc_status evtc_cuda_gemm_fit_clusters(evtc_cuda_device *dev, evtc_cuda_kernel *k, const evtc_cuda_gemm_config *c,
                                        evtc_cuda_gemm_launch *L, int *fit, evtc_diag *d);
/* The f32 workspace and int counts that a launch of evtc's sm_90a GEMM with split-K or a split tail needs
 * (evtc_cuda_gemm_split_floats, evtc_cuda_gemm_split_counts), for a caller that launches it by hand (tests,
 * benchmarks, the tuner; the backend shares one workspace among a program's kernels): kept between launches and
 * grown to the largest asked for, its counts zero when allocated (each launch leaves them zero), its workspace
 * NaN.  Zero-initialise it. */
typedef struct evtc_cuda_gemm_workspace {
  CUdeviceptr ws, cnt;
  int64_t floats, counts;
} evtc_cuda_gemm_workspace;
/* Grows w to what launch L (filled by evtc_cuda_gemm_launch_init for cfg, p and sm_count) needs and points L's
 * dims at it. */
evtc_status evtc_cuda_gemm_workspace_fit(evtc_cuda_device *dev, evtc_cuda_gemm_workspace *w, const evtc_cuda_gemm_config *cfg,
                                         const evtc_cuda_gemm_problem *p, int64_t sm_count, evtc_cuda_gemm_launch *L,
                                         evtc_diag *d);
void evtc_cuda_gemm_workspace_free(evtc_cuda_device *dev, evtc_cuda_gemm_workspace *w);
/* The most units a tile of the split tail is cut into (evtc_cuda_gemm_problem.tail_split; cuda_emit_gemm.c):
 * the environment variable EVTC_GEMM_TAIL_SPLIT, 4 when unset (the H200's best on 8192^3: bench/RESULTS.md), 0
 * (none) when it is 0 or 1. */
int evtc_cuda_gemm_tail_split(void);
/* Whether a GEMM of `tiles` output tiles over K on sms SMs (0: an H200's) is one whose SMs would idle for the
 * whole of K: split-K's or cuBLASLt's (cuda_gemm.c). */
bool evtc_cuda_gemm_few_tiles(int64_t tiles, int64_t K, int64_t sms);
/* Whether GEMM kernel k runs on evtc's GEMM (*pl filled, with dev's tuned
 * config when there is one; dev may be NULL); false with the reason (the
 * selector or the template's refusal) in why. */
bool evtc_cuda_gemm_use_evt(const evtc_kernel *k, const evtc_cuda_device *dev, evtc_cuda_evt_plan *pl, char *why,
                            size_t cap);
/* GEMM kernels the backend has loaded on each path, process-wide (tests check which path ran). */
typedef struct evtc_cuda_gemm_counts {
  int evt, cublaslt;
} evtc_cuda_gemm_counts;
evtc_cuda_gemm_counts evtc_cuda_gemm_counts_get(void);
void evtc_cuda_gemm_count(bool evt);

#endif
