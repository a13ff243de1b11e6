/* cuda_rows_plan.c -- how a CUDA rows kernel runs: column vectors, what
 * each pass keeps, threads per row, clusters, occupancy.
 *
 * Memory-bound kernels reach the device's copy bandwidth only with wide
 * accesses, enough bytes in flight on every SM, and little arithmetic per
 * byte.  So columns move in 16-byte vectors (evtc_cuda_vec_width); a row
 * is read once, the FULL values later passes need being kept on chip
 * (evtc_cuda_rows_info: loads, dropout masks, values that would
 * otherwise need several kept inputs, in place of those inputs, and f16 /
 * bf16 values computed from one, in its place, as its bits) and
 * values the graph computes twice computed once; a thread owns about 16
 * columns, fewer where a row would get less than 4 warps, 32 in rows too
 * long for 16 (a 32000-column f32 row in one block of 1000 threads, in
 * registers), and a row longer still is split
 * over a thread-block cluster of 2-8 blocks that combine their reductions
 * through distributed shared memory.  The launch bounds ask the compiler
 * for the blocks per SM that a register estimate allows; kernels with ROW
 * reductions run one persistent wave (a partial row per block) and
 * prefetch the kept loads of the next two rows into shared memory (one
 * where a second buffer would cost blocks per SM), as do kernels with
 * enough arithmetic per column to hide the copy, the others a block per row.
 * Measured on an H200 (2026-11-29; bench/gpu.sh's workloads, each as one
 * fused kernel): f32 per-thread sums took softmax from 60 to 75% of copy
 * bandwidth, f32 partial rows flushed to f64 took a layernorm forward +
 * backward from 51 to 77-82%, a block per row beat 4-block clusters (94
 * against 73%), prefetching helped cross-entropy (83 against 62%) and
 * layernorm (77 against 56%) but not softmax (89 against 94%).  Through
 * the pass pipeline and the ILP plan (bench/gpu_bench.c, 13:50Z) the
 * layernorm kernel with one row prefetched ran 0.455 ms where the same
 * source built from the autodiff graph ran 0.32-0.36 (ptxas schedules the
 * two differently; one 8-warp block per SM leaves no slack), and 0.33-0.36
 * with two rows prefetched; the dropout + residual + layernorm block ran
 * 0.139 ms with 4 warps a row against 0.149 with 2, and prefetching its
 * loads that no later pass needs cost time (13:40Z: 0.157 against 0.149).
 *
 * Rows of a length no multiple of the vector (GPT-2's vocabulary, 50257)
 * still move vectors where the view has room for the last one (gemm-pad's
 * padded LM-head output, row stride 50264), the other accesses one column
 * at a time; such a row of bf16 takes 7 vectors a thread in one block (not
 * a cluster), held in the prefetch buffers rather than registers.  Before
 * (2026-11-29 profile) the row went scalar to 224 threads of 225 columns in
 * a shared-memory row cache, one block per SM: 2640 us.  Kernels without COL
 * reductions over few rows (a sum over the batch), or summing columns over
 * many, run as column tiles (col_tiles_plan).
 *
 * The environment can force choices, for measuring them side by side:
 * EVTC_CUDA_VEC=0 (one column per access), EVTC_CUDA_CLUSTER=n (1: never
 * a cluster), EVTC_CUDA_ROW_CACHE=regs|smem|none (where kept values live;
 * EVTC_CUDA_SMEM_ROWS=0, the earlier switch, means no cluster and none:
 * rows re-read from global memory), EVTC_CUDA_ROW_COLS=n (columns per
 * thread, even where a row gets less than 4 warps), EVTC_CUDA_MIN_BLOCKS=n
 * (blocks per SM the launch bounds ask for), EVTC_CUDA_PREFETCH=0|1|2 (rows
 * ahead), EVTC_CUDA_ROW_PARTIALS=regs|smem|scratch,
 * EVTC_CUDA_ROW_ACC=f32 (shared-memory partial rows in f32), EVTC_CUDA_SLOT=f64 (partial rows in scratch in
 * f64, not f32: f32_slots),
 * EVTC_CUDA_THREAD_ACC=f64 (per-thread sums in double), EVTC_CUDA_PF_HOLD=0|1
 * (prefetched rows read from their buffers in every pass), EVTC_CUDA_STAGE=0 (no
 * staged stores: column by column), EVTC_CUDA_GRID_FINISH=1 (partials combined by
 * the main kernel's blocks after a grid-wide barrier, not by NAME_fin: grid_finish_plan), EVTC_CUDA_COL_TILES=0|1
 * and EVTC_CUDA_COL_ROWS=n (column tiles: never / always; rows per group),
 * EVTC_CUDA_HOIST=0 (row-invariant loads again in every row: the emitter's
 * decide_hoists), EVTC_CUDA_AHEAD=0 (loads one pass reads waited for at the
 * row's start, not loaded a row ahead into registers: decide_ahead),
 * EVTC_CUDA_FIN_PDL=0 (NAME_fin launched after the main kernel ends, not as its
 * dependent: fin_dependent_plan).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "runtime/program_internal.h"

static const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;

static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

static bool env_is(const char *name, const char *value) {
  const char *s = getenv(name);
  return s && strcmp(s, value) == 0;
}

static bool uniform_load(const evtc_kernel *k, const evtc_vnode *v) {
  for (int d = 0; d < k->rank; d++)
    if (k->dom[d] > 1 && v->strides[d] != 0) return false;
  return true;
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool evtc_cuda_load_vectorizes(const evtc_kernel *k, const evtc_vnode *v, int vec, int64_t *row_stride) {
  if (vec <= 1 || v->kind != EVTC_V_LOAD || (v->cls != EVTC_VC_FULL && v->cls != EVTC_VC_ROW)) return false;
  int64_t inner = 1, sr = -1;
  for (int d = k->rank - 1; d >= k->split; d--) {   /* columns: row-major, stride 1 */
    if (k->dom[d] > 1 && v->strides[d] != inner) return false;
    inner *= k->dom[d];
  }
  inner = 1;
  for (int d = k->split - 1; d >= 0; d--) {         /* rows: one linear stride */
    if (k->dom[d] > 1) {
      if (v->strides[d] % inner != 0) return false;
      int64_t f = v->strides[d] / inner;
      if (sr >= 0 && f != sr) return false;
      sr = f;
    }
    inner *= k->dom[d];
  }
  if (sr < 0) sr = 0;
  *row_stride = sr;
  if (v->offset % vec != 0 || sr % vec != 0) return false;
  if (k->cols % vec == 0 || evtc_kernel_flat_fits(k)) return true;
  /* a row ending in a partial vector (rows template): the whole last vector of the last row lies in the buffer */
  int64_t numel = evtc_type_numel(&k->args[v->arg].node->type);
  return v->offset + (k->rows - 1) * sr + cdiv(k->cols, vec) * vec <= numel;
}

/* Whether rows kernel k has a streamed load that vec-column vectors can read although the row length is no
 * multiple of vec (a padded view: gemm-pad's LM head). */
static bool tail_vectors(const evtc_kernel *k, int vec) {
  if (evtc_kernel_flat_fits(k)) return false;
  for (int i = 0; i < k->n_v; i++) {
    int64_t sr;
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_FULL && !uniform_load(k, v) && evtc_cuda_load_vectorizes(k, v, vec, &sr)) return true;
  }
  return false;
}

int evtc_cuda_vec_width(const evtc_kernel *k) {
  if (env_is("EVTC_CUDA_VEC", "0")) return 1;
  size_t narrow = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    bool streamed = v->cls == EVTC_VC_FULL && (v->kind == EVTC_V_STORE || (v->kind == EVTC_V_LOAD && !uniform_load(k, v)));
    size_t s = evtc_buffer_elem_size(v->dtype);
    if (streamed && (narrow == 0 || s < narrow)) narrow = s;
  }
  int vec = (int)(16 / (narrow ? narrow : 4));
  if (vec > 8) vec = 8;
  /* rows kernels and flat kernels that need (r, c): a vector lies in one row */
  bool flat = k->kind != EVTC_ML_ROWS && evtc_kernel_flat_fits(k);
  int64_t extent = flat && !evtc_cpu_needs_rc(k) ? k->rows * k->cols : k->cols;
  while (vec > 1 && extent % vec != 0 && !(k->cols > 512 && tail_vectors(k, vec))) vec /= 2;
  return vec;
}

/* ---- what each pass computes and keeps ------------------------------------ */

static bool is_value(const evtc_vnode *v) { return v->kind != EVTC_V_REDUCE && v->kind != EVTC_V_STORE; }

static bool is_root(const evtc_kernel *k, const int *alias, int i, int p) {
  const evtc_vnode *v = &k->v[i];
  if (v->kind == EVTC_V_REDUCE) return alias[i] < 0 && v->phase == p + 1 && ((wide >> k->v[v->args[0]].cls) & 1);
  return v->kind == EVTC_V_STORE && v->phase == p && ((wide >> v->cls) & 1) && k->v[v->args[0]].kind != EVTC_V_REDUCE;
}

typedef struct walk {
  const evtc_kernel *k;
  evtc_cuda_rows_info *info;
  bool *need;          /* this pass */
  bool *computed;      /* in an earlier pass */
  bool *read_kept;     /* read from the kept copy in some pass */
  int *weight_seen;
  int stamp;
  int leaf;            /* the value weight() last counted 1 for: a streamed load or a kept value */
} walk;

static int canon(const int *alias, int i) { return alias[i] >= 0 ? alias[i] : i; }

/* Whether node i computes the same value as the earlier node j (value numbering: an autodiff graph
 * recomputes a layernorm's statistics and a softmax for its backward).  ROW and SCALAR reductions keep
 * their own partial slots. */
static bool same_value(const evtc_kernel *k, const int *alias, int i, int j) {
  const evtc_vnode *a = &k->v[i], *b = &k->v[j];
  if (a->kind != b->kind || a->cls != b->cls || a->dtype != b->dtype || a->op != b->op || a->n_args != b->n_args ||
      a->kind == EVTC_V_STORE || a->kind == EVTC_V_ACC || (a->kind == EVTC_V_REDUCE && a->cls != EVTC_VC_COL) ||
      memcmp(&a->value, &b->value, sizeof a->value) != 0)
    return false;
  for (int t = 0; t < a->n_args; t++)
    if (canon(alias, a->args[t]) != canon(alias, b->args[t])) return false;
  if (a->kind == EVTC_V_LOAD) {
    if (a->arg != b->arg || a->offset != b->offset) return false;
    for (int d = 0; d < k->rank; d++)
      if (a->strides[d] != b->strides[d]) return false;
  }
  if (a->kind == EVTC_V_RNG && a->seed != b->seed) return false;
  if (a->kind == EVTC_V_ONE_HOT && (a->dim != b->dim || a->depth != b->depth || a->check != b->check)) return false;
  if (a->kind == EVTC_V_STEP && (a->dim != b->dim || a->depth != b->depth || a->below != b->below)) return false;
  return true;
}

/* Kept values, loads and masks a value's recomputation reads (an RNG counts twice: it is costly). */
static int weight(walk *w, int i) {
  const evtc_vnode *v = &w->k->v[i];
  if (w->info->alias[i] >= 0) return weight(w, w->info->alias[i]);
  if (v->cls != EVTC_VC_FULL || !is_value(v) || w->weight_seen[i] == w->stamp) return 0;
  w->weight_seen[i] = w->stamp;
  if (w->info->kept[i] || (v->kind == EVTC_V_LOAD && !uniform_load(w->k, v))) {
    w->leaf = i;
    return 1;
  }
  if (v->kind == EVTC_V_LOAD) return 0;
  if (v->kind == EVTC_V_RNG) return 2;
  int s = 0;
  for (int a = 0; a < v->n_args; a++) s += weight(w, v->args[a]);
  return s;
}

/* Whether value i, computed in an earlier pass, is kept for a later one: a streamed load, an RNG, a value whose
 * recomputation reads two or more of those, or an f16 / bf16 value computed from one of them (another f16 / bf16
 * value or wider) in place of it (stands_for; the emitter holds it as its storage bits, as it would the other):
 * BERT-Large's MLM loss added the head's bias and gemm-pad's mask to the kept padded logits again in each of its
 * two later passes, each time loading and unpacking both vectors (H200, 2026-11-30, with the bf16 unpacking and
 * one-hot compares of the emitter: that kernel 1150 -> 884 us alone, 1037 -> 918 in the step). */
static bool worth_keeping(walk *w, int i) {
  const evtc_vnode *v = &w->k->v[i];
  if (v->cls != EVTC_VC_FULL || !is_value(v) || v->kind == EVTC_V_IMM) return false;
  if (v->kind == EVTC_V_LOAD) return !uniform_load(w->k, v);
  if (v->kind == EVTC_V_RNG) return true;
  w->stamp++;
  int s = weight(w, i);
  if (s >= 2) return true;
  if (s == 1 && v->kind == EVTC_V_COMPUTE && evtc_dtype_is_half(v->dtype) && evtc_buffer_elem_size(w->k->v[w->leaf].dtype) >= 2) {
    w->info->stands_for[i] = w->leaf;
    return true;
  }
  return false;
}

/* Values kept in place of another (stands_for) where the one their recomputation reads is still read kept by
 * some pass (of the walk just made): both would take registers, so the value goes (in node order, so that one kept in
 * place of a value that goes now finds the one before).  Whether any went. */
static bool drop_doubles(walk *w) {
  evtc_cuda_rows_info *info = w->info;
  bool any = false;
  for (int i = 0; i < info->n_v; i++) {
    if (info->stands_for[i] < 0 || !info->kept[i]) continue;
    const evtc_vnode *v = &w->k->v[i];
    int s = 0;
    w->stamp++;
    for (int a = 0; a < v->n_args; a++) s += weight(w, v->args[a]);
    if (s == 1 && !(w->info->kept[w->leaf] && w->read_kept[w->leaf])) continue;
    info->kept[i] = false;
    info->stands_for[i] = -1;
    any = true;
  }
  return any;
}

/* Marks what pass p needs; with `choose`, decides to keep values an earlier pass computed. */
static void mark(walk *w, int i, int p, bool choose) {
  const evtc_kernel *k = w->k;
  const evtc_vnode *v = &k->v[i];
  evtc_cuda_rows_info *info = w->info;
  if (w->need[i] || !((wide >> v->cls) & 1)) return;
  w->need[i] = true;
  if (v->kind == EVTC_V_REDUCE) return;
  if (info->alias[i] >= 0) {             /* a copy of an earlier value */
    mark(w, info->alias[i], p, choose);
    return;
  }
  if (w->computed[i]) {
    if (choose && !info->kept[i] && worth_keeping(w, i)) info->kept[i] = true;
    if (info->kept[i]) {
      w->read_kept[i] = true;
      return;
    }
  }
  for (int a = 0; a < v->n_args; a++) mark(w, v->args[a], p, choose);
}

/* One walk over the passes in order; first[] and need[] follow the kept set. */
static void walk_passes(walk *w, bool choose) {
  evtc_cuda_rows_info *info = w->info;
  int n = info->n_v;
  memset(w->computed, 0, sizeof(bool) * (size_t)n);
  memset(w->read_kept, 0, sizeof(bool) * (size_t)n);
  for (int i = 0; i < n; i++) info->first[i] = -1;
  for (int p = 0; p < info->n_passes; p++) {
    w->need = info->need + (size_t)p * (size_t)n;
    memset(w->need, 0, sizeof(bool) * (size_t)n);
    info->has_work[p] = false;
    for (int i = 0; i < n; i++)
      if (is_root(w->k, info->alias, i, p)) {
        info->has_work[p] = true;
        mark(w, w->k->v[i].args[0], p, choose);
      }
    for (int i = 0; i < n; i++)
      if (w->need[i] && !w->computed[i]) {
        w->computed[i] = true;
        info->first[i] = p;
      }
  }
}

void evtc_cuda_rows_info_init(evtc_cuda_rows_info *info, const evtc_kernel *k, int vec, bool keep) {
  int n = k->n_v, np = k->n_phases > 0 ? k->n_phases : 1;
  memset(info, 0, sizeof *info);
  info->n_v = n;
  info->n_passes = k->n_phases;
  info->need = calloc((size_t)np * (size_t)n + 1, sizeof(bool));
  info->kept = calloc((size_t)n + 1, sizeof(bool));
  info->vec_load = calloc((size_t)n + 1, sizeof(bool));
  info->has_work = calloc((size_t)np + 1, sizeof(bool));
  info->first = calloc((size_t)n + 1, sizeof(int));
  info->alias = calloc((size_t)n + 1, sizeof(int));
  info->stands_for = calloc((size_t)n + 1, sizeof(int));
  for (int i = 0; i < n; i++) {
    const evtc_vnode *v = &k->v[i];
    int64_t sr;
    info->alias[i] = -1;
    info->stands_for[i] = -1;
    info->vec_load[i] = evtc_cuda_load_vectorizes(k, v, vec, &sr);
    for (int j = 0; j < i && info->alias[i] < 0; j++)
      if (info->alias[j] < 0 && same_value(k, info->alias, i, j)) info->alias[i] = j;
    if (v->kind == EVTC_V_REDUCE) {
      info->n_row += v->cls == EVTC_VC_ROW;
      info->n_scalar += v->cls == EVTC_VC_SCALAR;
    }
  }
  walk w = {.k = k, .info = info};
  w.computed = calloc((size_t)n + 1, sizeof(bool));
  w.read_kept = calloc((size_t)n + 1, sizeof(bool));
  w.weight_seen = calloc((size_t)n + 1, sizeof(int));
  if (keep) {
    walk_passes(&w, true);      /* choose what to keep */
    walk_passes(&w, false);     /* the passes as they will run with it */
    while (drop_doubles(&w)) walk_passes(&w, false);
    for (int i = 0; i < n; i++) {
      info->kept[i] = info->kept[i] && w.read_kept[i];
      if (!info->kept[i]) info->stands_for[i] = -1;
    }
    walk_passes(&w, false);
  } else {
    walk_passes(&w, false);
  }
  for (int i = 0; i < n; i++) {
    if (!info->kept[i]) continue;
    int s = evtc_cuda_value_bytes(k->v[i].dtype);
    bool bits = evtc_dtype_is_half(k->v[i].dtype) && ((k->v[i].kind == EVTC_V_LOAD && info->vec_load[i]) || info->stands_for[i] >= 0);
    info->regs_per_col += s == 1 ? 1.0 / 32 : bits ? 0.5 : s / 4;
    info->bytes_per_col += s;
  }
  for (int p = 0; p < k->n_phases; p++) {
    int reds = 0;
    for (int i = 0; i < n; i++) {
      const evtc_vnode *v = &k->v[i];
      reds += v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_COL && info->alias[i] < 0 && v->phase == p + 1 &&
              ((wide >> k->v[v->args[0]].cls) & 1);
    }
    if (reds > info->max_col_reds) info->max_col_reds = reds;
    info->n_col += reds;
    info->col_rounds += reds > 0;
  }
  free(w.computed);
  free(w.read_kept);
  free(w.weight_seen);
}

void evtc_cuda_rows_info_free(evtc_cuda_rows_info *info) {
  free(info->need);
  free(info->kept);
  free(info->vec_load);
  free(info->has_work);
  free(info->first);
  free(info->alias);
  free(info->stands_for);
  memset(info, 0, sizeof *info);
}

/* ---- threads, clusters and occupancy --------------------------------------- */

int evtc_cuda_value_bytes(evtc_dtype t) {
  return t == EVTC_BOOL ? 1 : t == EVTC_F64 || t == EVTC_I64 ? 8 : 4;
}

/* Shared-memory bytes of a row of every kept value (each array 16-byte aligned), as the emitter lays them out. */
static int64_t kept_smem(const evtc_kernel *k, const evtc_cuda_rows_info *info) {
  int64_t bytes = 0;
  for (int i = 0; i < k->n_v; i++)
    if (info->kept[i]) bytes += (k->cols * evtc_cuda_value_bytes(k->v[i].dtype) + 15) / 16 * 16;
  return bytes;
}

/* Registers a thread of plan pl needs, roughly: a base for indices and
 * reduction state, the kept columns, the partial rows held in registers. */
static int regs_estimate(const evtc_cuda_rows_plan *pl, const evtc_cuda_rows_info *info) {
  double cols = (double)pl->per_thread * pl->vec;
  double r = 64 + 2.0 * info->n_col + (pl->cache == 1 ? cols * info->regs_per_col : 0) +
             (pl->row_partials == 0 ? (pl->row_flush ? 1.0 : 2.0) * cols * info->n_row : 0) + 2.0 * pl->vec +
             (pl->prefetch ? 8 : 0);
  int n = (int)r;
  return (n + 7) / 8 * 8;
}

static void occupancy(evtc_cuda_rows_plan *pl, const evtc_cuda_rows_info *info, int smem_max) {
  int block = pl->threads * pl->rows_per_block;
  int by_threads = 2048 / block, by_regs = 65536 / (block * regs_estimate(pl, info));
  int smem_sm = smem_max + 1024;        /* per SM: what one block may opt in to, plus the reserve */
  int by_smem = pl->smem ? smem_sm / (int)(pl->smem + 1024) : 32;
  int b = by_threads < by_regs ? by_threads : by_regs;
  if (by_smem < b) b = by_smem;
  if (b > 32) b = 32;
  pl->min_blocks = b < 1 ? 1 : b;
  int forced = env_int("EVTC_CUDA_MIN_BLOCKS", 0);
  if (forced > 0 && forced * block <= 2048 && (!pl->smem || forced <= by_smem)) pl->min_blocks = forced;
}

/* Whether kernel k's ROW partial rows (not summed in scratch itself) go to scratch as f32: each is a sum, max or
 * min over one block's rows of f32 or narrower values, which the block adds in f32 or f64, and NAME_fin adds the
 * slots in f64.  Half the bytes written and read again: BERT-Large's layernorm gradient wrote 528 slots of three
 * 1024-column f64 rows (13 MB beside the 133 MB it must move) and its finishing kernel took 7 us of 53.
 * EVTC_CUDA_SLOT=f64: always f64. */
static bool f32_slots(const evtc_kernel *k, const evtc_cuda_rows_plan *pl) {
  if (pl->row_partials == 2 || pl->row_direct || env_is("EVTC_CUDA_SLOT", "f64")) return false;
  bool any = false;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls != EVTC_VC_ROW) continue;
    evtc_dtype t = k->v[v->args[0]].dtype;
    if (t != EVTC_F32 && t != EVTC_F16 && t != EVTC_BF16 && t != EVTC_BOOL) return false;
    any = true;
  }
  return any;
}

/* AStitch's global-memory scheme for one-wave grids, on request (EVTC_CUDA_GRID_FINISH=1): where every block of the
 * main kernel is resident at once (a persistent grid of at most min_blocks an SM, launched cooperatively, so that
 * the driver refuses rather than deadlocks a grid that does not fit), the blocks write their partials, meet at a
 * grid-wide barrier and then combine them as NAME_fin would, FIN_COLS columns a work item, the block's threads split
 * into threads / FIN_COLS slot groups, in shared memory the main loop is done with (at least a double a thread,
 * which holds the warps' sums of up to 8 ROW reductions).  It saves NAME_fin's launch, but on an H200 it lost
 * wherever it was tried (gpu_bench, device clock, three rounds each way, 2026-12-01): the dropout + residual +
 * layernorm block 116-118 -> 129 us, the 16384 x 4096 layernorm 314-342 -> 329-369, BERT-Large's MLM loss 723-729 ->
 * 792-797 (its 7632 column items walked by 132 blocks, one after another, where NAME_fin spreads them over 7632
 * blocks), its layernorm gradient and both cross-entropies unchanged.  So NAME_fin stays the default; clusters
 * always keep it. */
static void grid_finish_plan(evtc_cuda_rows_plan *pl, int n_row, int sm_count) {
  const int64_t threads = (int64_t)pl->threads * pl->rows_per_block;
  if (!pl->has_fin || pl->cluster > 1 || !env_is("EVTC_CUDA_GRID_FINISH", "1")) return;
  if ((int64_t)pl->grid > (int64_t)sm_count * pl->min_blocks || threads % EVTC_CUDA_FIN_COLS) return;
  if ((int64_t)pl->smem < threads * 8 || n_row > 8) return;   /* NAME_fin's buffers: n_row warps' sums a thread */
  pl->grid_finish = true;
  pl->has_fin = false;
  pl->barrier_offset = pl->scratch_doubles;
  pl->scratch_doubles += 1;
}

/* NAME_fin as a dependent launch of the main kernel: its launch and the scheduling of its blocks overlap the main
 * kernel's last rows instead of following its end.  ncu on the f32 dropout + residual + layernorm block (H200,
 * 2026-12-01): the main kernel 103-104 us, NAME_fin 4.9-5.8 us for 2 MB of partials, the two 113.5 us on the device
 * clock: a tenth of the block's time after its last row.  The main kernel triggers as its blocks start; NAME_fin is
 * launched once every block of it has started (a persistent wave: at once), so its blocks never take an SM from a
 * main block still waiting for one; they fill SMs as the main kernel's blocks exit.  (The thirteenth session's
 * dependent launches of every kernel, triggered early, made BERT-Large's step 1.2 ms slower; this is one pair, the
 * second waiting for the first by construction.)  Measured against EVTC_CUDA_FIN_PDL=0 (gpu_bench, three rounds,
 * H200, 2026-12-01): the dropout block 0.982x, BERT-Large's layernorm gradient 0.949x, the 16384 x 4096 layernorm
 * 0.988x; BERT-Large's step unchanged.  EVTC_CUDA_FIN_PDL=0: NAME_fin launched after the main kernel ends. */
static void fin_dependent_plan(evtc_cuda_rows_plan *pl) {
  pl->fin_dependent = pl->has_fin && !env_is("EVTC_CUDA_FIN_PDL", "0");
}

/* Column tiles: a kernel without COL reductions (nothing joins a row's columns: column sums, a bias or position-
 * embedding gradient) over fewer rows than a persistent wave has blocks, or one that sums columns over many
 * rows.  A row per block left the GPU idle (GPT-2's wpe gradient, 8 x 786432: 8 blocks, ROW partials read and
 * written in f64 scratch, 1484 us where the copy takes 15); instead blocks of 256 threads own a vector each of
 * a tile of columns and walk the rows, the ROW partials in registers; the rows split into groups (partial
 * slots) only where the tiles alone do not give every SM a block (sums of everything: a partial a block).
 * Over many rows the persistent wave of partial rows was slower too: BERT-Large's q/k/v bias gradient (16384
 * x 3072 bf16) 82-97 us against 63-66 us in column tiles (H200, the whole step profiled both ways).
 * A thread keeps the loads of 8 rows in flight (the group's row loop unrolled by 8): the q/k/v bias gradient
 * 43.7-44.9 -> 39.0-40.1 us against 4 (H200, alternating in one run; unrolled by 16, or groups of 64 rows: no
 * better).
 * EVTC_CUDA_COL_TILES=0: never; =1: wherever they fit; EVTC_CUDA_COL_ROWS=n: n rows per group;
 * EVTC_CUDA_COL_UNROLL=n: n rows' loads in flight. */
static bool col_tiles_fit(const evtc_kernel *k, const evtc_cuda_rows_info *info, int sm_count) {
  const char *e = getenv("EVTC_CUDA_COL_TILES");
  if ((e && strcmp(e, "0") == 0) || info->n_col > 0 || info->n_row + info->n_scalar == 0) return false;
  return (e && strcmp(e, "1") == 0) || (k->cols >= 1024 && (k->rows < 2 * (int64_t)sm_count || info->n_row > 0));
}

static void col_tiles_plan(evtc_cuda_rows_plan *pl, const evtc_kernel *k, const evtc_cuda_rows_info *info, int sm_count,
                           int smem_max) {
  const int64_t V = pl->vec, nvec = cdiv(k->cols, V), R = k->rows;
  pl->threads = 256;
  pl->rows_per_block = 1;
  pl->per_thread = 1;
  pl->chunk = nvec;
  pl->unrolled = true;
  pl->cache = info->bytes_per_col > 0 && V * info->regs_per_col <= 32 && !env_is("EVTC_CUDA_ROW_CACHE", "none") ? 1 : 0;
  pl->row_partials = 0;
  pl->col_tiles = cdiv(nvec, (int64_t)pl->threads * pl->per_thread);
  int64_t groups = pl->col_tiles >= sm_count ? 1 : cdiv(2 * (int64_t)sm_count, pl->col_tiles);
  if (groups > R) groups = R;
  pl->row_group = cdiv(R, groups);
  int forced = env_int("EVTC_CUDA_COL_ROWS", 0);
  if (forced > 0) pl->row_group = forced < R ? forced : R;
  pl->col_unroll = env_int("EVTC_CUDA_COL_UNROLL", 8);
  if (pl->col_unroll < 1) pl->col_unroll = 1;
  groups = cdiv(R, pl->row_group);
  if (groups * pl->col_tiles > 1 << 30) {         /* a grid of at most 2^30 blocks */
    groups = ((1 << 30) / pl->col_tiles) > 0 ? (1 << 30) / pl->col_tiles : 1;
    pl->row_group = cdiv(R, groups);
    groups = cdiv(R, pl->row_group);
  }
  pl->row_direct = groups == 1;
  pl->grid = (unsigned)(pl->col_tiles * groups);
  pl->row_slots = pl->row_direct ? 0 : groups;
  pl->scalar_slots = pl->grid;
  pl->scratch_doubles = pl->row_slots * k->cols * info->n_row + pl->scalar_slots * info->n_scalar;
  pl->has_fin = (info->n_row > 0 && !pl->row_direct) || info->n_scalar > 0;
  pl->fin_grid = (unsigned)(info->n_row && !pl->row_direct ? cdiv(k->cols, EVTC_CUDA_FIN_COLS) : 1);
  pl->slot_f32 = f32_slots(k, pl);
  occupancy(pl, info, smem_max);
  /* the grid in one wave where the blocks per SM that takes leave registers (GPT-2's wpe gradient: 384 blocks,
   * 3 an SM at 80 registers with the rows unrolled by 4, where 2 left a half wave) */
  int64_t wave = cdiv(pl->grid, sm_count);
  if (wave > pl->min_blocks && wave <= 3 && !getenv("EVTC_CUDA_MIN_BLOCKS")) pl->min_blocks = (int)wave;
  grid_finish_plan(pl, info->n_row, sm_count);
  fin_dependent_plan(pl);
}

evtc_cuda_rows_plan evtc_cuda_rows_plan_of(const evtc_kernel *k, int sm_count, int smem_max) {
  evtc_cuda_rows_plan pl = {0};
  int64_t C = k->cols, R = k->rows;
  pl.vec = evtc_cuda_vec_width(k);
  pl.cluster = 1;
  pl.f32_thread_acc = !env_is("EVTC_CUDA_THREAD_ACC", "f64");
  pl.row_acc_f32 = env_is("EVTC_CUDA_ROW_ACC", "f32");
  evtc_cuda_rows_info info;
  evtc_cuda_rows_info_init(&info, k, pl.vec, true);
  const int64_t nvec = cdiv(C, pl.vec), V = pl.vec, Cp = nvec * V;   /* Cp: a row with its partial last vector */
  bool keep = info.bytes_per_col > 0;
  if (col_tiles_fit(k, &info, sm_count)) {
    col_tiles_plan(&pl, k, &info, sm_count, smem_max);
    evtc_cuda_rows_info_free(&info);
    return pl;
  }
  int want_cols = env_int("EVTC_CUDA_ROW_COLS", 16);
  if (want_cols < 1) want_cols = 1;
  if (C <= 512) {                                       /* a warp per row */
    pl.threads = 32;
    pl.rows_per_block = 8;
    pl.per_thread = (int)cdiv(nvec, 32);
    pl.chunk = nvec;
  } else {
    pl.rows_per_block = 1;
    int64_t per = cdiv(want_cols, V), t = (cdiv(nvec, per) + 31) / 32 * 32;
    /* up to 8 warps a row, fewer columns a thread: the f32 dropout + residual + layernorm block over 1024 columns
       took 0.1141-0.1162 ms with 128 threads of 2 vectors, 0.1129-0.1132 with 256 of one (gpu_bench, H200,
       2026-12-01; 64 threads 0.127, 32 threads 0.148) */
    if (t < 256 && !getenv("EVTC_CUDA_ROW_COLS")) {
      per = cdiv(nvec, 256);
      t = (cdiv(nvec, per) + 31) / 32 * 32;
    }
    int cl = env_is("EVTC_CUDA_SMEM_ROWS", "0") ? 1 : env_int("EVTC_CUDA_CLUSTER", 0);
    if (t > 1024) {                                  /* long rows: 32 columns per thread */
      per = cdiv(2 * want_cols, V);
      t = (cdiv(nvec, per) + 31) / 32 * 32;
    }
    int64_t fit = cdiv(nvec, 1024);                  /* longer: up to 64 while the kept columns take <= 32 registers */
    if (t > 1024 && !getenv("EVTC_CUDA_ROW_COLS") && fit * V <= 64 && fit * V * info.regs_per_col <= 32) {
      per = fit;
      t = (cdiv(nvec, per) + 31) / 32 * 32;
    }
    if ((t > 1024 || cl > 1) && keep && cl != 1) {   /* still too long: a cluster of blocks per row */
      int n = cl > 1 ? cl : 2;
      if (cl <= 1)
        while (n < 8 && cdiv(nvec, n) > 256 * per) n *= 2;
      if (n > 8) n = 8;
      int64_t chunk = cdiv(nvec, n), tc = (cdiv(chunk, per) + 31) / 32 * 32;
      if (tc <= 1024 && per <= 16) {
        pl.cluster = n;
        pl.chunk = chunk;
        t = tc;
      }
    }
    if (pl.cluster == 1) pl.chunk = nvec;
    if (t > 1024) t = 1024;
    if (t < 32) t = 32;
    pl.threads = (int)t;
    int64_t p2 = cdiv(pl.chunk, t);
    pl.per_thread = (int)(p2 > 1 << 30 ? 1 << 30 : p2);
  }
  pl.unrolled = pl.per_thread <= 16 && (int64_t)pl.per_thread * V <= 64;
  /* kept values: registers while they leave about 32 per thread for the rest, else the row in shared memory */
  const char *rc = getenv("EVTC_CUDA_ROW_CACHE");
  double kept_regs = (double)pl.per_thread * V * info.regs_per_col, room = 65536.0 / (pl.threads * pl.rows_per_block) - 32;
  bool regs_fit = keep && pl.unrolled && kept_regs <= (room < 64 ? room : 64);
  bool smem_fits = keep && pl.cluster == 1 && pl.rows_per_block == 1 && kept_smem(k, &info) <= smem_max - 4096;
  if (rc && strcmp(rc, "regs") == 0) pl.cache = keep && pl.unrolled ? 1 : 0;
  else if (rc && strcmp(rc, "smem") == 0) pl.cache = smem_fits ? 2 : 0;
  else if ((rc && strcmp(rc, "none") == 0) || env_is("EVTC_CUDA_SMEM_ROWS", "0")) pl.cache = 0;
  else pl.cache = regs_fit ? 1 : smem_fits ? 2 : 0;
  /* partial rows of ROW reductions */
  int64_t part_bytes = (int64_t)pl.rows_per_block * cdiv(C, V) * V * 8 * info.n_row;     /* rows of whole vectors */
  const char *pe = getenv("EVTC_CUDA_ROW_PARTIALS");
  bool regs_ok = pl.unrolled && info.n_row > 0;
  bool smem_ok = info.n_row > 0 && pl.cluster == 1 && part_bytes + (pl.cache == 2 ? kept_smem(k, &info) : 0) <= smem_max - 4096;
  /* Where f64 partial rows fit neither shared memory (nor so registers' f32 sums can be flushed there) nor the
   * registers a thread has, f32 ones in shared memory: a vocabulary-wide cross-entropy with its bias gradient
   * (BERT-Large's 30528 columns: 244 KB in f64, 122 KB in f32; 960 threads a block leave 68 registers a thread)
   * would otherwise keep f64 partial rows in registers that spill, or in scratch (2.21 ms against 1.10 for the
   * cross-entropy alone, H200 2026-11-29).  The block's f32 sums cover its share of the rows (16384 / 132: 125). */
  bool regs_hold = 2.0 * pl.per_thread * V * info.n_row + (pl.cache == 1 ? kept_regs : 0) <= room;
  bool smem_f32 = info.n_row > 0 && pl.cluster == 1 && !smem_ok && !regs_hold && !pe &&
                  part_bytes / 2 + (pl.cache == 2 ? kept_smem(k, &info) : 0) <= smem_max - 4096;
  if (smem_f32) pl.row_acc_f32 = true;
  pl.row_partials = 2;
  if (pe && strcmp(pe, "regs") == 0 && regs_ok) pl.row_partials = 0;
  else if (pe && strcmp(pe, "smem") == 0 && smem_ok) pl.row_partials = 1;
  else if (pe && strcmp(pe, "scratch") == 0) pl.row_partials = 2;
  else if (smem_f32) pl.row_partials = 1;
  else if (regs_ok && (int64_t)pl.per_thread * V * info.n_row <= 32) pl.row_partials = 0;
  else if (smem_ok) pl.row_partials = 1;
  if (info.n_row == 0) pl.row_partials = 0;
  pl.row_flush = info.n_row > 0 && pl.row_partials == 0 && smem_ok;
  int64_t smem = pl.cache == 2 ? kept_smem(k, &info) : 0;
  if (pl.row_partials == 1) smem += part_bytes / (pl.row_acc_f32 ? 2 : 1);
  if (pl.row_flush) smem += part_bytes;
  /* a row ending in a partial vector starts anywhere in its output (row stride 50257): stored column by column, a
   * warp's 2-byte stores 16 bytes apart moved 8x the sectors (GPT-2's cross-entropy, 2026-11-29: 2.27 ms against
   * a copy's 0.42); a warp's 32 vectors go through shared memory and out as aligned 16-byte vectors instead */
  if (C % V != 0 && V == 8 && pl.cluster == 1 && pl.unrolled && pl.rows_per_block == 1 && !env_is("EVTC_CUDA_STAGE", "0"))
    for (int i = 0; i < k->n_v; i++)
      pl.stage_stores += k->v[i].kind == EVTC_V_STORE && k->v[i].cls == EVTC_VC_FULL && evtc_buffer_elem_size(k->v[i].dtype) == 2;
  smem += (int64_t)pl.stage_stores * (pl.threads / 32) * EVTC_CUDA_STAGE_BYTES;
  /* the next rows' 16-byte loads prefetched into shared memory, in a persistent loop (as the emitter's prefetched()):
   * the kept ones; in the kernels below also every other row load that one pass reads (prefetch_all), two
   * rows ahead instead of one in registers (cuda_emit_rows.c's decide_ahead), where their buffers cost no blocks
   * per SM: by default in kernels with ROW partials over rows of at most 4096 columns (the layernorm gradients),
   * EVTC_CUDA_PREFETCH_ALL=1 everywhere, =0 nowhere.  It made BERT-Large's layernorm gradient 0.0718-0.0731 ->
   * 0.0678-0.0688 ms and dropout + residual + layernorm fwd+bwd 16384 x 1024 0.137-0.140 -> 0.130-0.134 ms, the other
   * row workloads of gpu_bench unchanged, but everywhere BERT-Large's whole step 0.15-0.19 ms slower in each of four
   * rounds (H200, A and B alternating, 2026-11-30; a later pair of rounds found no difference: 73.42 / 73.70 ms
   * without it, 73.73 / 73.46 with it, eleventh session).  Which kernel lost was not measured.  ncu on the layernorm
   * gradient (thirteenth session) shows why it helps there: a row's loads go out one row ahead, and the next row's
   * rstd and gradients are still on their way when the row is done (17 % of the stall samples): about 24 KB in
   * flight an SM, where the H200's bandwidth over a loaded latency of 1.5-2 us wants 40-50.  As the default here
   * (fourteenth session, A / B in one call): BERT-Large's layernorm gradient 0.0589 -> 0.0569 ms, dropout +
   * residual + layernorm 0.1262 -> 0.1199; with launch packing and dq's A fragments, BERT-Large's step 72.23 ->
   * 71.71 ms. */
  const char *pfa = getenv("EVTC_CUDA_PREFETCH_ALL");
  pl.prefetch_all = pfa && *pfa ? strcmp(pfa, "1") == 0 : info.n_row > 0 && C <= 4096;
  int64_t pf = 0, pf_kept = 0;
  for (int i = 0; i < k->n_v; i++)
    if (evtc_cuda_rows_prefetches(k, &info, &pl, i)) {
      const int64_t bytes = (Cp * (int64_t)evtc_buffer_elem_size(k->v[i].dtype) + 15) / 16 * 16;
      pf += bytes;
      pf_kept += info.kept[i] ? bytes : 0;
    }
  if (pl.prefetch_all) {   /* the others only where their buffers (two rows) cost no blocks per SM */
    evtc_cuda_rows_plan with_all = pl, kept_only = pl;
    with_all.smem = (unsigned)(smem + 2 * pf);
    kept_only.smem = (unsigned)(smem + 2 * pf_kept);
    occupancy(&with_all, &info, smem_max);
    occupancy(&kept_only, &info, smem_max);
    if (with_all.min_blocks < kept_only.min_blocks) {
      pl.prefetch_all = false;
      pf = pf_kept;
    }
  }
  /* a kernel without ROW partials and with little arithmetic per column runs best as a block per row
   * (softmax 8192x32000: 94% of copy bandwidth against 89% prefetched); more arithmetic (cross-entropy:
   * 83% against 62%) or a persistent loop anyway (layernorm: 77% against 56%) hides the copy */
  int full_ops = 0;
  for (int i = 0; i < k->n_v; i++)
    full_ops += k->v[i].cls == EVTC_VC_FULL && info.alias[i] < 0 &&
                (k->v[i].kind == EVTC_V_COMPUTE || k->v[i].kind == EVTC_V_ONE_HOT || k->v[i].kind == EVTC_V_RNG);
  const char *pfe = getenv("EVTC_CUDA_PREFETCH");
  int depth = pfe && *pfe ? atoi(pfe) : info.n_row > 0 || full_ops > 4 ? 2 : 0;
  depth = depth < 0 ? 0 : depth > 2 ? 2 : depth;
  while (depth > 0 && smem + depth * pf > smem_max - 4096) depth--;   /* room for the static reduction buffers */
  pl.prefetch = pf > 0 && pl.cache == 1 && pl.cluster == 1 && pl.rows_per_block == 1 ? depth : 0;
  if (pl.prefetch == 2 && !(pfe && *pfe)) {       /* two rows ahead only where it costs no blocks per SM */
    evtc_cuda_rows_plan one = pl, two = pl;
    one.smem = (unsigned)(smem + pf);
    two.smem = (unsigned)(smem + 2 * pf);
    occupancy(&one, &info, smem_max);
    occupancy(&two, &info, smem_max);
    if (two.min_blocks < one.min_blocks) pl.prefetch = 1;
  }
  /* wide rows (GPT-2's 50257-column logits: 7 vectors a thread) kept in registers spilled (ptxas: 480 bytes at 28
   * registers of kept bf16 under 1024 threads' cap of 64): the prefetch buffers hold the row instead, and a value
   * kept in place of a prefetched load (stands_for: gemm-pad's masked logits) is written over that load in its
   * buffer.  GPT-2's masked cross-entropy kept its 28 registers of masked logits and spilled (ncu: 18.5 % of the
   * stall samples on one local store): 1386 us against 506 for the same kernel without the mask; written over
   * the loads, 696 us (H200, 2026-11-30, fourteenth session). */
  double pf_regs = 0;
  for (int i = 0; i < k->n_v && pl.prefetch; i++) {
    int leaf = info.stands_for[i] >= 0 ? info.stands_for[i] : i;     /* of the same size: it takes the leaf's slots */
    if (info.kept[i] && evtc_cuda_rows_prefetches(k, &info, &pl, leaf) &&
        evtc_buffer_elem_size(k->v[leaf].dtype) == evtc_buffer_elem_size(k->v[i].dtype))
      pf_regs += evtc_dtype_is_half(k->v[i].dtype) ? 0.5 : evtc_cuda_value_bytes(k->v[i].dtype) / 4;
  }
  const char *he = getenv("EVTC_CUDA_PF_HOLD");
  pl.pf_hold = pl.prefetch > 0 && (he && *he ? atoi(he) != 0 : (double)pl.per_thread * V * pf_regs > 16);
  if (pl.pf_hold) info.regs_per_col -= pf_regs;
  smem += pl.prefetch * pf;
  pl.smem = (unsigned)smem;
  occupancy(&pl, &info, smem_max);
  /* one wave of persistent row groups when ROW partials are kept per group, else a group per row */
  int64_t groups = pl.cluster > 1 ? R : cdiv(R, pl.rows_per_block);
  int64_t wave = (int64_t)sm_count * pl.min_blocks / pl.cluster;
  if (wave < 1) wave = 1;
  int64_t g = groups < wave || (info.n_row == 0 && !pl.prefetch) ? groups : wave;
  if (g > (1 << 30) / pl.cluster) g = (1 << 30) / pl.cluster;
  if (g < 1) g = 1;
  pl.grid = (unsigned)(g * pl.cluster);
  pl.row_slots = pl.cluster > 1 ? g : g * pl.rows_per_block;
  pl.scalar_slots = (int64_t)pl.grid * pl.rows_per_block;
  pl.scratch_doubles = pl.row_slots * C * info.n_row + pl.scalar_slots * info.n_scalar;
  pl.has_fin = info.n_row + info.n_scalar > 0;
  pl.fin_grid = (unsigned)(info.n_row ? cdiv(C, EVTC_CUDA_FIN_COLS) : 1);
  pl.slot_f32 = f32_slots(k, &pl);
  grid_finish_plan(&pl, info.n_row, sm_count);
  fin_dependent_plan(&pl);
  evtc_cuda_rows_info_free(&info);
  return pl;
}

bool evtc_cuda_rows_prefetches(const evtc_kernel *k, const evtc_cuda_rows_info *info, const evtc_cuda_rows_plan *pl,
                               int i) {
  const evtc_vnode *v = &k->v[i];
  if (!info->vec_load[i] || v->cls != EVTC_VC_FULL || pl->vec * (int)evtc_buffer_elem_size(v->dtype) != 16) return false;
  if (info->kept[i]) return true;
  for (int j = 0; j < k->n_v; j++)   /* a value kept in its place: its row is read by the first pass alone, as before */
    if (info->stands_for[j] == i) return true;
  int64_t row_stride;
  if (!pl->prefetch_all || v->kind != EVTC_V_LOAD || !evtc_cuda_load_vectorizes(k, v, pl->vec, &row_stride) ||
      row_stride == 0)
    return false;
  /* one pass reads it: the row two ahead goes into its buffer after that pass (the emitter's pf_pass) */
  int passes = 0;
  for (int p = 0; p < info->n_passes; p++) passes += info->has_work[p] && info->need[(size_t)p * (size_t)k->n_v + (size_t)i];
  return passes == 1;
}

int64_t evtc_cuda_reduce_offset(const evtc_kernel *k, const evtc_cuda_rows_plan *pl, int i) {
  int64_t off = 0;
  for (int j = 0; j < i; j++)
    if (k->v[j].kind == EVTC_V_REDUCE && k->v[j].cls != EVTC_VC_COL)
      off += k->v[j].cls == EVTC_VC_ROW ? pl->row_slots * k->cols : pl->scalar_slots;
  return off;
}
