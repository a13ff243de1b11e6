/* cuda_emit.h -- what the CUDA backend's CUDA C emitters share (internal).
 *
 * One emitter file per kernel family (CONVENTIONS.md #7):
 * cuda_emit_elementwise.c (flat loops; also the epilogue of a cuBLASLt
 * GEMM) and cuda_emit_rows.c (reduce-then-apply over rows, and kernels
 * with reductions over rows or everything).  Visitor nodes become CUDA C
 * through the CPU backend's visitor (cpu_emit.h): the CUDA prelude gives
 * the generated code the same names (int64_t, INFINITY, evtc_keep with the
 * Philox counter layout of runtime/philox.c, EVTC_MAXN, evtc_f2i), so a
 * visitor node means exactly the same on both backends.
 *
 * Every generated kernel has the signature
 *   extern "C" __global__ void NAME(evtc_params P, uint64_t step, int *err, void *scratch)
 * where P.a[i] is the device pointer of kernel argument i, err the
 * kernel's error flag and scratch its reduction partials (rows) or the
 * GEMM result (epilogues).  The launch shape comes from the same plan
 * function the emitter used (evtc_cuda_rows_plan), so they always agree.
 */
#ifndef EVTC_CUDA_EMIT_H
#define EVTC_CUDA_EMIT_H

#include "backend/cpu/cpu_emit.h"
#include "kernel/kernel.h"

#define EVTC_CUDA_MAX_ARGS 64       /* size of evtc_params */
#define EVTC_CUDA_EW_THREADS 256    /* elementwise: threads per block */
#define EVTC_CUDA_EW_PER_THREAD 8   /* elementwise: elements per thread (coalesced, in flight together) */

/* How a rows kernel runs: `threads` threads per row, `rows_per_block`
 * rows per block (a warp per row for short rows, a block per row for
 * long ones), `per_thread` columns per thread (c = lane + j*threads),
 * `grid` blocks striding over the rows; loads used in several passes are
 * kept in registers (cache 1) or shared memory (cache 2, `smem` bytes) or
 * re-read (cache 0). */
typedef struct evtc_cuda_rows_plan {
  int threads, rows_per_block, per_thread, cache;
  bool unrolled;                /* per_thread small enough to unroll the column loop */
  bool row_partials_in_regs;    /* ROW reductions accumulate in registers */
  unsigned grid;
  unsigned smem;
  int64_t slots;                /* grid * rows_per_block: partial slots of ROW / SCALAR reductions */
  int64_t scratch_doubles;      /* reduction partials */
  bool has_fin;                 /* a finishing kernel NAME_fin combines the partials and stores */
  unsigned fin_grid;
} evtc_cuda_rows_plan;

/* The plan of rows kernel k on a device with sm_count SMs and smem_max
 * bytes of shared memory per block. */
evtc_cuda_rows_plan evtc_cuda_rows_plan_of(const evtc_kernel *k, int sm_count, int smem_max);
/* Offset (in doubles) of REDUCE node i's partials in the scratch of plan pl. */
int64_t evtc_cuda_reduce_offset(const evtc_kernel *k, const evtc_cuda_rows_plan *pl, int i);

/* evtc_cpu_emit_value with a cheaper one-hot (see cuda_emit_common.c). */
void evtc_cuda_emit_value(const evtc_cpu_vctx *x, int i);

/* Writes the module prelude (types, Philox, reductions, evtc_params). */
void evtc_cuda_emit_prelude(evtc_sb *b);
/* "extern "C" __global__ void __launch_bounds__(threads) NAME<suffix>(...) {" and the argument pointers. */
void evtc_cuda_emit_head(evtc_sb *b, const evtc_kernel *k, const char *suffix, int threads);

/* Family entry points: append the whole kernel (and its helpers) to b.
 * acc_type: for a GEMM epilogue, the C type of the accumulator in scratch
 * (ACC reads scratch[i]); NULL otherwise. */
void evtc_cuda_emit_elementwise(evtc_sb *b, const evtc_kernel *k, const char *acc_type);
void evtc_cuda_emit_rows(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl);

#endif
