/* cuda_emit_gemm.h -- evtc's own GEMM, emitted as CUDA C: the Hopper
 * template (sm_90a: wgmma, TMA) and the Ampere one (sm_80 and later:
 * mma.sync, cp.async; cuda_emit_gemm80.c), behind one interface.
 *
 * D[b] = A[b] * B[b] for b < batch, A M x K, B K x N, bf16 or f16 inputs,
 * fp32 accumulation, D f32, bf16 or f16 (converted in the epilogue).  A is
 * stored M x K (K-major) or K x M (M-major), B N x K (K-major) or K x N
 * (N-major), each with its own row stride and batch stride; any M, N, K.
 *
 * The kernel (cuda_emit_gemm.c has the full story):
 *   - a persistent grid, one CTA per SM, walking the output tiles of all
 *     batches in a grouped raster order (group_m tile rows at a time, so
 *     that CTAs running together share A rows and B columns in L2);
 *   - warp specialisation: warpgroup 0 is the producer (one thread issues
 *     TMA bulk tensor copies), warpgroups 1..consumers issue wgmma;
 *   - a ring of `stages` shared-memory buffers, each holding one k-block
 *     (tile_k = 64 elements = one 128-byte swizzle span) of A and of B,
 *     handed over with two mbarriers per stage (full: TMA bytes landed;
 *     empty: every consumer warp is done reading);
 *   - TMA's out-of-bounds fill supplies zeros past M, N and K, so edges need
 *     no code in the main loop; the epilogue stores only r < M, c < N.
 *
 * The epilogue is a separate emitted piece (evtc_cuda_gemm_epilogue): the
 * kernel hands it every accumulator element inside the output bounds with
 * its row, column and batch index.  Without one, the built-in epilogue
 * stores D converted to the output type: staged through shared memory and
 * written by asynchronous TMA stores when D's base and strides are 16-byte
 * aligned (the consumers go on with their next tile meanwhile; the tile
 * holding a column edge that is not 16-byte aligned excepted), else by
 * direct stores of two columns (or one) per thread.
 *
 * Operand constraints (TMA's, and the 16-byte copies of the sm_80
 * template): base addresses 16-byte aligned, row strides and batch strides
 * multiples of 16 bytes (8 elements), so a packed K x N operand needs
 * N % 8 == 0; evtc_cuda_gemm_problem_check says which one fails.
 * Compilation needs NVRTC only; running needs an sm_90a device, or for a
 * config with sm80 set, any device from sm_80 on.
 *
 * The sm_80 template (config.sm80) keeps the kernel's signature, the tile
 * scheduler, the accumulator layout and the epilogue hook below, so the
 * visitor DAG is emitted into it unchanged: every warp of its `consumers`
 * warpgroups both copies (cp.async into a ring of stages, zero-filled past
 * the edges) and multiplies (ldmatrix, mma.sync m16n8k16), and warp w of a
 * warpgroup holds rows 16 w .. 16 w + 15 of each 64-row atom -- exactly the
 * rows and columns a wgmma atom gives it.  It has no TMA: no staged store of
 * D (direct stores), no TMA aux tile (aux_smem must be 0), and the operands
 * come from the dims' pointers, not from tensor maps.
 */
#ifndef EVTC_CUDA_EMIT_GEMM_H
#define EVTC_CUDA_EMIT_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_emit.h"
#include "backend/cuda/cuda_api.h"
#include "ir/ir.h"

/* The tunable side: what the future tuner searches (independent of the
 * problem size).  Valid ranges in evtc_cuda_gemm_config_check. */
typedef struct evtc_cuda_gemm_config {
  int tile_m, tile_n;        /* output tile of one CTA */
  int tile_k;                /* k-block per stage: 64 (128 bytes of bf16/f16, the 128B swizzle span) */
  int stages;                /* shared-memory ring depth */
  int consumers;             /* consumer warpgroups (1 or 2) */
  int cluster_m, cluster_n;  /* thread-block cluster shape: 1 x 1, or 2 x 1 (sm_90a, no split-K): two CTAs on
                              * vertically adjacent tiles share B, each loading half of it into both by TMA
                              * multicast ("cl2" in the config's name) */
  int group_m;               /* tile rows per raster group of the tile scheduler */
  bool pingpong;             /* false: the consumers share each tile (cooperative, tile_m / consumers rows
                              * each); true (2 consumers): they take alternate tiles, each the whole tile,
                              * so one's epilogue runs while the other's main loop keeps the tensor cores busy */
  bool sm80;                 /* the sm_80 template (mma.sync, cp.async): `consumers` warpgroups that copy and
                              * multiply alike, no producer, no pingpong, no cluster */
} evtc_cuda_gemm_config;

/* What the kernel's code depends on besides the config: element types and operand majorness. */
typedef struct evtc_cuda_gemm_variant {
  evtc_dtype in;             /* EVTC_BF16 or EVTC_F16 (A and B) */
  evtc_dtype out;            /* EVTC_F32, EVTC_BF16 or EVTC_F16 (D of the built-in epilogue) */
  bool a_kmajor;             /* A stored M x K (true) or K x M (false) */
  bool b_kmajor;             /* B stored N x K (true) or K x N (false) */
} evtc_cuda_gemm_variant;

/* One launch's sizes and strides, in elements. */
typedef struct evtc_cuda_gemm_problem {
  int64_t M, N, K, batch;
  int64_t lda, ldb, ldc;     /* row strides of A, B, D as stored (A M x K: lda >= K; A K x M: lda >= M; ...) */
  int64_t a_bstride, b_bstride, c_bstride;   /* batch strides (ignored when batch == 1) */
  /* Split-K (sm_90a template, a kernel with an epilogue hook only): each tile's k-blocks in `splits` units of
   * work (0 or 1: none; at most the k-blocks), their f32 partial tiles summed by the tile's last unit through
   * a workspace of evtc_cuda_gemm_split_floats floats and tiles int counts, zero before the first launch (each
   * launch leaves them zero): dims.split_ws and dims.split_cnt, which the caller sets. */
  int splits;
  /* The split tail (sm_90a template, no split-K; cuda_emit_gemm.c): when the tiles (a 2x1 cluster's: pairs of
   * tiles) are more than the persistent grid walks at once but no whole number of its waves, the last ones are
   * cut into up to tail_split units of their k-blocks each (0 or 1: none; evtc_cuda_gemm_tail), summed through the same
   * workspace and counts as split-K's (evtc_cuda_gemm_split_floats, evtc_cuda_gemm_split_counts), which the
   * caller then provides. */
  int tail_split;
  /* ... and at least this many k-blocks a unit (0: 1; EVTC_CUDA_GEMM_TAIL_MIN_KBLOCKS where it is to pay). */
  int tail_min_kblocks;
  /* Rows of D's TMA box (0: 64, a warpgroup's atom; 16: a warp's rows, for an epilogue hook whose warps each
   * store their own, cuda_emit_evt.c). */
  int d_box_rows;
} evtc_cuda_gemm_problem;

/* The epilogue hook (where the visitor DAG goes).  emit_element writes
 * statements for one accumulator element; in scope are `long long r, c`
 * (row and column of D, r < M, c < N), `long long rg` (bat * M + r: the
 * row of the batches stacked), `long long c0` (the thread's first column
 * of the pair c0, c0 + 1 that c belongs to), `int bat` (batch index),
 * `int t` (the tile number), `int m0, n0` (the tile's first row and
 * column), `int i, h, j, e` (the accumulator fragment's atom, row half,
 * 8-column block and column: acc[i][4 j + 2 h + e], c = c0 + e), `int cw`
 * (the warpgroup's block of rows in the tile, < evtc_cuda_gemm_row_groups:
 * atom i covers rows m0 + (cw WM + i) 64 ...), `int warp, lane`, `const
 * evtc_gemm_dims dims` (M, N, K, batch, ldc, c_bstride
 * as passed), `void *out_ptr` and the float named by `acc`.  The elements
 * of a tile are visited by 8-column block j (emit_col_begin / emit_col_end
 * around it: the thread's columns c0 and c0 + 1 of every row it holds),
 * then row (i, h; r, rg and c0 in scope, also for emit_pair_begin /
 * emit_pair_end around the pair), then e; every lane runs every iteration
 * and skips only the elements outside the bounds (the loops are emitted
 * twice: for a tile wholly inside, with EVTC_FULL_TILE 1 and the bounds
 * tests EVTC_IN_M(row), EVTC_IN_N(column) defined as true, and for an edge
 * tile, with EVTC_FULL_TILE 0 and the real tests: the hooks test bounds
 * through these macros), so col_end and
 * emit_tile_end (after the tile; emit_tile_begin before) may use warp
 * shuffles.  Its stores are its own: direct, or TMA stores of tma_d from
 * shared memory the hook stages (bulk_stores).  emit_params appends kernel parameters (", T name,
 * ...") after the fixed ones, emit_setup declares what every element
 * needs, once per consumer thread.
 * Loads ahead of their use: emit_prefetch_begin runs per tile, after bat,
 * m0, n0 are known, before the tile's main loop (the real bounds tests
 * defined), so the loads it issues land while the main loop runs; with
 * prefetch_blocks P > 0 it also declares
 * the registers that emit_prefetch(b, ind, J, ctx) fills with the
 * loads of 8-column block J (J a C expression, constant once the loops are
 * unrolled; the loads test bounds through EVTC_IN_M / EVTC_IN_N, defined
 * around every call, the real tests before the main loop): blocks
 * 0 .. P - 1 are issued before the main loop (their latency hides under
 * it), block j + P at the start of block j, so a load meets its use P
 * blocks later instead of stalling the warp.
 * Shared memory: the hook may use EVTC_CUDA_GEMM_HOOK_SMEM bytes per
 * consumer warpgroup at `hook_smem` (a generic pointer in scope, this
 * warpgroup's own), with evtc_wg_sync(1 + wg) as the warpgroup's barrier.
 * Each callback may be NULL; a NULL hook (or a NULL emit_element) means
 * the built-in store of D. */
typedef struct evtc_cuda_gemm_epilogue {
  void (*emit_params)(evtc_sb *b, void *ctx);
  void (*emit_setup)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_element)(evtc_sb *b, const char *ind, const char *acc, void *ctx);
  void *ctx;
  void (*emit_tile_begin)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_col_begin)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_pair_begin)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_pair_end)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_col_end)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_tile_end)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_prefetch_begin)(evtc_sb *b, const char *ind, void *ctx);
  void (*emit_prefetch)(evtc_sb *b, const char *ind, const char *j, void *ctx);
  int prefetch_blocks;
  /* A tile the hook copies into shared memory with TMA: aux_smem bytes per consumer warpgroup (a multiple of
   * 1024), at the 1024-byte aligned shared address aux_tile (generic pointer aux_smem) with its own mbarrier
   * aux_bar (count 1), all in scope from emit_setup on; emit_tile_loads runs at the start of each of the
   * warpgroup's tiles (bat, m0, n0 known), before its turn on the tensor cores. */
  unsigned aux_smem;
  void (*emit_tile_loads)(evtc_sb *b, const char *ind, void *ctx);
  /* Split-K (evtc_cuda_gemm_problem.splits): a unit of a tile that leaves the epilogue to the tile's last unit
   * consumes here what emit_tile_loads started (its TMA tile's barrier phase). */
  void (*emit_tile_skip)(evtc_sb *b, const char *ind, void *ctx);
  /* sm_90a: writes every accumulator's value before the unit's main loop (acc[i][j] for each atom i and register
   * j; NULL: zeros), after emit_prefetch_begin, with kb0 and kb1 (the unit's k-blocks) in scope.  The unit that
   * holds the tile's first k-blocks starts from these values; any other (split-K's or the split tail's later
   * parts, whose partial tiles are added to the first's) must start from zeros. */
  void (*emit_acc_init)(evtc_sb *b, const char *ind, void *ctx);
  /* The pair's elements at once instead of emit_element column by column (NULL: emit_element): both columns'
   * accumulators acc[i][4 * j + 2 * h] and acc[i][4 * j + 2 * h + 1] in scope, computed whatever the bounds (a
   * value past M or N is an accumulator of zeros: TMA fills the operands' missing rows with them), so the hook
   * must store only what EVTC_IN_M / EVTC_IN_N allow (emit_pair_end). */
  void (*emit_pair)(evtc_sb *b, const char *ind, void *ctx);
  /* The hook issues TMA stores (evtc_tma_store of tma_d, dims.tma_store set) from each warp's first lane: those
   * lanes wait for them after the last tile, before the shared memory they read goes away. */
  bool bulk_stores;
} evtc_cuda_gemm_epilogue;
/* Bytes of shared memory per consumer warpgroup that an epilogue hook may use (the built-in store's two
 * staged-output subtiles, which a hook's kernel does not otherwise use). */
enum { EVTC_CUDA_GEMM_HOOK_SMEM = 2 * 64 * 128 };
/* A kernel with a hook takes its parameters after the fixed five
 * (evtc_cuda_gemm_launch.params); the D tensor map is then unused. */

/* Kernel parameter block after the three tensor maps and the output pointer
 * (the generated evtc_gemm_dims has the same layout).  tma_store: D's
 * strides suit TMA and the built-in epilogue stores through shared memory.
 * a, b and their strides (elements): the operands as the sm_80 template
 * reads them (the sm_90a one reads them through the tensor maps). */
typedef struct evtc_cuda_gemm_dims {
  int32_t M, N, K, batch, tma_store, splits, tail_tiles, tail_splits;
  int64_t ldc, c_bstride;
  uint64_t a, b;
  int64_t lda, ldb, a_bstride, b_bstride;
  uint64_t split_ws, split_cnt;   /* split-K's or the split tail's workspace (f32) and counts (int32), device addresses */
} evtc_cuda_gemm_dims;

/* A CUtensorMap: 128 opaque bytes (cuda.h aligns it to 128 since CUDA 13). */
typedef struct evtc_cuda_tensor_map {
  _Alignas(128) unsigned long long opaque[16];
} evtc_cuda_tensor_map;

/* Everything one launch needs; params[] points into the struct itself, so
 * keep it in place (no copies) between evtc_cuda_gemm_launch_init and the
 * launch, and 128-byte aligned (a local variable is; the driver wants the
 * tensor maps 64-byte aligned, which malloc does not promise). */
typedef struct evtc_cuda_gemm_launch {
  evtc_cuda_tensor_map map_a, map_b, map_d;
  evtc_cuda_tensor_map map_x;    /* an epilogue's TMA tile (evtc_cuda_gemm_tile_map), when it has one */
  CUdeviceptr out;
  evtc_cuda_gemm_dims dims;
  unsigned grid[3], block[3], smem;
  void *params[5];           /* &map_a, &map_b, &map_d, &out, &dims: the fixed kernel parameters */
} evtc_cuda_gemm_launch;

/* 128x256x64, 4 stages, 2 cooperative consumer warpgroups, 1x1 cluster, group_m 8. */
evtc_cuda_gemm_config evtc_cuda_gemm_config_default(void);
/* The sm_80 template's for a device whose blocks may opt in to smem_optin bytes of shared memory: 256x128x64,
 * 3 stages, 2 warpgroups (8 warps of 32 rows x 128 columns) where its 176 KiB fit (an H100 / H200), else
 * 128x128x64, 4 stages, 2 warpgroups (warps of 16 x 128): 160 KiB, within an A100's 163.  group_m 8. */
evtc_cuda_gemm_config evtc_cuda_gemm_config_default_sm80(int smem_optin);
/* "128x256x64 s4 c2 g8" (" pp" appended for pingpong, " sm80" for the sm_80 template) into buf. */
void evtc_cuda_gemm_config_name(const evtc_cuda_gemm_config *cfg, char *buf, size_t cap);
/* Parses config_name's format ("128x128x64 s5 c2 g8 pp"); false on anything else.  Does not check it. */
bool evtc_cuda_gemm_config_parse(const char *s, evtc_cuda_gemm_config *cfg);
/* Warpgroups that split one tile's rows: consumers when cooperative, 1 with pingpong. */
int evtc_cuda_gemm_row_groups(const evtc_cuda_gemm_config *cfg);
/* 64-row atoms per warpgroup and tile (tile_m / (64 x the warpgroups sharing a tile)). */
int evtc_cuda_gemm_atoms(const evtc_cuda_gemm_config *c);

/* Whether cfg is buildable for variant v: false with the reason in why.
 * Checks tile shapes against wgmma (m64, n <= 256) and TMA (boxes <= 256),
 * the accumulator registers per consumer thread (<= 128) and the shared
 * memory (<= 227 KiB; a device with less refuses the launch). */
bool evtc_cuda_gemm_config_check(const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_variant *v, char *why,
                                 size_t cap);
/* Dynamic shared memory of cfg's kernel in bytes: the ring, two 8 KiB output subtiles per consumer
 * warpgroup (the hook's shared memory), the barriers and 1 KiB of alignment slack (sm_80: the ring and the
 * hook's 16 KiB per warpgroup). */
unsigned evtc_cuda_gemm_smem_bytes(const evtc_cuda_gemm_config *cfg);
/* Threads per CTA: 128 * (1 + consumers) (sm_80: 128 * consumers). */
unsigned evtc_cuda_gemm_threads(const evtc_cuda_gemm_config *cfg);

/* The device helpers both templates use (the parameter structs, the tile raster, warpgroup barriers,
 * epilogue stores), guarded so that a module holds them once. */
void evtc_cuda_emit_gemm_helpers(evtc_sb *b);
/* Those and the sm_90a ones (TMA, mbarriers, the wgmma descriptor, fence, commit and wait), guarded the same
 * way: the GEMM's, and the wgmma attention's (cuda_emit_attention_wg.c). */
void evtc_cuda_emit_sm90_helpers(evtc_sb *b);

/* Appends kernel `name` (extern "C") for cfg and v with epilogue epi (NULL:
 * the built-in store) to b, preceded by the shared helpers (guarded, so a
 * module may hold several GEMM kernels).  cfg must pass config_check. */
void evtc_cuda_gemm_emit(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *cfg,
                         const evtc_cuda_gemm_variant *v, const evtc_cuda_gemm_epilogue *epi);

/* Whether problem p with operands at device addresses a, b (and D at out)
 * can run: sizes in int32 range, TMA's 16-byte alignments.  False with the
 * reason (naming the operand and the stride) in why. */
bool evtc_cuda_gemm_problem_check(const evtc_cuda_gemm_variant *v, const evtc_cuda_gemm_problem *p, CUdeviceptr a,
                                  CUdeviceptr b, char *why, size_t cap);

/* Fills L for one launch: the TMA descriptors of A, B and (when its
 * alignment allows; dims.tma_store says) D, through the driver's
 * cuTensorMapEncodeTiled (none for the sm_80 template: the maps stay zero
 * and dims carries the operands), the parameter block, the persistent grid
 * (min(tiles, sm_count) CTAs), block and shared memory.  Runs
 * evtc_cuda_gemm_problem_check first (EVTC_ERR_INVALID with its reason);
 * a descriptor the driver rejects is EVTC_ERR_RUNTIME naming the operand. */
evtc_status evtc_cuda_gemm_launch_init(evtc_cuda_gemm_launch *L, const evtc_cuda_driver *drv,
                                       const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_variant *v,
                                       const evtc_cuda_gemm_problem *p, CUdeviceptr a, CUdeviceptr b,
                                       CUdeviceptr out, int sm_count, evtc_diag *d);

/* The split tail of problem p on a persistent grid of `grid` CTAs: its tiles (a 2x1 cluster's: pairs of tiles;
 * the last tiles % (grid / cluster)) and the units each is cut into (grid / cluster / those tiles, at most
 * p->tail_split, and p->tail_min_kblocks k-blocks a unit at least); both 0 when there is none: p->tail_split < 2,
 * the sm_80 template, split-K, tiles that fill whole waves or no more than one, or fewer than 2 units a tile. */
/* Where the split tail pays: units of 32 k-blocks or more.  On the H200 (2026-12-02, bench/RESULTS.md) its
 * fix-up (the partial tiles' stores, fence, count and reads: microseconds) made 16384 x 4096 x 1024 (16 k-blocks
 * a tile) 1-6 % slower in 2 to 8 units a tile, while 8192^3 (128 k-blocks) gained 1-2.6 % in 4 units of 32. */
enum { EVTC_CUDA_GEMM_TAIL_MIN_KBLOCKS = 32 };
void evtc_cuda_gemm_tail(const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_problem *p, int64_t grid, int *tiles,
                         int *splits);
/* The persistent grid of problem p on sm_count SMs: one CTA a unit of work (a cluster of two a pair of tiles),
 * at most sm_count CTAs. */
int64_t evtc_cuda_gemm_grid(const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_problem *p, int64_t sm_count);
/* Floats of the workspace for cfg's tiles of problem p on sm_count SMs: split-K's (its tiles times splits
 * partial tiles) or the split tail's (its tiles times their units); 0 if neither. */
int64_t evtc_cuda_gemm_split_floats(const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_problem *p, int64_t sm_count);
/* Ints of the counts beside that workspace (one a split tile), zero before the
 * first launch (each launch leaves them zero); 0 if neither. */
int64_t evtc_cuda_gemm_split_counts(const evtc_cuda_gemm_config *cfg, const evtc_cuda_gemm_problem *p, int64_t sm_count);

/* Dynamic shared memory a block may opt in to on sm_90 (227 KiB): the most a config may use. */
enum { EVTC_CUDA_GEMM_SMEM_LIMIT = 227 * 1024 };

/* Shared memory of cfg's kernel with an epilogue's TMA tiles of aux_smem bytes per consumer warpgroup (and
 * their mbarriers). */
unsigned evtc_cuda_gemm_smem_bytes_aux(const evtc_cuda_gemm_config *cfg, unsigned aux_smem);

/* The 2-D map of a rows x cols matrix of t (row stride ld elements, a multiple of 8) at base (16-byte
 * aligned) with boxes of 128 bytes x box_rows, 128B-swizzled: an epilogue's TMA tile, 64 columns a box. */
evtc_status evtc_cuda_gemm_tile_map(const evtc_cuda_driver *drv, evtc_cuda_tensor_map *m, evtc_dtype t, CUdeviceptr base,
                                    int64_t cols, int64_t rows, int64_t ld, unsigned box_rows, evtc_diag *d);

/* ---- a kernel IR GEMM with its visitor DAG in the epilogue (cuda_emit_evt.c) ---- */

#include "kernel/kernel.h"

/* How a GEMM kernel runs on the template: config, variant (its `out`: the
 * stored type with builtin_store, else unused: the visitor stores),
 * problem (strides from the kernel's operand descriptors; bases are
 * checked at launch), tile counts, the doubles of reduction slots in
 * scratch and the finishing kernel NAME_fin (fin_grid blocks of 256
 * threads) when there are reductions.  builtin_store: the epilogue is one
 * store of the accumulator (as f32, bf16 or f16) into argument out_arg,
 * done by the template's own epilogue (staged TMA stores); the kernel then
 * has the five fixed parameters only, D = that argument. */
typedef struct evtc_cuda_evt_plan {
  bool builtin_store;
  /* The visitor store whose full tiles go through TMA stores like the built-in store's (cuda_emit_evt.c:
   * choose_staged_store): its node + 1 (0: none); out_arg is then its argument and var.out its type. */
  int staged_store;
  int out_arg;
  /* A bias the accumulators start from (cuda_emit_evt.c: choose_acc_bias): the add node + 1 (0: none) whose
   * operands are the accumulator (or its cast to f32) and a row broadcast spread over the lanes, node
   * acc_bias_load + 1; the add is then the accumulator itself. */
  int acc_bias, acc_bias_load;
  /* The epilogue computes each pair of columns in bf16x2 arithmetic (cuda_emit_evt.c: choose_packed). */
  bool packed;
  evtc_cuda_gemm_config cfg;
  evtc_cuda_gemm_variant var;
  evtc_cuda_gemm_problem prob;
  int64_t tiles_m, tiles_n, tiles;
  int64_t scratch_doubles;
  /* split-K (prob.splits > 1) or the split tail (prob.tail_split), chosen by evtc_cuda_gemm_use_evt for the
   * device's SMs: the workspace's floats (a program shares one among its kernels) and, after the reduction
   * slots in scratch, the counts (ints, zeroed once) */
  int64_t split_floats, split_counts;
  bool has_fin;
  unsigned fin_grid;
  /* An aux (M x N) load that TMA copies a tile at a time into shared memory: its visitor node + 1 (0: none),
   * kernel argument, element offset, row stride, rows and columns (the map's), its type, the box rows (a
   * consumer warpgroup's) and the shared memory per consumer warpgroup. */
  int tma_load, tma_arg;
  int64_t tma_offset, tma_ld, tma_rows, tma_cols;
  evtc_dtype tma_dtype;
  unsigned tma_box_rows, aux_bytes;
} evtc_cuda_evt_plan;

/* Whether GEMM kernel k fits the template; false with the reason (naming
 * the operand and stride for TMA's rules) in why.  The tile config:
 * EVTC_GEMM_CONFIG when set, else the tuner's for dev (cuda_gemm_tune.h;
 * dev may be NULL) unless the epilogue reduces over rows or columns, else
 * the template's default for the epilogue kind. */
struct evtc_cuda_device;
bool evtc_cuda_evt_plan_of(const evtc_kernel *k, const struct evtc_cuda_device *dev, evtc_cuda_evt_plan *pl, char *why,
                           size_t cap);
/* Partial slots per result of a reduction of class cls. */
int64_t evtc_cuda_evt_slots(const evtc_cuda_evt_plan *pl, evtc_vclass cls);
/* Appends kernel k->name (the GEMM with the visitor epilogue; parameters:
 * the five fixed ones, then, unless builtin_store, evtc_params P, const
 * uint64_t *stepp, int *err, void *scratch) and, with reductions, k->name_fin (the backend's usual
 * signature) to b, which must hold the CUDA prelude (cuda_emit.h). */
void evtc_cuda_emit_evt(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_evt_plan *pl);

#endif
