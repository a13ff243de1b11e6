/* gpu_gemm_bench.c -- evtc's GEMM templates, sm_90a (cuda_emit_gemm.c) and
 * sm_80 (cuda_emit_gemm80.c, its configs named "... sm80"), against
 * cuBLASLt on the GEMM shapes of issue 8: 8192^3, 16384x4096x1024 and
 * 16384x1024x4096 (M x N x K), bf16 inputs, fp32 accumulation, bf16 D.
 *
 * Layouts: "TN" (A M x K, B N x K: both K-major, the layout of a linear
 * layer's forward pass and wgmma's native one) for cuBLASLt and three tile
 * configs of evtc; "NN" (B K x N) for cuBLASLt and evtc's default configs
 * of both templates.  On an H200 the sm_80 rows show what mma.sync and
 * cp.async reach without wgmma and TMA (the path an A100 takes).
 * cuBLASLt runs its top heuristic (compute 32F, scale 32F, 32 MiB
 * workspace), called through evtc's dlopen of libcublasLt (cuda_api.h).
 * Each timing is the median of 20 launches after 5 warm-ups, each launch
 * between two CUDA events.  A diagnostic row, "no store", runs the default
 * config with an epilogue hook that stores nothing (only NaN accumulators,
 * never produced): its time is the main loop's, the difference to the full
 * kernel the epilogue's cost.  Inputs are random bf16 in [-1, 1]; 2048 random
 * elements of every output are checked against a float64 host dot product
 * (the bound of tests/test_gpu_gemm.c, reported as max err/tol: <= 1
 * passes).  Rows ending "tail N" run the same kernel with the split tail
 * (cuda_emit_gemm.c: the tiles past the last whole wave cut into up to N
 * units of their k-blocks), where the shape's tiles are no whole number of
 * waves and each tail tile gets 2 units or more; the row before them walks
 * tile by tile.  The table comes last.
 *
 *   gpu_gemm_bench                 run (needs an sm_90 GPU)
 *   gpu_gemm_bench --compile-only  emit and compile the kernels through NVRTC
 *                                  (fills the disk cache; no GPU needed)
 *   gpu_gemm_bench --dump DIR      also write the generated module to DIR/gpu_gemm_bench.cu
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_gemm.h"
#include "runtime/elements.h"

static const evtc_cuda_gemm_config cfgs[] = {
    {128, 256, 64, 4, 2, 1, 1, 8, false, false},
    {256, 128, 64, 4, 2, 1, 1, 8, false, false},
    {128, 128, 64, 6, 2, 1, 1, 8, false, false},
    {128, 128, 64, 6, 2, 1, 1, 8, true, false},    /* pingpong: the visitor epilogue's default */
    {64, 256, 64, 4, 2, 1, 1, 8, true, false},
    {128, 256, 64, 4, 2, 2, 1, 8, false, false},   /* 2x1 clusters: B multicast to both CTAs */
    {64, 256, 64, 4, 2, 2, 1, 8, true, false},
    {128, 128, 64, 6, 2, 2, 1, 8, true, false},
    {128, 128, 64, 4, 2, 1, 1, 8, false, true},    /* SM80: the sm_80 template's default */
    {128, 256, 64, 3, 2, 1, 1, 8, false, true},
    {256, 128, 64, 3, 2, 1, 1, 8, false, true},    /* warps of 32 x 128 */
    {128, 128, 64, 4, 1, 1, 1, 8, false, true},    /* one warpgroup, warps of 32 x 128 */
};
enum { N_CFG = sizeof cfgs / sizeof cfgs[0], SM80 = 8, WARM = 5, ITERS = 20, SAMPLES = 2048 };
/* NN (B K x N) runs each template's default config only */
static bool runs_nn(int c) { return c == 0 || c == SM80; }
static const int64_t shapes[][3] = {{8192, 8192, 8192}, {16384, 4096, 1024}, {16384, 1024, 4096}};
enum { N_SHAPE = sizeof shapes / sizeof shapes[0] };

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static evtc_cuda_gemm_variant variant(bool b_kmajor) {
  return (evtc_cuda_gemm_variant){.in = EVTC_BF16, .out = EVTC_BF16, .a_kmajor = true, .b_kmajor = b_kmajor};
}

static void kernel_name(int cfg, bool b_kmajor, char *buf, size_t cap) {
  snprintf(buf, cap, "bench_gemm_c%d_%s", cfg, b_kmajor ? "tn" : "nn");
}

/* the "no store" epilogue: accumulators stay live, nothing is written */
static void nostore_setup(evtc_sb *b, const char *ind, void *ctx) {
  evtc_sb_printf(b, "%sfloat *const out_f = (float *)out_ptr;\n", ind);
}
static void nostore_element(evtc_sb *b, const char *ind, const char *acc, void *ctx) {
  evtc_sb_printf(b, "%sif (%s != %s) out_f[r * dims.ldc + c] = %s;\n", ind, acc, acc, acc);
}
static const evtc_cuda_gemm_epilogue nostore = {.emit_setup = nostore_setup, .emit_element = nostore_element};

static char *module_source(void) {
  evtc_sb b = {0};
  evtc_cuda_gemm_variant tn = variant(true);
  evtc_cuda_gemm_emit(&b, "bench_gemm_c0_tn_nostore", &cfgs[0], &tn, &nostore);
  for (int c = 0; c < N_CFG; c++)
    for (int t = 0; t < 2; t++) {
      if (t == 0 && !runs_nn(c)) continue;
      char name[64];
      kernel_name(c, t == 1, name, sizeof name);
      evtc_cuda_gemm_variant v = variant(t == 1);
      evtc_cuda_gemm_emit(&b, name, &cfgs[c], &v, NULL);
    }
  return b.s;
}

/* ---- one shape ---- */

typedef struct row {
  char shape[32], impl[64];
  double ms, tflops, err;   /* err: max err/tol over the samples */
  bool ok;
} row;

static row rows[64];
static int n_rows;

typedef struct bufs {
  int64_t M, N, K;
  uint16_t *a, *b_nk, *b_kn;   /* host copies: A M x K, B as N x K and as K x N */
  CUdeviceptr da, db_nk, db_kn, dd;
} bufs;

/* max |d - ref| / tol over SAMPLES random elements of the M x N bf16 output at dd */
static double check_output(evtc_cuda_device *dev, const bufs *B, evtc_diag *d) {
  uint16_t *out = malloc((size_t)(B->M * B->N) * 2);
  if (evtc_cuda_copy_dtoh(dev, out, B->dd, (size_t)(B->M * B->N) * 2, d)) {
    free(out);
    return INFINITY;
  }
  double worst = 0;
  for (int s = 0; s < SAMPLES; s++) {
    int64_t r = (int64_t)(urand() * (double)B->M), c = (int64_t)(urand() * (double)B->N);
    double ref = 0, mag = 0;
    for (int64_t k = 0; k < B->K; k++) {
      double t = evtc_bf16_to_double(B->a[r * B->K + k]) * evtc_bf16_to_double(B->b_nk[c * B->K + k]);
      ref += t;
      mag += fabs(t);
    }
    double tol = (double)B->K * 0x1p-22 * mag + fabs(ref) * 0x1p-7 + 1e-30;
    double e = fabs(evtc_bf16_to_double(out[r * B->N + c]) - ref) / tol;
    if (!(e <= worst)) worst = e;   /* NaN sticks */
  }
  free(out);
  return worst;
}

typedef evtc_status (*launch_fn)(evtc_cuda_device *dev, void *ctx, evtc_diag *d);

/* Median ms of ITERS launches after WARM, each between two events. */
static evtc_status time_it(evtc_cuda_device *dev, launch_fn fn, void *ctx, double *ms, evtc_diag *d) {
  CUevent e0 = NULL, e1 = NULL;
  float t[ITERS];
  evtc_status s = evtc_cuda_event_new(dev, &e0, d);
  if (s == EVTC_OK) s = evtc_cuda_event_new(dev, &e1, d);
  for (int i = 0; i < WARM + ITERS && s == EVTC_OK; i++) {
    s = evtc_cuda_event_record(dev, e0, d);
    if (s == EVTC_OK) s = fn(dev, ctx, d);
    if (s == EVTC_OK) s = evtc_cuda_event_record(dev, e1, d);
    float x = 0;
    if (s == EVTC_OK) s = evtc_cuda_event_ms(dev, e0, e1, &x, d);
    if (i >= WARM) t[i - WARM] = x;
  }
  evtc_cuda_event_free(dev, e0);
  evtc_cuda_event_free(dev, e1);
  if (s != EVTC_OK) return s;
  qsort(t, ITERS, sizeof t[0], cmp_float);
  *ms = (t[ITERS / 2 - 1] + t[ITERS / 2]) / 2;
  return EVTC_OK;
}

/* evtc: one launch of a prepared kernel */
typedef struct evtc_run {
  evtc_cuda_kernel *k;
  evtc_cuda_gemm_launch *L;
} evtc_run;

static evtc_status evtc_launch(evtc_cuda_device *dev, void *ctx, evtc_diag *d) {
  evtc_run *r = ctx;
  return evtc_cuda_launch(dev, r->k, r->L->grid, r->L->block, r->L->smem, r->L->params, d);
}

/* cuBLASLt: D^T (N x M, column-major) = op(B) (N x K) op(A^T) (K x M) */
typedef struct lt_run {
  const evtc_cuda_cublaslt *lt;
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  evtc_cublasLtHeuristic algo;
  CUdeviceptr a, b, dd, ws;
  size_t ws_bytes;
} lt_run;

static evtc_status lt_launch(evtc_cuda_device *dev, void *ctx, evtc_diag *d) {
  lt_run *r = ctx;
  float one = 1, zero = 0;
  cublasStatus_t st = r->lt->cublasLtMatmul(r->h, r->desc, &one, (const void *)(uintptr_t)r->b, r->la,
                                            (const void *)(uintptr_t)r->a, r->lb, &zero, (void *)(uintptr_t)r->dd,
                                            r->lc, (void *)(uintptr_t)r->dd, r->lc, &r->algo.algo,
                                            (void *)(uintptr_t)r->ws, r->ws_bytes, dev->stream);
  return st ? evtc_diag_set(d, EVTC_ERR_RUNTIME, "cublasLtMatmul: status %d", st) : EVTC_OK;
}

static evtc_status lt_init(lt_run *r, const bufs *B, bool b_kmajor, evtc_diag *d) {
  const evtc_cuda_cublaslt *lt = r->lt;
  int32_t ta = b_kmajor ? EVTC_CUBLAS_OP_T : EVTC_CUBLAS_OP_N, tb = EVTC_CUBLAS_OP_N;
  cublasStatus_t st = lt->cublasLtMatmulDescCreate(&r->desc, EVTC_CUBLAS_COMPUTE_32F, EVTC_CUDA_R_32F);
  if (!st) st = lt->cublasLtMatmulDescSetAttribute(r->desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (!st) st = lt->cublasLtMatmulDescSetAttribute(r->desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  /* B as stored: N x K row-major is column-major K x N (ld K); K x N row-major is column-major N x K (ld N) */
  if (!st)
    st = b_kmajor ? lt->cublasLtMatrixLayoutCreate(&r->la, EVTC_CUDA_R_16BF, (uint64_t)B->K, (uint64_t)B->N, B->K)
                  : lt->cublasLtMatrixLayoutCreate(&r->la, EVTC_CUDA_R_16BF, (uint64_t)B->N, (uint64_t)B->K, B->N);
  if (!st) st = lt->cublasLtMatrixLayoutCreate(&r->lb, EVTC_CUDA_R_16BF, (uint64_t)B->K, (uint64_t)B->M, B->K);
  if (!st) st = lt->cublasLtMatrixLayoutCreate(&r->lc, EVTC_CUDA_R_16BF, (uint64_t)B->N, (uint64_t)B->M, B->N);
  cublasLtMatmulPreference_t pref = NULL;
  unsigned long long ws = r->ws_bytes;
  if (!st) st = lt->cublasLtMatmulPreferenceCreate(&pref);
  if (!st) st = lt->cublasLtMatmulPreferenceSetAttribute(pref, EVTC_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                         sizeof ws);
  int found = 0;
  if (!st)
    st = lt->cublasLtMatmulAlgoGetHeuristic(r->h, r->desc, r->la, r->lb, r->lc, r->lc, pref, 1, &r->algo, &found);
  if (pref) lt->cublasLtMatmulPreferenceDestroy(pref);
  if (st || found < 1) return evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuBLASLt setup: status %d, %d algorithms", st, found);
  return EVTC_OK;
}

static void lt_free(lt_run *r) {
  if (r->la) r->lt->cublasLtMatrixLayoutDestroy(r->la);
  if (r->lb) r->lt->cublasLtMatrixLayoutDestroy(r->lb);
  if (r->lc) r->lt->cublasLtMatrixLayoutDestroy(r->lc);
  if (r->desc) r->lt->cublasLtMatmulDescDestroy(r->desc);
}

static void add_row(const bufs *B, const char *impl, double ms, double err, bool ok) {
  if (n_rows >= 64) return;
  row *r = &rows[n_rows++];
  snprintf(r->shape, sizeof r->shape, "%lldx%lldx%lld", (long long)B->M, (long long)B->N, (long long)B->K);
  snprintf(r->impl, sizeof r->impl, "%s", impl);
  r->ms = ms;
  r->tflops = ok ? 2.0 * (double)B->M * (double)B->N * (double)B->K / (ms * 1e-3) / 1e12 : 0;
  r->err = err;
  r->ok = ok;
  printf("RESULT %s %s %.4f ms %.1f TFLOP/s err/tol %.3f%s\n", r->shape, impl, ms, r->tflops, err,
         ok ? "" : " FAILED");
  fflush(stdout);
}

static void run_shape(evtc_cuda_device *dev, CUmodule mod, const evtc_cuda_cublaslt *lt, cublasLtHandle_t h,
                      CUdeviceptr ws, size_t ws_bytes, const int64_t *shape) {
  const evtc_cuda_driver *drv = dev->drv;
  bufs B = {.M = shape[0], .N = shape[1], .K = shape[2]};
  evtc_cuda_gemm_workspace tail_ws = {0};   /* the split tail rows' */
  size_t na = (size_t)(B.M * B.K), nb = (size_t)(B.N * B.K), nd = (size_t)(B.M * B.N);
  B.a = malloc(na * 2);
  B.b_nk = malloc(nb * 2);
  B.b_kn = malloc(nb * 2);
  for (size_t i = 0; i < na; i++) B.a[i] = evtc_double_to_bf16(urand() * 2 - 1);
  for (size_t i = 0; i < nb; i++) B.b_nk[i] = evtc_double_to_bf16(urand() * 2 - 1);
  for (int64_t n = 0; n < B.N; n++)
    for (int64_t k = 0; k < B.K; k++) B.b_kn[k * B.N + n] = B.b_nk[n * B.K + k];
  evtc_diag d = {0};
  if (drv->cuMemAlloc(&B.da, na * 2) || drv->cuMemAlloc(&B.db_nk, nb * 2) || drv->cuMemAlloc(&B.db_kn, nb * 2) ||
      drv->cuMemAlloc(&B.dd, nd * 2) || evtc_cuda_copy_htod(dev, B.da, B.a, na * 2, &d) ||
      evtc_cuda_copy_htod(dev, B.db_nk, B.b_nk, nb * 2, &d) || evtc_cuda_copy_htod(dev, B.db_kn, B.b_kn, nb * 2, &d)) {
    fprintf(stderr, "%lldx%lldx%lld: allocation or copy failed %s\n", (long long)B.M, (long long)B.N, (long long)B.K,
            d.msg);
    goto out;
  }
  for (int t = 0; t < 2; t++) {   /* TN, then NN */
    bool kmaj = t == 0;
    char impl[64];
    /* cuBLASLt */
    lt_run lr = {.lt = lt, .h = h, .a = B.da, .b = kmaj ? B.db_nk : B.db_kn, .dd = B.dd, .ws = ws, .ws_bytes = ws_bytes};
    double ms = 0, err = INFINITY;
    snprintf(impl, sizeof impl, "cublaslt %s", kmaj ? "TN" : "NN");
    evtc_status s = evtc_cuda_fill32(dev, B.dd, 0xFFFFFFFFu, nd / 2, &d);
    if (s == EVTC_OK) s = lt_init(&lr, &B, kmaj, &d);
    if (s == EVTC_OK) s = time_it(dev, lt_launch, &lr, &ms, &d);
    if (s == EVTC_OK) err = check_output(dev, &B, &d);
    if (s != EVTC_OK) fprintf(stderr, "%s: %s\n", impl, d.msg);
    add_row(&B, impl, ms, err, s == EVTC_OK && err <= 1);
    lt_free(&lr);
    d = (evtc_diag){0};
    /* evtc */
    for (int c = 0; c < N_CFG; c++)
      for (int tv = 0; tv < 4; tv++) {   /* tile by tile, then split tails of at most 2, 4 and 8 units a tile */
        static const int tail_of[4] = {0, 2, 4, 8};
        const int tail = tail_of[tv];
        if (!kmaj && !runs_nn(c)) continue;
        char name[64], cfgname[32];
        kernel_name(c, kmaj, name, sizeof name);
        evtc_cuda_gemm_config_name(&cfgs[c], cfgname, sizeof cfgname);
        snprintf(impl, sizeof impl, "evtc %s %s", kmaj ? "TN" : "NN", cfgname);
        if (tail) snprintf(impl + strlen(impl), sizeof impl - strlen(impl), " tail %d", tail);
        evtc_cuda_kernel k;
        evtc_cuda_gemm_variant v = variant(kmaj);
        evtc_cuda_gemm_problem p = {.M = B.M, .N = B.N, .K = B.K, .batch = 1, .lda = B.K, .ldb = kmaj ? B.K : B.N,
                                    .ldc = B.N, .tail_split = tail};   /* any k-blocks: what it costs, too */
        if (tail && evtc_cuda_gemm_split_counts(&cfgs[c], &p, dev->sm_count) == 0) continue;
        evtc_cuda_gemm_launch L;
        ms = 0;
        err = INFINITY;
        s = evtc_cuda_kernel_get(dev, mod, name, &k, &d);
        if (s == EVTC_OK) s = evtc_cuda_fill32(dev, B.dd, 0xFFFFFFFFu, nd / 2, &d);
        if (s == EVTC_OK)
          s = evtc_cuda_gemm_launch_init(&L, drv, &cfgs[c], &v, &p, B.da, kmaj ? B.db_nk : B.db_kn, B.dd, dev->sm_count,
                                         &d);
        if (s == EVTC_OK) s = evtc_cuda_gemm_workspace_fit(dev, &tail_ws, &cfgs[c], &p, dev->sm_count, &L, &d);
        int fit = 0;   /* clusters that run at once */
        if (s == EVTC_OK) s = evtc_cuda_gemm_fit_clusters(dev, &k, &cfgs[c], &L, &fit, &d);
        if (s == EVTC_OK && fit > 0)
          printf("%s: %d clusters of %d CTAs fit at once; the grid has %u CTAs\n", impl, fit, cfgs[c].cluster_m, L.grid[0]);
        if (s == EVTC_OK && tail)
          printf("%s: the last %d tiles in %d units each on %u CTAs\n", impl, L.dims.tail_tiles, L.dims.tail_splits,
                 L.grid[0]);
        evtc_run er = {&k, &L};
        if (s == EVTC_OK) s = time_it(dev, evtc_launch, &er, &ms, &d);
        if (s == EVTC_OK) err = check_output(dev, &B, &d);
        if (s != EVTC_OK) fprintf(stderr, "%s: %s\n", impl, d.msg);
        add_row(&B, impl, ms, err, s == EVTC_OK && err <= 1);
        if (s == EVTC_ERR_RUNTIME) goto out;   /* a fault: the context is gone */
        d = (evtc_diag){0};
        if (kmaj && c == 0 && !tail) {   /* the same kernel without its stores: the epilogue's cost */
          evtc_cuda_kernel kn;
          s = evtc_cuda_kernel_get(dev, mod, "bench_gemm_c0_tn_nostore", &kn, &d);
          evtc_run nr = {&kn, &L};
          if (s == EVTC_OK) s = time_it(dev, evtc_launch, &nr, &ms, &d);
          if (s != EVTC_OK) fprintf(stderr, "no store: %s\n", d.msg);
          snprintf(impl, sizeof impl, "evtc TN %s, no store", cfgname);
          add_row(&B, impl, ms, 0, s == EVTC_OK);
          if (s == EVTC_ERR_RUNTIME) goto out;
          d = (evtc_diag){0};
        }
      }
  }
out:
  evtc_cuda_gemm_workspace_free(dev, &tail_ws);
  if (B.da) drv->cuMemFree(B.da);
  if (B.db_nk) drv->cuMemFree(B.db_nk);
  if (B.db_kn) drv->cuMemFree(B.db_kn);
  if (B.dd) drv->cuMemFree(B.dd);
  free(B.a);
  free(B.b_nk);
  free(B.b_kn);
}

static void print_table(void) {
  printf("\n%-18s %-36s %9s %9s %12s %8s\n", "M x N x K", "implementation", "ms", "TFLOP/s", "vs cuBLASLt", "err/tol");
  const row *base = NULL;
  for (int i = 0; i < n_rows; i++) {
    const row *r = &rows[i];
    if (!strncmp(r->impl, "cublaslt", 8)) base = r;
    char ratio[16] = "-";
    if (base && base->ok && r->ok && r != base) snprintf(ratio, sizeof ratio, "%.1f %%", 100 * base->ms / r->ms);
    printf("%-18s %-36s %9.4f %9.1f %12s %8.3f%s\n", r->shape, r->impl, r->ms, r->tflops, ratio, r->err,
           r->ok ? "" : "  FAILED");
  }
}

int main(int argc, char **argv) {
  bool compile_only = false;
  const char *dump = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--compile-only")) compile_only = true;
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--compile-only] [--dump DIR]\n", argv[0]);
      return 2;
    }
  }
  char *src = module_source();
  if (dump) {
    char path[4096];
    snprintf(path, sizeof path, "%s/gpu_gemm_bench.cu", dump);
    FILE *f = fopen(path, "w");
    if (f) {
      fputs(src, f);
      fclose(f);
    } else {
      fprintf(stderr, "cannot write %s\n", path);
    }
  }
  evtc_diag d = {0};
  evtc_cuda_cubin cubin;
  static const char *const opts[] = {"--std=c++17", "-lineinfo"};
  if (evtc_cuda_compile(src, "sm90 GEMM bench kernels", "sm_90a", opts, 2, &cubin, &d) != EVTC_OK) {
    fprintf(stderr, "gpu_gemm_bench: %s\n", d.msg);
    free(src);
    return 1;
  }
  free(src);
  printf("kernels compiled (%s)\n", cubin.cache_hit ? "cache hit" : "NVRTC");
  if (compile_only) {
    evtc_cuda_cubin_free(&cubin);
    return 0;
  }
  evtc_cuda_device dev;
  if (evtc_cuda_device_open(&dev, 0, &d) != EVTC_OK) {
    fprintf(stderr, "gpu_gemm_bench: %s\n", d.msg);
    evtc_cuda_cubin_free(&cubin);
    return 77;
  }
  int rc = 0;
  const evtc_cuda_cublaslt *lt = evtc_cuda_cublaslt_get(&d);
  cublasLtHandle_t h = NULL;
  CUmodule mod = NULL;
  CUdeviceptr ws = 0;
  const size_t ws_bytes = 32u << 20;
  if (strcmp(dev.arch, "sm_90a") != 0) {
    fprintf(stderr, "gpu_gemm_bench: %s is %s, not sm_90a\n", dev.name, dev.arch);
    rc = 77;
  } else if (!lt || lt->cublasLtCreate(&h) || dev.drv->cuMemAlloc(&ws, ws_bytes) ||
             evtc_cuda_module_load(&dev, &cubin, "sm90 GEMM bench kernels", &mod, &d)) {
    fprintf(stderr, "gpu_gemm_bench: setup failed: %s\n", d.msg[0] ? d.msg : "cuBLASLt handle or workspace");
    rc = 1;
  } else {
    printf("device %s, %d SMs, %s\n", dev.name, dev.sm_count, lt->path);
    for (int s = 0; s < N_SHAPE; s++) run_shape(&dev, mod, lt, h, ws, ws_bytes, shapes[s]);
    print_table();
    for (int i = 0; i < n_rows; i++) rc |= !rows[i].ok;
  }
  if (mod) evtc_cuda_module_unload(&dev, mod);
  if (ws) dev.drv->cuMemFree(ws);
  if (h) lt->cublasLtDestroy(h);
  evtc_cuda_cubin_free(&cubin);
  evtc_cuda_device_close(&dev);
  return rc;
}
