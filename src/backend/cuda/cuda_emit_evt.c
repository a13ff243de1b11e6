/* cuda_emit_evt.c -- a kernel IR GEMM on evtc's own GEMM (the sm_90a
 * template, or the sm_80 one: cuda_emit_gemm.h) with the visitor DAG
 * emitted into its epilogue (the Epilogue Visitor Tree).
 *
 * evtc_cuda_evt_plan_of decides whether a GEMM kernel fits the template
 * (bf16 / f16 operands, row- or column-major operands with one batch
 * stride each -- batches of A times one shared B become one GEMM of
 * batch x M rows when A's batches are stacked --, TMA's 16-byte stride rules, a visitor DAG whose stores are
 * FULL values or reduction results) and fixes the tile config, the problem
 * and the reduction scratch; evtc_cuda_emit_evt writes the GEMM kernel
 * (cuda_emit_gemm.c) with an epilogue hook that runs the visitor nodes on
 * every accumulator element: the CPU visitor's statements (cpu_visitor.c)
 * with r = the row of the batches stacked (bat * M + row), c = the column,
 * CC = N, so loads, broadcasts, Philox dropout (flat index r * N + c, bit
 * for bit the interpreter's mask), one-hot and stores (f32 -> bf16 / f16
 * rounding at the store) mean what they mean on every backend; the float
 * arithmetic among them carries its constant factors instead of
 * multiplying them in (cuda_evt_factors.c).
 *
 * Loads ahead of use.  Aux (M x N) loads are read as pairs of columns
 * into registers a few 8-column blocks before the block that uses them
 * (the hook's prefetch, cuda_emit_gemm.h): the first blocks while the
 * tile's main loop runs, block j + P at the start of block j, P from a
 * budget of 24 registers.  Loaded at their use instead, every block of a
 * long epilogue waited for a memory latency with one warp per scheduler to
 * hide it (SASS: each block's loads issued right before their first use).
 * Row broadcasts (a bias) are read whole while the main loop runs, spread
 * over the warp's lanes, and shuffled to the lanes that need them
 * (lane_vector); on pingpong tiles a bias added to the accumulator alone is
 * where the accumulators start instead (choose_acc_bias).
 *
 * Reductions (each REDUCE node's only consumers are stores).  A thread
 * folds its elements into f32 partials (f64 for f64 values): COL (over the
 * columns of a row) one per fragment row, ROW (over the rows of a column)
 * one per column while the hook walks that column's rows, SCALAR one.
 * Warp shuffles then combine the lanes that share the row (xor 1, 2), the
 * column (xor 4, 8, 16) or everything.  COL and SCALAR partials go from one
 * lane as a double to their own slot in scratch: COL slot = the tile
 * column (n0 / tile_n) per row, SCALAR slot = (tile, consumer warpgroup,
 * warp).  ROW partials go to the warpgroup's shared memory (4 warps x
 * tile_n) and, after the tile, one thread per column adds the 4 warps' in
 * warp order into slot (batch, tile row, consumer warpgroup) as a double.
 * Every slot is written exactly once, without atomics; the kernel NAME_fin
 * combines the slots of each result in a fixed order (COL: one thread per
 * row, slot after slot; ROW: FIN_COLS columns a block, warp w summing
 * slots w, w + FIN_WARPS, ..., then the warps in order; SCALAR: one block,
 * then a block reduction in a fixed tree), so runs are deterministic,
 * divides means by their count and stores.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_gemm_tune.h"
#include "runtime/elements.h"
#include "runtime/precision.h"

/* NAME_fin's blocks: FIN_THREADS threads (the backend's launch), FIN_WARPS warps; a ROW result takes FIN_COLS
 * columns a block, a COL result one row a thread */
enum { FIN_THREADS = 256, FIN_WARPS = FIN_THREADS / 32, FIN_COLS = 32 };

static int64_t fin_blocks(int64_t n, int64_t per) { return (n + per - 1) / per; }

/* Byte offset in the hook's shared memory of ROW reduction i's per-warp partials: 4 warps x tile_n. */
static int row_smem_offset(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i) {
  int off = 0;
  for (int j = 0; j < i; j++)
    if (k->v[j].kind == EVTC_V_REDUCE && k->v[j].cls == EVTC_VC_ROW)
      off += 4 * pl->cfg.tile_n * (k->v[k->v[j].args[0]].dtype == EVTC_F64 ? 8 : 4);
  return off;
}

/* The quad stores' exchange in the hook's shared memory, after the ROW partials: per warp 8 quads of lanes x 4
 * blocks x 4 words, a quad's 64 bytes at an 80-byte stride (a lane's four stores of one block hit 32 different
 * banks; each quad's 16-byte loads stay aligned). */
enum { QUAD_STRIDE = 80, QUAD_WARP = 8 * QUAD_STRIDE, QUAD_SMEM = 4 * QUAD_WARP };

static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

/* The one batch stride of an operand with per-dim batch strides s (false when the dims do not collapse). */
static bool one_batch_stride(const evtc_gemm_desc *g, const int64_t *s, int64_t *out) {
  int64_t stride = -1, inner = 1;
  for (int d = g->batch_rank - 1; d >= 0; d--) {
    if (g->batch_shape[d] == 1) continue;
    if (stride < 0) stride = s[d] / inner;
    if (s[d] != stride * inner) return false;
    inner *= g->batch_shape[d];
  }
  *out = stride < 0 ? 0 : stride;
  return true;
}

static bool fail(char *why, size_t cap, const char *msg) {
  snprintf(why, cap, "%s", msg);
  return false;
}

/* Whether class cls has one value per element of the domain (a COL value when there is one column, ...). */
static bool per_element(const evtc_kernel *k, evtc_vclass cls) {
  return cls == EVTC_VC_FULL || (cls == EVTC_VC_COL && k->cols == 1) || (cls == EVTC_VC_ROW && k->rows == 1) ||
         (cls == EVTC_VC_SCALAR && k->rows * k->cols == 1);
}

/* Whether the visitor DAG fits the epilogue: stores of per-element values or of reductions, reductions of
 * per-element float values feeding stores only. */
static bool visitor_ok(const evtc_kernel *k, char *why, size_t cap) {
  if (k->n_phases != 1) return fail(why, cap, "a reduction read inside the kernel (the epilogue has one pass)");
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_REDUCE) {
      const evtc_vnode *a = &k->v[v->args[0]];
      if (!per_element(k, a->cls) || !evtc_dtype_is_float(a->dtype) || v->cls == EVTC_VC_FULL)
        return fail(why, cap, "a reduction of a broadcast or integer value in the epilogue");
      for (int j = i + 1; j < k->n_v; j++)
        for (int q = 0; q < k->v[j].n_args; q++)
          if (k->v[j].args[q] == i && k->v[j].kind != EVTC_V_STORE)
            return fail(why, cap, "a reduction result used inside the kernel");
    }
    if (v->kind == EVTC_V_STORE && !per_element(k, v->cls) && k->v[v->args[0]].kind != EVTC_V_REDUCE)
      return fail(why, cap, "a vector or scalar store of a broadcast value");
  }
  return true;
}

/* The layout of an operand of `outer` rows (M for A, N for B) and K columns, element (o, k) at
 * s_outer o + s_k k: K-major (k contiguous; ld the row stride) or outer-major (o contiguous; ld the k
 * stride).  A unit extent takes any stride, its ld the packed extent rounded up to 8 (TMA's rule). */
static bool operand_layout(const char *name, int64_t outer, int64_t K, int64_t s_outer, int64_t s_k, bool *kmajor,
                           int64_t *ld, char *why, size_t cap) {
  if ((s_k == 1 || K == 1) && (outer == 1 || s_outer >= K)) {
    *kmajor = true;
    *ld = outer == 1 ? round8(K) : s_outer;
  } else if (s_outer == 1 || outer == 1) {
    *kmajor = false;
    *ld = K == 1 ? round8(outer) : s_k;
  } else {
    snprintf(why, cap, "operand %s strides (%lld per row, %lld along k) are neither row- nor column-major", name,
             (long long)s_outer, (long long)s_k);
    return false;
  }
  return true;
}

/* Whether the visitor DAG reduces over rows or columns (a bias gradient, a layernorm's gain sums). */
static bool has_vector_reduction(const evtc_kernel *k) {
  return evtc_kernel_has_reduce(k, EVTC_VC_ROW) || evtc_kernel_has_reduce(k, EVTC_VC_COL);
}

/* The tile config: EVTC_GEMM_CONFIG when set (config_name's format, for experiments: one that does not
 * parse or fit is refused, naming it; *fixed then says so), else the tuner's winner for dev and the kernel's
 * family when `evtc tune` has measured it and the epilogue does not reduce over rows or columns, else by the
 * kernel.  The tuner measures a visitor family with a bias + GELU epilogue that reduces nothing, so its
 * winner says nothing about an epilogue with a bias gradient's or a layernorm's sums (partials to write, a
 * finishing kernel), whose tiles below were measured for it.  On the H200 (2026-12-01) `evtc tune` chose
 * 128x256x64 s4 c2 g8 for bf16-mk-nk-visitor; bench/epilogue/bert_gelu_grad.evt (the GELU gradient with
 * its bias gradient; `evtc explain --profile 200`, one round) took 305 us on those tiles (EVTC_GEMM_CONFIG,
 * which also kept 4 stages, so its aux tile went without TMA) against 258 us on the 4-stage pingpong ones.
 * By the kernel: the cooperative 128x256 default for the built-in store and for a visitor epilogue that
 * reduces nothing (in 2x1 clusters when it computes in packed bf16x2: packed_clusters), over any K (on the H200,
 * 2026-12-01, `evtc explain --profile 300`, three rounds, against the pingpong 128x128 tiles with 6 stages the
 * plan took over a short K before: bench/epilogue/bert_fc.evt 290.7 against 298.1 us, bias_gelu.evt (erf) 262.6
 * against 272.1; a bias added over K = 4096: 0.211 -> 0.185 ms, 2026-11-29), and for an epilogue whose only sums are over columns (a row vector per row: the next
 * layernorm's statistics; gpu_evt_bench ln_stats, 16384 x 4096 x 1024, H200, 2000 runs at the power cap: 0.394 ms
 * on the pingpong tiles below, 0.365 on the cooperative ones with EVTC_GEMM_CONFIG, 2026-12-02; 0.353-0.360
 * against 0.342 in 20-run bursts; the plan's own cooperative tiles, 3 stages beside the TMA aux tile: 0.385-0.390
 * -> 0.361-0.367, the same day); for an epilogue that sums over rows (a bias gradient, a layernorm's gain and
 * shift gradients: a result per column) pingpong 128x128 tiles (that epilogue runs on the CUDA
 * cores while the other warpgroup's main loop keeps the tensor cores busy), with 4 stages (over a
 * short K: the gradient through GELU with its bias gradient, 0.547 -> 0.428 ms at 16384 x 4096 x 1024 on the
 * H200 against 6 stages; over K = 4096: BERT-Large's gradient into a layernorm with its two column sums,
 * 16384 x 1024 x 4096, 0.255-0.260 -> 0.244 ms) and the default's raster groups of 8 (groups of 16, chosen
 * with those 4 stages, measured slower since: BERT-Large's GELU gradient times its coefficient with the bias
 * gradient 233-237 -> 225-232 us, the layernorm gradient's GEMM above 229-231 -> 224 us; `evtc explain
 * --profile 5`, bench/epilogue/bert_gelu_grad.evt and ln_grad_col_sums.evt, H200, 2026-11-30).  On the
 * sm_80 template (evtc_cuda_gemm_sm80_template): the tuner's winner for its sm_80 family where `evtc tune
 * --family ...-sm80` has measured it, else its default for the device's shared memory, or EVTC_GEMM_CONFIG
 * taken as an sm_80 config. */
static bool tile_config(const evtc_cuda_device *dev, const evtc_kernel *k, bool builtin_store,
                        const evtc_cuda_gemm_variant *v, evtc_cuda_gemm_config *cfg, bool *fixed, bool *by_kernel,
                        char *why, size_t cap) {
  const char *env = getenv("EVTC_GEMM_CONFIG");
  const bool sm80 = evtc_cuda_gemm_sm80_template(dev);
  *fixed = env && *env;
  *by_kernel = false;
  char cwhy[160];
  if (env && *env) {
    if (!evtc_cuda_gemm_config_parse(env, cfg)) {
      snprintf(why, cap, "EVTC_GEMM_CONFIG '%s' is not like '128x256x64 s4 c2 g8' (+ ' pp', ' cl2', ' sm80')", env);
      return false;
    }
    cfg->sm80 = sm80;
  } else if (sm80) {
    if (!dev || !evtc_cuda_gemm_tuned_config(dev, v, !builtin_store, true, cfg))
      *cfg = evtc_cuda_gemm_config_default_sm80(dev ? dev->smem_per_block_optin : 0);
  } else {
    const bool reduces = has_vector_reduction(k);
    if (!dev || reduces || !evtc_cuda_gemm_tuned_config(dev, v, !builtin_store, false, cfg)) {
      *by_kernel = true;
      *cfg = evtc_cuda_gemm_config_default();
      if (!builtin_store && evtc_kernel_has_reduce(k, EVTC_VC_ROW)) {
        cfg->tile_n = 128;
        cfg->stages = 4;
        cfg->pingpong = true;
      }
    }
  }
  if (!evtc_cuda_gemm_config_check(cfg, v, cwhy, sizeof cwhy)) {
    snprintf(why, cap, "tile config%s: %s", env && *env ? " (EVTC_GEMM_CONFIG)" : "", cwhy);
    return false;
  }
  return true;
}

static bool is_pair_load(const evtc_kernel *k, const evtc_vnode *v, int64_t *row_stride);
static void choose_acc_bias(const evtc_kernel *k, evtc_cuda_evt_plan *pl);
static void choose_packed(const evtc_kernel *k, evtc_cuda_evt_plan *pl);
static void packed_clusters(evtc_cuda_evt_plan *pl, const evtc_cuda_device *dev);

/* Aux loads through TMA.  An aux (M x N) load's pairs read as 32-bit words straight from global memory cost the
 * L1 a wavefront per row of the warp's 8 (each row's 16 bytes in a sector of its own) and share that pipe with
 * the main loop's wgmma operand reads (ncu, BERT-Large's GELU-gradient GEMM, which loads GELU's coefficient:
 * L1/TEX 84 % busy against 62 % for the GEMM alone, a quarter of its warp samples waiting on those loads however
 * far ahead they were issued).  Instead the consumer warpgroup copies its rows x tile_n tile of the load with
 * TMA at the tile's start (boxes of 64 columns x its rows, 128B-swizzled, out-of-bounds elements zero), it
 * arrives during the main loop, and each pair is one conflict-free 32-bit shared load.  One load a kernel (the
 * first that fits: bf16 / f16, contiguous columns, 16-byte aligned offset and row stride), when the tile fits
 * in shared memory beside the ring (down to 3 stages unless EVTC_GEMM_CONFIG fixed them);
 * EVTC_EVT_TMA_AUX=0 turns it off. */
static void choose_tma_load(const evtc_kernel *k, evtc_cuda_evt_plan *pl, bool fixed_config) {
  const char *off = getenv("EVTC_EVT_TMA_AUX");
  if (off && strcmp(off, "0") == 0) return;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    int64_t sr;
    if (v->kind != EVTC_V_LOAD || v->cls != EVTC_VC_FULL || (v->dtype != EVTC_BF16 && v->dtype != EVTC_F16) ||
        !is_pair_load(k, v, &sr) || sr == 0 || sr % 8 || v->offset % 8 || k->cols % 8)
      continue;
    const unsigned rows = (unsigned)(pl->cfg.tile_m / evtc_cuda_gemm_row_groups(&pl->cfg));
    const unsigned bytes = rows * (unsigned)pl->cfg.tile_n * 2;
    evtc_cuda_gemm_config c = pl->cfg;
    while (evtc_cuda_gemm_smem_bytes_aux(&c, bytes) > EVTC_CUDA_GEMM_SMEM_LIMIT && c.stages > 3 && !fixed_config) c.stages--;
    if (evtc_cuda_gemm_smem_bytes_aux(&c, bytes) > EVTC_CUDA_GEMM_SMEM_LIMIT) return;
    pl->cfg = c;
    pl->tma_load = i + 1;
    pl->tma_arg = v->arg;
    pl->tma_offset = v->offset;
    pl->tma_ld = sr;
    pl->tma_rows = k->rows;
    pl->tma_cols = k->cols;
    pl->tma_dtype = v->dtype;
    pl->tma_box_rows = rows;
    pl->aux_bytes = bytes;
    return;
  }
}

/* Stores of per-element values go through sv<i>[e], written as a pair after the thread's two columns. */
static bool is_pair_store(const evtc_kernel *k, const evtc_vnode *v) {
  return v->kind == EVTC_V_STORE && k->v[v->args[0]].kind != EVTC_V_REDUCE;
}

/* A pair store of 2-byte values into rows of CC % 8 == 0 elements: on a full tile, the lanes of a quad trade
 * their pairs of four 8-column blocks (after every fourth block) so that each lane stores one block's 16
 * bytes, a quad 64 contiguous bytes of its row (whole sectors instead of 16 bytes per row).  They trade through
 * shared memory (QUAD_SMEM): four stores and a 16-byte load a lane, where three shuffles needed 24 selects of
 * which word to send and where to put it (the fc GEMM with GELU and its coefficient: 16888 -> 15424 SASS
 * instructions). */
static bool is_quad_store(const evtc_kernel *k, const evtc_vnode *v) {
  return is_pair_store(k, v) && (v->dtype == EVTC_BF16 || v->dtype == EVTC_F16) && k->cols % 8 == 0;
}

/* A warp's staged box: 16 rows x 128 bytes (64 columns of 2-byte values); a warp's share of the hook's shared
 * memory: two boxes. */
enum { STAGED_BOX = 16 * 128, STAGED_WARP = 2 * STAGED_BOX };
_Static_assert(4 * STAGED_WARP <= EVTC_CUDA_GEMM_HOOK_SMEM, "a warpgroup's staged boxes fit the hook's shared memory");

/* Whether the epilogue is elementwise math on the accumulator and register loads: it reduces nothing, draws no
 * dropout masks and reads no TMA aux tile.  The staged store and the lane vectors are for these only: each made
 * a bias + GELU + dropout + residual (the TMA aux tile) + row sums epilogue 1.04-1.07x slower on an H200
 * (RESULTS, twenty-sixth and twenty-seventh sessions), while they sped up bias + GELU; with the lane vectors
 * that kernel's hot loop spilled 46 registers where it spilled 7 (SASS), its 128 accumulators leaving no room. */
static bool light_epilogue(const evtc_kernel *k, const evtc_cuda_evt_plan *pl) {
  if (pl->tma_load) return false;
  for (int i = 0; i < k->n_v; i++)
    if (k->v[i].kind == EVTC_V_REDUCE || k->v[i].kind == EVTC_V_RNG) return false;
  return true;
}

/* The one pair store of 2-byte values (a bf16 / f16 FULL result) of an sm_90a epilogue without reductions,
 * dropout or the TMA aux tile: its full tiles go through TMA stores.  Per 64-column group each
 * warp writes its pairs into STAGED_BOX buffers in the 128B-swizzled layout of a TMA box (two buffers in turn
 * with one atom a tile, one per atom with two) and
 * its first lane hands each to a TMA store, which runs while the warp goes on; no barrier beyond the warp's own.
 * The quad exchange it replaces paid a shared load and a 16-byte global store a lane every fourth block, the
 * load's wait holding the store (a third of a GEMM epilogue's stall samples, RESULTS tenth session); cuBLASLt's
 * GELU_BIAS kernel stores through stmatrix and TMA too.  Edge tiles store directly.  The arena's 64-byte bases
 * and N % 8 == 0 suit TMA; the backend refuses a launch whose D does not (dims.tma_store 0).
 * Only for a light epilogue: measured on an H200 (RESULTS, twenty-sixth session) a bias + tanh GELU and the
 * accumulator times one 0.956x each over 2000 runs. */
static void choose_staged_store(const evtc_kernel *k, evtc_cuda_evt_plan *pl) {
  if (pl->builtin_store || pl->cfg.sm80 || pl->cfg.tile_n % 64 || evtc_cuda_gemm_atoms(&pl->cfg) > 2 ||
      !light_epilogue(k, pl))
    return;
  int store = -1;
  for (int i = 0; i < k->n_v; i++) {
    if (is_pair_store(k, &k->v[i])) {
      if (store >= 0) return;
      store = i;
    }
  }
  if (store < 0 || !is_quad_store(k, &k->v[store])) return;
  pl->staged_store = store + 1;
  pl->out_arg = k->v[store].arg;
  pl->var.out = k->v[store].dtype;
  pl->prob.d_box_rows = 16;
}

bool evtc_cuda_evt_plan_of(const evtc_kernel *k, const struct evtc_cuda_device *dev, evtc_cuda_evt_plan *pl, char *why,
                           size_t cap) {
  memset(pl, 0, sizeof *pl);
  if (k->kind != EVTC_ML_GEMM) return fail(why, cap, "not a matmul");
  const evtc_gemm_desc *g = &k->gemm;
  if (g->dtype != EVTC_BF16 && g->dtype != EVTC_F16) {
    snprintf(why, cap, "%s operands (bf16 or f16 only)", evtc_dtype_name(g->dtype));
    return false;
  }
  if (k->cols != g->N || k->rows != g->batch * g->M)
    return fail(why, cap, "the kernel's domain is not the batches of M x N outputs stacked");
  if (!visitor_ok(k, why, cap)) return false;
  evtc_cuda_gemm_problem p = {.M = g->M, .N = g->N, .K = g->K, .batch = g->batch, .ldc = g->N,
                              .c_bstride = g->M * g->N};
  evtc_cuda_gemm_variant v = {.in = g->dtype, .out = EVTC_F32};
  /* A (i, k) at a_rs i + a_cs k: M x K or K x M; B (k, j) at b_rs k + b_cs j: N x K or K x N */
  if (!operand_layout("A", g->M, g->K, g->a_rs, g->a_cs, &v.a_kmajor, &p.lda, why, cap) ||
      !operand_layout("B", g->N, g->K, g->b_cs, g->b_rs, &v.b_kmajor, &p.ldb, why, cap))
    return false;
  if (!one_batch_stride(g, g->a_bstride, &p.a_bstride) || !one_batch_stride(g, g->b_bstride, &p.b_bstride))
    return fail(why, cap, "batch dims of an operand that do not collapse into one stride");
  /* B shared by every batch and A's batches stacked row after row: one GEMM of batch * M rows (same rg) */
  if (p.batch > 1 && p.b_bstride == 0 && v.a_kmajor && p.a_bstride == p.M * p.lda) {
    p.M *= p.batch;
    p.batch = 1;
    p.a_bstride = p.c_bstride = 0;
  }
  /* the arena places every buffer at a 64-byte boundary: the bases pass; launch_init checks them again */
  char pwhy[200];
  if (!evtc_cuda_gemm_problem_check(&v, &p, 0, 0, pwhy, sizeof pwhy)) {
    snprintf(why, cap, "%s", pwhy);
    return false;
  }
  /* a plain store of the accumulator as f32 / bf16 / f16: the template's own epilogue (TMA stores) */
  const evtc_vnode *st = &k->v[k->n_v - 1];
  if (k->n_v == 2 && k->v[0].kind == EVTC_V_ACC && st->kind == EVTC_V_STORE && st->args[0] == 0 &&
      per_element(k, st->cls) && (st->dtype == EVTC_F32 || st->dtype == EVTC_BF16 || st->dtype == EVTC_F16)) {
    pl->builtin_store = true;
    pl->out_arg = st->arg;
    v.out = st->dtype;
  }
  bool fixed_config, by_kernel;
  if (!tile_config(dev, k, pl->builtin_store, &v, &pl->cfg, &fixed_config, &by_kernel, why, cap)) return false;
  pl->var = v;
  pl->prob = p;
  /* the launch's tiles (after folding batches into rows: the problem's M and batch, not the kernel's) */
  pl->tiles_m = (p.M + pl->cfg.tile_m - 1) / pl->cfg.tile_m;
  pl->tiles_n = (p.N + pl->cfg.tile_n - 1) / pl->cfg.tile_n;
  pl->tiles = pl->tiles_m * pl->tiles_n * p.batch;
  int64_t fin_grid = 1;
  for (int i = 0; i < k->n_v; i++)
    if (k->v[i].kind == EVTC_V_REDUCE) {
      const evtc_vclass cls = k->v[i].cls;
      pl->scratch_doubles += evtc_cuda_evt_slots(pl, cls) * (cls == EVTC_VC_ROW ? k->cols : cls == EVTC_VC_COL ? k->rows : 1);
      pl->has_fin = true;
      const int64_t blocks = cls == EVTC_VC_ROW ? fin_blocks(k->cols, FIN_COLS)
                             : cls == EVTC_VC_COL ? fin_blocks(k->rows, FIN_THREADS) : 1;
      if (blocks > fin_grid) fin_grid = blocks;
    }
  pl->fin_grid = (unsigned)fin_grid;
  if (!pl->builtin_store && !pl->cfg.sm80) choose_tma_load(k, pl, fixed_config);   /* no TMA on sm_80 */
  if (row_smem_offset(k, pl, k->n_v) + QUAD_SMEM > EVTC_CUDA_GEMM_HOOK_SMEM)
    return fail(why, cap, "more sums over rows than the epilogue's shared memory holds (4 warps x tile_n partials each, "
                          "beside the quad stores' exchange)");
  choose_staged_store(k, pl);
  choose_acc_bias(k, pl);
  choose_packed(k, pl);
  if (pl->packed && by_kernel) packed_clusters(pl, dev);
  return true;
}

int64_t evtc_cuda_evt_slots(const evtc_cuda_evt_plan *pl, evtc_vclass cls) {
  const int64_t warps = 4 * evtc_cuda_gemm_row_groups(&pl->cfg);
  switch (cls) {
    case EVTC_VC_COL: return pl->tiles_n;
    case EVTC_VC_ROW: return pl->prob.batch * pl->tiles_m * evtc_cuda_gemm_row_groups(&pl->cfg);
    case EVTC_VC_SCALAR: return pl->tiles * warps;
    default: return 0;
  }
}

/* Offset (in doubles) of REDUCE node i's slots. */
static int64_t red_offset(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i) {
  int64_t off = 0;
  for (int j = 0; j < i; j++)
    if (k->v[j].kind == EVTC_V_REDUCE)
      off += evtc_cuda_evt_slots(pl, k->v[j].cls) * (k->v[j].cls == EVTC_VC_ROW ? k->cols
                                                   : k->v[j].cls == EVTC_VC_COL ? k->rows : 1);
  return off;
}

static int red_op(evtc_op op) { return op == EVTC_OP_REDUCE_MAX ? 1 : op == EVTC_OP_REDUCE_MIN ? 2 : 0; }

typedef struct evt_ctx {
  const evtc_kernel *k;
  const evtc_cuda_evt_plan *pl;
} evt_ctx;

/* The partial's C type and its identity. */
static const char *part_type(const evtc_kernel *k, const evtc_vnode *v) {
  return k->v[v->args[0]].dtype == EVTC_F64 ? "double" : "float";
}
static const char *part_init(const evtc_vnode *v) {
  return v->op == EVTC_OP_REDUCE_MAX ? "-INFINITY" : v->op == EVTC_OP_REDUCE_MIN ? "INFINITY" : "0";
}
/* "p = comb(p, x)" */
static void emit_comb(evtc_sb *b, const char *ind, const evtc_vnode *v, const char *p, const char *x) {
  if (v->op == EVTC_OP_REDUCE_MAX) evtc_sb_printf(b, "%s%s = EVTC_MAXN(%s, %s);\n", ind, p, p, x);
  else if (v->op == EVTC_OP_REDUCE_MIN) evtc_sb_printf(b, "%s%s = EVTC_MINN(%s, %s);\n", ind, p, p, x);
  else evtc_sb_printf(b, "%s%s += %s;\n", ind, p, x);
}
/* The butterfly over lanes xor `masks` (a 0-terminated list) of partial p.  Each shuffle goes to a
 * variable first: EVTC_MAXN / EVTC_MINN name their operands twice, and a shuffle evaluated in one arm
 * of their conditional would run in some lanes only. */
static void emit_shuffles(evtc_sb *b, const char *ind, const evtc_vnode *v, const char *p, const int *masks) {
  char in[64];
  snprintf(in, sizeof in, "%s  ", ind);
  for (const int *m = masks; *m; m++) {
    evtc_sb_printf(b, "%s{\n%s  const auto s = __shfl_xor_sync(0xffffffffu, %s, %d);\n", ind, ind, p, *m);
    emit_comb(b, in, v, p, "s");
    evtc_sb_printf(b, "%s}\n", ind);
  }
}

static void evt_params(evtc_sb *b, void *ctx) {
  const evt_ctx *e = ctx;
  evtc_sb_printf(b, ",\n   const evtc_params P, const uint64_t *const stepp, int *const err, void *const scratch");
  if (e->pl->tma_load) evtc_sb_printf(b, ",\n   const __grid_constant__ evtc_tmap tma_x");
}

/* The TMA tile (choose_tma_load) of each of the warpgroup's tiles: once every thread of the warpgroup has read
 * the last one (a warpgroup barrier), one thread asks for this one's boxes; evt_tile_begin waits for them. */
static void evt_tile_loads(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const unsigned boxes = (unsigned)e->pl->cfg.tile_n / 64, box = e->pl->tma_box_rows * 128u;
  evtc_sb_printf(b,
    "%sevtc_wg_sync(1 + wg);\n"
    "%sif ((threadIdx.x & 127) == 0) {\n"
    "%s  evtc_mbar_expect_tx(aux_bar, %uu);\n"
    "#pragma unroll\n"
    "%s  for (int bx = 0; bx < %u; bx++)\n"
    "%s    evtc_tma_load(aux_tile + bx * %uu, &tma_x, aux_bar, n0 + bx * 64, bat * dims.M + m0 + cw * %u, 0);\n"
    "%s}\n",
    ind, ind, ind, boxes * box, ind, boxes, ind, box, e->pl->tma_box_rows, ind);
}

/* Whether the staged store's pairs go to shared memory by stmatrix (evt_pair_end): on pingpong tiles.  With the bias
 * in the accumulators, bias + tanh GELU on 128 x 128 pingpong tiles took 0.959-0.964x and on 64 x 256 pingpong
 * tiles in 2x1 clusters 0.988-1.002x (gpu_evt_bench); on the cooperative tiles, where the store alone changed, it
 * gained nothing: 1.009x and 1.019x (bench/epilogue/bias_gelu_tanh.evt, 2000 runs), 0.985-1.011x (gpu_evt_bench;
 * H200, RESULTS thirtieth session), so they keep one 4-byte store a pair. */
static bool staged_stmatrix(const evtc_cuda_evt_plan *pl) { return pl->staged_store && pl->cfg.pingpong; }

static void evt_setup(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  evtc_sb_printf(b, "%sconst uint64_t step = *stepp;\n%svoid *const *args = P.a;\n%s(void)args; (void)step; (void)err;\n",
                 ind, ind, ind);
  evtc_cpu_emit_args(b, e->k);
  evtc_sb_printf(b, "%sconst int64_t CC = %lldLL;\n%s(void)CC;\n%sdouble *const red = (double *)scratch;\n%s(void)red;\n",
                 ind, (long long)e->k->cols, ind, ind, ind);
  if (e->pl->tma_load) evtc_sb_printf(b, "%sunsigned aux_ph = 0;   /* the parity of this warpgroup's next TMA tile */\n", ind);
  if (e->pl->staged_store)
    evtc_sb_printf(b, "%sunsigned sgc = 0;   /* 64-column groups staged so far: their buffers' parity */\n", ind);
  if (staged_stmatrix(e->pl))
    evtc_sb_printf(b, "%s/* the row of an 8-column block pair this lane addresses in the staged stmatrix (evt_pair_end) */\n"
                      "%sconst unsigned sst = ((lane >> 3) & 1) * 1024u + (lane & 7) * 128u + ((((lane >> 4) ^ lane) & 7u) << 4);\n",
                   ind, ind);
}

/* A split-K unit that leaves the tile's epilogue to another: its TMA tile's copy is waited for all the same, so
 * that the barrier's parity stays the warpgroup's count of tiles. */
static void evt_tile_skip(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  if (e->pl->tma_load) evtc_sb_printf(b, "%sevtc_mbar_wait(aux_bar, aux_ph);\n%saux_ph ^= 1u;\n", ind, ind);
}

static void evt_tile_begin(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  const int wm = evtc_cuda_gemm_atoms(&e->pl->cfg);
  if (e->pl->tma_load) evtc_sb_printf(b, "%sevtc_mbar_wait(aux_bar, aux_ph);   /* the tile's TMA copy is in */\n%saux_ph ^= 1u;\n", ind, ind);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (is_quad_store(k, v) && e->pl->staged_store != i + 1) evtc_sb_printf(b, "%suint32_t sq%d[%d][2][4];\n", ind, i, wm);
    if (e->pl->staged_store == i + 1 && staged_stmatrix(e->pl)) evtc_sb_printf(b, "%suint32_t ss%d[%d][2][2];\n", ind, i, wm);
    if (v->kind != EVTC_V_REDUCE) continue;
    if (v->cls == EVTC_VC_COL)
      evtc_sb_printf(b, "%s%s rp%d[%d][2];\n#pragma unroll\n%sfor (int q = 0; q < %d; q++) rp%d[q / 2][q %% 2] = %s;\n",
                     ind, part_type(k, v), i, wm, ind, 2 * wm, i, part_init(v));
    else if (v->cls == EVTC_VC_SCALAR)
      evtc_sb_printf(b, "%s%s rp%d = %s;\n", ind, part_type(k, v), i, part_init(v));
  }
}

/* Loads of f32 / bf16 / f16 values along contiguous columns (aux loads, row broadcasts) go through lv<i>[e],
 * a pair of the thread's two columns taken from the prefetched registers (*row_stride: the view's stride per
 * domain row). */
static bool is_pair_load(const evtc_kernel *k, const evtc_vnode *v, int64_t *row_stride) {
  return (v->dtype == EVTC_F32 || v->dtype == EVTC_BF16 || v->dtype == EVTC_F16) &&
         evtc_cuda_load_vectorizes(k, v, 2, row_stride);
}

static bool evt_storage(const evtc_cpu_vctx *x, int i, char *buf, size_t cap) {
  int64_t sr;
  if (is_pair_store(x->k, &x->k->v[i])) snprintf(buf, cap, "sv%d[e]", i);
  else if (is_pair_load(x->k, &x->k->v[i], &sr)) snprintf(buf, cap, "lv%d[e]", i);
  else return false;
  return true;
}

/* Pair loads go through registers pf<i>.  A view that moves along rows (an aux tile not copied by TMA) is
 * prefetched per 8-column block j (cuda_emit_gemm.h: prefetch): pf<i>[j][atom][row half].  A row-invariant one
 * (a bias) is too, as pf<i>[j], except in a light epilogue (lane_vector): there it is read whole before the
 * tile's main loop, spread over the warp's lanes: lane l holds the pair at columns n0 + 64 g + 2 l, + 1 of each
 * 64-column group g in pf<i>[g], and block j takes its pair from lane 4 (j % 8) + (l % 4) by a shuffle.  So no
 * global load of it is in flight during the epilogue (its latency stalled the block that used it, and the
 * staged store's fence waits for every load in flight), at tile_n / 64 registers instead of a prefetch window
 * (H200, RESULTS twenty-seventh session: bias + GELU 0.973-0.986x).  A pair of 2-byte values is one 32-bit
 * word, a pair of floats two. */
static bool pair_f32(const evtc_vnode *v) { return v->dtype == EVTC_F32; }

/* Whether node i is a pair load through registers (not the plan's TMA tile). */
static bool register_pair(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i, int64_t *row_stride) {
  return is_pair_load(k, &k->v[i], row_stride) && pl->tma_load != i + 1;
}

/* The row stride of pair load i's view (0: row-invariant). */
static int64_t pair_stride(const evtc_kernel *k, int i) {
  int64_t sr = 0;
  is_pair_load(k, &k->v[i], &sr);
  return sr;
}

/* Whether node i is a row-invariant pair load spread over the lanes (above), in a light epilogue. */
static bool lane_vector(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i) {
  int64_t sr;
  return register_pair(k, pl, i, &sr) && sr == 0 && light_epilogue(k, pl);
}

/* The one node that reads value i, or -1 when none or more than one does (or one reads it twice). */
static int only_reader(const evtc_kernel *k, int i) {
  int reader = -1;
  for (int j = i + 1; j < k->n_v; j++)
    for (int q = 0; q < k->v[j].n_args; q++)
      if (k->v[j].args[q] == i) {
        if (reader >= 0) return -1;
        reader = j;
      }
  return reader;
}

/* The bias in the accumulators.  A float add whose operands are the accumulator (or its cast to f32) and a lane
 * vector (a bias), each read by the add alone, starts the unit's accumulators from the bias instead of zeros
 * (evt_acc_init), and the add becomes the accumulator itself: one FADD an element fewer in the epilogue, and the
 * bias's shuffles and unpacking run once a tile before the main loop instead of in the epilogue.  Pingpong tiles
 * only: the init waits for the bias's loads, which a pingpong warpgroup issues before it waits for its turn on the
 * tensor cores anyway, where on cooperative tiles the wait would hold up the main loop. */
static void choose_acc_bias(const evtc_kernel *k, evtc_cuda_evt_plan *pl) {
  if (pl->builtin_store || pl->cfg.sm80 || !pl->cfg.pingpong) return;
  for (int a = 0; a < k->n_v; a++) {
    const evtc_vnode *v = &k->v[a];
    if (v->kind != EVTC_V_COMPUTE || v->op != EVTC_OP_ADD || v->n_args != 2 ||
        !(v->dtype == EVTC_F32 || v->dtype == EVTC_BF16 || v->dtype == EVTC_F16))
      continue;
    for (int s = 0; s < 2; s++) {
      const int x = v->args[s], bias = v->args[1 - s];
      const evtc_vnode *xv = &k->v[x];
      const int acc = xv->kind == EVTC_V_COMPUTE && xv->op == EVTC_OP_CAST && xv->dtype == EVTC_F32 ? xv->args[0] : x;
      if (k->v[acc].kind != EVTC_V_ACC || only_reader(k, x) != a || (acc != x && only_reader(k, acc) != x) ||
          !lane_vector(k, pl, bias) || only_reader(k, bias) != a)
        continue;
      pl->acc_bias = a + 1;
      pl->acc_bias_load = bias + 1;
      return;
    }
  }
}

/* The bf16x2 op of a packed COMPUTE node (cuda_emit_common.c: the prelude's evtc_<op>_bf16x2), or NULL. */
static const char *packed_op(evtc_op op) {
  switch (op) {
    case EVTC_OP_ADD: return "add";
    case EVTC_OP_SUB: return "sub";
    case EVTC_OP_MUL: return "mul";
    case EVTC_OP_NEG: return "neg";
    case EVTC_OP_TANH: return "tanh";
    case EVTC_OP_GELU_TANH: return "gelu_tanh";
    default: return NULL;
  }
}

/* Whether node i can live in a packed epilogue as a bf16x2 word: a bf16 accumulator, immediate, register pair load
 * (a lane vector such as a bias, or an aux tile prefetched by blocks), pair store or op of packed_op.  Every node
 * must pack (choose_packed), so an op's operands are bf16 words too. */
static bool packs(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i) {
  const evtc_vnode *v = &k->v[i];
  int64_t sr;
  if (v->dtype != EVTC_BF16) return false;
  switch (v->kind) {
    case EVTC_V_ACC: case EVTC_V_IMM: return true;
    case EVTC_V_LOAD: return lane_vector(k, pl, i) || (register_pair(k, pl, i, &sr) && sr != 0);
    case EVTC_V_STORE: return is_pair_store(k, v);
    case EVTC_V_COMPUTE: return packed_op(v->op) != NULL;
    default: return false;
  }
}

/* Packed bf16x2 arithmetic.  A light epilogue (no reductions, dropout or TMA aux tile) on the sm_90a template whose
 * every node is bf16 and packs (above) computes each of a thread's pairs of columns two values an instruction
 * (evt_pair, the prelude's evtc_*_bf16x2): the accumulators rounded to bf16 by one cvt a pair, then each node as
 * the graph types it, rounded to bf16 (the interpreter's rounding; the f32 form skips it, cpu_visitor.c), GELU's
 * tanh form by its bf16x2 steps (its error: cuda_emit_common.c).  In SASS tests/gemm_emu's bias + GELU kernel went
 * 6312 -> 4616 instructions; on the H200 at the power cap (RESULTS, thirty-sixth session) bias + GELU on 16384 x
 * 4096 x 1024 0.243 -> 0.238 ms on the plan's cooperative tiles, 0.241 -> 0.233 on 2x1 clusters (packed_clusters),
 * GPT-2's step 0.990x.  Not with the bias in the accumulators (choose_acc_bias: the add is already gone);
 * EVTC_EVT_PACKED=0 turns it off. */
static void choose_packed(const evtc_kernel *k, evtc_cuda_evt_plan *pl) {
  const char *off = getenv("EVTC_EVT_PACKED");
  if ((off && strcmp(off, "0") == 0) || pl->builtin_store || pl->cfg.sm80 || pl->acc_bias || !light_epilogue(k, pl))
    return;
  for (int i = 0; i < k->n_v; i++)
    if (!packs(k, pl, i)) return;
  pl->packed = true;
}

/* A packed epilogue's tiles by the kernel (not EVTC_GEMM_CONFIG's or the tuner's): the cooperative 128 x 256 tiles in
 * 2x1 clusters (B multicast to the pair), except over few tiles and a long K, where K is split (split-K runs
 * without clusters).  With the epilogue's instructions halved the GEMM's own speed shows: on the H200 at the power
 * cap (gpu_evt_bench --rounds 3 --runs 2000, RESULTS thirty-sixth session) bias + tanh GELU on 16384 x 4096 x 1024
 * took 0.232-0.233 ms on them against 0.237-0.238 without the clusters (1.042x evtc's GEMM alone; cuBLASLt's
 * GELU_BIAS 0.239); GPT-2's step 1.002x and 1.009x against the unclustered tiles (within its rounds' spread). */
static void packed_clusters(evtc_cuda_evt_plan *pl, const evtc_cuda_device *dev) {
  evtc_cuda_gemm_config c = pl->cfg;
  char why[160];
  if (c.pingpong || c.tile_m != 128 || c.tile_n != 256 ||
      evtc_cuda_gemm_few_tiles(pl->tiles, pl->prob.K, dev ? dev->sm_count : 0))
    return;
  c.cluster_m = 2;
  if (evtc_cuda_gemm_config_check(&c, &pl->var, why, sizeof why)) pl->cfg = c;
}

/* Whether node i is a pair load prefetched block by block: a view that moves along rows, or a row-invariant one
 * outside a light epilogue (pf<i>[j] then). */
static bool block_pair(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int i) {
  int64_t sr;
  return register_pair(k, pl, i, &sr) && !lane_vector(k, pl, i);
}

/* Registers per 8-column block that the block-prefetched loads take (the prefetch distance's budget). */
static int prefetch_regs(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int wm) {
  int regs = 0;
  for (int i = 0; i < k->n_v; i++)
    if (block_pair(k, pl, i)) regs += (pair_stride(k, i) ? 2 * wm : 1) * (pair_f32(&k->v[i]) ? 2 : 1);
  return regs;
}

/* Blocks of loads in flight: as many as 24 registers hold, 1 to 3 (3 blocks of a long epilogue cover a
 * memory latency); 0 without block-prefetched loads. */
static int prefetch_distance(const evtc_kernel *k, const evtc_cuda_evt_plan *pl, int wm) {
  const int regs = prefetch_regs(k, pl, wm);
  if (regs == 0) return 0;
  const int d = 24 / regs;
  return d < 1 ? 1 : d > 3 ? 3 : d;
}

/* Zeros into pair register dst (a uint32_t word, or float[2]): what a pair past M or N reads. */
static void emit_pair_zero(evtc_sb *b, const char *ind, const evtc_vnode *v, const char *dst) {
  if (pair_f32(v)) evtc_sb_printf(b, "%s%s[0] = %s[1] = 0;\n", ind, dst, dst);
  else evtc_sb_printf(b, "%s%s = 0;\n", ind, dst);
}

/* The load of one pair into dst (a uint32_t word, or float[2]): columns pc, pc + 1 at p, leaving dst's zeros
 * past N (bounds through EVTC_IN_M / EVTC_IN_N, as everywhere in the hook: no tests on a full tile). */
static void emit_pair_fetch(evtc_sb *b, const char *ind, const evtc_vnode *v, const char *dst) {
  if (pair_f32(v))
    evtc_sb_printf(b, "%sif (EVTC_IN_N(pc + 1)) { const evtc_f32x2 q = *(const evtc_f32x2 *)p; %s[0] = q.x; %s[1] = q.y; }\n"
                      "%selse if (EVTC_IN_N(pc)) %s[0] = p[0];\n",
                   ind, dst, dst, ind, dst);
  else
    evtc_sb_printf(b, "%sif (EVTC_IN_N(pc + 1)) %s = *(const uint32_t *)p;\n%selse if (EVTC_IN_N(pc)) %s = p[0];\n", ind, dst,
                   ind, dst);
}

/* Before the tile's main loop: the block-prefetched registers' declarations, and each lane vector read whole
 * (pair offsets are even (load_vectorizes) and so is pc: each pair is aligned). */
static void evt_prefetch_begin(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  const int wm = evtc_cuda_gemm_atoms(&e->pl->cfg), nj = e->pl->cfg.tile_n / 8;
  const int groups = e->pl->cfg.tile_n / 64;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    const char *t = pair_f32(v) ? "float" : "uint32_t", *pair = pair_f32(v) ? "[2]" : "";
    if (block_pair(k, e->pl, i) && pair_stride(k, i))
      evtc_sb_printf(b, "%s%s pf%d[%d][%d][2]%s;\n", ind, t, i, nj, wm, pair);
    else if (block_pair(k, e->pl, i))
      evtc_sb_printf(b, "%s%s pf%d[%d]%s;\n", ind, t, i, nj, pair);
    if (!lane_vector(k, e->pl, i)) continue;
    char dst[32];
    snprintf(dst, sizeof dst, "pf%d[g]", i);
    evtc_sb_printf(b, "%s%s pf%d[%d]%s;\n#pragma unroll\n%sfor (int g = 0; g < %d; g++) {\n"
                      "%s  const long long pc = n0 + g * 64 + lane * 2;\n"
                      "%s  const %s *const p = a%d + (%lldLL + pc);\n",
                   ind, t, i, groups, pair, ind, groups, ind, ind, evtc_cpu_storage_ctype(v->dtype), v->arg,
                   (long long)v->offset);
    char in[64];
    snprintf(in, sizeof in, "%s  ", ind);
    emit_pair_zero(b, in, v, dst);
    emit_pair_fetch(b, in, v, dst);
    evtc_sb_printf(b, "%s}\n", ind);
  }
}

/* The block-prefetched loads of block j. */
static void evt_prefetch(evtc_sb *b, const char *ind, const char *j, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  const int wm = evtc_cuda_gemm_atoms(&e->pl->cfg);
  evtc_sb_printf(b, "%s{\n%s  const long long pc = n0 + (%s) * 8 + (lane & 3) * 2;\n", ind, ind, j);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!block_pair(k, e->pl, i)) continue;
    const int64_t sr = pair_stride(k, i);
    const char *st = evtc_cpu_storage_ctype(v->dtype);
    char dst[64];
    if (!sr) {
      snprintf(dst, sizeof dst, "pf%d[%s]", i, j);
      char in[64];
      snprintf(in, sizeof in, "%s  ", ind);
      emit_pair_zero(b, in, v, dst);
      evtc_sb_printf(b, "%s  {\n%s    const %s *const p = a%d + (%lldLL + pc);\n", ind, ind, st, v->arg, (long long)v->offset);
      snprintf(in, sizeof in, "%s    ", ind);
      emit_pair_fetch(b, in, v, dst);
      evtc_sb_printf(b, "%s  }\n", ind);
      continue;
    }
    snprintf(dst, sizeof dst, "pf%d[%s][pi][ph]", i, j);
    evtc_sb_printf(b, "%s#pragma unroll\n%s  for (int pi = 0; pi < %d; pi++)\n#pragma unroll\n%s    for (int ph = 0; ph < 2; ph++) {\n"
                      "%s      const long long pr = m0 + (cw * %d + pi) * 64 + warp * 16 + ph * 8 + (lane >> 2);\n",
                   ind, ind, wm, ind, ind, wm);
    char in[64];
    snprintf(in, sizeof in, "%s      ", ind);
    emit_pair_zero(b, in, v, dst);
    evtc_sb_printf(b, "%s      if (EVTC_IN_M(pr)) {\n"
                      "%s        const %s *const p = a%d + (%lldLL + ((long long)bat * dims.M + pr) * %lldLL + pc);\n",
                   ind, ind, st, v->arg, (long long)v->offset, (long long)sr);
    snprintf(in, sizeof in, "%s        ", ind);
    emit_pair_fetch(b, in, v, dst);
    evtc_sb_printf(b, "%s      }\n%s    }\n", ind, ind);
  }
  evtc_sb_printf(b, "%s}\n", ind);
}

/* lv<i>[2], the pair of values the element code reads, from the block-prefetched registers (indexed by idx). */
static void emit_pair_take(evtc_sb *b, const char *ind, const evtc_vnode *v, int i, const char *idx) {
  const char *st = evtc_cpu_storage_ctype(v->dtype);
  if (pair_f32(v))
    evtc_sb_printf(b, "%s%s lv%d[2] = {pf%d%s[0], pf%d%s[1]};\n", ind, st, i, i, idx, i, idx);
  else
    evtc_sb_printf(b, "%s%s lv%d[2] = {(%s)pf%d%s, (%s)(pf%d%s >> 16)};\n", ind, st, i, st, i, idx, st, i, idx);
}

/* The lane that holds block j's pair of a lane vector (evt_prefetch_begin's layout), as a C expression: read by
 * emit_lane_take and evt_acc_init. */
static const char LANE_OF_BLOCK[] = "((j & 7) << 2) | (lane & 3)";

/* lv<i>[2] of a lane vector for block j, from the lane that holds it (every lane runs every block). */
static void emit_lane_take(evtc_sb *b, const char *ind, const evtc_vnode *v, int i) {
  const char *st = evtc_cpu_storage_ctype(v->dtype);
  const char *src = LANE_OF_BLOCK;
  if (pair_f32(v))
    evtc_sb_printf(b, "%s%s lv%d[2] = {__shfl_sync(0xffffffffu, pf%d[j >> 3][0], %s), __shfl_sync(0xffffffffu, pf%d[j >> 3][1], %s)};\n",
                   ind, st, i, i, src, i, src);
  else
    evtc_sb_printf(b, "%sconst uint32_t lw%d = __shfl_sync(0xffffffffu, pf%d[j >> 3], %s);\n"
                      "%s%s lv%d[2] = {(%s)lw%d, (%s)(lw%d >> 16)};\n",
                   ind, i, i, src, ind, st, i, st, i, st, i);
}

/* The accumulators from the bias (choose_acc_bias): block j's pair shuffled from the lane that holds it (as
 * emit_lane_take), into both row halves of every atom.  Only the unit that holds the tile's first k-block (or its
 * one unit when K is 0) starts from the bias: another part's partial tile is added to that one's, so it starts
 * from zeros (its lane vector zeroed first). */
static void evt_acc_init(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const int i = e->pl->acc_bias_load - 1, wm = evtc_cuda_gemm_atoms(&e->pl->cfg), groups = e->pl->cfg.tile_n / 64;
  const evtc_vnode *v = &e->k->v[i];
  const char *src = LANE_OF_BLOCK;
  evtc_sb_printf(b, "%sif (kb0 > 0 || (kb1 == 0 && kblocks > 0))   /* not the tile's first part: no bias */\n"
                    "#pragma unroll\n%s  for (int g = 0; g < %d; g++) ", ind, ind, groups);
  char dst[32];
  snprintf(dst, sizeof dst, "pf%d[g]", i);
  emit_pair_zero(b, "", v, dst);
  evtc_sb_printf(b, "#pragma unroll\n%sfor (int j = 0; j < %d; j++) {\n", ind, e->pl->cfg.tile_n / 8);
  if (pair_f32(v)) {
    evtc_sb_printf(b, "%s  const float b0 = __shfl_sync(0xffffffffu, pf%d[j >> 3][0], %s);\n"
                      "%s  const float b1 = __shfl_sync(0xffffffffu, pf%d[j >> 3][1], %s);\n",
                   ind, i, src, ind, i, src);
  } else {
    evtc_sb_printf(b, "%s  const uint32_t bw = __shfl_sync(0xffffffffu, pf%d[j >> 3], %s);\n%s  const float b0 = ", ind, i,
                   src, ind);
    evtc_cpu_emit_from_storage(b, v->dtype, "(uint16_t)bw");
    evtc_sb_printf(b, ", b1 = ");
    evtc_cpu_emit_from_storage(b, v->dtype, "(uint16_t)(bw >> 16)");
    evtc_sb_printf(b, ";\n");
  }
  evtc_sb_printf(b, "#pragma unroll\n%s  for (int i = 0; i < %d; i++)\n"
                    "%s    acc[i][4 * j] = acc[i][4 * j + 2] = b0, acc[i][4 * j + 1] = acc[i][4 * j + 3] = b1;\n%s}\n",
                 ind, wm, ind, ind);
}

static void evt_pair_begin(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (is_pair_store(k, v)) evtc_sb_printf(b, "%s%s sv%d[2] = {0, 0};\n", ind, evtc_cpu_storage_ctype(v->dtype), i);
    if (block_pair(k, e->pl, i) && pair_stride(k, i)) emit_pair_take(b, ind, v, i, "[j][i][h]");
    if (e->pl->tma_load == i + 1) {
      /* the TMA tile: box j / 8 of 64 columns, the row's 128 bytes, 16-byte chunk j % 8 at (j % 8) ^ (row % 8) */
      const char *st = evtc_cpu_storage_ctype(v->dtype);
      evtc_sb_printf(b, "%sconst uint32_t xw%d = *(const uint32_t *)(aux_smem + (j >> 3) * %uu + (i * 64 + warp * 16 + h * 8 + "
                        "(lane >> 2)) * 128 + (((j & 7) ^ (lane >> 2)) << 4) + (lane & 3) * 4);\n"
                        "%s%s lv%d[2] = {(%s)xw%d, (%s)(xw%d >> 16)};\n",
                     ind, i, e->pl->tma_box_rows * 128u, ind, st, i, st, i, st, i);
    }
  }
}

/* Whether FULL RNG node v (dropout's mask) gets its Philox words per lane pair (evt_col_begin): a 4-element
 * Philox block is then 4 columns of one row (CC % 4 == 0). */
static bool rng_shared(const evtc_kernel *k, const evtc_vnode *v) {
  return v->kind == EVTC_V_RNG && v->cls == EVTC_VC_FULL && k->cols % 4 == 0;
}

/* The keep test of a Philox word x for drop probability p: (x >> 8) 2^-24 >= p, as the integer test
 * (x >> 8) >= ceil(p 2^24) (exact: p 2^24 is p scaled by a power of two). */
static void emit_keep(evtc_sb *b, const char *x, double p) {
  const double thr = ceil(p * 16777216.0);
  if (thr <= 0) evtc_sb_printf(b, "1");
  else if (thr > 16777215.0) evtc_sb_printf(b, "0");
  else evtc_sb_printf(b, "(%s >> 8) >= %.0fu", x, thr);
}

/* The warp's staged buffer of atom i (a C expression) in the current group, an offset in the hook's shared
 * memory: with one atom a tile, the group's parity picks one of two, so a group's writes overlap the previous
 * group's store. */
static void staged_buffer(evtc_sb *b, const evtc_cuda_evt_plan *pl, const char *i) {
  if (evtc_cuda_gemm_atoms(&pl->cfg) == 1) evtc_sb_printf(b, "warp * %uu + (sgc & 1u) * %uu", (unsigned)STAGED_WARP, (unsigned)STAGED_BOX);
  else evtc_sb_printf(b, "warp * %uu + (unsigned)(%s) * %uu", (unsigned)STAGED_WARP, i, (unsigned)STAGED_BOX);
}

/* Before the first block of a 64-column group: the buffers it writes are free once the stores that read them
 * have (the previous group's with two atoms, the one before it with one). */
static void staged_group_begin(evtc_sb *b, const char *ind, const evtc_cuda_evt_plan *pl) {
  evtc_sb_printf(b, "%sif (EVTC_FULL_TILE && (j & 7) == 0) {\n%s  if (lane == 0) evtc_bulk_wait_read%d();\n"
                    "%s  __syncwarp();\n%s}\n",
                 ind, ind, evtc_cuda_gemm_atoms(&pl->cfg) == 1 ? 1 : 0, ind, ind);
}

/* After the last block of a group: the writes fenced for the async proxy, the warp met, one TMA store per atom
 * (the warp's 16 rows x 64 columns at n0 + 64 g). */
static void staged_group_end(evtc_sb *b, const char *ind, const evtc_cuda_evt_plan *pl) {
  const int wm = evtc_cuda_gemm_atoms(&pl->cfg);
  evtc_sb_printf(b, "%sif (EVTC_FULL_TILE && (j & 7) == 7) {\n%s  evtc_fence_smem_async();\n%s  __syncwarp();\n"
                    "%s  if (lane == 0)\n#pragma unroll\n%s    for (int i = 0; i < %d; i++)\n"
                    "%s      evtc_tma_store(&tma_d, evtc_smem_u32(hook_smem) + ",
                 ind, ind, ind, ind, ind, wm, ind);
  staged_buffer(b, pl, "i");
  evtc_sb_printf(b, ", n0 + (j >> 3) * 64, m0 + (cw * %d + i) * 64 + warp * 16, bat);\n%s  sgc++;\n%s}\n", wm, ind,
                 ind);
}

/* Per 8-column block: ROW partials of the thread's two columns; the pairs of the lane vectors (row broadcasts such
 * as a bias), once for all the thread's rows; the dropout masks kp<i>[atom][h][e] of the
 * thread's elements.  A lane holds columns c0, c0 + 1 (words 2 (lane & 1) + e of their Philox block) in rows
 * h = 0, 1; its partner lane ^ 1 holds the other two words of the same two blocks.  So each lane evaluates
 * the block of row half lane & 1 only and trades two words with its partner: one Philox evaluation per four
 * elements. */
static void evt_col_begin(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  evtc_sb_printf(b, "%sconst long long cj = n0 + j * 8 + (lane & 3) * 2;\n%s(void)cj;\n", ind, ind);
  if (e->pl->staged_store) staged_group_begin(b, ind, e->pl);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_ROW)
      evtc_sb_printf(b, "%s%s rp%d[2] = {%s, %s};\n", ind, part_type(k, v), i, part_init(v), part_init(v));
    if (lane_vector(k, e->pl, i) && e->pl->acc_bias_load != i + 1) emit_lane_take(b, ind, v, i);
    else if (block_pair(k, e->pl, i) && !pair_stride(k, i)) emit_pair_take(b, ind, v, i, "[j]");
    if (!rng_shared(k, v)) continue;
    const int wm = evtc_cuda_gemm_atoms(&e->pl->cfg);
    evtc_sb_printf(b, "%suint8_t kp%d[%d][2][2];\n#pragma unroll\n%sfor (int ii = 0; ii < %d; ii++) {\n", ind, i, wm, ind,
                   wm);
    evtc_sb_printf(b, "%s  const int hl = lane & 1;\n"
                      "%s  const long long rr = (long long)bat * dims.M + m0 + (cw * %d + ii) * 64 + warp * 16 + hl * 8 + (lane >> 2);\n"
                      "%s  uint32_t w[4];\n"
                      "%s  evtc_philox4(%lluULL, step, (uint64_t)((rr * CC + cj) >> 2), w);\n"
                      "%s  const uint32_t own0 = hl ? w[2] : w[0], own1 = hl ? w[3] : w[1];\n"
                      "%s  const uint32_t got0 = __shfl_xor_sync(0xffffffffu, hl ? w[0] : w[2], 1);\n"
                      "%s  const uint32_t got1 = __shfl_xor_sync(0xffffffffu, hl ? w[1] : w[3], 1);\n",
                   ind, ind, wm, ind, ind, (unsigned long long)v->seed, ind, ind, ind);
    static const char *const words[2][2] = {{"own0", "own1"}, {"got0", "got1"}};
    for (int h = 0; h < 2; h++)
      for (int q = 0; q < 2; q++) {
        /* row half h: the lane's own block when h == hl, the partner's otherwise */
        evtc_sb_printf(b, "%s  kp%d[ii][%d][%d] = hl == %d ? (", ind, i, h, q, h);
        emit_keep(b, words[0][q], v->value);
        evtc_sb_printf(b, ") : (");
        emit_keep(b, words[1][q], v->value);
        evtc_sb_printf(b, ");\n");
      }
    evtc_sb_printf(b, "%s}\n", ind);
  }
}

/* The pair's stores: one 4- or 8-byte store of both columns when both are inside and the pair is aligned (CC even:
 * r CC + c0 is then even), else one store per column inside. */
static void evt_pair_end(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!is_pair_store(k, v)) continue;
    const char *st = evtc_cpu_storage_ctype(v->dtype);
    const bool half = v->dtype == EVTC_BF16 || v->dtype == EVTC_F16, f32 = v->dtype == EVTC_F32;
    if (e->pl->staged_store == i + 1 && !staged_stmatrix(e->pl)) {
      /* row r of the warp's box at 128 r, 16-byte chunk j % 8 at (j % 8) ^ (r % 8) (the buffer is 1024-byte
       * aligned): a store instruction's 8 rows x 4 lanes hit 32 different banks */
      evtc_sb_printf(b, "%sif (EVTC_FULL_TILE) {\n"
                        "%s  const unsigned row = h * 8 + (lane >> 2);\n"
                        "%s  *(uint32_t *)(hook_smem + ", ind, ind, ind);
      staged_buffer(b, e->pl, "i");
      evtc_sb_printf(b, " + row * 128u + ((((unsigned)j ^ row) & 7u) << 4) + (lane & 3) * 4) =\n"
                        "%s      (uint32_t)sv%d[0] | (uint32_t)sv%d[1] << 16;\n%s} else ",
                     ind, i, i, ind);
    } else if (e->pl->staged_store == i + 1) {
      /* the same layout, stmatrix (staged_stmatrix): the pairs of two blocks j - 1, j (j odd) in both row halves
       * are four 8 x 8 matrices, written by one stmatrix: lane l addresses row l % 8 of matrix l / 8 (row half
       * (l / 8) % 2, block j - 1 + l / 16), whose chunk (j - 1 + l / 16) ^ (l % 8) is (j & 6) ^ q, q = (l / 16) ^
       * (l % 8): the lane's fixed offset sst (evt_setup), XORed with (j & 6) << 4 -- one instruction for 16
       * 4-byte stores' addresses */
      evtc_sb_printf(b, "%sif (EVTC_FULL_TILE) {\n"
                        "%s  ss%d[i][h][j & 1] = (uint32_t)sv%d[0] | (uint32_t)sv%d[1] << 16;\n"
                        "%s  if ((j & 1) == 1 && h == 1)\n"
                        "%s    evtc_stsm_x4((evtc_smem_u32(hook_smem) + ",
                     ind, ind, i, i, i, ind, ind);
      staged_buffer(b, e->pl, "i");
      evtc_sb_printf(b, " + sst) ^ ((unsigned)(j & 6) << 4), ss%d[i][0][0], ss%d[i][1][0], ss%d[i][0][1],\n"
                        "%s                 ss%d[i][1][1]);\n%s} else ",
                     i, i, i, ind, i, ind);
    } else if (is_quad_store(k, v)) {
      /* after every fourth block the quad trades its words through shared memory: lane q writes its word of
       * block b at [quad][b][q], then reads [quad][q][0..3] -- the four lanes' words of block q, in column
       * order -- and stores them as one 16-byte unit; the warp syncs before the read and after it (the next
       * exchange rewrites the buffer).  On sm_90a one stmatrix writes the four words a lane: its matrix b is
       * block b of the warp's 8 rows, lane l giving the address of row l % 8 of matrix l / 8 (the same bytes as
       * the four 4-byte stores, one instruction instead of four) */
      evtc_sb_printf(b,
        "%sif (EVTC_FULL_TILE) {\n"
        "%s  sq%d[i][h][j & 3] = (uint32_t)sv%d[0] | (uint32_t)sv%d[1] << 16;\n"
        "%s  if ((j & 3) == 3) {\n"
        "%s    const int q = lane & 3;\n"
        "%s    unsigned char *const xq = hook_smem + %d + warp * %d + (lane >> 2) * %d;\n",
        ind, ind, i, i, i, ind, ind, ind, row_smem_offset(k, e->pl, k->n_v), QUAD_WARP, QUAD_STRIDE);
      if (e->pl->cfg.sm80)
        evtc_sb_printf(b, "#pragma unroll\n"
                          "%s    for (int bq = 0; bq < 4; bq++) *(uint32_t *)(xq + bq * 16 + q * 4) = sq%d[i][h][bq];\n",
                       ind, i);
      else
        evtc_sb_printf(b, "%s    evtc_stsm_x4(evtc_smem_u32(hook_smem + %d + warp * %d + (lane & 7) * %d + (lane >> 3) * 16),\n"
                          "%s                 sq%d[i][h][0], sq%d[i][h][1], sq%d[i][h][2], sq%d[i][h][3]);\n",
                       ind, row_smem_offset(k, e->pl, k->n_v), QUAD_WARP, QUAD_STRIDE, ind, i, i, i, i);
      evtc_sb_printf(b,
        "%s    __syncwarp();\n"
        "%s    const evtc_u32x4 o = *(const evtc_u32x4 *)(xq + q * 16);\n"
        "%s    __syncwarp();\n"
        "%s    *(evtc_u32x4 *)(a%d + rg * CC + n0 + (j - 3 + q) * 8) = o;\n"
        "%s  }\n"
        "%s} else ",
        ind, ind, ind, ind, v->arg, ind, ind);
    } else {
      evtc_sb_printf(b, "%s", ind);
    }
    evtc_sb_printf(b, "if (EVTC_IN_M(r)) {\n%s  %s *const p = a%d + rg * CC + c0;\n", ind, st, v->arg);
    if ((half || f32) && k->cols % 2 == 0) {
      if (half)
        evtc_sb_printf(b, "%s  if (EVTC_IN_N(c0 + 1)) *(uint32_t *)p = (uint32_t)sv%d[0] | (uint32_t)sv%d[1] << 16;\n",
                       ind, i, i);
      else
        evtc_sb_printf(b, "%s  if (EVTC_IN_N(c0 + 1)) { evtc_f32x2 q; q.x = sv%d[0]; q.y = sv%d[1]; *(evtc_f32x2 *)p = q; }\n",
                       ind, i, i);
      evtc_sb_printf(b, "%s  else if (EVTC_IN_N(c0)) p[0] = sv%d[0];\n", ind, i);
    } else {
      evtc_sb_printf(b, "%s  if (EVTC_IN_N(c0)) p[0] = sv%d[0];\n%s  if (EVTC_IN_N(c0 + 1)) p[1] = sv%d[1];\n", ind, i,
                     ind, i);
    }
    evtc_sb_printf(b, "%s}\n", ind);
  }
}

/* A packed epilogue's pair of columns (choose_packed): node i as the bf16x2 word pw<i>, the stores' halves into
 * sv<i>[2] (evt_pair_end stores what is inside the bounds). */
static void evt_pair(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  evtc_sb_printf(b, "%s{\n", ind);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    const int *a = v->args;
    switch (v->kind) {
      case EVTC_V_ACC:
        evtc_sb_printf(b, "%s  const uint32_t pw%d = evtc_pack_bf16x2(acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);\n",
                       ind, i);
        break;
      case EVTC_V_IMM: {
        const uint32_t h = evtc_double_to_bf16(v->value);
        evtc_sb_printf(b, "%s  const uint32_t pw%d = 0x%08xu;   /* %.9g */\n", ind, i, h << 16 | h, v->value);
        break;
      }
      case EVTC_V_LOAD:
        if (lane_vector(k, e->pl, i)) evtc_sb_printf(b, "%s  const uint32_t pw%d = lw%d;\n", ind, i, i);
        else evtc_sb_printf(b, "%s  const uint32_t pw%d = pf%d[j][i][h];\n", ind, i, i);
        break;
      case EVTC_V_STORE:
        evtc_sb_printf(b, "%s  sv%d[0] = (uint16_t)pw%d;\n%s  sv%d[1] = (uint16_t)(pw%d >> 16);\n", ind, i, a[0], ind, i,
                       a[0]);
        break;
      default:   /* COMPUTE (packs) */
        evtc_sb_printf(b, "%s  const uint32_t pw%d = evtc_%s_bf16x2(pw%d", ind, i, packed_op(v->op), a[0]);
        for (int q = 1; q < v->n_args; q++) evtc_sb_printf(b, ", pw%d", a[q]);
        evtc_sb_printf(b, ");\n");
        break;
    }
  }
  evtc_sb_printf(b, "%s}\n", ind);
}

static void evt_element(evtc_sb *b, const char *ind, const char *acc, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  char in[64];
  snprintf(in, sizeof in, "%s  ", ind);
  evtc_sb_printf(b, "%s{\n%s  const int64_t r = rg;\n", ind, ind);
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = in, .acc_expr = acc, .storage = evt_storage};
  evtc_cuda_factors fx;
  evtc_cuda_factors_plan(&fx, k, e->pl->acc_bias - 1);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (e->pl->acc_bias_load == i + 1) continue;   /* the bias the accumulators hold: nothing else reads it */
    if (evtc_cuda_factors_emit(b, in, k, &fx, i)) continue;
    if (v->kind == EVTC_V_STORE) {
      if (is_pair_store(k, v)) evtc_cpu_emit_store(&x, i);
    } else if (rng_shared(k, v)) {
      evtc_sb_printf(b, "%suint8_t v%d = kp%d[i][h][e];\n", in, i, i);
    } else if (v->kind == EVTC_V_REDUCE) {
      char p[32], val[48];
      snprintf(p, sizeof p, v->cls == EVTC_VC_COL ? "rp%d[i][h]" : v->cls == EVTC_VC_ROW ? "rp%d[e]" : "rp%d", i);
      snprintf(val, sizeof val, "(%s)v%d", part_type(k, v), v->args[0]);
      emit_comb(b, in, v, p, val);
    } else {
      evtc_cuda_emit_value(&x, i);
    }
  }
  evtc_cuda_factors_free(&fx);
  evtc_sb_printf(b, "%s}\n", ind);
}

static void evt_col_end(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  static const int column_lanes[] = {4, 8, 16, 0};
  if (e->pl->staged_store) staged_group_end(b, ind, e->pl);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls != EVTC_VC_ROW) continue;
    for (int q = 0; q < 2; q++) {
      char p[24];
      snprintf(p, sizeof p, "rp%d[%d]", i, q);
      emit_shuffles(b, ind, v, p, column_lanes);
      evtc_sb_printf(b, "%sif (lane < 4) ((%s *)(hook_smem + %d))[warp * %d + j * 8 + lane * 2 + %d] = rp%d[%d];\n", ind,
                     part_type(k, v), row_smem_offset(k, e->pl, i), e->pl->cfg.tile_n, q, i, q);
    }
  }
}

static void evt_tile_end(evtc_sb *b, const char *ind, void *ctx) {
  const evt_ctx *e = ctx;
  const evtc_kernel *k = e->k;
  const int wm = evtc_cuda_gemm_atoms(&e->pl->cfg);
  static const int row_lanes[] = {1, 2, 0}, all_lanes[] = {16, 8, 4, 2, 1, 0};
  if (evtc_kernel_has_reduce(k, EVTC_VC_ROW)) {
    /* the 4 warps' partials of each column, combined in warp order: one slot per (batch, tile row, warpgroup) */
    evtc_sb_printf(b, "%sevtc_wg_sync(1 + wg);\n%sfor (int q = threadIdx.x & 127; q < %d; q += 128)\n%s  if (n0 + q < dims.N) {\n",
                   ind, ind, e->pl->cfg.tile_n, ind);
    for (int i = 0; i < k->n_v; i++) {
      const evtc_vnode *v = &k->v[i];
      if (v->kind != EVTC_V_REDUCE || v->cls != EVTC_VC_ROW) continue;
      const int tn = e->pl->cfg.tile_n;
      evtc_sb_printf(b, "%s    {\n%s      const %s *const w = (const %s *)(hook_smem + %d);\n"
                        "%s      double s = w[q];\n",
                     ind, ind, part_type(k, v), part_type(k, v), row_smem_offset(k, e->pl, i), ind);
      char in[64];
      snprintf(in, sizeof in, "%s      ", ind);
      for (int w = 1; w < 4; w++) {
        char x[32];
        snprintf(x, sizeof x, "(double)w[%d + q]", w * tn);
        emit_comb(b, in, v, "s", x);
      }
      evtc_sb_printf(b, "%s      red[%lldLL + (((long long)bat * %lld + m0 / %d) * %d + cw) * CC + n0 + q] = s;\n%s    }\n",
                     ind, (long long)red_offset(k, e->pl, i), (long long)e->pl->tiles_m, e->pl->cfg.tile_m,
                     evtc_cuda_gemm_row_groups(&e->pl->cfg), ind);
    }
    evtc_sb_printf(b, "%s  }\n%sevtc_wg_sync(1 + wg);   /* the partials are read before the next tile rewrites them */\n",
                   ind, ind);
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE) continue;
    long long off = (long long)red_offset(k, e->pl, i);
    char p[32];
    if (v->cls == EVTC_VC_COL) {
      evtc_sb_printf(b, "%s#pragma unroll\n%sfor (int i = 0; i < %d; i++) {\n#pragma unroll\n%s  for (int h = 0; h < 2; h++) {\n",
                     ind, ind, wm, ind);
      char in[64];
      snprintf(in, sizeof in, "%s    ", ind);
      snprintf(p, sizeof p, "rp%d[i][h]", i);
      emit_shuffles(b, in, v, p, row_lanes);
      evtc_sb_printf(b, "%sconst long long r = m0 + (cw * %d + i) * 64 + warp * 16 + h * 8 + (lane >> 2);\n"
                        "%sif ((lane & 3) == 0 && r < dims.M)\n"
                        "%s  red[%lldLL + (long long)(n0 / %d) * %lldLL + (long long)bat * dims.M + r] = (double)rp%d[i][h];\n"
                        "%s  }\n%s}\n",
                     in, wm, in, in, off, e->pl->cfg.tile_n, (long long)k->rows, i, ind, ind);
    } else if (v->cls == EVTC_VC_SCALAR) {
      snprintf(p, sizeof p, "rp%d", i);
      emit_shuffles(b, ind, v, p, all_lanes);
      evtc_sb_printf(b, "%sif (lane == 0) red[%lldLL + ((long long)t * %d + cw) * 4 + warp] = (double)rp%d;\n", ind, off,
                     evtc_cuda_gemm_row_groups(&e->pl->cfg), i);
    }
  }
}

/* NAME_fin: each result combined over its slots in slot order, finished and stored. */
static void emit_fin(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_evt_plan *pl) {
  evtc_cuda_emit_head(b, k, "_fin", FIN_THREADS);
  evtc_sb_printf(b, "  const int64_t g = (int64_t)blockIdx.x * %d + threadIdx.x, CC = %lldLL;\n  (void)g; (void)CC;\n"
                    "  const double *red = (const double *)scratch;\n  __shared__ double evtc_red[32];\n  (void)evtc_red;\n"
                    "  __shared__ double evtc_colred[%d][32];\n  (void)evtc_colred;\n",
                 FIN_THREADS, (long long)k->cols, FIN_WARPS);
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = "      "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE) continue;
    const int op = red_op(v->op);
    const long long off = (long long)red_offset(k, pl, i), slots = (long long)evtc_cuda_evt_slots(pl, v->cls);
    const char *init = v->op == EVTC_OP_REDUCE_MAX ? "-(double)INFINITY" : v->op == EVTC_OP_REDUCE_MIN ? "(double)INFINITY" : "0.0";
    if (v->cls == EVTC_VC_SCALAR)
      evtc_sb_printf(b, "  if (blockIdx.x == 0) {\n    double acc = %s;\n"
                        "    for (int64_t s = threadIdx.x; s < %lldLL; s += %d) acc = evtc_comb<%d>(acc, red[%lldLL + s]);\n"
                        "    acc = evtc_block_reduce<%d>(acc, evtc_red);\n    if (threadIdx.x == 0) {\n",
                     init, slots, FIN_THREADS, op, off, op);
    else if (v->cls == EVTC_VC_ROW)   /* FIN_COLS columns a block: warp w takes slots w, w + FIN_WARPS, ... */
      evtc_sb_printf(b, "  if (blockIdx.x < %lldLL) {\n"
                        "    const int64_t cl = (int64_t)blockIdx.x * %d + (threadIdx.x & 31);\n"
                        "    double acc = %s;\n"
                        "    if (cl < CC)\n"
                        "      for (int64_t s = threadIdx.x >> 5; s < %lldLL; s += %d) acc = evtc_comb<%d>(acc, red[%lldLL + s * CC + cl]);\n"
                        "    evtc_colred[threadIdx.x >> 5][threadIdx.x & 31] = acc;\n"
                        "    __syncthreads();\n"
                        "    if (threadIdx.x < 32 && cl < CC) {\n"
                        "      const int64_t c = cl;\n"
                        "      acc = evtc_colred[0][threadIdx.x];\n"
                        "      for (int w = 1; w < %d; w++) acc = evtc_comb<%d>(acc, evtc_colred[w][threadIdx.x]);\n"
                        "    {\n",
                     (long long)fin_blocks(k->cols, FIN_COLS), FIN_COLS, init, slots, FIN_WARPS, op, off, FIN_WARPS, op);
    else
      evtc_sb_printf(b, "  if (g < %lldLL) {\n    const int64_t %s = g;\n    double acc = %s;\n"
                        "    for (int64_t s = 0; s < %lldLL; s++) acc = evtc_comb<%d>(acc, red[%lldLL + s * %lldLL + g]);\n"
                        "    {\n",
                     (long long)(v->cls == EVTC_VC_ROW ? k->cols : k->rows), v->cls == EVTC_VC_ROW ? "c" : "r", init,
                     slots, op, off, (long long)(v->cls == EVTC_VC_ROW ? k->cols : k->rows));
    const char *t = evtc_cpu_ctype(v->dtype);
    if (v->op == EVTC_OP_REDUCE_MEAN) evtc_sb_printf(b, "      %s v%d = (%s)(acc / %.17g);\n", t, i, t, v->value);
    else evtc_sb_printf(b, "      %s v%d = (%s)acc;\n", t, i, t);
    for (int j = i + 1; j < k->n_v; j++)
      if (k->v[j].kind == EVTC_V_STORE && k->v[j].args[0] == i) evtc_cpu_emit_store(&x, j);
    if (v->cls == EVTC_VC_ROW)   /* the block's shared partials are free again for the next ROW result */
      evtc_sb_printf(b, "    }\n    }\n    __syncthreads();\n  }\n");
    else
      evtc_sb_printf(b, "    }\n  }\n");
  }
  evtc_sb_printf(b, "}\n\n");
}

void evtc_cuda_emit_evt(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_evt_plan *pl) {
  if (pl->builtin_store) {
    evtc_cuda_gemm_emit(b, k->name, &pl->cfg, &pl->var, NULL);
    return;
  }
  evt_ctx e = {.k = k, .pl = pl};
  evtc_cuda_gemm_epilogue epi = {.emit_params = evt_params, .emit_setup = evt_setup, .emit_element = evt_element,
                                 .ctx = &e, .emit_tile_begin = evt_tile_begin, .emit_col_begin = evt_col_begin,
                                 .emit_pair_begin = evt_pair_begin, .emit_pair_end = evt_pair_end,
                                 .emit_col_end = evt_col_end, .emit_tile_end = evt_tile_end,
                                 .emit_prefetch_begin = evt_prefetch_begin, .emit_prefetch = evt_prefetch,
                                 .prefetch_blocks = prefetch_distance(k, pl, evtc_cuda_gemm_atoms(&pl->cfg)),
                                 .aux_smem = pl->tma_load ? pl->aux_bytes : 0,
                                 .emit_tile_loads = pl->tma_load ? evt_tile_loads : NULL, .emit_tile_skip = evt_tile_skip,
                                 .bulk_stores = pl->staged_store > 0,
                                 .emit_acc_init = pl->acc_bias ? evt_acc_init : NULL,
                                 .emit_pair = pl->packed ? evt_pair : NULL};
  evtc_cuda_gemm_emit(b, k->name, &pl->cfg, &pl->var, &epi);
  if (pl->has_fin) emit_fin(b, k, pl);
}
