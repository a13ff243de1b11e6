/* cuda_emit_rows.c -- the reduce-then-apply template in CUDA C (AStitch's
 * row schemes).
 *
 * The plan (cuda_rows_plan.c) says who owns which columns: a row goes to
 * one warp (short rows, 8 rows per block, reductions by warp shuffles
 * only), one block, or a cluster of blocks (rows beyond 1024 threads x 32
 * columns); a thread owns vectors of V contiguous columns (16-byte loads
 * and stores into register arrays evtc_vec<T, V>, which the CPU visitor's
 * statements read and write element by element through the storage hook
 * of evtc_cpu_vctx).  The kernel runs the kernel IR's phases per row like
 * the CPU template: a pass over the thread's columns computes what the
 * phase's reductions and stores need; FULL values that later passes need
 * are kept per column (evtc_cuda_rows_info: in registers -- masks as bits,
 * f16 / bf16 loads two per register -- in shared memory, or recomputed),
 * and values the graph computes twice (an autodiff backward recomputing
 * the forward's statistics) are computed once, so a softmax or a layernorm
 * forward + backward reads each input once and writes each output once.
 * In a persistent loop the kept loads of the next one or two rows are
 * copied to shared memory with cp.async while the current row is processed
 * (one buffer and one commit group a row, the row after them going into the
 * buffer a row is done with; each thread copies and later reads only its
 * own vectors, so no barrier is needed); with pf_hold every pass reads the
 * row from its buffer and the next row goes in after the last pass.  A row
 * ending in a partial vector skips the columns past its end; its FULL
 * stores go column by column.  Column tiles (no COL reductions, few rows):
 * a block owns a tile of vectors and walks a group of rows (unrolled by 4,
 * so loads of several rows are in flight), its ROW partials in registers;
 * with one group the main kernel finishes and stores them.
 *
 * A pass's COL reductions finish together in one round: a warp-shuffle
 * butterfly per warp, one value per warp and reduction into shared memory
 * (two buffers, alternating rounds, so one barrier per round is enough),
 * a barrier (__syncthreads, or the cluster barrier with release / acquire
 * semantics), then every thread of a block of at most 8 warps reads the
 * warps' values and combines them in one order; in larger blocks and
 * clusters every warp gathers all the warps' values -- of every block of
 * the cluster, through distributed shared memory (mapa +
 * ld.shared::cluster) -- and reduces them with the same butterfly
 * (EVTC_CUDA_XWARP=shfl: always), so every thread of the row holds the
 * same bits.  A thread sums its own columns of f32 values in f32 (at most
 * 64 terms), everything across threads in double
 * (EVTC_CUDA_THREAD_ACC=f64: double throughout).  A softmax's or a
 * cross-entropy's row max and its sum of exponentials, two passes with a
 * round each, share one round (decide_online): the sum's pass runs with
 * each warp's own max, and the round combines the warps' pairs.
 *
 * Reductions over rows (ROW) and over everything (SCALAR) go to partial
 * slots in scratch, one per row group (a warp, a block, a cluster): ROW
 * partials are summed in f32 registers and added every 8 rows to f64
 * partial rows in shared memory, or kept in shared memory or scratch (in
 * shared memory a thread's partial of column q V + e sits at e * vectors +
 * q, so a warp's lanes touch consecutive slots: by column, BERT-Large's
 * layernorm gradient put 16 lanes on one bank, 99 us against 76 on the
 * H200); a block's partial rows go to scratch as f32 where their values
 * are f32 or narrower (the plan's slot_f32); a second kernel NAME_fin
 * combines the slots in f64 in a fixed order (4 columns x 64 slot groups
 * per block, four partials per thread and every
 * ROW reduction's loads in one loop, so that their loads are in flight
 * together) and stores the results, so runs are deterministic.  A
 * cluster kernel ends on a cluster barrier: no block leaves while another
 * may still read its shared memory.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "runtime/program_internal.h"

static const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;

static bool is_value(const evtc_vnode *v) { return v->kind != EVTC_V_REDUCE && v->kind != EVTC_V_STORE; }
static int red_op(evtc_op op) { return op == EVTC_OP_REDUCE_MAX ? 1 : op == EVTC_OP_REDUCE_MIN ? 2 : 0; }
static const char *red_init(evtc_op op) {
  return op == EVTC_OP_REDUCE_MAX ? "-(double)INFINITY" : op == EVTC_OP_REDUCE_MIN ? "(double)INFINITY" : "0.0";
}
static const char *red_initf(evtc_op op) {
  return op == EVTC_OP_REDUCE_MAX ? "-INFINITY" : op == EVTC_OP_REDUCE_MIN ? "INFINITY" : "0.0f";
}

static bool reduce_in_pass(const evtc_kernel *k, int i, int p) {
  const evtc_vnode *v = &k->v[i];
  return v->kind == EVTC_V_REDUCE && v->phase == p + 1 && ((wide >> k->v[v->args[0]].cls) & 1);
}
static bool store_in_pass(const evtc_kernel *k, int i, int p) {
  const evtc_vnode *v = &k->v[i];
  return v->kind == EVTC_V_STORE && v->phase == p && ((wide >> v->cls) & 1) && k->v[v->args[0]].kind != EVTC_V_REDUCE;
}

typedef struct rows_ctx {
  const evtc_kernel *k;
  const evtc_cuda_rows_plan *pl;
  evtc_cuda_rows_info info;
  evtc_sb *b;
  int V, nt;
  bool block;                   /* reductions span warps (a block or a cluster per row) */
  const char *kidx;             /* index of the thread's column among its own: "j * V + e" */
  const char *pt;               /* C type of ROW partials */
  int pf_pass;                  /* the pass after which row r + prefetch * grid is prefetched, or -1 */
  bool opaque_c;                /* FULL one-hot values: hide c from cross-pass reuse */
  bool xwarp_shfl;              /* EVTC_CUDA_XWARP=shfl: warps' values combined by a butterfly (else read by all) */
  bool tail;                    /* the row ends in a partial vector: columns past it skipped, FULL stores by column */
  int64_t cp;                   /* columns of a row rounded up to whole vectors (prefetch buffers) */
  char sidx[48];                /* a thread's partial of column c = q V + e in shared memory: "e * (cp / V) + q" */
  bool *hoist;                  /* per node: a row-invariant load kept in registers from before the row loop */
  int *ahead;                   /* per node: the pass (a per-row load: its phase) that takes this load from registers
                                   loaded a row ahead (rx<i>, rxs<i>; decide_ahead), or -1 */
  int online;                   /* the pass whose row max (online_max) is finished online with the next pass's sum of
                                   exponentials shifted by it (online_sum), in one round after both passes
                                   (decide_online); -1: none */
  int online_max, online_sum;
} rows_ctx;

/* A COL reduction finished by pass p (copies of another, alias >= 0, are not computed). */
static bool col_red(const rows_ctx *x, int i, int p) {
  return reduce_in_pass(x->k, i, p) && x->k->v[i].cls == EVTC_VC_COL && x->info.alias[i] < 0;
}

/* A thread sums its own columns in f32 when the values are f32 (or narrower) and the plan says so. */
static bool f32_acc(const rows_ctx *x, int i) {
  evtc_dtype t = x->k->v[x->k->v[i].args[0]].dtype;
  return x->pl->f32_thread_acc && (t == EVTC_F32 || t == EVTC_F16 || t == EVTC_BF16 || t == EVTC_BOOL);
}

/* ROW reduction i sums in f32 registers, flushed to f64 shared memory every 8 rows. */
static bool row_f32(const rows_ctx *x, int i) {
  evtc_dtype t = x->k->v[x->k->v[i].args[0]].dtype;
  return x->pl->row_flush && (t == EVTC_F32 || t == EVTC_F16 || t == EVTC_BF16 || t == EVTC_BOOL);
}

/* C type of ROW reduction i's partials. */
static const char *row_type(const rows_ctx *x, int i) {
  return x->pl->row_partials == 0 ? (row_f32(x, i) ? "float" : "double") : x->pt;
}

/* The vectors of a row hold whole Philox blocks (4 elements from a multiple of 4): a FULL RNG evaluates
 * one block per 4 elements (evtc_keep_w with the block "rb4 + (e >> 2)"). */
static bool shares_philox(const rows_ctx *x) {
  if (x->V % 4 != 0 || x->k->cols % 4 != 0) return false;
  for (int i = 0; i < x->k->n_v; i++)
    if (x->k->v[i].kind == EVTC_V_RNG && x->k->v[i].cls == EVTC_VC_FULL) return true;
  return false;
}

/* Load i comes from the block's prefetch buffers in shared memory. */
static bool prefetched(const rows_ctx *x, int i) {
  return x->pl->prefetch > 0 && evtc_cuda_rows_prefetches(x->k, &x->info, x->pl, i);
}

/* Vector load i reads the same columns in every row (a gamma, a bias: row stride 0) and is loaded once, before the
 * row loop of a persistent plan, into registers lh<i>[j] (x->hoist, decided by decide_hoists). */
static bool hoisted(const rows_ctx *x, int i) { return x->hoist && x->hoist[i]; }

/* Registers a thread may take under the plan's launch bounds (its threads times min_blocks in one SM's 64K). */
static int regs_cap(const evtc_cuda_rows_plan *pl) {
  return 65536 / (pl->threads * pl->rows_per_block * (pl->min_blocks > 0 ? pl->min_blocks : 1));
}

/* Which row-invariant vector loads go before the row loop: where blocks stride over several rows each (a
 * persistent plan with its column loop unrolled, not column tiles or clusters), in node order, up to 8 registers a
 * thread of them, or 32 where the launch bounds leave a thread 192 registers or more; EVTC_CUDA_HOIST=0: none.  In
 * the loop such a load was issued again in every pass of every row; bench/epilogue/ln_block.train.evt's layernorm
 * gradient (BERT-Large's 16384 x 1024 bf16, 4 warps a row, 31 rows a block) read gamma twice a row: 66 -> 59 us
 * (H200, 2026-11-30; BERT-Large's own kernel did not move: two of its row inputs are read synchronously, not
 * prefetched).  The 16384 x 4096 f32 layernorm's forward and backward (256 threads, one block an SM) read gamma and
 * beta (16 registers each) in its passes: 311 -> 291 us with both hoisted.  The f32 dropout + residual + layernorm
 * block (1024 columns) hoists both (4 registers each) as 256 threads of one vector; as 128 threads of two (4 blocks an
 * SM: 128 registers) it hoisted gamma but not beta, though its warps' most sampled stalls waited on beta's load:
 * with 16 registers, both hoisted, it took 115 -> 123 us, and with beta staged in shared memory instead (4 KB a
 * block, still 4 blocks an SM) 115 -> 121 (gpu_bench, H200, 2026-12-01). */
static void decide_hoists(rows_ctx *x) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  x->hoist = calloc((size_t)k->n_v, sizeof *x->hoist);
  if (!x->hoist) return;
  const char *e = getenv("EVTC_CUDA_HOIST");
  bool persistent = (int64_t)pl->grid * pl->rows_per_block < k->rows;
  if ((e && strcmp(e, "0") == 0) || !persistent || !pl->unrolled || pl->col_tiles || pl->cluster > 1 || x->V <= 1) return;
  const int budget = regs_cap(pl) >= 192 ? 32 : 8;
  int regs = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    int64_t sr;
    if (v->kind != EVTC_V_LOAD || !x->info.vec_load[i] || x->info.alias[i] >= 0 || prefetched(x, i)) continue;
    evtc_cuda_load_vectorizes(k, v, x->V, &sr);     /* vec_load: it does; only its row stride is wanted */
    if (sr != 0) continue;
    int r = (int)(((int64_t)pl->per_thread * x->V * (int64_t)evtc_buffer_elem_size(v->dtype) + 3) / 4);
    if (regs + r > budget) continue;
    x->hoist[i] = true;
    regs += r;
  }
}

/* Under pf_hold, the prefetched load whose buffer holds value i in every pass that needs it: i itself, or the load
 * a value kept in place of one (stands_for) is written over; -1 where no buffer holds i. */
static int holder(const rows_ctx *x, int i) {
  if (!x->pl->pf_hold) return -1;
  if (prefetched(x, i)) return i;
  int leaf = x->info.stands_for[i];
  return x->info.kept[i] && leaf >= 0 && prefetched(x, leaf) &&
         evtc_buffer_elem_size(x->k->v[leaf].dtype) == evtc_buffer_elem_size(x->k->v[i].dtype) ? leaf : -1;
}

/* The load whose buffer a computed value i is written over (hw<i>, read back as hv<i>), or -1. */
static int over_load(const rows_ctx *x, int i) { return x->k->v[i].kind == EVTC_V_LOAD ? -1 : holder(x, i); }

/* Value i is read from a prefetch buffer in every pass that needs it, not kept in registers. */
static bool held(const rows_ctx *x, int i) { return holder(x, i) >= 0; }

/* Kept f16 / bf16 load i, or value i kept in place of one (stands_for), is held as its storage bits, two per 32-bit
 * register. */
static bool packed(const rows_ctx *x, int i) {
  evtc_dtype t = x->k->v[i].dtype;
  bool bits = x->k->v[i].kind == EVTC_V_LOAD ? x->info.vec_load[i] : x->info.stands_for[i] >= 0;
  return x->pl->cache == 1 && x->info.kept[i] && bits && evtc_dtype_is_half(t) && !held(x, i);
}

/* Whether pass p reads load i from global memory (not from its kept copy of an earlier pass). */
static bool reads_global(const rows_ctx *x, int i, int p) {
  const evtc_cuda_rows_info *in = &x->info;
  return in->need[(size_t)p * (size_t)x->k->n_v + (size_t)i] &&
         !(x->pl->cache && in->kept[i] && in->first[i] < p && !held(x, i));
}

/* Vector loads that one pass alone reads, in a persistent plan with registers to spare (96 a thread under the
 * launch bounds), neither kept for later passes (a kept row would take its registers twice), prefetched into
 * shared memory nor hoisted, 16-byte vectors: the next row's go into registers rx<i>[j] at the end of that pass
 * (emit_ahead), so they arrive while the row's reductions and later passes run instead of being waited for at the
 * next row's start.
 * Up to 16 registers a thread of them, in node order; and so are up to 4 per-row loads (COL: one value a row,
 * loaded at its phase's start), each into a register rxs<i> when the row's own is taken.  EVTC_CUDA_AHEAD=0:
 * none.  BERT-Large's layernorm gradient reads its two incoming gradients and 1 / sigma so (16384 x 1024 bf16, 4
 * warps a row, 31 rows a block; ncu, H200 2026-11-30: with all three read in the row, a third of the warps'
 * samples waited on them). */
static void decide_ahead(rows_ctx *x) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  x->ahead = malloc(sizeof *x->ahead * (size_t)(k->n_v > 0 ? k->n_v : 1));
  if (!x->ahead) return;
  for (int i = 0; i < k->n_v; i++) x->ahead[i] = -1;
  const char *e = getenv("EVTC_CUDA_AHEAD");
  bool persistent = (int64_t)pl->grid * pl->rows_per_block < k->rows;
  /* where a thread's registers are few (1000 threads holding a 32000-column row, 64 each), another one of a row
     ahead cost the bf16 cross-entropy 0.388 -> 0.422 ms */
  const int cap = regs_cap(pl);
  if ((e && strcmp(e, "0") == 0) || !persistent || !pl->unrolled || pl->col_tiles || pl->cluster > 1 || x->V <= 1 ||
      x->tail || cap < 96)
    return;
  int regs = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    int64_t sr;
    if (v->kind != EVTC_V_LOAD || v->cls != EVTC_VC_FULL || !x->info.vec_load[i] || x->info.alias[i] >= 0 ||
        prefetched(x, i) || hoisted(x, i) || x->info.kept[i] || x->V * (int)evtc_buffer_elem_size(v->dtype) != 16)
      continue;
    evtc_cuda_load_vectorizes(k, v, x->V, &sr);
    int pass = -1, passes = 0;
    for (int p = 0; p < k->n_phases; p++)
      if (x->info.has_work[p] && reads_global(x, i, p)) pass = p, passes++;
    if (sr == 0 || passes != 1) continue;
    int r = 4 * pl->per_thread;
    if (regs + r > 16) continue;
    x->ahead[i] = pass;
    regs += r;
  }
  int scalars = 0;     /* per-row loads (a saved 1 / sigma), one register each, in their phase */
  for (int i = 0; i < k->n_v && scalars < 4; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_LOAD || v->cls != EVTC_VC_COL || x->info.alias[i] >= 0) continue;
    x->ahead[i] = v->phase;
    scalars++;
  }
}

/* A row's max m of a value a (pass p) and its sum of e^(a - m) (pass p + 1), as a softmax and a cross-entropy take
 * them, finished in one round (Milakov and Gimelshein's online normaliser) where a row spans warps: pass p + 1 runs
 * right after pass p with its warp's max m_w for m, so each warp holds m_w and s_w = sum of e^(a - m_w) over its
 * columns, and the round combines those pairs into m and s = sum over warps of s_w e^(m_w - m)
 * (evtc_warp_reduce_lse).  The row then waits at one barrier instead of two.  Only where pass p + 1 does nothing
 * else: it finishes the sum alone, stores nothing, keeps nothing for later passes, and no row value is computed from
 * m before it (nothing else would see m_w in place of m); m is the only COL reduction pass p finishes, a max of f32
 * or of f16 / bf16 values (held as floats in the kernel, as all its f16 / bf16 values).  EVTC_CUDA_ONLINE=0: never. */
static void decide_online(rows_ctx *x) {
  const evtc_kernel *k = x->k;
  x->online = -1;
  const char *e = getenv("EVTC_CUDA_ONLINE");
  if (e && strcmp(e, "0") == 0) return;
  for (int s = 0; s < k->n_v; s++) {
    const evtc_vnode *vs = &k->v[s];
    if (vs->kind != EVTC_V_REDUCE || vs->op != EVTC_OP_REDUCE_SUM || vs->cls != EVTC_VC_COL) continue;
    const evtc_vnode *ve = &k->v[vs->args[0]];
    if (ve->kind != EVTC_V_COMPUTE || ve->op != EVTC_OP_EXP) continue;
    const evtc_vnode *vd = &k->v[ve->args[0]];
    if (vd->kind != EVTC_V_COMPUTE || vd->op != EVTC_OP_SUB) continue;
    const int m = vd->args[1], p = vs->phase - 2;
    const evtc_vnode *vm = &k->v[m];
    if (vm->kind != EVTC_V_REDUCE || vm->op != EVTC_OP_REDUCE_MAX || (vm->dtype != EVTC_F32 && !evtc_dtype_is_half(vm->dtype)) ||
        vm->args[0] != vd->args[0] ||
        p < 0 || !x->block || !col_red(x, m, p) || !col_red(x, s, p + 1))
      continue;
    bool alone = true;
    for (int i = 0; i < k->n_v && alone; i++) {
      const evtc_vnode *v = &k->v[i];
      if ((col_red(x, i, p) && i != m) || (reduce_in_pass(k, i, p + 1) && i != s) || store_in_pass(k, i, p + 1))
        alone = false;
      if (v->phase == p + 1 && i != m && (v->cls == EVTC_VC_COL || v->cls == EVTC_VC_SCALAR)) alone = false;
      if (x->info.kept[i] && x->info.first[i] == p + 1) alone = false;
      if (x->info.alias[i] == m || x->info.alias[i] == s) alone = false;
    }
    if (!alone) continue;
    x->online = p;
    x->online_max = m;
    x->online_sum = s;
    return;
  }
}

/* Load i is read from registers loaded a row ahead (decide_ahead). */
static bool ahead(const rows_ctx *x, int i) { return x->ahead && x->ahead[i] >= 0; }

static void open_cols(const rows_ctx *x, const char *ind, bool in_pass);

/* The row after this one in the row loop, as an expression. */
static void next_row(const rows_ctx *x, char *buf, size_t cap) {
  snprintf(buf, cap, "r + (int64_t)gridDim.x * %d", x->pl->rows_per_block);
}

/* Per-row load i of row `row` into rxs<i> (its index as evtc_cpu_load_index writes it, over `r`). */
static void emit_ahead_col(const rows_ctx *x, int i, const char *ind, const char *row) {
  char idx[512];
  evtc_cpu_vctx vx = {.k = x->k};
  evtc_cpu_load_index(&vx, &x->k->v[i], idx, sizeof idx);
  evtc_sb_printf(x->b, "%s{\n%s  const int64_t rnx = %s;\n%s  if (rnx < RR) {\n%s    const int64_t r = rnx;\n"
                       "%s    rxs%d = a%d[%s];\n%s  }\n%s}\n",
                 ind, ind, row, ind, ind, ind, i, x->k->v[i].arg, idx, ind, ind);
}

/* The vectors of row `row` of every load that pass p (or, p < 0, any pass) reads a row ahead, into rx<i>. */
static void emit_ahead(const rows_ctx *x, int p, const char *ind, const char *row) {
  const evtc_kernel *k = x->k;
  bool any = false;
  for (int i = 0; i < k->n_v; i++) any |= ahead(x, i) && k->v[i].cls == EVTC_VC_FULL && (p < 0 || x->ahead[i] == p);
  if (!any) return;
  evtc_sb_printf(x->b, "%sif (%s < RR) {\n", ind, row);
  open_cols(x, ind, false);
  for (int i = 0; i < k->n_v; i++) {
    if (!ahead(x, i) || k->v[i].cls != EVTC_VC_FULL || (p >= 0 && x->ahead[i] != p)) continue;
    int64_t sr;
    evtc_cuda_load_vectorizes(k, &k->v[i], x->V, &sr);
    evtc_sb_printf(x->b, "%s    rx%d[j] = *(const uint4 *)(a%d + (%lldLL + (%s) * %lldLL + cb));\n", ind, i, k->v[i].arg,
                   (long long)k->v[i].offset, row, (long long)sr);
  }
  evtc_sb_printf(x->b, "%s  }\n%s}\n%s}\n", ind, ind, ind);
}

/* FULL store i goes through its warp's stage buffer (the plan's stage_stores), or -1: that buffer's index. */
static int staged(const rows_ctx *x, int i) {
  const evtc_kernel *k = x->k;
  if (!x->pl->stage_stores || k->v[i].kind != EVTC_V_STORE || k->v[i].cls != EVTC_VC_FULL ||
      evtc_buffer_elem_size(k->v[i].dtype) != 2)
    return -1;
  int n = 0;
  for (int j = 0; j < i; j++)
    n += k->v[j].kind == EVTC_V_STORE && k->v[j].cls == EVTC_VC_FULL && evtc_buffer_elem_size(k->v[j].dtype) == 2;
  return n;
}

/* The warp's 32 vectors of staged store i (this j) out of its stage buffer: the segment of 256 columns from c0
 * starts h halves before an aligned 16-byte chunk of the output; lane L writes chunk L (two aligned 16-byte reads
 * shifted by h: a select over word offsets, a byte permute for odd h) where it lies in the segment and the row,
 * the halves before the first chunk and after the last whole one one by one. */
static void emit_stage_out(const rows_ctx *x, int i) {
  const evtc_vnode *v = &x->k->v[i];
  int s = staged(x, i);
  evtc_sb_printf(x->b,
    "      __syncwarp();\n      {\n"
    "        const CI c0 = (CI)(QB + (lane & ~31) + (CI)j * %d) * 8;\n"
    "        const int L = lane & 31;\n"
    "        uint16_t *const g = (uint16_t *)a%d + (r * CC + c0);\n"
    "        const int h = (int)((8 - ((unsigned long long)g >> 1)) & 7), o = h + 8 * L, k2 = h >> 1;\n"
    "        if (o + 8 <= 256 && c0 + o + 8 <= CC) {\n"
    "          const uint4 lo = *(const uint4 *)(stg%d + 8 * L), hi = *(const uint4 *)(stg%d + 8 * L + 8);\n"
    "          const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};\n"
    "          uint32_t out[4];\n"
    "#pragma unroll\n"
    "          for (int t = 0; t < 4; t++) {\n"
    "            const uint32_t a = k2 == 0 ? w[t] : k2 == 1 ? w[t + 1] : k2 == 2 ? w[t + 2] : w[t + 3];\n"
    "            const uint32_t b = k2 == 0 ? w[t + 1] : k2 == 1 ? w[t + 2] : k2 == 2 ? w[t + 3] : w[t + 4];\n"
    "            out[t] = (h & 1) ? __byte_perm(a, b, 0x5432) : a;\n"
    "          }\n"
    "          *(uint4 *)(g + o) = make_uint4(out[0], out[1], out[2], out[3]);\n"
    "        } else {\n"
    "          for (int t = o; t < o + 8 && t < 256; t++)\n"
    "            if (c0 + t < CC) g[t] = stg%d[t];\n"
    "        }\n"
    "        if (L < h && c0 + L < CC) g[L] = stg%d[L];\n"
    "      }\n      __syncwarp();\n",
    x->nt, v->arg, s, s, s, s);
}

/* Storage hook: vector-loaded elements and staged stores. */
static bool rows_storage(const evtc_cpu_vctx *x, int i, char *buf, size_t cap) {
  const rows_ctx *r = x->storage_ctx;
  const evtc_vnode *v = &x->k->v[i];
  if (v->kind == EVTC_V_LOAD && v->cls == EVTC_VC_COL && ahead(r, i)) {
    snprintf(buf, cap, "rxs%d", i);
    return true;
  }
  if (r->V <= 1) return false;
  if (v->kind == EVTC_V_LOAD && r->info.vec_load[i]) snprintf(buf, cap, v->dtype == EVTC_BF16 ? "evtc_vec_bfw(lv%d, e)" : "lv%d.v[e]", i);
  else if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_FULL && (!r->tail || staged(r, i) >= 0)) snprintf(buf, cap, "sv%d.v[e]", i);
  else return false;
  return true;
}

static void emit_helpers(evtc_sb *b) {
  evtc_cuda_emit_vec_helpers(b);
  evtc_cuda_emit_cluster_helpers(b);
  evtc_sb_printf(b, "%s",
    "#ifndef EVTC_ROWS_HELPERS\n#define EVTC_ROWS_HELPERS\n"
    "/* *p in the shared memory of block `rank` of the cluster */\n"
    "__device__ __forceinline__ double evtc_dsmem_ld(const double *p, unsigned rank) {\n"
    "  unsigned a = (unsigned)__cvta_generic_to_shared(p), m;\n  double v;\n"
    "  asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(m) : \"r\"(a), \"r\"(rank));\n"
    "  asm volatile(\"ld.shared::cluster.f64 %0, [%1];\" : \"=d\"(v) : \"r\"(m) : \"memory\");\n"
    "  return v;\n}\n"
    "/* 16 bytes global -> shared without registers (cached in L2 only); visible to the thread after the wait */\n"
    "__device__ __forceinline__ void evtc_cp_async16(void *s, const void *g) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"((unsigned)__cvta_generic_to_shared(s)), \"l\"(g) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void evtc_cp_async_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void evtc_cp_async_wait() { asm volatile(\"cp.async.wait_all;\" ::: \"memory\"); }\n"
    "/* all but the most recent group */\n"
    "__device__ __forceinline__ void evtc_cp_async_wait1() { asm volatile(\"cp.async.wait_group 1;\" ::: \"memory\"); }\n"
    "/* a 16-byte vector from the raw words of a load issued a row ahead (held as uint4, so that the loop carries the\n"
    "   load's own registers: as an evtc_vec of halves the compiler split it into them right after the load, waiting\n"
    "   for it there) */\n"
    "/* a max (OP 1) or min (OP 2) over a vector of bf16 as they are stored, two a max.NaN.bf16x2 (NaN wins, as in\n"
    "   evtc_combf): exact, a max picks one of its inputs; a's halves hold the two running values */\n"
    "template <int OP, int V> __device__ __forceinline__ void evtc_comb_bf16x2(uint32_t &a, const evtc_vec<uint16_t, V> &v) {\n"
    "  union {\n    evtc_vec<uint16_t, V> v;\n    uint32_t w[V / 2];\n  } u;\n  u.v = v;\n"
    "#pragma unroll\n"
    "  for (int q = 0; q < V / 2; q++) {\n"
    "    if (OP == 1) asm(\"max.NaN.bf16x2 %0, %1, %2;\" : \"=r\"(a) : \"r\"(a), \"r\"(u.w[q]));\n"
    "    else asm(\"min.NaN.bf16x2 %0, %1, %2;\" : \"=r\"(a) : \"r\"(a), \"r\"(u.w[q]));\n"
    "  }\n}\n"
    "/* Every block of the grid, all of them resident (a cooperative launch), waits here until each has arrived, its\n"
    "   writes before visible to every block after.  bar[0] counts the arrivals and is zero between barriers; bar[1]\n"
    "   is the barrier's generation: the last block to arrive resets the count, then releases the others by\n"
    "   advancing the generation, which each read (acquire) before its own arrival; the arrivals are acquire-release,\n"
    "   so the last block to arrive has seen every write before the others' arrivals when it releases them. */\n"
    "__device__ __forceinline__ void evtc_grid_barrier(unsigned *bar) {\n"
    "  __threadfence();\n  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    unsigned gen, now, arrived;\n"
    "    asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(gen) : \"l\"(bar + 1) : \"memory\");\n"
    "    asm volatile(\"atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\" : \"=r\"(arrived) : \"l\"(bar) : \"memory\");\n"
    "    if (arrived == gridDim.x * gridDim.y * gridDim.z - 1) {\n"
    "      asm volatile(\"st.relaxed.gpu.global.u32 [%0], 0;\" :: \"l\"(bar) : \"memory\");\n"
    "      asm volatile(\"red.release.gpu.global.add.u32 [%0], 1;\" :: \"l\"(bar + 1) : \"memory\");\n"
    "    } else {\n"
    "      do {\n"
    "        __nanosleep(32);\n"
    "        asm volatile(\"ld.acquire.gpu.global.u32 %0, [%1];\" : \"=r\"(now) : \"l\"(bar + 1) : \"memory\");\n"
    "      } while (now == gen);\n"
    "    }\n"
    "  }\n"
    "  __syncthreads();\n"
    "}\n"
    "/* (m, s) and (mo, so): maxima and sums of e^(a - max) over two sets of columns, combined into the larger max\n"
    "   and the sum of both, each scaled by e^(its max - that) -- by exactly 1 at the larger max, so that an empty\n"
    "   set's (-inf, 0) joins another empty one as (-inf, 0), and NaN in a max stays NaN */\n"
    "__device__ __forceinline__ void evtc_lse_comb(float &m, double &s, float mo, double so) {\n"
    "  const float mm = evtc_combf<1>(m, mo);\n"
    "  const double f = m == mm ? 1.0 : (double)evtc_expf(m - mm), fo = mo == mm ? 1.0 : (double)evtc_expf(mo - mm);\n"
    "  s = s * f + so * fo;\n  m = mm;\n}\n"
    "/* the same over the lanes of a warp: the max across them, each lane's sum scaled to it once, summed; every lane\n"
    "   ends with the same bits */\n"
    "__device__ __forceinline__ void evtc_warp_reduce_lse(float &m, double &s) {\n"
    "  const float mm = evtc_warp_reducef<1>(m);\n"
    "  s = evtc_warp_reduce<0>(m == mm ? s : s * (double)evtc_expf(m - mm));\n  m = mm;\n}\n"
    "template <typename T, int V> __device__ __forceinline__ evtc_vec<T, V> evtc_vec_bits(uint4 u) {\n"
    "  static_assert(sizeof(evtc_vec<T, V>) == sizeof(uint4), \"evtc_vec_bits: a 16-byte vector\");\n"
    "  union {\n    uint4 u;\n    evtc_vec<T, V> v;\n  } c;\n  c.u = u;\n  return c.v;\n}\n"
    "#endif\n");
}

/* "T v<i> = (T)(acc [/ count]);" */
static void emit_finish(evtc_sb *b, const char *ind, const evtc_vnode *v, int i, const char *acc) {
  const char *t = evtc_cpu_ctype(v->dtype);
  if (v->op == EVTC_OP_REDUCE_MEAN) evtc_sb_printf(b, "%s%s v%d = (%s)(%s / %.17g);\n", ind, t, i, t, acc, v->value);
  else evtc_sb_printf(b, "%s%s v%d = (%s)(%s);\n", ind, t, i, t, acc);
}

/* Reduction i finished from acc and stored by every STORE of it, at indentation ind. */
static void emit_finish_stores(evtc_sb *b, const evtc_kernel *k, const char *ind, int i, const char *acc) {
  emit_finish(b, ind, &k->v[i], i, acc);
  evtc_cpu_vctx vx = {.k = k, .sb = b, .ind = ind};
  for (int j = i + 1; j < k->n_v; j++)
    if (k->v[j].kind == EVTC_V_STORE && k->v[j].args[0] == i) evtc_cpu_emit_store(&vx, j);
}

/* "if (<the thread's row lead>)": lane 0 (of block 0 of a cluster, of the first column tile). */
static const char *lead(const rows_ctx *x) {
  return x->pl->cluster > 1 ? "lane == 0 && crank == 0" : x->pl->col_tiles ? "lane == 0 && tile == 0" : "lane == 0";
}

static void emit_phase_start(const rows_ctx *x, int p) {
  const evtc_kernel *k = x->k;
  evtc_cpu_vctx vx = {.k = k, .sb = x->b, .ind = "    ", .storage = rows_storage, .storage_ctx = x};
  char next[64];
  next_row(x, next, sizeof next);
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->phase != p) continue;
    if (is_value(v) && v->cls == EVTC_VC_COL && x->info.alias[i] >= 0)
      evtc_sb_printf(x->b, "    %s v%d = v%d;\n", evtc_cpu_ctype(v->dtype), i, x->info.alias[i]);
    else if (is_value(v) && v->cls == EVTC_VC_COL) evtc_cuda_emit_value(&vx, i);
    if (v->kind == EVTC_V_LOAD && v->cls == EVTC_VC_COL && ahead(x, i)) emit_ahead_col(x, i, "    ", next);
    if (is_value(v) && v->cls == EVTC_VC_COL) evtc_cuda_emit_label_checks(&vx, i);
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_COL) {
      evtc_sb_printf(x->b, "    if (%s)\n", lead(x));
      vx.ind = "      ";
      evtc_cpu_emit_store(&vx, i);
      vx.ind = "    ";
    }
    if (v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].cls == EVTC_VC_COL)
      evtc_sb_printf(x->b, "    if (%s) ps%d = evtc_comb<%d>(ps%d, (double)v%d);\n", lead(x), i, red_op(v->op), i,
                     v->args[0]);
  }
}

/* The kept copy of value i at the current column (an lvalue unless a bit of a mask or packed). */
static void kept_ref(const rows_ctx *x, int i, char *buf, size_t cap) {
  if (packed(x, i)) {
    char bits[96];
    evtc_sb t = {0};
    if (x->k->v[i].dtype == EVTC_BF16) snprintf(bits, sizeof bits, "evtc_bfw{kh%d[(%s) >> 1], ((%s) & 1) != 0}", i, x->kidx, x->kidx);
    else snprintf(bits, sizeof bits, "(uint16_t)(kh%d[(%s) >> 1] >> (((%s) & 1) * 16))", i, x->kidx, x->kidx);
    evtc_cpu_emit_from_storage(&t, x->k->v[i].dtype, bits);
    snprintf(buf, cap, "%s", t.s);
    free(t.s);
  } else if (x->pl->cache == 2) snprintf(buf, cap, "sk%d[c]", i);
  else if (x->k->v[i].dtype == EVTC_BOOL)
    snprintf(buf, cap, "(uint8_t)((kb%d[(%s) >> 5] >> ((%s) & 31)) & 1u)", i, x->kidx, x->kidx);
  else snprintf(buf, cap, "kv%d[%s]", i, x->kidx);
}

/* Whether pass p computes value i (rather than reading it back from a kept copy, or copying another). */
static bool computed_in_pass(const rows_ctx *x, int i, int p) {
  const evtc_cuda_rows_info *in = &x->info;
  if (!in->need[(size_t)p * (size_t)x->k->n_v + (size_t)i] || !is_value(&x->k->v[i])) return false;
  if (over_load(x, i) >= 0) return in->first[i] >= p;
  if (x->pl->cache && in->kept[i] && !held(x, i) && in->first[i] < p) return false;
  return in->alias[i] < 0;
}

/* Value i is e^(a - b) of a bf16 value, b a row's value, and pass p computes a - b: evtc_exp_shiftf(a, b). */
static bool exp_of_shift(const rows_ctx *x, int i, int p) {
  const evtc_kernel *k = x->k;
  const evtc_vnode *v = &k->v[i];
  if (v->kind != EVTC_V_COMPUTE || v->op != EVTC_OP_EXP || v->dtype != EVTC_BF16) return false;
  const evtc_vnode *s = &k->v[v->args[0]];
  const evtc_vclass shift_by = s->n_args > 1 ? k->v[s->args[1]].cls : EVTC_VC_FULL;
  return s->kind == EVTC_V_COMPUTE && s->op == EVTC_OP_SUB && (shift_by == EVTC_VC_COL || shift_by == EVTC_VC_SCALAR) &&
         computed_in_pass(x, v->args[0], p);
}

/* Value i is an f32 product w s, w an f32 product a r that pass p computes (on a plain vector, pf, w may be a
 * value folded into it), r a row's value and s a power of two, or its negation, that is a normal float: then *a,
 * *r, *s, and i is emitted a (r s), where the row's r s is computed once (nvcc hoists it out of the element loop):
 * one product an element instead of two (a cross-entropy's gradient, the softmax times the mean's 1 / N).  The same
 * value: such an s scales without rounding, away from float's ends. */
static bool scaled_row_product(const rows_ctx *x, const evtc_cuda_plain *pf, int i, int p, int *a, int *r, int *s) {
  const evtc_kernel *k = x->k;
  const evtc_vnode *v = &k->v[i];
  if (v->kind != EVTC_V_COMPUTE || v->op != EVTC_OP_MUL || v->dtype != EVTC_F32) return false;
  for (int o = 0; o < 2; o++) {
    const evtc_vnode *c = &k->v[v->args[o]];
    int m;
    const double mag = fabs(c->value);
    if (c->kind != EVTC_V_IMM || !(mag >= 0x1p-126 && mag <= 0x1p127) || frexp(mag, &m) != 0.5) continue;
    int w = v->args[1 - o];
    if (pf && pf->fact[w] == EVTC_PLAIN_SAME) w = pf->same[w];
    const evtc_vnode *wv = &k->v[w];
    if (wv->kind != EVTC_V_COMPUTE || wv->op != EVTC_OP_MUL || wv->dtype != EVTC_F32 || !computed_in_pass(x, w, p) ||
        (pf && pf->fact[w] != EVTC_PLAIN_NONE))
      continue;
    for (int q = 0; q < 2; q++) {
      const evtc_vclass rc = k->v[wv->args[q]].cls;
      if (rc != EVTC_VC_COL && rc != EVTC_VC_SCALAR) continue;
      *a = wv->args[1 - q];
      *r = wv->args[q];
      *s = v->args[o];
      return true;
    }
  }
  return false;
}

/* Value i computed in pass p, or on a plain vector (pf, cuda_rows_plain.c) folded: zero, or a copy of another
 * value. */
static void emit_computed(const rows_ctx *x, const evtc_cpu_vctx *vx, const evtc_cuda_plain *pf, int i, int p) {
  const char *t = evtc_cpu_ctype(vx->k->v[i].dtype);
  int a, r, sc;
  if (pf && pf->fact[i] == EVTC_PLAIN_ZERO) evtc_sb_printf(vx->sb, "%s%s v%d = (%s)0;\n", vx->ind, t, i, t);
  else if (pf && pf->fact[i] == EVTC_PLAIN_SAME)
    evtc_sb_printf(vx->sb, "%s%s v%d = (%s)v%d;\n", vx->ind, t, i, t, pf->same[i]);
  else if (exp_of_shift(x, i, p)) {
    const evtc_vnode *s = &vx->k->v[vx->k->v[i].args[0]];
    evtc_sb_printf(vx->sb, "%sfloat v%d = evtc_exp_shiftf(v%d, v%d);\n", vx->ind, i, s->args[0], s->args[1]);
  } else if (scaled_row_product(x, pf, i, p, &a, &r, &sc))
    evtc_sb_printf(vx->sb, "%sfloat v%d = v%d * (v%d * v%d);\n", vx->ind, i, a, r, sc);
  else evtc_cuda_emit_value(vx, i);
}

/* On a plain vector, value i kept over a load's buffer is that load's own value: the buffer holds it already. */
static bool plain_in_place(const rows_ctx *x, const evtc_cuda_plain *pf, int i) {
  int h = over_load(x, i);
  return pf && h >= 0 && pf->fact[i] == EVTC_PLAIN_SAME && pf->same[i] == h && x->k->v[h].dtype == x->k->v[i].dtype;
}

/* Value i in pass p: from the kept copy, the RNG it repeats, or computed (and kept); on a plain vector (pf) folded
 * where it can. */
static void emit_node_value(const rows_ctx *x, const evtc_cpu_vctx *vx, int i, int p, const evtc_cuda_plain *pf) {
  const evtc_vnode *v = &x->k->v[i];
  const evtc_cuda_rows_info *in = &x->info;
  char ref[160];
  kept_ref(x, i, ref, sizeof ref);
  if (over_load(x, i) >= 0) {   /* kept over a load in its buffer: read back as hv<i>, written as hw<i> */
    char bits[48];
    if (in->first[i] < p) {
      snprintf(bits, sizeof bits, v->dtype == EVTC_BF16 ? "evtc_vec_bfw(hv%d, e)" : "hv%d.v[e]", i);
      evtc_sb_printf(x->b, "%s%s v%d = ", vx->ind, evtc_cpu_ctype(v->dtype), i);
      evtc_cpu_emit_from_storage(x->b, v->dtype, bits);
      evtc_sb_printf(x->b, ";\n");
      return;
    }
    if (plain_in_place(x, pf, i)) {
      evtc_sb_printf(x->b, "%s%s v%d = v%d;\n", vx->ind, evtc_cpu_ctype(v->dtype), i, pf->same[i]);
      return;
    }
    emit_computed(x, vx, pf, i, p);
    evtc_sb_printf(x->b, "%s{\n%s  const uint16_t kq = ", vx->ind, vx->ind);
    evtc_cpu_emit_to_storage(x->b, v->dtype, v->dtype, i);
    evtc_sb_printf(x->b, ";\n%s  hw%d.v[e] = kq;\n%s  v%d = ", vx->ind, i, vx->ind, i);
    evtc_cpu_emit_from_storage(x->b, v->dtype, "kq");
    evtc_sb_printf(x->b, ";\n%s}\n", vx->ind);
    return;
  }
  bool kept = x->pl->cache && in->kept[i] && !held(x, i);
  if (kept && in->first[i] < p) {
    evtc_sb_printf(x->b, "%s%s v%d = %s;\n", vx->ind, evtc_cpu_ctype(v->dtype), i, ref);
    return;
  }
  if (in->alias[i] >= 0) evtc_sb_printf(x->b, "%s%s v%d = v%d;\n", vx->ind, evtc_cpu_ctype(v->dtype), i, in->alias[i]);
  else emit_computed(x, vx, pf, i, p);
  if (!kept) return;
  if (packed(x, i) && v->kind == EVTC_V_LOAD) {
    evtc_sb_printf(x->b, "%skh%d[(%s) >> 1] |= (uint32_t)lv%d.v[e] << (((%s) & 1) * 16);\n", vx->ind, i, x->kidx, i, x->kidx);
  } else if (packed(x, i)) {     /* rounded to its dtype here, so that every pass reads the value the graph defines */
    evtc_sb_printf(x->b, "%s{\n%s  const uint16_t kq = ", vx->ind, vx->ind);
    evtc_cpu_emit_to_storage(x->b, v->dtype, v->dtype, i);
    evtc_sb_printf(x->b, ";\n%s  kh%d[(%s) >> 1] |= (uint32_t)kq << (((%s) & 1) * 16);\n%s  v%d = ", vx->ind, i, x->kidx,
                   x->kidx, vx->ind, i);
    evtc_cpu_emit_from_storage(x->b, v->dtype, "kq");
    evtc_sb_printf(x->b, ";\n%s}\n", vx->ind);
  } else if (x->pl->cache == 1 && v->dtype == EVTC_BOOL) {
    evtc_sb_printf(x->b, "%skb%d[(%s) >> 5] |= (uint32_t)(v%d != 0) << ((%s) & 31);\n", vx->ind, i, x->kidx, i, x->kidx);
  } else {
    evtc_sb_printf(x->b, "%s%s = v%d;\n", vx->ind, ref, i);
  }
}

/* Opens the loop over the thread's vectors of the row; "cb": their first column.  Column tiles' passes need
 * no bound: a thread without a vector walks no rows (so the loop over a group's rows has no branches). */
static void open_cols(const rows_ctx *x, const char *ind, bool in_pass) {
  const evtc_cuda_rows_plan *pl = x->pl;
  if (pl->unrolled) {
    evtc_sb_printf(x->b, "%s#pragma unroll\n%sfor (int j = 0; j < %d; j++) {\n%s  const CI q = QB + lane + (CI)j * %d;\n",
                   ind, ind, pl->per_thread, ind, x->nt);
    if (in_pass && pl->col_tiles && pl->per_thread == 1) evtc_sb_printf(x->b, "%s  {\n", ind);
    else if (pl->cluster > 1) evtc_sb_printf(x->b, "%s  if (lane + j * %d < %lld && q < QE) {\n", ind, x->nt, (long long)pl->chunk);
    else evtc_sb_printf(x->b, "%s  if (q < QE) {\n", ind);
  } else {
    evtc_sb_printf(x->b, "%sfor (CI q = QB + lane; q < QE; q += %d) {\n%s  {\n", ind, x->nt, ind);
  }
  evtc_sb_printf(x->b, "%s    const CI cb = q * %d;\n", ind, x->V);
}

/* cp.async of the thread's vectors of row `row` of every prefetched load into the block's buffers at element
 * offset `buf` (one buffer a row, pl->prefetch of them, used in turn), as one group. */
static void emit_prefetch(const rows_ctx *x, const char *ind, const char *row, const char *buf) {
  const evtc_kernel *k = x->k;
  evtc_sb *b = x->b;
  evtc_sb_printf(b, "%sif (%s < RR) {\n", ind, row);
  open_cols(x, ind, false);
  for (int i = 0; i < k->n_v; i++) {
    if (!prefetched(x, i)) continue;
    int64_t sr;
    evtc_cuda_load_vectorizes(k, &k->v[i], x->V, &sr);
    evtc_sb_printf(b, "%s    evtc_cp_async16(pf%d + %s + cb, a%d + (%lldLL + (%s) * %lldLL + cb));\n", ind, i, buf, k->v[i].arg,
                   (long long)k->v[i].offset, row, (long long)sr);
  }
  evtc_sb_printf(b, "%s  }\n%s}\n%s}\n%sevtc_cp_async_commit();\n", ind, ind, ind, ind);
}

/* Value a is a cast of a bf16 value to f32 (exact: a max of the casts is the cast of the max). */
static bool widens_bf16(const evtc_kernel *k, int a) {
  const evtc_vnode *v = &k->v[a];
  return v->kind == EVTC_V_COMPUTE && v->op == EVTC_OP_CAST && v->dtype == EVTC_F32 && k->v[v->args[0]].dtype == EVTC_BF16;
}

/* A row's max or min i in pass p of a bf16 load's vectors as they are, or of their widening to f32 (a cross-entropy
 * of bf16 logits in f32 math; on a plain vector, pf, a value folded into the load's counts): the load, whose vectors
 * evtc_comb_bf16x2 combines packed, two values an instruction, where each value took a widening and a max; else -1.
 * Not for a row ending in a partial vector (its padding). */
static int packed_root(const rows_ctx *x, const evtc_cuda_plain *pf, int i, int p) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_info *in = &x->info;
  if (!col_red(x, i, p) || red_op(k->v[i].op) == 0 || !f32_acc(x, i) || x->V < 2 || x->tail) return -1;
  int a = k->v[i].args[0];
  if (pf && pf->fact[a] == EVTC_PLAIN_SAME) a = pf->same[a];
  if (widens_bf16(k, a)) a = k->v[a].args[0];
  if (pf && pf->fact[a] == EVTC_PLAIN_SAME) a = pf->same[a];
  const evtc_vnode *l = &k->v[a];
  bool from_kept = x->pl->cache && in->kept[a] && in->first[a] < p && !held(x, a);
  bool vector = in->need[(size_t)p * (size_t)k->n_v + (size_t)a] && in->vec_load[a] && !from_kept && in->alias[a] < 0;
  return l->kind == EVTC_V_LOAD && l->dtype == EVTC_BF16 && vector ? a : -1;
}

/* Pass p's element loop over a vector's columns (or its one column), then the vector's stores; on a plain vector
 * (pf) with its values folded. */
static void emit_elements(const rows_ctx *x, int p, const evtc_cuda_plain *pf) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  const evtc_cuda_rows_info *in = &x->info;
  const bool *need = in->need + (size_t)p * (size_t)k->n_v;
  evtc_sb *b = x->b;
  const char *ind = "        ";
  if (x->V > 1) {
    evtc_sb_printf(b, "#pragma unroll\n        for (int e = 0; e < %d; e++) {\n          CI c = %s + e;\n", x->V,
                   x->opaque_c ? "cbo" : "cb");
    if (x->tail) evtc_sb_printf(b, "          if (c >= CC) continue;\n");
    ind = "          ";
  } else {
    evtc_sb_printf(b, "        const int e = 0;\n        CI c = cb;\n        (void)e;\n");
  }
  if (x->opaque_c && x->V == 1) evtc_sb_printf(b, "%sasm volatile(\"\" : \"+%s\"(c));\n", ind, k->cols < (int64_t)1 << 30 ? "r" : "l");
  bool *computed = malloc((size_t)k->n_v * sizeof *computed);
  for (int i = 0; i < k->n_v; i++) computed[i] = computed_in_pass(x, i, p) && !(pf && pf->fact[i] != EVTC_PLAIN_NONE);
  evtc_cpu_vctx vx = {.k = k, .sb = b, .ind = ind, .storage = rows_storage, .storage_ctx = x, .computed = computed};
  if (x->V > 1) vx.vec_c0 = x->opaque_c ? "cbo" : "cb";
  if (x->V > 1 && shares_philox(x)) {
    vx.rng_block = "rb4 + (e >> 2)";
    vx.rng_word = "e & 3";
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (need[i] && is_value(v)) emit_node_value(x, &vx, i, p, pf);
    if (reduce_in_pass(k, i, p) && (v->cls != EVTC_VC_COL || col_red(x, i, p))) {
      int op = red_op(v->op), a = v->args[0];
      if (pf && op == 0 && pf->fact[a] == EVTC_PLAIN_ZERO) continue;    /* a sum skips a zero */
      if (packed_root(x, pf, i, p) >= 0) continue;                        /* after the loop, packed */
      bool f = f32_acc(x, i);
      const char *comb = f ? "evtc_combf" : "evtc_comb", *ct = f ? "float" : "double";
      if (v->cls == EVTC_VC_COL) evtc_sb_printf(b, "%sacc%d = %s<%d>(acc%d, (%s)v%d);\n", ind, i, comb, op, i, ct, a);
      else if (v->cls == EVTC_VC_SCALAR) evtc_sb_printf(b, "%spa%d = %s<%d>(pa%d, (%s)v%d);\n", ind, i, comb, op, i, ct, a);
      else {
        const char *rt = row_type(x, i), *idx = pl->row_partials == 0 ? x->kidx : pl->row_partials == 1 ? x->sidx : "c";
        f = strcmp(rt, "float") == 0;
        evtc_sb_printf(b, "%spr%d[%s] = %s<%d>(pr%d[%s], (%s)v%d);\n", ind, i, idx, f ? "evtc_combf" : "evtc_comb", op, i,
                       idx, rt, a);
      }
    }
    if (store_in_pass(k, i, p)) evtc_cpu_emit_store(&vx, i);
  }
  free(computed);
  if (x->V > 1) {
    evtc_sb_printf(b, "        }\n");
    for (int i = 0; i < k->n_v; i++)
      if (packed_root(x, pf, i, p) >= 0)
        evtc_sb_printf(b, "        evtc_comb_bf16x2<%d>(acp%d, lv%d);\n", red_op(k->v[i].op), i, packed_root(x, pf, i, p));
    for (int i = 0; i < k->n_v; i++)
      if (over_load(x, i) >= 0 && need[i] && in->first[i] == p && !plain_in_place(x, pf, i))
        evtc_sb_printf(b, "        *(evtc_vec<%s, %d> *)(pf%d + pb + cb) = hw%d;\n", evtc_cpu_storage_ctype(k->v[i].dtype), x->V,
                       over_load(x, i), i);
    for (int i = 0; i < k->n_v; i++) {
      if (!store_in_pass(k, i, p) || k->v[i].cls != EVTC_VC_FULL) continue;
      if (!x->tail)
        evtc_sb_printf(b, "        *(evtc_vec<%s, %d> *)(a%d + (r * CC + cb)) = sv%d;\n",
                       evtc_cpu_storage_ctype(k->v[i].dtype), x->V, k->v[i].arg, i);
      else if (staged(x, i) >= 0)
        evtc_sb_printf(b, "        *(evtc_vec<%s, %d> *)(stg%d + 8 * (lane & 31)) = sv%d;\n", evtc_cpu_storage_ctype(k->v[i].dtype),
                       x->V, staged(x, i), i);
    }
  }
}

/* The facts of pass p's values on a row's plain vectors (cuda_rows_plain.c); false when none fold. */
static bool plain_facts(const rows_ctx *x, int p, evtc_cuda_plain *pf) {
  if (x->V == 1) return false;
  bool *computed = malloc((size_t)x->k->n_v * sizeof *computed);
  for (int i = 0; i < x->k->n_v; i++) computed[i] = computed_in_pass(x, i, p);
  bool any = evtc_cuda_plain_facts(x->k, computed, x->V, pf);
  free(computed);
  return any;
}

static void emit_pass(const rows_ctx *x, int p) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  const evtc_cuda_rows_info *in = &x->info;
  const bool *need = in->need + (size_t)p * (size_t)k->n_v;
  evtc_sb *b = x->b;
  if (!in->has_work[p]) return;
  evtc_cuda_plain plain;
  const bool has_plain = plain_facts(x, p, &plain);
  bool *packs = calloc((size_t)k->n_v, sizeof *packs);    /* some loop of the pass combines i packed (acp<i>) */
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    bool f = f32_acc(x, i);
    if (col_red(x, i, p) || (reduce_in_pass(k, i, p) && v->cls == EVTC_VC_SCALAR))
      evtc_sb_printf(b, "    %s %s%d = %s;\n", f ? "float" : "double", v->cls == EVTC_VC_COL ? "acc" : "pa", i,
                     f ? red_initf(v->op) : red_init(v->op));
    packs[i] = packed_root(x, NULL, i, p) >= 0 || (has_plain && packed_root(x, &plain, i, p) >= 0);
    if (packs[i])   /* two bf16 -inf (max) or +inf (min) */
      evtc_sb_printf(b, "    uint32_t acp%d = %s;\n", i, red_op(v->op) == 1 ? "0xff80ff80u" : "0x7f807f80u");
  }
  open_cols(x, "    ", true);
  if (x->V > 1) {
    for (int i = 0; i < k->n_v; i++) {
      const evtc_vnode *v = &k->v[i];
      const char *st = evtc_cpu_storage_ctype(v->dtype);
      bool from_kept = pl->cache && in->kept[i] && in->first[i] < p && !held(x, i);
      if (need[i] && v->kind == EVTC_V_LOAD && in->vec_load[i] && !from_kept && in->alias[i] < 0) {
        if (prefetched(x, i)) {
          evtc_sb_printf(b, "        const evtc_vec<%s, %d> lv%d = *(const evtc_vec<%s, %d> *)(pf%d + pb + cb);\n", st, x->V, i,
                         st, x->V, i);
        } else if (hoisted(x, i)) {
          evtc_sb_printf(b, "        const evtc_vec<%s, %d> lv%d = lh%d[j];\n", st, x->V, i, i);
        } else if (ahead(x, i)) {
          evtc_sb_printf(b, "        const evtc_vec<%s, %d> lv%d = evtc_vec_bits<%s, %d>(rx%d[j]);\n", st, x->V, i, st, x->V, i);
        } else {
          int64_t sr;
          evtc_cuda_load_vectorizes(k, v, x->V, &sr);
          evtc_sb_printf(b, "        const evtc_vec<%s, %d> lv%d = *(const evtc_vec<%s, %d> *)(a%d + (%lldLL + r * %lldLL + cb));\n",
                         st, x->V, i, st, x->V, v->arg, (long long)v->offset, (long long)sr);
        }
      }
      if (store_in_pass(k, i, p) && v->cls == EVTC_VC_FULL && (!x->tail || staged(x, i) >= 0))
        evtc_sb_printf(b, "        evtc_vec<%s, %d> sv%d;\n", st, x->V, i);
      int h = over_load(x, i);
      if (h >= 0 && need[i] && in->first[i] < p)
        evtc_sb_printf(b, "        const evtc_vec<%s, %d> hv%d = *(const evtc_vec<%s, %d> *)(pf%d + pb + cb);\n", st, x->V, i,
                       st, x->V, h);
      else if (h >= 0 && need[i])
        evtc_sb_printf(b, "        evtc_vec<%s, %d> hw%d = {};\n", st, x->V, i);
    }
    if (shares_philox(x)) evtc_sb_printf(b, "        const uint64_t rb4 = (uint64_t)(r * CC + cb) >> 2;\n");
    /* a vector's first column the compiler cannot see through: otherwise it keeps c-dependent values (one-hot
     * compares) of every column from one pass for the next, in registers, instead of recomputing them (one opaque
     * value a vector: one a column spilled GPT-2's 56-column rows) */
    if (x->opaque_c)
      evtc_sb_printf(b, "        CI cbo = cb;\n        asm volatile(\"\" : \"+%s\"(cbo));\n", k->cols < (int64_t)1 << 30 ? "r" : "l");
  }
  if (has_plain) {     /* the vector's values folded where it is plain, as computed elsewhere */
    evtc_sb_printf(b, "        if (%s) {\n", plain.cond);
    emit_elements(x, p, &plain);
    evtc_sb_printf(b, "        } else {\n");
  }
  emit_elements(x, p, NULL);
  if (has_plain) {
    evtc_sb_printf(b, "        }\n");
    evtc_cuda_plain_free(&plain);
  }
  evtc_sb_printf(b, "      }\n");
  for (int i = 0; i < k->n_v; i++)     /* every lane of the warp, whether it owns this j's vector or not */
    if (store_in_pass(k, i, p) && x->V > 1 && staged(x, i) >= 0) emit_stage_out(x, i);
  evtc_sb_printf(b, "    }\n");
  for (int i = 0; i < k->n_v; i++)
    if (reduce_in_pass(k, i, p) && k->v[i].cls == EVTC_VC_SCALAR)
      evtc_sb_printf(b, "    ps%d = evtc_comb<%d>(ps%d, (double)pa%d);\n", i, red_op(k->v[i].op), i, i);
  for (int i = 0; i < k->n_v; i++)
    if (packs[i])
      evtc_sb_printf(b, "    acc%d = evtc_combf<%d>(acc%d, evtc_combf<%d>(evtc_bf2f((uint16_t)acp%d), evtc_bf2f((uint16_t)(acp%d >> 16))));\n",
                     i, red_op(k->v[i].op), i, red_op(k->v[i].op), i, i);
  free(packs);
  if (p == x->pf_pass) emit_prefetch(x, "    ", "rn", "pb");   /* into the buffer this row is done with */
  char next[64];
  next_row(x, next, sizeof next);
  emit_ahead(x, p, "    ", next);
}

/* COL reduction i is a max or min of floats (the threads' partials f32): its warp shuffles stay in f32, exactly. */
static bool float_extremum(const rows_ctx *x, int i) { return red_op(x->k->v[i].op) != 0 && f32_acc(x, i); }

/* "const int rb<p> = ...": which of the two reduction buffers a row's round `round` (counted over the kernel's rows)
 * uses -- alternating, so that one barrier a round is enough. */
static void emit_round_buffer(const rows_ctx *x, int p, int round) {
  const int rounds = x->info.col_rounds;
  if (rounds % 2 == 0) evtc_sb_printf(x->b, "    const int rb%d = %d;\n", p, round & 1);
  else evtc_sb_printf(x->b, "    const int rb%d = (int)((it * %d + %d) & 1);\n", p, rounds, round);
}

/* The COL reductions pass p finishes: one round across the row's threads. */
static void emit_round(const rows_ctx *x, int p, int round) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  evtc_sb *b = x->b;
  int m = 0;
  for (int i = 0; i < k->n_v; i++) {
    if (!col_red(x, i, p)) continue;
    if (float_extremum(x, i))
      evtc_sb_printf(b, "    double s%d = (double)evtc_warp_reducef<%d>(acc%d);\n", i, red_op(k->v[i].op), i);
    else evtc_sb_printf(b, "    double s%d = evtc_warp_reduce<%d>((double)acc%d);\n", i, red_op(k->v[i].op), i);
    m++;
  }
  if (m == 0) return;
  if (x->block) {
    int nw = x->nt / 32;
    emit_round_buffer(x, p, round);
    evtc_sb_printf(b, "    if ((threadIdx.x & 31) == 0) {\n");
    m = 0;
    for (int i = 0; i < k->n_v; i++)
      if (col_red(x, i, p)) evtc_sb_printf(b, "      evtc_rr[rb%d][%d][threadIdx.x >> 5] = s%d;\n", p, m++, i);
    evtc_sb_printf(b, "    }\n    %s;\n", pl->cluster > 1 ? "evtc_cluster_sync()" : "__syncthreads()");
    m = 0;
    for (int i = 0; i < k->n_v; i++) {
      if (!col_red(x, i, p)) continue;
      int op = red_op(k->v[i].op);
      if (pl->cluster == 1 && nw <= 8 && !x->xwarp_shfl) {
        /* every thread reads the warps' values (broadcasts) and combines them in the same order */
        int chains = nw < 4 ? nw : 4;
        for (int c = 0; c < chains; c++) {
          evtc_sb_printf(b, "    double t%d_%d = evtc_rr[rb%d][%d][%d];\n", i, c, p, m, c);
          for (int w = c + chains; w < nw; w += chains)
            evtc_sb_printf(b, "    t%d_%d = evtc_comb<%d>(t%d_%d, evtc_rr[rb%d][%d][%d]);\n", i, c, op, i, c, p, m, w);
        }
        if (chains == 4)
          evtc_sb_printf(b, "    s%d = evtc_comb<%d>(evtc_comb<%d>(t%d_0, t%d_1), evtc_comb<%d>(t%d_2, t%d_3));\n", i, op, op, i, i, op,
                         i, i);
        else if (chains == 1) evtc_sb_printf(b, "    s%d = t%d_0;\n", i, i);
        else if (chains == 2) evtc_sb_printf(b, "    s%d = evtc_comb<%d>(t%d_0, t%d_1);\n", i, op, i, i);
        else evtc_sb_printf(b, "    s%d = evtc_comb<%d>(evtc_comb<%d>(t%d_0, t%d_1), t%d_2);\n", i, op, op, i, i, i);
        m++;
        continue;
      }
      evtc_sb_printf(b, "    s%d = %s;\n    for (int w = threadIdx.x & 31; w < %d; w += 32)\n", i, red_init(k->v[i].op),
                     nw * pl->cluster);
      if (pl->cluster > 1)
        evtc_sb_printf(b, "      s%d = evtc_comb<%d>(s%d, evtc_dsmem_ld(&evtc_rr[rb%d][%d][w %% %d], (unsigned)(w / %d)));\n", i,
                       op, i, p, m, nw, nw);
      else evtc_sb_printf(b, "      s%d = evtc_comb<%d>(s%d, evtc_rr[rb%d][%d][w]);\n", i, op, i, p, m);
      if (float_extremum(x, i)) evtc_sb_printf(b, "    s%d = (double)evtc_warp_reducef<%d>((float)s%d);\n", i, op, i);
      else evtc_sb_printf(b, "    s%d = evtc_warp_reduce<%d>(s%d);\n", i, op, i);
      m++;
    }
  }
  for (int i = 0; i < k->n_v; i++)
    if (col_red(x, i, p)) {
      char s[24];
      snprintf(s, sizeof s, "s%d", i);
      emit_finish(b, "    ", &k->v[i], i, s);
    }
  for (int i = 0; i < k->n_v; i++)
    if (reduce_in_pass(k, i, p) && k->v[i].cls == EVTC_VC_COL && x->info.alias[i] >= 0)
      evtc_sb_printf(b, "    %s v%d = v%d;\n", evtc_cpu_ctype(k->v[i].dtype), i, x->info.alias[i]);
}

/* The online round after passes p and p + 1 (decide_online): each warp's max (v<m>, taken across the warp before
 * pass p + 1) and its sum (acc<s> summed across the warp), combined across the row's warps in shared memory like
 * emit_round's values, the sums in double (evtc_warp_reduce_lse: each warp's sum scaled by e^(its max - the row's)
 * once); then v<m> is the row's max and v<s> its sum. */
static void emit_online_round(const rows_ctx *x, int round) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  evtc_sb *b = x->b;
  const int m = x->online_max, s = x->online_sum, p = x->online + 1;
  const int nw = x->nt / 32, n = nw * pl->cluster;
  evtc_sb_printf(b, "    double os = evtc_warp_reduce<0>((double)acc%d);\n", s);
  emit_round_buffer(x, p, round);
  evtc_sb_printf(b, "    if ((threadIdx.x & 31) == 0) {\n      evtc_rr[rb%d][0][threadIdx.x >> 5] = (double)v%d;\n"
                    "      evtc_rr[rb%d][1][threadIdx.x >> 5] = os;\n    }\n    %s;\n    float om = -INFINITY;\n    os = 0.0;\n",
                 p, m, p, pl->cluster > 1 ? "evtc_cluster_sync()" : "__syncthreads()");
  if (pl->cluster > 1) {
    evtc_sb_printf(b, "    for (int w = threadIdx.x & 31; w < %d; w += 32)\n"
                      "      evtc_lse_comb(om, os, (float)evtc_dsmem_ld(&evtc_rr[rb%d][0][w %% %d], (unsigned)(w / %d)),\n"
                      "                    evtc_dsmem_ld(&evtc_rr[rb%d][1][w %% %d], (unsigned)(w / %d)));\n",
                   n, p, nw, nw, p, nw, nw);
  } else {
    evtc_sb_printf(b, "    if ((threadIdx.x & 31) < %d) {\n      om = (float)evtc_rr[rb%d][0][threadIdx.x & 31];\n"
                      "      os = evtc_rr[rb%d][1][threadIdx.x & 31];\n    }\n",
                   n, p, p);
  }
  evtc_sb_printf(b, "    evtc_warp_reduce_lse(om, os);\n    v%d = om;\n", m);
  emit_finish(b, "    ", &k->v[s], s, "os");
}

/* A statement for each of the thread's own columns c, over all its vectors (j, e in scope when unrolled). */
static void for_own_cols(const rows_ctx *x, const char *stmt) {
  evtc_sb *b = x->b;
  open_cols(x, "  ", false);
  evtc_sb_printf(b, "#pragma unroll\n      for (int e = 0; e < %d; e++) {\n        const CI c = cb + e;\n%s        %s\n      }\n",
                 x->V, x->tail ? "        if (c >= CC) continue;\n" : "", stmt);
  evtc_sb_printf(b, "    }\n  }\n");
}

/* Whether reduction v's partials are combined by NAME_fin, as a column of ROW slots. */
static bool fin_row(const evtc_vnode *v, const evtc_cuda_rows_plan *pl) {
  return v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_ROW && !pl->row_direct;
}

/* The ROW / SCALAR partial slots combined in order and stored, by blocks of `threads` threads.  A ROW reduction's
 * column is summed by threads / FIN_COLS slot groups over every such slot in four partials (a fixed order), the
 * loads of every ROW reduction of the kernel in one loop, so that all of them are in flight together (BERT-Large's
 * layernorm gradient: three); then each warp's groups by shuffles (lanes FIN_COLS apart), the warps' sums of
 * every ROW reduction through shared memory (evtc_fin) at one barrier, and a thread per reduction and column
 * combines its warps in order, where one thread per column had walked all FIN_SPLIT groups, one reduction
 * after another (BERT-Large's layernorm gradient 0.974x, H200, 2026-12-01); a SCALAR reduction's slots by block
 * 0.  In NAME_fin a block is one work item of FIN_COLS columns; in the main kernel (in_main: after the grid-wide
 * barrier) the blocks walk the items, their buffers in its dynamic shared memory, and the partials, which other
 * SMs wrote, are read from L2. */
static void emit_fin_body(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl, int threads, bool in_main) {
  const int fc = EVTC_CUDA_FIN_COLS, fs = threads / fc, nw = threads / 32;
  const char *st = pl->slot_f32 ? "float" : "double";   /* a ROW slot's element */
  int n_rows = 0;
  for (int i = 0; i < k->n_v; i++) n_rows += fin_row(&k->v[i], pl);
  const int fin_len = (n_rows > 0 ? n_rows : 1) * nw;    /* evtc_fin's rows: a warp's sums of each ROW reduction */
  if (in_main)
    evtc_sb_printf(b, "  {\n  const int g = threadIdx.x / %d;\n  double (*evtc_fin)[%d] = (double (*)[%d])evtc_smem;\n"
                      "  double *evtc_red = (double *)evtc_smem;\n  (void)g; (void)evtc_fin; (void)evtc_red;\n",
                   fc, fc, fc);
  else
    evtc_sb_printf(b, "  {\n  const int g = threadIdx.x / %d;\n  __shared__ double evtc_fin[%d][%d];\n"
                      "  __shared__ double evtc_red[32];\n  (void)g; (void)evtc_fin; (void)evtc_red;\n",
                   fc, fin_len, fc);
  if (n_rows > 0) {
    if (in_main) evtc_sb_printf(b, "  for (int64_t fb = blockIdx.x; fb < %uLL; fb += gridDim.x) {\n", pl->fin_grid);
    else evtc_sb_printf(b, "  {\n    const int64_t fb = blockIdx.x;\n");
    evtc_sb_printf(b, "    const int64_t c = fb * %d + threadIdx.x %% %d;\n", fc, fc);
    for (int i = 0; i < k->n_v; i++)
      if (fin_row(&k->v[i], pl))
        evtc_sb_printf(b, "    double f%d_0 = %s, f%d_1 = f%d_0, f%d_2 = f%d_0, f%d_3 = f%d_0;\n", i, red_init(k->v[i].op), i, i,
                       i, i, i, i);
    const long long slots = (long long)pl->row_slots;
    evtc_sb_printf(b, "    if (c < CC) {\n      int64_t s = g;\n      for (; s + %d < %lldLL; s += %d) {\n", 3 * fs, slots, 4 * fs);
    for (int i = 0; i < k->n_v; i++) {
      if (!fin_row(&k->v[i], pl)) continue;
      int op = red_op(k->v[i].op);
      long long off = (long long)evtc_cuda_reduce_offset(k, pl, i);
      for (int u = 0; u < 4; u++)
        evtc_sb_printf(b, "        f%d_%d = evtc_comb<%d>(f%d_%d, (double)__ldcg((const %s *)(red + %lldLL) + (s + %d) * CC + c));\n",
                       i, u, op, i, u, st, off, u * fs);
    }
    evtc_sb_printf(b, "      }\n      for (; s < %lldLL; s += %d) {\n", slots, fs);
    for (int i = 0; i < k->n_v; i++)
      if (fin_row(&k->v[i], pl))
        evtc_sb_printf(b, "        f%d_0 = evtc_comb<%d>(f%d_0, (double)__ldcg((const %s *)(red + %lldLL) + s * CC + c));\n", i,
                       red_op(k->v[i].op), i, st, (long long)evtc_cuda_reduce_offset(k, pl, i));
    evtc_sb_printf(b, "      }\n    }\n");
    int r = 0;
    for (int i = 0; i < k->n_v; i++) {    /* each warp's groups, by shuffles; lanes 0 .. fc - 1 write the warp's sums */
      if (!fin_row(&k->v[i], pl)) continue;
      int op = red_op(k->v[i].op);
      evtc_sb_printf(b, "    {\n      double a = evtc_comb<%d>(evtc_comb<%d>(f%d_0, f%d_1), evtc_comb<%d>(f%d_2, f%d_3));\n"
                        "      for (int o = %d; o < 32; o <<= 1) a = evtc_comb<%d>(a, __shfl_xor_sync(0xffffffffu, a, o));\n"
                        "      if (threadIdx.x %% 32 < %d) evtc_fin[%d + threadIdx.x / 32][threadIdx.x %% 32] = a;\n    }\n",
                     op, op, i, i, op, i, i, fc, op, fc, r * nw);
      r++;
    }
    evtc_sb_printf(b, "    __syncthreads();\n");
    r = 0;
    for (int i = 0; i < k->n_v; i++) {    /* thread r * fc + column: reduction r's column, its warps in order */
      if (!fin_row(&k->v[i], pl)) continue;
      evtc_sb_printf(b, "    if (g == %d && c < CC) {\n      double acc = evtc_fin[%d][threadIdx.x %% %d];\n"
                        "      for (int w = 1; w < %d; w++) acc = evtc_comb<%d>(acc, evtc_fin[%d + w][threadIdx.x %% %d]);\n",
                     r, r * nw, fc, nw, red_op(k->v[i].op), r * nw, fc);
      emit_finish_stores(b, k, "      ", i, "acc");
      evtc_sb_printf(b, "    }\n");
      r++;
    }
    evtc_sb_printf(b, "    __syncthreads();\n  }\n");
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!(v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_SCALAR)) continue;
    int op = red_op(v->op);
    evtc_sb_printf(b, "  if (blockIdx.x == 0) {\n    double acc = %s;\n    for (int64_t s = threadIdx.x; s < %lldLL; s += %d)\n"
                      "      acc = evtc_comb<%d>(acc, __ldcg(red + %lldLL + s));\n    acc = evtc_block_reduce<%d>(acc, evtc_red);\n"
                      "    if (threadIdx.x == 0) {\n",
                   red_init(v->op), (long long)pl->scalar_slots, threads, op, (long long)evtc_cuda_reduce_offset(k, pl, i), op);
    emit_finish_stores(b, k, "      ", i, "acc");
    evtc_sb_printf(b, "    }\n  }\n");
  }
  evtc_sb_printf(b, "  }\n");
}

/* NAME_fin: the partials combined by a kernel of their own, blocks of FIN_COLS x FIN_SPLIT threads. */
static void emit_fin(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  const int threads = EVTC_CUDA_FIN_COLS * EVTC_CUDA_FIN_SPLIT;
  evtc_cuda_emit_head(b, k, "_fin", threads);
  if (pl->fin_dependent)      /* launched while the main kernel drains: its partials are complete past this */
    evtc_sb_printf(b, "#if __CUDA_ARCH__ >= 900\n  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n#endif\n");
  evtc_sb_printf(b, "  const int64_t CC = %lldLL;\n  (void)CC;\n  const double *red = (const double *)scratch;\n",
                 (long long)k->cols);
  emit_fin_body(b, k, pl, threads, false);
  evtc_sb_printf(b, "}\n\n");
}

/* Kernel head: launch bounds (threads, blocks per SM) and the cluster shape. */
static void emit_head(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  evtc_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d, %d) ", pl->threads * pl->rows_per_block, pl->min_blocks);
  if (pl->cluster > 1) evtc_sb_printf(b, "__cluster_dims__(%d, 1, 1) ", pl->cluster);
  evtc_sb_printf(b, "%s(evtc_params P, const uint64_t *stepp, int *err, void *scratch) {\n"
                    "  const uint64_t step = *stepp;\n  void *const *args = P.a;\n"
                    "  (void)args; (void)step; (void)err; (void)scratch;\n", k->name);
  evtc_cpu_emit_args(b, k);
  if (pl->fin_dependent)      /* NAME_fin may be launched (it waits for this grid's end: fin_dependent_plan) */
    evtc_sb_printf(b, "#if __CUDA_ARCH__ >= 900\n  asm volatile(\"griddepcontrol.launch_dependents;\");\n#endif\n");
}

static void emit_partials(const rows_ctx *x) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  evtc_sb *b = x->b;
  int64_t smem_off = 0;
  if (pl->cache == 2) {
    for (int i = 0; i < k->n_v; i++)
      if (x->info.kept[i]) {
        const char *t = k->v[i].dtype == EVTC_BOOL ? "uint8_t" : evtc_cpu_ctype(k->v[i].dtype);
        evtc_sb_printf(b, "  %s *sk%d = (%s *)(evtc_smem + %lld);\n", t, i, t, (long long)smem_off);
        smem_off += (k->cols * evtc_cuda_value_bytes(k->v[i].dtype) + 15) / 16 * 16;
      }
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (is_value(v) && v->cls == EVTC_VC_SCALAR) {
      evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  "};
      evtc_cuda_emit_value(&top, i);
    }
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].kind != EVTC_V_REDUCE) {
      evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "    "};
      evtc_sb_printf(b, "  if (blockIdx.x == 0 && threadIdx.x == 0)\n");
      evtc_cpu_emit_store(&top, i);
    }
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    if (v->cls == EVTC_VC_SCALAR) {
      evtc_sb_printf(b, "  double ps%d = %s;\n", i, red_init(v->op));
      continue;
    }
    char stmt[96];
    long long off = (long long)evtc_cuda_reduce_offset(k, pl, i);
    if (pl->row_partials == 0) {
      evtc_sb_printf(b, "  %s pr%d[%d];\n", row_type(x, i), i, pl->per_thread * x->V);
      snprintf(stmt, sizeof stmt, "pr%d[%s] = %s;", i, x->kidx, red_init(v->op));
      if (pl->row_flush) {
        for_own_cols(x, stmt);
        evtc_sb_printf(b, "  double *prd%d = (double *)(evtc_smem + %lld) + (int64_t)wib * %lld;\n", i, (long long)smem_off,
                       (long long)x->cp);
        smem_off += (int64_t)pl->rows_per_block * x->cp * 8;
        snprintf(stmt, sizeof stmt, "prd%d[%s] = %s;", i, x->sidx, red_init(v->op));
      }
    } else if (pl->row_partials == 1) {
      evtc_sb_printf(b, "  %s *pr%d = (%s *)(evtc_smem + %lld) + (int64_t)wib * %lld;\n", x->pt, i, x->pt, (long long)smem_off,
                     (long long)x->cp);
      smem_off += (int64_t)pl->rows_per_block * x->cp * (pl->row_acc_f32 ? 4 : 8);
      snprintf(stmt, sizeof stmt, "pr%d[%s] = %s;", i, x->sidx, red_init(v->op));
    } else {
      evtc_sb_printf(b, "  double *pr%d = red + %lldLL + slot * CC;\n", i, off);
      snprintf(stmt, sizeof stmt, "pr%d[c] = %s;", i, red_init(v->op));
    }
    for_own_cols(x, stmt);
  }
  for (int i = 0; i < k->n_v; i++)
    if (prefetched(x, i)) {
      const char *st = evtc_cpu_storage_ctype(k->v[i].dtype);
      evtc_sb_printf(b, "  %s *pf%d = (%s *)(evtc_smem + %lld);\n", st, i, st, (long long)smem_off);
      smem_off += pl->prefetch * ((x->cp * (int64_t)evtc_buffer_elem_size(k->v[i].dtype) + 15) / 16 * 16);
    }
  for (int s = 0; s < pl->stage_stores; s++) {
    evtc_sb_printf(b, "  uint16_t *stg%d = (uint16_t *)(evtc_smem + %lld) + (threadIdx.x >> 5) * %d;\n", s, (long long)smem_off,
                   EVTC_CUDA_STAGE_BYTES / 2);
    smem_off += (int64_t)(pl->threads / 32) * EVTC_CUDA_STAGE_BYTES;
  }
}

static void emit_partials_out(const rows_ctx *x) {
  const evtc_kernel *k = x->k;
  const evtc_cuda_rows_plan *pl = x->pl;
  evtc_sb *b = x->b;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    long long off = (long long)evtc_cuda_reduce_offset(k, pl, i);
    char stmt[192];
    if (v->cls == EVTC_VC_ROW && pl->row_direct) {   /* every row summed here: finish and store */
      open_cols(x, "  ", false);
      evtc_sb_printf(b, "#pragma unroll\n      for (int e = 0; e < %d; e++) {\n        const CI c = cb + e;\n", x->V);
      if (x->tail) evtc_sb_printf(b, "        if (c >= CC) continue;\n");
      char acc[48];
      snprintf(acc, sizeof acc, "pr%d[%s]", i, x->kidx);
      emit_finish_stores(b, k, "        ", i, acc);
      evtc_sb_printf(b, "      }\n    }\n  }\n");
    } else if (v->cls == EVTC_VC_ROW && pl->row_partials != 2) {
      char slot[80];
      const char *st = pl->slot_f32 ? "float" : "double";
      snprintf(slot, sizeof slot, "((%s *)(red + %lldLL))[slot * CC + c]", st, off);
      if (pl->row_flush) snprintf(stmt, sizeof stmt, "%s = (%s)prd%d[%s];", slot, st, i, x->sidx);
      else if (pl->row_partials == 0) snprintf(stmt, sizeof stmt, "%s = (%s)pr%d[%s];", slot, st, i, x->kidx);
      else snprintf(stmt, sizeof stmt, "%s = (%s)pr%d[%s];", slot, st, i, x->sidx);
      for_own_cols(x, stmt);
    } else if (v->cls == EVTC_VC_SCALAR && x->block) {
      evtc_sb_printf(b, "  ps%d = evtc_block_reduce<%d>(ps%d, evtc_r1);\n  if (threadIdx.x == 0) red[%lldLL + blockIdx.x] = ps%d;\n",
                     i, red_op(v->op), i, off, i);
    } else if (v->cls == EVTC_VC_SCALAR) {
      evtc_sb_printf(b, "  ps%d = evtc_warp_reduce<%d>(ps%d);\n  if (lane == 0) red[%lldLL + (int64_t)blockIdx.x * %d + wib] = ps%d;\n",
                     i, red_op(v->op), i, off, pl->rows_per_block, i);
    }
  }
}

void evtc_cuda_emit_rows(evtc_sb *b, const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  rows_ctx x = {.k = k, .pl = pl, .b = b, .V = pl->vec, .nt = pl->threads, .block = pl->threads > 32};
  x.kidx = pl->unrolled ? "j * VV + e" : "0";   /* register arrays need the unrolled loop */
  x.pt = pl->row_acc_f32 ? "float" : "double";
  x.pf_pass = -1;
  const char *xw = getenv("EVTC_CUDA_XWARP");
  x.xwarp_shfl = xw && strcmp(xw, "shfl") == 0;
  evtc_cuda_rows_info_init(&x.info, k, pl->vec, pl->cache != 0);
  decide_hoists(&x);
  for (int i = 0; i < k->n_v; i++) {
    if (prefetched(&x, i) && x.info.first[i] > x.pf_pass) x.pf_pass = x.info.first[i];
    if (prefetched(&x, i) && pl->pf_hold)        /* the buffer is read until the row's last pass */
      for (int p = 0; p < k->n_phases; p++)
        if (x.info.has_work[p] && p > x.pf_pass) x.pf_pass = p;
    x.opaque_c |= k->v[i].cls == EVTC_VC_FULL && k->v[i].kind == EVTC_V_ONE_HOT;
  }
  const int nt = pl->threads, rpb = pl->rows_per_block, n = pl->cluster;
  const long long nvec = (long long)((k->cols + pl->vec - 1) / pl->vec);
  x.tail = k->cols % pl->vec != 0;
  x.cp = (int64_t)nvec * pl->vec;
  decide_ahead(&x);
  decide_online(&x);
  if (x.online >= 0) {      /* its two passes finish their reductions in one round, of two values */
    x.info.col_rounds--;
    if (x.info.max_col_reds < 2) x.info.max_col_reds = 2;
  }
  /* by e first: a warp's 32 lanes (consecutive q) touch consecutive slots, where by column (q V + e) they would
     be V slots apart -- 16 lanes on one bank for f64 partials at V = 8 */
  snprintf(x.sidx, sizeof x.sidx, "e * %lld + q", (long long)nvec);
  emit_helpers(b);
  evtc_sb_printf(b, "#undef CI\n#define CI %s\n", k->cols < (int64_t)1 << 30 ? "int" : "int64_t");   /* column indices */
  emit_head(b, k, pl);
  evtc_sb_printf(b, "  const int64_t RR = %lldLL, CC = %lldLL;\n  (void)RR; (void)CC;\n  const int VV = %d;\n  (void)VV;\n"
                    "  double *red = (double *)scratch;\n  (void)red;\n"
                    "  const int lane = threadIdx.x %% %d, wib = threadIdx.x / %d;\n  (void)wib;\n",
                 (long long)k->rows, (long long)k->cols, pl->vec, nt, nt);
  if (pl->col_tiles) {
    long long tv = (long long)pl->threads * pl->per_thread;
    evtc_sb_printf(b, "  const int64_t tile = blockIdx.x %% %lldLL, slot = blockIdx.x / %lldLL;\n"
                      "  const CI QB = (CI)(tile * %lldLL), QE = QB + %lld < %lld ? QB + %lld : %lld;\n",
                   (long long)pl->col_tiles, (long long)pl->col_tiles, tv, tv, nvec, tv, nvec);
  } else if (n > 1)
    evtc_sb_printf(b, "  const unsigned crank = evtc_cluster_rank();\n  const int64_t slot = blockIdx.x / %d;\n"
                      "  const CI QB = (CI)crank * %lld, QE = QB + %lld < %lld ? QB + %lld : %lld;\n",
                   n, (long long)pl->chunk, (long long)pl->chunk, nvec, (long long)pl->chunk, nvec);
  else
    evtc_sb_printf(b, "  const int64_t slot = (int64_t)blockIdx.x * %d + wib;\n  const CI QB = 0, QE = %lld;\n", rpb, nvec);
  evtc_sb_printf(b, "  (void)slot; (void)QB; (void)QE;\n");
  if (x.block) {
    int m = x.info.max_col_reds > 0 ? x.info.max_col_reds : 1;
    evtc_sb_printf(b, "  __shared__ double evtc_rr[2][%d][32];\n  __shared__ double evtc_r1[32];\n  (void)evtc_rr; (void)evtc_r1;\n", m);
  }
  if (pl->smem) evtc_sb_printf(b, "  extern __shared__ __align__(16) unsigned char evtc_smem[];\n");
  emit_partials(&x);
  for (int d = 0; x.pf_pass >= 0 && d < pl->prefetch; d++) {   /* the first rows, one group each */
    char row[64], buf[32];
    snprintf(row, sizeof row, "slot + %d * (int64_t)gridDim.x", d);
    snprintf(buf, sizeof buf, "%lld", (long long)(d * x.cp));
    emit_prefetch(&x, "  ", row, buf);
  }
  for (int i = 0; i < k->n_v; i++) {
    if (!hoisted(&x, i)) continue;
    const char *st = evtc_cpu_storage_ctype(k->v[i].dtype);
    evtc_sb_printf(b, "  evtc_vec<%s, %d> lh%d[%d];\n", st, x.V, i, pl->per_thread);
    open_cols(&x, "  ", false);
    evtc_sb_printf(b, "      lh%d[j] = *(const evtc_vec<%s, %d> *)(a%d + (%lldLL + cb));\n    }\n  }\n", i, st, x.V,
                   k->v[i].arg, (long long)k->v[i].offset);
  }
  for (int i = 0; i < k->n_v; i++) {
    if (!ahead(&x, i)) continue;
    if (k->v[i].cls == EVTC_VC_FULL) {
      evtc_sb_printf(b, "  uint4 rx%d[%d];\n", i, pl->per_thread);
    } else {
      evtc_sb_printf(b, "  %s rxs%d = 0;\n", evtc_cpu_storage_ctype(k->v[i].dtype), i);
      emit_ahead_col(&x, i, "  ", "slot");
    }
  }
  emit_ahead(&x, -1, "  ", "slot");     /* the first row's */
  if (pl->col_tiles)        /* the group's rows, unrolled so that loads of several rows are in flight */
    evtc_sb_printf(b, "  const int64_t r0 = slot * %lldLL, r1 = QB + lane >= QE ? r0 : r0 + %lldLL < RR ? r0 + %lldLL : RR;\n"
                      "#pragma unroll %d\n  for (int64_t r = r0, it = 0; r < r1; r++, it++) {\n",
                   (long long)pl->row_group, (long long)pl->row_group, (long long)pl->row_group, pl->col_unroll);
  else if (n > 1) evtc_sb_printf(b, "  for (int64_t r = slot, it = 0; r < RR; r += gridDim.x / %d, it++) {\n", n);
  else evtc_sb_printf(b, "  for (int64_t r = slot, it = 0; r < RR; r += (int64_t)gridDim.x * %d, it++) {\n", rpb);
  evtc_sb_printf(b, "    (void)it;\n");
  if (x.pf_pass >= 0)    /* the thread's own copies of this row are in (one group a row, in order); row rn goes out
                          * after pass pf_pass, into this row's buffer */
    evtc_sb_printf(b, "    const int64_t rn = r + %d * (int64_t)gridDim.x;\n    const CI pb = (CI)(it %% %d) * %lld;\n"
                      "    %s;\n",
                   pl->prefetch, pl->prefetch, (long long)x.cp,
                   pl->prefetch > 1 ? "evtc_cp_async_wait1()" : "evtc_cp_async_wait()");
  if (pl->cache == 1)
    for (int i = 0; i < k->n_v; i++) {
      if (!x.info.kept[i] || held(&x, i)) continue;
      int cols = pl->per_thread * pl->vec;
      if (packed(&x, i)) evtc_sb_printf(b, "    uint32_t kh%d[%d] = {};\n", i, (cols + 1) / 2);
      else if (k->v[i].dtype == EVTC_BOOL) evtc_sb_printf(b, "    uint32_t kb%d[%d] = {};\n", i, (cols + 31) / 32);
      else evtc_sb_printf(b, "    %s kv%d[%d];\n", evtc_cpu_ctype(k->v[i].dtype), i, cols);
    }
  int round = 0;
  for (int p = 0; p <= k->n_phases; p++) {
    emit_phase_start(&x, p);
    if (p == x.online) {    /* pass p + 1 right after p, with the warp's own max; one round for both */
      emit_pass(&x, p);
      evtc_sb_printf(b, "    float v%d = evtc_warp_reducef<1>((float)acc%d);\n", x.online_max, x.online_max);
      emit_pass(&x, p + 1);
      emit_online_round(&x, round++);
      p++;
      continue;
    }
    if (p < k->n_phases) {
      emit_pass(&x, p);
      for (int i = 0; i < k->n_v; i++)
        if (col_red(&x, i, p)) {
          emit_round(&x, p, round);
          round++;
          break;
        }
    }
  }
  if (pl->row_flush) {                    /* every 8 rows and after the block's last: f32 partials into f64 */
    if (n > 1) evtc_sb_printf(b, "    if ((it & 7) == 7 || r + gridDim.x / %d >= RR) {\n", n);
    else evtc_sb_printf(b, "    if ((it & 7) == 7 || r + (int64_t)gridDim.x * %d >= RR) {\n", rpb);
    for (int i = 0; i < k->n_v; i++) {
      const evtc_vnode *v = &k->v[i];
      if (v->kind != EVTC_V_REDUCE || v->cls != EVTC_VC_ROW) continue;
      char stmt[256];
      snprintf(stmt, sizeof stmt, "prd%d[%s] = evtc_comb<%d>(prd%d[%s], (double)pr%d[%s]); pr%d[%s] = %s;", i, x.sidx,
               red_op(v->op), i, x.sidx, i, x.kidx, i, x.kidx, red_init(v->op));
      for_own_cols(&x, stmt);
    }
    evtc_sb_printf(b, "    }\n");
  }
  evtc_sb_printf(b, "  }\n");
  emit_partials_out(&x);
  if (pl->grid_finish) {    /* every block's partials written: combined here (grid_finish_plan) */
    if (x.pf_pass >= 0) evtc_sb_printf(b, "  evtc_cp_async_wait();\n");   /* no copy still bound for the buffers */
    evtc_sb_printf(b, "  evtc_grid_barrier((unsigned *)(red + %lldLL));\n", (long long)pl->barrier_offset);
    emit_fin_body(b, k, pl, nt * rpb, true);
  }
  if (n > 1) evtc_sb_printf(b, "  evtc_cluster_sync();\n");
  evtc_sb_printf(b, "}\n\n");
  evtc_cuda_rows_info_free(&x.info);
  free(x.hoist);
  free(x.ahead);
  if (pl->has_fin) emit_fin(b, k, pl);
}
