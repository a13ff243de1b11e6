/* cuda_emit.h -- what the CUDA backend's CUDA C emitters share (internal).
 *
 * One emitter file per kernel family (CONVENTIONS.md #7):
 * cuda_emit_elementwise.c (flat loops; also the epilogue of a cuBLASLt
 * GEMM) and cuda_emit_rows.c (reduce-then-apply over rows, and kernels
 * with reductions over rows or everything), whose launch shape and
 * column ownership cuda_rows_plan.c decides.  Visitor nodes become CUDA C
 * through the CPU backend's visitor (cpu_emit.h): the CUDA prelude gives
 * the generated code the same names (int64_t, INFINITY, evtc_keep with the
 * Philox counter layout of runtime/philox.c, EVTC_MAXN, evtc_f2i), so a
 * visitor node means exactly the same on both backends.
 *
 * Every generated kernel has the signature
 *   extern "C" __global__ void NAME(evtc_params P, const uint64_t *stepp, int *err, void *scratch)
 * where P.a[i] is the device pointer of kernel argument i, *stepp the step
 * (the dropout offset; read from device memory, where the backend writes
 * it before each run, so that a captured CUDA graph of the launches stays
 * valid from step to step; the kernel loads it into `step`, which the
 * visitor's statements name), err the kernel's error flag and scratch its
 * reduction partials (rows) or the GEMM result (epilogues).  The launch shape comes from the same plan
 * function the emitter used (evtc_cuda_rows_plan), so they always agree.
 */
#ifndef EVTC_CUDA_EMIT_H
#define EVTC_CUDA_EMIT_H

#include "backend/cpu/cpu_emit.h"
#include "kernel/kernel.h"

#define EVTC_CUDA_MAX_ARGS 64       /* size of evtc_params */
#define EVTC_CUDA_EW_THREADS 256    /* elementwise: threads per block */
#define EVTC_CUDA_EW_PER_THREAD 8   /* elementwise: accesses per thread (coalesced, in flight together) */

/* Columns a thread moves with one access: 16 bytes of the narrowest tensor
 * the kernel streams (loads through contiguous rows, stores), 1 when the
 * row length (flat: the element count) is no multiple of it or
 * EVTC_CUDA_VEC=0 is set.  Loads whose view is not contiguous and aligned
 * to it stay one column per access. */
int evtc_cuda_vec_width(const evtc_kernel *k);

/* How a rows kernel runs (evtc_cuda_rows_plan_of; the emitter and the
 * launch use the same plan).  A row of C columns is C/vec vectors of `vec`
 * contiguous columns.  It is processed by `threads` threads (lane 0 ..
 * threads-1) of one warp (rows_per_block rows per block: short rows), of
 * one block, or of a cluster of `cluster` blocks (long rows: block `rank`
 * of the cluster owns vectors [rank*chunk, rank*chunk + chunk)); lane owns
 * vectors rank*chunk + lane + j*threads, j < per_thread.  Blocks (clusters)
 * stride over the rows in one wave of min_blocks blocks per SM.  FULL
 * values that several passes need are kept per column (evtc_cuda_rows_info)
 * in registers (cache 1), shared memory (cache 2) or recomputed from
 * global memory (cache 0); partial rows of ROW reductions live in registers
 * (row_partials 0), shared memory (1) or scratch (2).  Kept f16 / bf16 loads
 * stay packed, two per register.  A row whose length is no multiple of vec
 * ends in a partial vector: loads through views with room for the whole
 * last vector (a padded row) still move vectors, other loads and stores
 * move the row's columns one by one. */
typedef struct evtc_cuda_rows_plan {
  int vec, threads, rows_per_block, per_thread, cluster;
  int64_t chunk;
  int cache, row_partials;
  bool unrolled;                /* the column loop is unrolled (per_thread known): register arrays */
  bool f32_thread_acc;          /* COL / SCALAR reductions of f32 values: a thread sums its columns of a row in f32 */
  bool row_flush;               /* row_partials 0: f32 values summed in f32 registers, added every 8 rows to f64
                                   partial rows in shared memory */
  bool row_acc_f32;             /* row_partials 1: partial rows in f32 (EVTC_CUDA_ROW_ACC=f32) */
  int prefetch;                 /* rows ahead (0, 1 or 2) whose loads go to shared memory (cp.async) */
  bool prefetch_all;            /* not only the loads kept for later passes: every FULL row load of 16-byte vectors
                                   (evtc_cuda_rows_prefetches) */
  bool pf_hold;                 /* prefetched loads are read from their buffers in every pass (not kept in
                                   registers), and a value kept in place of one is written over it there; the next
                                   row goes into a buffer once its row is done */
  int min_blocks;
  unsigned grid;
  unsigned smem;                /* dynamic shared memory bytes */
  int64_t row_slots;            /* partial rows of each ROW reduction (one per row group) */
  bool slot_f32;                /* those partial rows go to scratch as f32 (in the first half of their f64 region):
                                   every ROW reduction sums f32 or narrower values; NAME_fin adds them in f64 */
  int64_t scalar_slots;         /* partials of each SCALAR reduction (one per warp row group or block) */
  int64_t scratch_doubles;
  bool has_fin;                 /* a finishing kernel NAME_fin combines the partials and stores */
  unsigned fin_grid;            /* NAME_fin's blocks (in grid_finish: the work items the main kernel's blocks share) */
  bool fin_dependent;           /* NAME_fin is launched as a dependent of the main kernel (programmatic stream
                                   serialization): the main kernel's blocks signal griddepcontrol.launch_dependents
                                   as they start, NAME_fin's blocks are scheduled while it drains and wait at
                                   griddepcontrol.wait before reading its partials (fin_dependent_plan) */
  bool grid_finish;             /* no NAME_fin: the main kernel's blocks, all resident (a cooperative launch), wait at
                                   a grid-wide barrier and then combine the partials themselves (has_fin false;
                                   EVTC_CUDA_GRID_FINISH=1 only: grid_finish_plan) */
  int64_t barrier_offset;       /* grid_finish: the barrier's two words, zero before the first launch, in scratch at
                                   this offset (in doubles) */
  int64_t col_tiles;            /* column tiles (kernels without COL reductions, few rows): block b owns vectors
                                   [t*threads*per_thread, +threads*per_thread), t = b % col_tiles, and rows
                                   [g*row_group, +row_group), g = b / col_tiles; 0: rows are spread over blocks */
  int64_t row_group;
  int col_unroll;               /* col_tiles: rows of the group unrolled (loads of that many rows in flight) */
  bool row_direct;              /* col_tiles, one row group: the main kernel finishes and stores ROW reductions */
  int stage_stores;             /* rows ending in a partial vector: f16 / bf16 FULL stores staged a warp at a time in
                                   shared memory (EVTC_CUDA_STAGE_BYTES a warp each), written as aligned 16-byte
                                   vectors of the output row; 0: stored column by column */
} evtc_cuda_rows_plan;

/* The plan of rows kernel k on a device with sm_count SMs and smem_max
 * bytes of shared memory per block. */
evtc_cuda_rows_plan evtc_cuda_rows_plan_of(const evtc_kernel *k, int sm_count, int smem_max);
/* Offset (in doubles) of REDUCE node i's partials in the scratch of plan pl. */
int64_t evtc_cuda_reduce_offset(const evtc_kernel *k, const evtc_cuda_rows_plan *pl, int i);
#define EVTC_CUDA_STAGE_BYTES 528   /* a warp's 32 vectors of 8 halves, and one vector of slack */
/* NAME_fin's blocks of 256 threads: FIN_COLS columns (32 bytes of f64 partials: one sector a slot) by FIN_SPLIT slot
 * groups, combined in order.  BERT-Large's layernorm gradient (1024 columns, 528 slots, three sums): 8 x 32 gave 128
 * blocks, under one an SM, 10.8 us for 13 MB (ncu, H200); 4 x 64 made no measurable change to that kernel and its
 * fin together (66 us). */
#define EVTC_CUDA_FIN_COLS 4
#define EVTC_CUDA_FIN_SPLIT 64

/* What each pass of a rows kernel computes (cuda_rows_plan.c).  Pass p
 * needs need[p * n_v + i]; a FULL value i with kept[i] is computed in pass
 * first[i] and kept per column for the later passes that need it (loads,
 * dropout masks, values whose recomputation would need several kept
 * values, and f16 / bf16 values in place of the one they are computed
 * from: stands_for); an RNG node with alias[i] >= 0 repeats RNG node
 * alias[i] (same seed, p and class) and takes its value; vec_load[i]: a
 * load moved by vectors of plan.vec columns. */
typedef struct evtc_cuda_rows_info {
  int n_v, n_passes;
  bool *need, *kept, *vec_load, *has_work;
  int *first, *alias;
  int *stands_for;              /* kept f16 / bf16 value i is kept in place of value stands_for[i] (its one streamed
                                   or kept input), as storage bits; -1 */
  double regs_per_col;          /* registers per column of the kept values */
  int64_t bytes_per_col;        /* their bytes per column (shared memory) */
  int n_row, n_scalar;          /* ROW / SCALAR reductions */
  int n_col;                    /* COL reductions over FULL / ROW values */
  int max_col_reds;             /* of which one pass finishes, at most */
  int col_rounds;               /* passes finishing COL reductions */
} evtc_cuda_rows_info;

/* Whether a persistent plan with prefetch rows (plan pl's vec and prefetch_all) copies load i's next rows to shared
 * memory: a FULL load of 16-byte vectors that is kept for later passes, or with prefetch_all any such load that
 * moves along the rows and that one pass reads. */
bool evtc_cuda_rows_prefetches(const evtc_kernel *k, const evtc_cuda_rows_info *info, const evtc_cuda_rows_plan *pl,
                               int i);
/* Bytes of a kept value of dtype t (f16 / bf16 values are floats in kernels; bool: one byte). */
int evtc_cuda_value_bytes(evtc_dtype t);
/* Fills info for k with columns moved by vectors of `vec` (caching as if
 * kept values fit); free with evtc_cuda_rows_info_free. */
void evtc_cuda_rows_info_init(evtc_cuda_rows_info *info, const evtc_kernel *k, int vec, bool keep);
void evtc_cuda_rows_info_free(evtc_cuda_rows_info *info);
/* The plain vectors of a row (cuda_rows_plain.c): a rows pass's values that
 * are zero on a vector of V columns that every one-hot of a row's label
 * misses and that lies wholly on the zero side of every column step, and
 * the values that fold with them (zero, or the same as another value). */
enum { EVTC_PLAIN_NONE, EVTC_PLAIN_ZERO, EVTC_PLAIN_SAME };
typedef struct evtc_cuda_plain {
  signed char *fact;            /* per node: EVTC_PLAIN_* */
  int *same;                    /* EVTC_PLAIN_SAME: the node whose value this one is */
  char cond[512];               /* C condition on the vector's first column cb: the vector is plain */
} evtc_cuda_plain;
/* Facts of the nodes a pass computes (computed[i]); false, with nothing to
 * free, when no computed value folds.  Free with evtc_cuda_plain_free. */
bool evtc_cuda_plain_facts(const evtc_kernel *k, const bool *computed, int V, evtc_cuda_plain *pl);
void evtc_cuda_plain_free(evtc_cuda_plain *pl);

/* Whether load v's view walks the columns contiguously with its offset
 * and row stride multiples of vec (*row_stride set): vector accesses. */
bool evtc_cuda_load_vectorizes(const evtc_kernel *k, const evtc_vnode *v, int vec, int64_t *row_stride);

/* The elementwise template's launch: blocks of EVTC_CUDA_EW_THREADS threads. */
unsigned evtc_cuda_ew_grid(const evtc_kernel *k);
/* Defines (once per module, behind a preprocessor guard) the vector type
 * evtc_vec<T, V>. */
void evtc_cuda_emit_vec_helpers(evtc_sb *b);
/* Defines (once per module, behind a preprocessor guard) evtc_cluster_rank
 * and evtc_cluster_sync: the block's rank in its cluster, and the barrier of
 * every thread of the cluster (release / acquire). */
void evtc_cuda_emit_cluster_helpers(evtc_sb *b);

/* evtc_cpu_emit_value with a cheaper one-hot (see cuda_emit_common.c).  In
 * a rows kernel (x->flat false) a checked one-hot of a label per row (COL)
 * leaves the range check to evtc_cuda_emit_label_checks. */
void evtc_cuda_emit_value(const evtc_cpu_vctx *x, int i);
/* The range checks of the checked one-hots reading COL value i, once where
 * the rows template has emitted (or aliased) v<i> for the row. */
void evtc_cuda_emit_label_checks(const evtc_cpu_vctx *x, int i);

/* Constant factors carried through a GEMM epilogue's float arithmetic
 * instead of multiplied in (cuda_evt_factors.c): value i is emitted as w<i>
 * with v<i> = f[i] w<i>, made as how[i] says. */
typedef enum evtc_cuda_fx {
  EVTC_FX_NONE,      /* not carried: v<i> as evtc_cuda_emit_value writes it (factor 1) */
  EVTC_FX_ALIAS,     /* w of the first operand (a product by an immediate or its reciprocal, a negation) */
  EVTC_FX_ALIAS_B,   /* w of the second operand (an immediate times it) */
  EVTC_FX_MUL,       /* w_a w_b */
  EVTC_FX_ADD,       /* a sum or difference of two values: w_p + (F_o / F_p) w_o, p the pivot operand */
  EVTC_FX_ADD_IMM,   /* a value plus or minus an immediate: F w + c, factor 1 */
  EVTC_FX_EXP,       /* e^v, F taken into the exp2's product */
  EVTC_FX_ERF1P      /* 1 + erf(x) as K (1 + erf) (evtc_erf1p_scaledf), factor 1 / K */
} evtc_cuda_fx;
typedef struct evtc_cuda_factors {
  evtc_cuda_fx *how;
  unsigned char *pivot;  /* EVTC_FX_ADD: the factor kept is the second operand's */
  double *f;             /* v<i> = f[i] w<i> */
  double *erf_k;         /* a carried 1 + erf: K */
  int held;              /* an add whose bias operand the accumulators hold (w: the other operand's), or -1 */
} evtc_cuda_factors;
void evtc_cuda_factors_plan(evtc_cuda_factors *fx, const evtc_kernel *k, int held);
void evtc_cuda_factors_free(evtc_cuda_factors *fx);
/* Value i's lines "const float w<i> = ...; const float v<i> = w<i> * f;" when it is carried (true), else nothing
 * (false: the caller emits it). */
bool evtc_cuda_factors_emit(evtc_sb *b, const char *ind, const evtc_kernel *k, const evtc_cuda_factors *fx, int i);

/* Writes the module prelude (types, Philox, reductions, evtc_params). */
void evtc_cuda_emit_prelude(evtc_sb *b);
/* "extern "C" __global__ void __launch_bounds__(threads) NAME<suffix>(...) {" and the argument pointers. */
void evtc_cuda_emit_head(evtc_sb *b, const evtc_kernel *k, const char *suffix, int threads);

/* Family entry points: append the whole kernel (and its helpers) to b.
 * acc_type: for a GEMM epilogue, the C type of the accumulator in scratch
 * (ACC reads scratch[i]); NULL otherwise. */
void evtc_cuda_emit_elementwise(evtc_sb *b, const evtc_kernel *k, const char *acc_type);
void evtc_cuda_emit_rows(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl);

/* The OPAQUE templates that move data (cuda_emit_opaque.c): gather,
 * embedding, scatter_add, pad, concat.  Blocks of EVTC_CUDA_OPAQUE_THREADS
 * threads, NAME_fin's too (the backend launches every NAME_fin with 256). */
#define EVTC_CUDA_OPAQUE_THREADS 256
/* Whether op is one of them (the attention family has its own template). */
bool evtc_cuda_opaque_op(evtc_op op);
/* Whether OPAQUE kernel k runs on them; else why. */
bool evtc_cuda_opaque_fits(const evtc_kernel *k, char *why, size_t cap);
/* Its launch on a device of sm_count SMs: the main kernel's grid, then (has_fin) NAME_fin's, and the scratch it
 * needs zeroed before its first run (the kernels leave it zeroed after every run, so kernels that run one after
 * another may share it: the backend gives them its one zeroed scratch). */
typedef struct evtc_cuda_opaque_launch {
  unsigned grid, block, fin_grid;
  bool has_fin;
  size_t scratch_bytes;
} evtc_cuda_opaque_launch;
evtc_cuda_opaque_launch evtc_cuda_opaque_launch_of(const evtc_kernel *k, int sm_count);
/* Appends the device helpers (once per module) and kernel k->name (and k->name_fin). */
void evtc_cuda_emit_opaque(evtc_sb *b, const evtc_kernel *k);

#endif
