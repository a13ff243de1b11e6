/* cuda_gemm.c -- cuBLASLt descriptors for a kernel's GEMM (cuda_gemm.h).
 *
 * f32 and f64 GEMMs keep their dtype throughout; f16 and bf16 operands
 * (CUDA_R_16F / CUDA_R_16BF) multiply with f32 math (CUBLAS_COMPUTE_32F)
 * into an f32 result that the epilogue kernel rounds when it stores.  The
 * algorithm is chosen for the operands' real alignment: evtc's arena places
 * values at 64-byte offsets, and loops over outer batch dims step the
 * pointers by whole matrices.
 */
#include "backend/cuda/cuda_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One operand as cuBLASLt sees it: op(stored), stored column-major rows x cols with leading dimension ld. */
typedef struct lt_mat {
  int op;
  int64_t rows, cols, ld, batch_stride;
} lt_mat;

/* Matrix X (R x C) with X(x, y) at x*sr + y*sc as a column-major operand; false when no layout fits. */
static bool as_colmajor(int64_t R, int64_t C, int64_t sr, int64_t sc, lt_mat *m) {
  if ((sr == 1 || R == 1) && (C == 1 || (sc >= R && sc >= 1))) {
    *m = (lt_mat){.op = EVTC_CUBLAS_OP_N, .rows = R, .cols = C, .ld = C == 1 ? R : sc};
    return true;
  }
  if ((sc == 1 || C == 1) && (R == 1 || (sr >= C && sr >= 1))) {
    *m = (lt_mat){.op = EVTC_CUBLAS_OP_T, .rows = C, .cols = R, .ld = R == 1 ? C : sr};
    return true;
  }
  return false;
}

/* The single batch stride of batch dims [lo, rank) of an operand with per-dim batch strides s; false when
 * those dims do not collapse. */
static bool batch_stride(const evtc_gemm_desc *g, const int64_t *s, int lo, int64_t *out) {
  int64_t stride = -1, inner = 1;
  for (int d = g->batch_rank - 1; d >= lo; d--) {
    if (g->batch_shape[d] == 1) continue;
    if (stride < 0) stride = s[d] / inner;
    if (s[d] != stride * inner) return false;
    inner *= g->batch_shape[d];
  }
  *out = stride < 0 ? 0 : stride;
  return true;
}

/* cuBLASLt's A = B^T (N x K) and B = A^T (K x M), batched over dims [*lo, batch_rank) (the fewest outer dims). */
static bool operands(const evtc_kernel *k, lt_mat *la, lt_mat *lb, int *lo) {
  const evtc_gemm_desc *g = &k->gemm;
  if (!as_colmajor(g->N, g->K, g->b_cs, g->b_rs, la) || !as_colmajor(g->K, g->M, g->a_cs, g->a_rs, lb)) return false;
  for (*lo = 0; *lo <= g->batch_rank; (*lo)++)
    if (batch_stride(g, g->b_bstride, *lo, &la->batch_stride) && batch_stride(g, g->a_bstride, *lo, &lb->batch_stride))
      return true;
  return false;
}

bool evtc_cuda_gemm_fits(const evtc_kernel *k, char *why, size_t cap) {
  lt_mat la, lb;
  int lo;
  if (k->kind != EVTC_ML_GEMM) {
    snprintf(why, cap, "conv2d has no CUDA main loop yet (im2col + cuBLASLt is not written)");
    return false;
  }
  if (evtc_dtype_is_int(k->gemm.dtype) || k->gemm.dtype == EVTC_BOOL) {
    snprintf(why, cap, "%s GEMM (cuBLASLt runs f64, f32, f16 and bf16 here)", evtc_dtype_name(k->gemm.dtype));
    return false;
  }
  if (!operands(k, &la, &lb, &lo)) {
    snprintf(why, cap, "GEMM operand strides that cuBLASLt cannot describe");
    return false;
  }
  return true;
}

static evtc_status lt_fail(cublasStatus_t st, const char *what, const char *name, evtc_diag *d) {
  return evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuBLASLt error %d in %s (kernel %s)", st, what, name);
}

static evtc_status layout(const evtc_cuda_cublaslt *lt, cublasLtMatrixLayout_t *out, int type, const lt_mat *m,
                          int32_t batch, const char *name, evtc_diag *d) {
  cublasStatus_t st = lt->cublasLtMatrixLayoutCreate(out, type, (unsigned long long)m->rows,
                                                     (unsigned long long)m->cols, m->ld);
  if (st == 0 && batch > 1) {
    long long bs = m->batch_stride;
    st = lt->cublasLtMatrixLayoutSetAttribute(*out, EVTC_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    if (st == 0)
      st = lt->cublasLtMatrixLayoutSetAttribute(*out, EVTC_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &bs, sizeof bs);
  }
  return st ? lt_fail(st, "cublasLtMatrixLayoutCreate", name, d) : EVTC_OK;
}

/* The largest power of two (at most 64: the arena's placement) dividing every pointer that a loop over
 * n dims of these sizes and element strides passes, in bytes. */
static uint32_t alignment(int n, const int64_t *shape, const int64_t *strides, size_t elem) {
  uint32_t align = 64;
  for (int q = 0; q < n; q++)
    while (shape[q] > 1 && strides[q] * (int64_t)elem % align) align /= 2;
  return align;
}

evtc_status evtc_cuda_gemm_init(evtc_cuda_gemm *g, const evtc_cuda_cublaslt *lt, cublasLtHandle_t h,
                                const evtc_kernel *k, size_t workspace, evtc_diag *d) {
  memset(g, 0, sizeof *g);
  g->lt = lt;
  g->f64 = k->gemm.dtype == EVTC_F64;
  g->in_elem = evtc_dtype_size(k->gemm.dtype);
  int type = g->f64 ? EVTC_CUDA_R_64F : EVTC_CUDA_R_32F;
  int in_type = k->gemm.dtype == EVTC_F16 ? EVTC_CUDA_R_16F : k->gemm.dtype == EVTC_BF16 ? EVTC_CUDA_R_16BF : type;
  lt_mat la, lb, lc = {.op = EVTC_CUBLAS_OP_N, .rows = k->gemm.N, .cols = k->gemm.M, .ld = k->gemm.N,
                       .batch_stride = k->gemm.M * k->gemm.N};
  int lo;
  EVTC_ASSERT(operands(k, &la, &lb, &lo));
  const evtc_gemm_desc *gd = &k->gemm;
  int64_t outer = 1;
  for (int dd = 0; dd < lo; dd++) {
    g->outer_shape[dd] = gd->batch_shape[dd];
    g->a_outer[dd] = gd->a_bstride[dd];
    g->b_outer[dd] = gd->b_bstride[dd];
    outer *= gd->batch_shape[dd];
  }
  g->outer_rank = lo;
  g->outer_count = outer;
  g->d_outer = gd->batch / outer * gd->M * gd->N;
  cublasStatus_t st = lt->cublasLtMatmulDescCreate(&g->desc, g->f64 ? EVTC_CUBLAS_COMPUTE_64F : EVTC_CUBLAS_COMPUTE_32F,
                                                   type);
  if (st) return lt_fail(st, "cublasLtMatmulDescCreate", k->name, d);
  int32_t ta = la.op, tb = lb.op, batch = (int32_t)(k->gemm.batch / outer);
  if ((st = lt->cublasLtMatmulDescSetAttribute(g->desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) ||
      (st = lt->cublasLtMatmulDescSetAttribute(g->desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)))
    return lt_fail(st, "cublasLtMatmulDescSetAttribute", k->name, d);
  if (layout(lt, &g->a, in_type, &la, batch, k->name, d) || layout(lt, &g->b, in_type, &lb, batch, k->name, d) ||
      layout(lt, &g->c, type, &lc, batch, k->name, d))
    return d->status;
  cublasLtMatmulPreference_t pref;
  if ((st = lt->cublasLtMatmulPreferenceCreate(&pref))) return lt_fail(st, "cublasLtMatmulPreferenceCreate", k->name, d);
  unsigned long long ws = workspace;
  st = lt->cublasLtMatmulPreferenceSetAttribute(pref, EVTC_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  /* cuBLASLt's A is evtc's B; C and D are the result, d_outer elements further per call */
  uint32_t align[4] = {alignment(g->outer_rank, g->outer_shape, g->b_outer, g->in_elem),
                       alignment(g->outer_rank, g->outer_shape, g->a_outer, g->in_elem),
                       alignment(1, &g->outer_count, &g->d_outer, g->f64 ? 8 : 4), 0};
  align[3] = align[2];
  for (int q = 0; q < 4 && st == 0; q++)
    st = lt->cublasLtMatmulPreferenceSetAttribute(pref, EVTC_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + q, &align[q],
                                                  sizeof align[q]);
  int found = 0;
  if (st == 0) st = lt->cublasLtMatmulAlgoGetHeuristic(h, g->desc, g->a, g->b, g->c, g->c, pref, 1, &g->algo, &found);
  lt->cublasLtMatmulPreferenceDestroy(pref);
  if (st) return lt_fail(st, "cublasLtMatmulAlgoGetHeuristic", k->name, d);
  if (found < 1)
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuBLASLt has no algorithm for kernel %s (%lldx%lldx%lld, batch %lld)",
                         k->name, (long long)k->gemm.M, (long long)k->gemm.N, (long long)k->gemm.K,
                         (long long)k->gemm.batch);
  return EVTC_OK;
}

evtc_status evtc_cuda_gemm_run(const evtc_cuda_gemm *g, cublasLtHandle_t h, const void *a, const void *b, void *dd,
                               void *workspace, size_t workspace_bytes, CUstream s, const char *name, evtc_diag *d) {
  float one = 1.0f, zero = 0.0f;
  double one64 = 1.0, zero64 = 0.0;
  const void *alpha = g->f64 ? (const void *)&one64 : (const void *)&one;
  const void *beta = g->f64 ? (const void *)&zero64 : (const void *)&zero;
  size_t elem = g->f64 ? 8 : 4;     /* of the result; operands: in_elem */
  for (int64_t o = 0; o < g->outer_count; o++) {
    int64_t aoff = 0, boff = 0, rest = o;
    for (int q = g->outer_rank - 1; q >= 0; q--) {
      aoff += rest % g->outer_shape[q] * g->a_outer[q];
      boff += rest % g->outer_shape[q] * g->b_outer[q];
      rest /= g->outer_shape[q];
    }
    /* cuBLASLt's A is evtc's B (transposed view) and its B is evtc's A. */
    const char *bp = (const char *)b + (size_t)boff * g->in_elem, *ap = (const char *)a + (size_t)aoff * g->in_elem;
    char *dp = (char *)dd + (size_t)(o * g->d_outer) * elem;
    cublasStatus_t st = g->lt->cublasLtMatmul(h, g->desc, alpha, bp, g->a, ap, g->b, beta, dp, g->c, dp, g->c,
                                              &g->algo.algo, workspace, workspace_bytes, s);
    if (st) return lt_fail(st, "cublasLtMatmul", name, d);
  }
  return EVTC_OK;
}

void evtc_cuda_gemm_free(evtc_cuda_gemm *g) {
  if (!g->lt) return;
  if (g->a) g->lt->cublasLtMatrixLayoutDestroy(g->a);
  if (g->b) g->lt->cublasLtMatrixLayoutDestroy(g->b);
  if (g->c) g->lt->cublasLtMatrixLayoutDestroy(g->c);
  if (g->desc) g->lt->cublasLtMatmulDescDestroy(g->desc);
  memset(g, 0, sizeof *g);
}

evtc_cuda_gemm_mode evtc_cuda_gemm_mode_get(void) {
  static bool warned;
  const char *m = getenv("EVTC_GEMM");
  if (m && strcmp(m, "cublaslt") == 0) return EVTC_CUDA_GEMM_CUBLASLT;
  if (m && strcmp(m, "sm80") == 0) return EVTC_CUDA_GEMM_SM80;
  if (!m || !*m || strcmp(m, "evtc") == 0) return EVTC_CUDA_GEMM_EVTC;
  if (!warned) fprintf(stderr, "evtc: EVTC_GEMM=%s is not evtc, sm80 or cublaslt: using evtc\n", m);
  warned = true;
  return EVTC_CUDA_GEMM_EVTC;
}

bool evtc_cuda_gemm_sm80_template(const evtc_cuda_device *dev) {
  return evtc_cuda_gemm_mode_get() == EVTC_CUDA_GEMM_SM80 ||
         (dev && dev->cc_major >= 8 && strcmp(dev->arch, "sm_90a") != 0);
}

evtc_status evtc_cuda_gemm_fit_clusters(evtc_cuda_device *dev, evtc_cuda_kernel *k, const evtc_cuda_gemm_config *c,
                                        evtc_cuda_gemm_launch *L, int *fit_out, evtc_diag *d) {
  int fit = 0;
  if (fit_out) *fit_out = 0;
  if (c->cluster_m < 2) return EVTC_OK;
  if (evtc_cuda_max_clusters(dev, k, L->grid, L->block, L->smem, &fit, d)) return d->status;
  if (fit_out) *fit_out = fit;
  if (fit < 1)
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: no cluster of %d CTAs with %u bytes of shared memory fits the "
                         "device", k->name, c->cluster_m, L->smem);
  if (L->grid[0] > (unsigned)(fit * c->cluster_m)) L->grid[0] = (unsigned)(fit * c->cluster_m);
  return EVTC_OK;
}

/* A GEMM of few output tiles over a long K -- a weight gradient, [N_out, N_in] summed over every token of the
 * batch: GPT-2's 768 x 768 over K = 8192 is 18 tiles of 128 x 256 for 132 SMs -- would leave SMs idle for the
 * whole of K with one CTA a tile.  Below SPLIT_K_FILL of the last wave's SMs busy, over at least
 * SPLIT_K_MIN_K, such a GEMM takes the cuBLASLt path (which splits K, into f32 scratch and a separate epilogue
 * kernel) when that path can run its epilogue.  With EVTC_GEMM_SPLIT_K=1, evtc's GEMM splits K instead
 * (cuda_emit_gemm.c, emit_split_k) where the kernel has a visitor epilogue on the sm_90a template: into the
 * fewest units (2 to 16, each at least 4 k-blocks) that fill SPLIT_K_UNIT_FILL of their waves, else the
 * best-filled.  Not the default: on the H200 (2026-12-01, `evtc explain --profile 50`, bench/epilogue/wgrad_sgd_*.evt,
 * a weight gradient with its SGD update) its first version took 247 / 72 / 59 us for BERT-Large's q/k/v (3072 x
 * 1024 over 16384) and output (1024 x 1024) and GPT-2's 768 x 768 over 8192, against 147 / 65 / 34 us on
 * cuBLASLt, and GPT-2's step 21.5 against 15.2 ms, its last units then summing the partial tiles one load after
 * another; loading a whole partial tile at once, 208 / 68 / 44 us against 147 / 65 / 35, and GPT-2's step 19.6
 * against 15.0 ms (it also took the forward fc_proj GEMMs, 192 tiles over K = 3072).  Without a device (tests that mirror
 * the backend's choices) the H200's SMs count. */
enum { SPLIT_K_MIN_K = 2048, H200_SMS = 132, SPLIT_K_MAX = 16, SPLIT_K_MIN_KBLOCKS = 4 };
#define SPLIT_K_FILL 0.75
#define SPLIT_K_UNIT_FILL 0.9

static double wave_fill(int64_t units, int64_t sms) {
  const int64_t waves = (units + sms - 1) / sms;
  return (double)units / (double)(waves * sms);
}

bool evtc_cuda_gemm_few_tiles(int64_t tiles, int64_t K, int64_t sms) {
  return K >= SPLIT_K_MIN_K && wave_fill(tiles, sms > 0 ? sms : H200_SMS) < SPLIT_K_FILL;
}

static int split_count(int64_t tiles, int64_t kblocks, int64_t sms) {
  int best = 1;
  for (int s = 2; s <= SPLIT_K_MAX && s * SPLIT_K_MIN_KBLOCKS <= kblocks; s++) {
    if (wave_fill(tiles * s, sms) >= SPLIT_K_UNIT_FILL) return s;
    if (best == 1 || wave_fill(tiles * s, sms) > wave_fill(tiles * best, sms)) best = s;
  }
  return best;
}

static bool split_k_enabled(void) {
  const char *e = getenv("EVTC_GEMM_SPLIT_K");
  return e && strcmp(e, "1") == 0;
}

/* A device buffer of `elems` 32-bit values, all `value`, in place of *buf (freed) when *have is less. */
static evtc_status grow32(evtc_cuda_device *dev, CUdeviceptr *buf, int64_t *have, int64_t elems, unsigned value,
                          const char *what, evtc_diag *d) {
  if (elems <= *have) return EVTC_OK;
  if (*buf) dev->drv->cuMemFree(*buf);
  *buf = 0;
  *have = 0;
  evtc_status s = evtc_cuda_fail(dev->drv, dev->drv->cuMemAlloc(buf, (size_t)elems * 4), what, EVTC_ERR_RUNTIME, d);
  if (s == EVTC_OK) s = evtc_cuda_fill32(dev, *buf, value, (size_t)elems, d);
  if (s == EVTC_OK) *have = elems;
  return s;
}

evtc_status evtc_cuda_gemm_workspace_fit(evtc_cuda_device *dev, evtc_cuda_gemm_workspace *w, const evtc_cuda_gemm_config *cfg,
                                         const evtc_cuda_gemm_problem *p, int64_t sm_count, evtc_cuda_gemm_launch *L,
                                         evtc_diag *d) {
  evtc_status s = grow32(dev, &w->ws, &w->floats, evtc_cuda_gemm_split_floats(cfg, p, sm_count), 0xFFFFFFFFu,
                         "cuMemAlloc (GEMM split workspace)", d);
  if (s == EVTC_OK)
    s = grow32(dev, &w->cnt, &w->counts, evtc_cuda_gemm_split_counts(cfg, p, sm_count), 0, "cuMemAlloc (GEMM split counts)", d);
  L->dims.split_ws = w->ws;
  L->dims.split_cnt = w->cnt;
  return s;
}

void evtc_cuda_gemm_workspace_free(evtc_cuda_device *dev, evtc_cuda_gemm_workspace *w) {
  if (w->ws) dev->drv->cuMemFree(w->ws);
  if (w->cnt) dev->drv->cuMemFree(w->cnt);
  *w = (evtc_cuda_gemm_workspace){0};
}

int evtc_cuda_gemm_tail_split(void) {
  const char *e = getenv("EVTC_GEMM_TAIL_SPLIT");
  const int n = e ? atoi(e) : 4;
  return n > 1 ? n : 0;
}

bool evtc_cuda_gemm_use_evt(const evtc_kernel *k, const evtc_cuda_device *dev, evtc_cuda_evt_plan *pl, char *why,
                            size_t cap) {
  if (evtc_cuda_gemm_mode_get() == EVTC_CUDA_GEMM_CUBLASLT) {
    snprintf(why, cap, "EVTC_GEMM=cublaslt");
    return false;
  }
  if (!evtc_cuda_evt_plan_of(k, dev, pl, why, cap)) return false;
  const int64_t sms = dev && dev->sm_count > 0 ? dev->sm_count : H200_SMS;
  const double fill = wave_fill(pl->tiles, sms);
  const bool few = evtc_cuda_gemm_few_tiles(pl->tiles, pl->prob.K, sms);
  char lt_why[200];
  if (few && !pl->builtin_store && !pl->cfg.sm80 && pl->cfg.cluster_m == 1 && split_k_enabled()) {
    const int s = split_count(pl->tiles, (pl->prob.K + 63) / 64, sms);
    if (s > 1) {
      pl->prob.splits = s;
      pl->split_floats = evtc_cuda_gemm_split_floats(&pl->cfg, &pl->prob, sms);
      pl->split_counts = evtc_cuda_gemm_split_counts(&pl->cfg, &pl->prob, sms);
      return true;
    }
  }
  if (few && evtc_cuda_gemm_fits(k, lt_why, sizeof lt_why) &&
      evtc_kernel_visitor_fits(k, lt_why, sizeof lt_why)) {
    snprintf(why, cap, "%lld output tiles keep %.0f%% of %lld SMs busy over K = %lld: cuBLASLt splits K",
             (long long)pl->tiles, 100.0 * fill, (long long)sms, (long long)pl->prob.K);
    return false;
  }
  pl->prob.tail_split = evtc_cuda_gemm_tail_split();
  pl->prob.tail_min_kblocks = EVTC_CUDA_GEMM_TAIL_MIN_KBLOCKS;
  pl->split_floats = evtc_cuda_gemm_split_floats(&pl->cfg, &pl->prob, sms);
  pl->split_counts = evtc_cuda_gemm_split_counts(&pl->cfg, &pl->prob, sms);
  return true;
}

static evtc_cuda_gemm_counts counts;

evtc_cuda_gemm_counts evtc_cuda_gemm_counts_get(void) { return counts; }

void evtc_cuda_gemm_count(bool evt) {
  if (evt) counts.evt++;
  else counts.cublaslt++;
}
