/* cuda_emit_rows.c -- the reduce-then-apply template in CUDA C (AStitch's
 * row schemes).
 *
 * A row is processed by one warp when it has at most 512 columns (8 rows
 * per 256-thread block, reductions by warp shuffles only) and by one block
 * otherwise (up to 1024 threads, about 8 columns per thread; reductions by
 * warp shuffles and then 32 doubles of shared memory).  Thread `lane` owns
 * columns c = lane + j*threads, so every access of a warp is coalesced.
 * Blocks stride over the rows in one wave.  The kernel runs the kernel
 * IR's phases per row like the CPU template: a pass over the row's columns
 * computes what the phase's reductions and stores need; a kernel input
 * read in several passes is loaded from global memory once and kept --
 * in registers when a thread owns at most 16 of its columns, else in
 * shared memory when the row fits (a 32000-column f32 row is 125 KiB) --
 * so a softmax or layernorm reads its input once and writes its output
 * once.  A shared-memory row leaves room for one block per SM; with
 * EVTC_CUDA_SMEM_ROWS=0 in the environment such rows are re-read from
 * global memory (mostly L2 hits) instead, for measuring both.  All
 * accumulation is in double.
 *
 * Reductions over rows (ROW) and over everything (SCALAR) go to partial
 * slots in scratch, one per row slot (a warp or a block), in registers
 * while the columns are few; a second kernel NAME_fin combines the slots
 * in a fixed order and stores the results, so runs are deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "runtime/program_internal.h"

static bool is_value(const evtc_vnode *v) { return v->kind != EVTC_V_REDUCE && v->kind != EVTC_V_STORE; }
static int red_op(evtc_op op) { return op == EVTC_OP_REDUCE_MAX ? 1 : op == EVTC_OP_REDUCE_MIN ? 2 : 0; }
static const char *red_init(evtc_op op) {
  return op == EVTC_OP_REDUCE_MAX ? "-(double)INFINITY" : op == EVTC_OP_REDUCE_MIN ? "(double)INFINITY" : "0.0";
}
static const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;

static bool reduce_in_pass(const evtc_kernel *k, int i, int p) {
  const evtc_vnode *v = &k->v[i];
  return v->kind == EVTC_V_REDUCE && v->phase == p + 1 && ((wide >> k->v[v->args[0]].cls) & 1);
}
static bool store_in_pass(const evtc_kernel *k, int i, int p) {
  const evtc_vnode *v = &k->v[i];
  return v->kind == EVTC_V_STORE && v->phase == p && ((wide >> v->cls) & 1) && k->v[v->args[0]].kind != EVTC_V_REDUCE;
}

/* Marks what pass p computes; false when the pass has no work. */
static bool pass_needs(const evtc_kernel *k, int p, bool *need) {
  memset(need, 0, sizeof(bool) * (size_t)k->n_v);
  bool any = false;
  for (int i = 0; i < k->n_v; i++)
    if (reduce_in_pass(k, i, p) || store_in_pass(k, i, p)) {
      any = true;
      evtc_cpu_mark_needed(k, k->v[i].args[0], wide, need);
    }
  return any;
}

/* first[i]: the first pass loading FULL load i when a later pass loads it too, else -1. */
static int64_t cached_loads(const evtc_kernel *k, int *first) {
  bool *need = calloc((size_t)k->n_v + 1, sizeof(bool));
  int *uses = calloc((size_t)k->n_v + 1, sizeof(int));
  for (int i = 0; i < k->n_v; i++) first[i] = -1;
  for (int p = 0; p < k->n_phases; p++) {
    if (!pass_needs(k, p, need)) continue;
    for (int i = 0; i < k->n_v; i++)
      if (need[i] && k->v[i].kind == EVTC_V_LOAD && k->v[i].cls == EVTC_VC_FULL) {
        if (uses[i]++ == 0) first[i] = p;
      }
  }
  int64_t bytes = 0;
  for (int i = 0; i < k->n_v; i++) {
    if (uses[i] < 2) first[i] = -1;
    else bytes += (k->cols * (int64_t)evtc_buffer_elem_size(k->v[i].dtype) + 15) / 16 * 16;
  }
  free(need);
  free(uses);
  return bytes;
}

evtc_cuda_rows_plan evtc_cuda_rows_plan_of(const evtc_kernel *k, int sm_count, int smem_max) {
  evtc_cuda_rows_plan pl = {0};
  int64_t C = k->cols, R = k->rows;
  int n_row = 0, n_scalar = 0;
  for (int i = 0; i < k->n_v; i++) {
    if (k->v[i].kind != EVTC_V_REDUCE) continue;
    n_row += k->v[i].cls == EVTC_VC_ROW;
    n_scalar += k->v[i].cls == EVTC_VC_SCALAR;
  }
  /* ROW reductions keep a partial row per slot: wider blocks, fewer slots */
  int64_t cols_per_thread = n_row ? 2 : 8;
  if (C <= 512) {
    pl.threads = 32;
    pl.rows_per_block = 8;
  } else {
    int64_t t = ((C + cols_per_thread - 1) / cols_per_thread + 31) / 32 * 32;
    pl.threads = (int)(t > 1024 ? 1024 : t);
    pl.rows_per_block = 1;
  }
  int64_t per = (C + pl.threads - 1) / pl.threads;
  pl.per_thread = (int)(per > 1 << 30 ? 1 << 30 : per);
  pl.unrolled = per <= 32;
  int *first = malloc(sizeof(int) * ((size_t)k->n_v + 1));
  int64_t bytes = cached_loads(k, first);
  free(first);
  const char *smem_env = getenv("EVTC_CUDA_SMEM_ROWS");   /* "0": re-read long rows instead of shared memory */
  bool smem_ok = !(smem_env && strcmp(smem_env, "0") == 0);
  if (bytes > 0 && pl.unrolled && per <= 16) pl.cache = 1;
  else if (smem_ok && bytes > 0 && pl.rows_per_block == 1 && bytes <= smem_max - 1024) {
    pl.cache = 2;
    pl.smem = (unsigned)bytes;
  }
  pl.row_partials_in_regs = pl.unrolled && per * n_row <= 16;
  int64_t per_sm = 2048 / (pl.threads * pl.rows_per_block);
  if (pl.cache == 2) per_sm = 1;
  if (n_row && pl.rows_per_block > 1) per_sm = 2;
  int64_t want = (R + pl.rows_per_block - 1) / pl.rows_per_block, wave = (int64_t)sm_count * (per_sm > 0 ? per_sm : 1);
  pl.grid = (unsigned)(want < wave ? want : wave);
  if (pl.grid == 0) pl.grid = 1;
  pl.slots = (int64_t)pl.grid * pl.rows_per_block;
  pl.scratch_doubles = pl.slots * (C * n_row + n_scalar);
  pl.has_fin = n_row + n_scalar > 0;
  pl.fin_grid = n_row ? (unsigned)((C + 255) / 256) : 1;
  return pl;
}

int64_t evtc_cuda_reduce_offset(const evtc_kernel *k, const evtc_cuda_rows_plan *pl, int i) {
  int64_t off = 0;
  for (int j = 0; j < i; j++)
    if (k->v[j].kind == EVTC_V_REDUCE && k->v[j].cls != EVTC_VC_COL)
      off += pl->slots * (k->v[j].cls == EVTC_VC_ROW ? k->cols : 1);
  return off;
}

/* "T v<i> = (T)(acc [/ count]);" */
static void emit_finish(evtc_sb *b, const char *ind, const evtc_vnode *v, int i, const char *acc) {
  const char *t = evtc_cpu_ctype(v->dtype);
  if (v->op == EVTC_OP_REDUCE_MEAN) evtc_sb_printf(b, "%s%s v%d = (%s)(%s / %.17g);\n", ind, t, i, t, acc, v->value);
  else evtc_sb_printf(b, "%s%s v%d = (%s)(%s);\n", ind, t, i, t, acc);
}

typedef struct rows_ctx {
  const evtc_kernel *k;
  const evtc_cuda_rows_plan *pl;
  evtc_sb *b;
  int *first;               /* cached loads: first pass that loads them */
  bool *need;
} rows_ctx;

static void emit_phase_start(const rows_ctx *x, int p) {
  const evtc_kernel *k = x->k;
  evtc_cpu_vctx vx = {.k = k, .sb = x->b, .ind = "    "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->phase != p) continue;
    if (is_value(v) && v->cls == EVTC_VC_COL) evtc_cuda_emit_value(&vx, i);
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_COL) {
      evtc_sb_printf(x->b, "    if (lane == 0)\n");
      vx.ind = "      ";
      evtc_cpu_emit_store(&vx, i);
      vx.ind = "    ";
    }
    if (v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].cls == EVTC_VC_COL)
      evtc_sb_printf(x->b, "    if (lane == 0) ps%d = evtc_comb<%d>(ps%d, (double)v%d);\n", i, red_op(v->op), i,
                     v->args[0]);
  }
}

/* A cached load in pass p: from memory (and into the cache) or from the cache. */
static void emit_cached_load(const rows_ctx *x, const evtc_cpu_vctx *vx, int i, int p) {
  const evtc_vnode *v = &x->k->v[i];
  const char *t = evtc_cpu_ctype(v->dtype);
  const char *slot = x->pl->cache == 1 ? "cL%d[j]" : "sL%d[c]";
  char ref[32];
  snprintf(ref, sizeof ref, slot, i);
  if (p == x->first[i]) {
    evtc_cuda_emit_value(vx, i);
    evtc_sb_printf(x->b, "%s%s = v%d;\n", vx->ind, ref, i);
  } else {
    evtc_sb_printf(x->b, "%s%s v%d = %s;\n", vx->ind, t, i, ref);
  }
}

static void emit_pass(const rows_ctx *x, int p) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  evtc_sb *b = x->b;
  if (!pass_needs(k, p, x->need)) return;
  for (int i = 0; i < k->n_v; i++)
    if (reduce_in_pass(k, i, p) && k->v[i].cls == EVTC_VC_COL)
      evtc_sb_printf(b, "    double acc%d = %s;\n", i, red_init(k->v[i].op));
  if (pl->unrolled)
    evtc_sb_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n      const int64_t c = lane + (int64_t)j * %d;\n"
                      "      if (c < CC) {\n", pl->per_thread, pl->threads);
  else
    evtc_sb_printf(b, "    for (int64_t c = lane; c < CC; c += %d) {\n      {\n", pl->threads);
  evtc_cpu_vctx vx = {.k = k, .sb = b, .ind = "        "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (x->need[i] && is_value(v)) {
      if (x->first[i] >= 0 && pl->cache) emit_cached_load(x, &vx, i, p);
      else evtc_cuda_emit_value(&vx, i);
    }
    if (reduce_in_pass(k, i, p)) {
      int op = red_op(v->op), a = v->args[0];
      if (v->cls == EVTC_VC_COL) evtc_sb_printf(b, "        acc%d = evtc_comb<%d>(acc%d, (double)v%d);\n", i, op, i, a);
      else if (v->cls == EVTC_VC_SCALAR) evtc_sb_printf(b, "        ps%d = evtc_comb<%d>(ps%d, (double)v%d);\n", i, op, i, a);
      else if (pl->row_partials_in_regs)
        evtc_sb_printf(b, "        pr%d[j] = evtc_comb<%d>(pr%d[j], (double)v%d);\n", i, op, i, a);
      else evtc_sb_printf(b, "        pr%d[c] = evtc_comb<%d>(pr%d[c], (double)v%d);\n", i, op, i, a);
    }
    if (store_in_pass(k, i, p)) evtc_cpu_emit_store(&vx, i);
  }
  evtc_sb_printf(b, "      }\n    }\n");
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!(reduce_in_pass(k, i, p) && v->cls == EVTC_VC_COL)) continue;
    if (pl->rows_per_block == 1)
      evtc_sb_printf(b, "    acc%d = evtc_block_reduce<%d>(acc%d, evtc_red);\n", i, red_op(v->op), i);
    else evtc_sb_printf(b, "    acc%d = evtc_warp_reduce<%d>(acc%d);\n", i, red_op(v->op), i);
    char acc[32];
    snprintf(acc, sizeof acc, "acc%d", i);
    emit_finish(b, "    ", v, i, acc);
  }
}

/* NAME_fin: combines the ROW / SCALAR partial slots in order and stores them. */
static void emit_fin(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  evtc_cuda_emit_head(b, k, "_fin", 256);
  evtc_sb_printf(b, "  const int64_t CC = %lldLL, c = (int64_t)blockIdx.x * 256 + threadIdx.x;\n  (void)CC;\n"
                    "  const double *red = (const double *)scratch;\n  __shared__ double evtc_red[32];\n",
                 (long long)k->cols);
  evtc_cpu_vctx vx = {.k = k, .sb = b, .ind = "    "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    int op = red_op(v->op);
    long long off = (long long)evtc_cuda_reduce_offset(k, pl, i), slots = (long long)pl->slots;
    if (v->cls == EVTC_VC_ROW)
      evtc_sb_printf(b, "  if (c < CC) {\n    double acc = %s;\n    for (int64_t s = 0; s < %lldLL; s++)\n"
                        "      acc = evtc_comb<%d>(acc, red[%lldLL + s * CC + c]);\n",
                     red_init(v->op), slots, op, off);
    else
      evtc_sb_printf(b, "  if (blockIdx.x == 0) {\n    double acc = %s;\n    for (int64_t s = threadIdx.x; s < %lldLL; s += 256)\n"
                        "      acc = evtc_comb<%d>(acc, red[%lldLL + s]);\n    acc = evtc_block_reduce<%d>(acc, evtc_red);\n"
                        "    if (threadIdx.x == 0) {\n",
                     red_init(v->op), slots, op, off, op);
    emit_finish(b, "    ", v, i, "acc");
    for (int j = i + 1; j < k->n_v; j++)
      if (k->v[j].kind == EVTC_V_STORE && k->v[j].args[0] == i) evtc_cpu_emit_store(&vx, j);
    evtc_sb_printf(b, v->cls == EVTC_VC_ROW ? "  }\n" : "    }\n  }\n");
  }
  evtc_sb_printf(b, "}\n\n");
}

void evtc_cuda_emit_rows(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  const int nt = pl->threads, rpb = pl->rows_per_block;
  evtc_cuda_emit_head(b, k, "", nt * rpb);
  evtc_sb_printf(b, "  const int64_t RR = %lldLL, CC = %lldLL;\n  (void)RR; (void)CC;\n"
                    "  double *red = (double *)scratch;\n  (void)red;\n"
                    "  const int lane = threadIdx.x %% %d;\n  const int64_t slot = (int64_t)blockIdx.x * %d + threadIdx.x / %d;\n",
                 (long long)k->rows, (long long)k->cols, nt, rpb, nt);
  if (rpb == 1) evtc_sb_printf(b, "  __shared__ double evtc_red[32];\n");
  rows_ctx x = {.k = k, .pl = pl, .b = b};
  x.first = malloc(sizeof(int) * ((size_t)k->n_v + 1));
  x.need = calloc((size_t)k->n_v + 1, sizeof(bool));
  cached_loads(k, x.first);
  if (pl->cache == 2) {
    evtc_sb_printf(b, "  extern __shared__ __align__(16) unsigned char evtc_smem[];\n");
    int64_t off = 0;
    for (int i = 0; i < k->n_v; i++) {
      if (x.first[i] < 0) continue;
      const char *t = evtc_cpu_ctype(k->v[i].dtype);
      evtc_sb_printf(b, "  %s *sL%d = (%s *)(evtc_smem + %lld);\n", t, i, t, (long long)off);
      off += (k->cols * (int64_t)evtc_buffer_elem_size(k->v[i].dtype) + 15) / 16 * 16;
    }
  }
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (is_value(v) && v->cls == EVTC_VC_SCALAR) evtc_cuda_emit_value(&top, i);
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].kind != EVTC_V_REDUCE) {
      evtc_sb_printf(b, "  if (blockIdx.x == 0 && threadIdx.x == 0)\n");
      top.ind = "    ";
      evtc_cpu_emit_store(&top, i);
      top.ind = "  ";
    }
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    if (v->cls == EVTC_VC_SCALAR) evtc_sb_printf(b, "  double ps%d = %s;\n", i, red_init(v->op));
    else if (pl->row_partials_in_regs)
      evtc_sb_printf(b, "  double pr%d[%d];\n#pragma unroll\n  for (int j = 0; j < %d; j++) pr%d[j] = %s;\n", i,
                     pl->per_thread, pl->per_thread, i, red_init(v->op));
    else
      evtc_sb_printf(b, "  double *pr%d = red + %lldLL + slot * CC;\n  for (int64_t c = lane; c < CC; c += %d) pr%d[c] = %s;\n",
                     i, (long long)evtc_cuda_reduce_offset(k, pl, i), nt, i, red_init(v->op));
  }
  evtc_sb_printf(b, "  for (int64_t r = slot; r < RR; r += (int64_t)gridDim.x * %d) {\n", rpb);
  if (pl->cache == 1)
    for (int i = 0; i < k->n_v; i++)
      if (x.first[i] >= 0) evtc_sb_printf(b, "    %s cL%d[%d];\n", evtc_cpu_ctype(k->v[i].dtype), i, pl->per_thread);
  for (int p = 0; p <= k->n_phases; p++) {
    emit_phase_start(&x, p);
    if (p < k->n_phases) emit_pass(&x, p);
  }
  evtc_sb_printf(b, "  }\n");
  for (int i = 0; i < k->n_v; i++) {               /* partial slots out */
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    long long off = (long long)evtc_cuda_reduce_offset(k, pl, i);
    if (v->cls == EVTC_VC_ROW && pl->row_partials_in_regs)
      evtc_sb_printf(b, "#pragma unroll\n  for (int j = 0; j < %d; j++) {\n    const int64_t c = lane + (int64_t)j * %d;\n"
                        "    if (c < CC) red[%lldLL + slot * CC + c] = pr%d[j];\n  }\n",
                     pl->per_thread, nt, off, i);
    else if (v->cls == EVTC_VC_SCALAR && rpb == 1)
      evtc_sb_printf(b, "  ps%d = evtc_block_reduce<%d>(ps%d, evtc_red);\n  if (threadIdx.x == 0) red[%lldLL + slot] = ps%d;\n",
                     i, red_op(v->op), i, off, i);
    else if (v->cls == EVTC_VC_SCALAR)
      evtc_sb_printf(b, "  ps%d = evtc_warp_reduce<%d>(ps%d);\n  if (lane == 0) red[%lldLL + slot] = ps%d;\n", i,
                     red_op(v->op), i, off, i);
  }
  evtc_sb_printf(b, "}\n\n");
  free(x.first);
  free(x.need);
  if (pl->has_fin) emit_fin(b, k, pl);
}
