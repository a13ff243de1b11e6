/* test_gpu_gemm.c -- evtc's GEMM templates, sm_90a (cuda_emit_gemm.c) and
 * sm_80 (cuda_emit_gemm80.c), against a float64 host reference.
 *
 * Every case runs one emitted kernel on fresh random inputs (uniform in
 * [-1, 1], rounded to bf16 or f16) with the output buffer poisoned with NaN
 * bits: odd sizes (2039x1x17, 1x1x1, 129x257x65, 3x300x1000), tile
 * multiples, all four operand layouts (A M x K or K x M, B N x K or K x N),
 * batches, bf16 and f16 inputs, f32, bf16 and f16 outputs, padded row and
 * batch strides (the padding holds random values the kernel must not read,
 * and the output's padding must stay poisoned), both stores of D (staged
 * through shared memory and TMA when D's row stride is a multiple of 16
 * bytes, direct when it is odd, and both when only the column-edge tile
 * cannot use TMA), and eight sm_90a tile configs (two on 2x1 clusters) and four sm_80 ones
 * (including more tiles than SMs, so the persistent scheduler wraps),
 * and the epilogue hook (a kernel parameter, D = alpha acc + r - 2c), and the
 * split tail (the last tiles cut into units of their k-blocks once the
 * tiles are more than the SMs but no whole number of waves: on the device's
 * SMs, and on grids of 6 to 10 CTAs, clusters too; its counts must be zero
 * after the launch).  The
 * sm_80 template runs the same kinds of cases (its stores are direct).
 * Each element must satisfy |d - ref| <= K 2^-22 sum|a b| (fp32
 * accumulation in any order, with margin) + |ref| ulp(out) (the output
 * rounding) and must not be NaN.  The host-side checks of configs and
 * problems (rejected strides name the operand) run everywhere.
 *
 * Without a GPU the kernels are still compiled through NVRTC when it is
 * there (the emitted CUDA C must build without headers; this also fills
 * the disk cache that bench/gpu_gemm.sh carries to the GPU machine), then
 * the test prints SKIPPED and exits 77.  The sm_80 kernels are also
 * compiled for sm_80 (they must not need anything later).  On a device from
 * sm_80 on other than sm_90a only the sm_80 cases run; before sm_80 it skips.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_gemm.h"
#include "check.h"
#include "runtime/elements.h"

static const evtc_cuda_gemm_config cfgs[] = {
    {128, 256, 64, 4, 2, 1, 1, 8, false, false},   /* the default: 64x256 per consumer warpgroup */
    {128, 128, 64, 6, 2, 1, 1, 8, false, false},
    {256, 128, 64, 4, 2, 1, 1, 4, false, false},   /* two 64-row atoms per consumer */
    {128, 128, 64, 5, 1, 1, 1, 2, false, false},   /* one consumer warpgroup (no register reallocation) */
    {128, 128, 64, 5, 2, 1, 1, 8, true, false},    /* pingpong: consumers take alternate 128x128 tiles */
    {64, 256, 64, 4, 2, 1, 1, 8, true, false},     /* pingpong: alternate 64x256 tiles */
    {128, 256, 64, 4, 2, 2, 1, 8, false, false},   /* CLUSTER: 2x1 clusters sharing B by TMA multicast */
    {64, 256, 64, 4, 2, 2, 1, 4, true, false},     /* 2x1 clusters of pingpong tiles */
    {128, 128, 64, 4, 2, 1, 1, 8, false, true},    /* SM80: the sm_80 default, 8 warps of 16 x 128 */
    {128, 128, 64, 2, 1, 1, 1, 2, false, true},    /* sm_80, one warpgroup: two atoms, warps of 32 x 128, 2 stages */
    {64, 64, 64, 3, 1, 1, 1, 1, false, true},      /* sm_80, small tiles: many of them, the scheduler wraps */
    {256, 128, 64, 3, 2, 1, 1, 8, false, true},    /* sm_80, the H200's default: warps of 32 x 128 */
};
enum { N_CFG = sizeof cfgs / sizeof cfgs[0], CLUSTER = 6, SM80 = 8 };
/* (input, output) types: 0 bf16->f32, 1 bf16->bf16, 2 f16->f16, 3 f16->f32 */
static const evtc_dtype in_of[4] = {EVTC_BF16, EVTC_BF16, EVTC_F16, EVTC_F16};
static const evtc_dtype out_of[4] = {EVTC_F32, EVTC_BF16, EVTC_F16, EVTC_F32};

typedef struct gcase {
  int64_t M, N, K, batch;
  int layout;   /* bit 0: A stored K x M; bit 1: B stored K x N */
  int types;    /* index into in_of / out_of */
  int cfg;
  int pad;      /* padded strides */
  int epi;      /* the test epilogue (test_epilogue) instead of the built-in store; f32 output */
  int sms;      /* the persistent grid's SMs (0: the device's): a few make a split tail of few tiles */
} gcase;

#define MAX_CASES 160
static gcase cases[MAX_CASES];
static int n_cases;

static void add_case(int64_t M, int64_t N, int64_t K, int64_t batch, int layout, int types, int cfg, int pad,
                     int epi) {
  if (n_cases < MAX_CASES) cases[n_cases++] = (gcase){M, N, K, batch, layout, types & 3, cfg, pad, epi, 0};
}

static void add_on_sms(int64_t M, int64_t N, int64_t K, int64_t batch, int layout, int types, int cfg, int epi, int sms) {
  if (n_cases < MAX_CASES) cases[n_cases++] = (gcase){M, N, K, batch, layout, types & 3, cfg, 0, epi, sms};
}

static void add(int64_t M, int64_t N, int64_t K, int64_t batch, int layout, int types, int cfg, int pad) {
  add_case(M, N, K, batch, layout, types, cfg, pad, 0);
}

static void make_cases(void) {
  for (int l = 0; l < 4; l++)
    for (int t = 0; t < 4; t++) add(129, 257, 65, 1, l, t, 0, (l + t) & 1);
  for (int l = 0; l < 4; l++) {
    add(2039, 1, 17, 1, l, l, 0, 0);
    add(1, 1, 1, 1, l, l + 1, 0, 1);
    add(256, 512, 128, 1, l, l + 2, 0, 0);
    add(100, 200, 70, 3, l, l + 3, 0, 1);
    add(3, 300, 1000, 1, l, l, 0, l & 1);
  }
  for (int c = 1; c < SM80; c++) {
    add(2048, 1280, 160, 1, 0, 1, c, 0);   /* 160+ tiles of 128x128: the scheduler wraps */
    add(129, 257, 65, 2, 3, 2, c, 1);
    add(300, 7, 129, 1, 1, 0, c, 0);
  }
  add(77, 100, 130, 4, 1, 3, 0, 0);   /* batched, staged f32 stores */
  add(129, 264, 65, 2, 2, 1, 2, 0);   /* batched, staged bf16 stores, two atoms per consumer */
  add_case(129, 257, 65, 2, 0, 0, 0, 1, 1);
  add_case(200, 100, 300, 1, 3, 3, 3, 0, 1);
  add_case(300, 520, 130, 3, 1, 0, 4, 0, 1);   /* the hook on pingpong tiles */
  /* the split tail on few SMs (the 2048 x 1280 cases above make one on the device's: 28 tiles in 3 units): 27
     tiles on 8 (the last 3 in 2 units), 45 on 7 with the hook on pingpong tiles (3 in 2), 24 of 64 x 256 pingpong
     on 7 over K = 1000 (3 in 2 units of 8 k-blocks) */
  add_on_sms(300, 520, 130, 3, 0, 1, 0, 0, 8);
  add_on_sms(300, 520, 130, 3, 3, 0, 4, 1, 7);
  add_on_sms(384, 1000, 1000, 1, 2, 2, 5, 0, 7);
  /* and on 2x1 clusters: 4 pairs (one with a ghost) on 3 clusters, the last in 3 units; 27 pairs of pingpong tiles
     with the hook on 5 clusters, the last 2 in 2 units */
  add_on_sms(300, 300, 200, 1, 0, 0, CLUSTER, 0, 6);
  add_on_sms(300, 520, 130, 3, 1, 0, CLUSTER + 1, 1, 10);
  /* 2x1 clusters: every layout (an N-major B's panels split by k-rows, a K-major one's rows), odd tile rows (the
     last pair's lower tile a ghost), a column-edge tile whose lower half of B lies past N, the hook */
  for (int l = 0; l < 4; l++) {
    add(300, 300, 200, 1, l, l, CLUSTER + (l & 1), l & 1);
    add(129, 257, 65, 2, l, l + 1, CLUSTER + ((l >> 1) & 1), 0);
  }
  add_case(300, 520, 130, 3, 1, 0, CLUSTER, 0, 1);
  add_case(200, 100, 300, 1, 3, 3, CLUSTER + 1, 0, 1);
  /* the sm_80 template: every layout and type, odd sizes, K not a multiple of 8 (chunks cut at K) */
  for (int l = 0; l < 4; l++)
    for (int t = 0; t < 4; t++) add(129, 257, 65, 1, l, t, SM80, (l + t) & 1);
  for (int l = 0; l < 4; l++) {
    add(2039, 1, 17, 1, l, l, SM80, 0);
    add(1, 1, 1, 1, l, l + 1, SM80 + 1, 1);
    add(100, 200, 70, 3, l, l + 3, SM80 + 2, 1);
    add(3, 300, 1000, 1, l, l, SM80 + (l % 3), l & 1);
  }
  for (int c = SM80; c < N_CFG; c++) {
    add(2048, 1280, 160, 1, 0, 1, c, 0);
    add(300, 7, 129, 1, 1, 0, c, 0);
  }
  add_case(129, 257, 65, 2, 0, 0, SM80, 1, 1);   /* the hook on the sm_80 template */
  add_case(300, 520, 130, 3, 3, 3, SM80 + 1, 0, 1);
  add_case(300, 520, 130, 2, 1, 0, SM80 + 3, 1, 1);
}

/* The epilogue hook with a parameter: D = alpha acc + (r - 2 c), stored as f32 by hand. */
static const float ALPHA = 0.5f;
static void epi_params(evtc_sb *b, void *ctx) { evtc_sb_printf(b, ", float alpha"); }
static void epi_setup(evtc_sb *b, const char *ind, void *ctx) {
  evtc_sb_printf(b, "%sfloat *const out_f = (float *)out_ptr;\n", ind);
}
static void epi_element(evtc_sb *b, const char *ind, const char *acc, void *ctx) {
  evtc_sb_printf(b, "%sout_f[bat * dims.c_bstride + r * dims.ldc + c] = %s * alpha + (float)(r - 2 * c);\n", ind, acc);
}
static const evtc_cuda_gemm_epilogue test_epilogue = {.emit_params = epi_params, .emit_setup = epi_setup,
                                                      .emit_element = epi_element};

static evtc_cuda_gemm_variant variant_of(const gcase *g) {
  return (evtc_cuda_gemm_variant){.in = in_of[g->types], .out = g->epi ? EVTC_F32 : out_of[g->types],
                                  .a_kmajor = !(g->layout & 1), .b_kmajor = !(g->layout & 2)};
}

static void kernel_name(const gcase *g, char *buf, size_t cap) {
  snprintf(buf, cap, "gemm_c%d_t%d_l%d%s", g->cfg, g->types, g->layout, g->epi ? "_epi" : "");
}

/* One module holding every distinct kernel of the cases (only the sm_80 template's with sm80_only). */
static char *module_source(bool sm80_only) {
  evtc_sb b = {0};
  for (int i = 0; i < n_cases; i++) {
    if (sm80_only && !cfgs[cases[i].cfg].sm80) continue;
    int first = 1;
    for (int j = 0; j < i && first; j++)
      first = !(cases[j].cfg == cases[i].cfg && cases[j].types == cases[i].types &&
                cases[j].layout == cases[i].layout && cases[j].epi == cases[i].epi);
    if (!first) continue;
    char name[64];
    kernel_name(&cases[i], name, sizeof name);
    evtc_cuda_gemm_variant v = variant_of(&cases[i]);
    evtc_cuda_gemm_emit(&b, name, &cfgs[cases[i].cfg], &v, cases[i].epi ? &test_epilogue : NULL);
  }
  return b.s;
}

/* ---- one case ---- */

typedef struct operand {
  int64_t rows, cols, ld, bstride;   /* as stored, per batch */
  size_t elems;
  uint16_t *bits;
  double *val;
} operand;

static void operand_make(operand *o, int64_t rows, int64_t cols, int64_t batch, int pad, evtc_dtype t) {
  o->rows = rows;
  o->cols = cols;
  o->ld = (cols + 7) / 8 * 8 + (pad ? 8 : 0);
  o->bstride = rows * o->ld + (pad ? 24 : 0);
  o->elems = (size_t)(o->bstride * (batch - 1) + rows * o->ld);
  o->bits = malloc(o->elems * 2);
  o->val = malloc(o->elems * sizeof(double));
  for (size_t i = 0; i < o->elems; i++) {   /* padding too: values the kernel must not read */
    double x = check_urand() * 2 - 1;
    o->bits[i] = t == EVTC_BF16 ? evtc_double_to_bf16(x) : evtc_double_to_f16(x);
    o->val[i] = t == EVTC_BF16 ? evtc_bf16_to_double(o->bits[i]) : evtc_f16_to_double(o->bits[i]);
  }
}

static void operand_free(operand *o) {
  free(o->bits);
  free(o->val);
}

static double out_val(const void *buf, size_t i, evtc_dtype t, int *poisoned) {
  if (t == EVTC_F32) {
    uint32_t u;
    memcpy(&u, (const char *)buf + i * 4, 4);
    *poisoned = u == 0xFFFFFFFFu;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, (const char *)buf + i * 2, 2);
  *poisoned = h == 0xFFFFu;
  return t == EVTC_BF16 ? evtc_bf16_to_double(h) : evtc_f16_to_double(h);
}

/* Cases whose launch walked a split tail. */
static int tail_cases;

/* Runs case g with kernel k; false when the device is unusable afterwards (a fault). */
static bool run_case(evtc_cuda_device *dev, evtc_cuda_kernel *k, const gcase *g) {
  const evtc_cuda_driver *drv = dev->drv;
  evtc_cuda_gemm_variant v = variant_of(g);
  operand A, B;
  operand_make(&A, v.a_kmajor ? g->M : g->K, v.a_kmajor ? g->K : g->M, g->batch, g->pad, v.in);
  operand_make(&B, v.b_kmajor ? g->N : g->K, v.b_kmajor ? g->K : g->N, g->batch, g->pad, v.in);
  /* D: rows of N rounded up to 8 (16-byte aligned: the staged TMA store), or padded to odd strides (direct stores) */
  evtc_cuda_gemm_problem p = {.M = g->M, .N = g->N, .K = g->K, .batch = g->batch, .lda = A.ld, .ldb = B.ld,
                              .ldc = g->pad ? g->N + 3 : (g->N + 7) / 8 * 8, .a_bstride = A.bstride,
                              .b_bstride = B.bstride, .tail_split = 4};
  p.c_bstride = g->M * p.ldc + (g->pad ? 5 : 0);
  size_t es = evtc_dtype_size(v.out), c_elems = (size_t)(p.c_bstride * (g->batch - 1) + g->M * p.ldc);
  size_t c_bytes = (c_elems * es + 3) / 4 * 4;
  char label[260];
  snprintf(label, sizeof label, "%lldx%lldx%lld batch %lld, %s->%s, A %s, B %s, cfg %d%s%s%s", (long long)g->M,
           (long long)g->N, (long long)g->K, (long long)g->batch, evtc_dtype_name(v.in), evtc_dtype_name(v.out),
           v.a_kmajor ? "MxK" : "KxM", v.b_kmajor ? "NxK" : "KxN", g->cfg, cfgs[g->cfg].sm80 ? " sm80" : "",
           g->pad ? ", padded" : "",
           g->epi ? ", hook" : "");
  const int sms = g->sms ? g->sms : dev->sm_count;
  const int64_t n_counts = evtc_cuda_gemm_split_counts(&cfgs[g->cfg], &p, sms);

  CUdeviceptr da = 0, db = 0, dc = 0;
  evtc_cuda_gemm_workspace tw = {0};   /* the split tail's: a fresh one a case (NaN workspace, zero counts) */
  evtc_diag d = {0};
  bool alive = true;
  evtc_cuda_gemm_launch L;
  if (drv->cuMemAlloc(&da, A.elems * 2) || drv->cuMemAlloc(&db, B.elems * 2) || drv->cuMemAlloc(&dc, c_bytes)) {
    CHECK(0, "%s: cuMemAlloc failed", label);
    goto out;
  }
  if (evtc_cuda_copy_htod(dev, da, A.bits, A.elems * 2, &d) || evtc_cuda_copy_htod(dev, db, B.bits, B.elems * 2, &d) ||
      evtc_cuda_fill32(dev, dc, 0xFFFFFFFFu, c_bytes / 4, &d) ||
      evtc_cuda_gemm_launch_init(&L, drv, &cfgs[g->cfg], &v, &p, da, db, dc, sms, &d) ||
      evtc_cuda_gemm_workspace_fit(dev, &tw, &cfgs[g->cfg], &p, sms, &L, &d)) {
    CHECK(0, "%s: %s", label, d.msg);
    goto out;
  }
  if (L.dims.tail_tiles > 0) {
    const size_t n = strlen(label);
    snprintf(label + n, sizeof label - n, ", split tail %d of %lld tiles in %d units, %u CTAs", L.dims.tail_tiles,
             (long long)(p.batch * ((p.M + cfgs[g->cfg].tile_m - 1) / cfgs[g->cfg].tile_m) *
                         ((p.N + cfgs[g->cfg].tile_n - 1) / cfgs[g->cfg].tile_n)), L.dims.tail_splits, L.grid[0]);
    tail_cases++;
  }
  float alpha = ALPHA;
  void *params[6] = {L.params[0], L.params[1], L.params[2], L.params[3], L.params[4], &alpha};
  if (evtc_cuda_launch(dev, k, L.grid, L.block, L.smem, params, &d) || evtc_cuda_sync(dev, label, &d)) {
    CHECK(0, "%s: %s", label, d.msg);
    alive = false;   /* a fault (or a trapped hang) leaves the context unusable */
    goto out;
  }
  void *host = malloc(c_bytes);
  if (evtc_cuda_copy_dtoh(dev, host, dc, c_bytes, &d)) {
    CHECK(0, "%s: %s", label, d.msg);
    free(host);
    alive = false;
    goto out;
  }
  /* dense float64 copies: At[r][k], Bt[c][k] of one batch */
  double *At = malloc(sizeof(double) * (size_t)(g->M * (g->K ? g->K : 1)));
  double *Bt = malloc(sizeof(double) * (size_t)(g->N * (g->K ? g->K : 1)));
  const double ulp = v.out == EVTC_F32 ? 0x1p-23 : v.out == EVTC_BF16 ? 0x1p-7 : 0x1p-10;
  int64_t bad = 0, unpoisoned = 0, checked = 0;
  double worst = 0;
  for (int64_t bt = 0; bt < g->batch; bt++) {
    for (int64_t r = 0; r < g->M; r++)
      for (int64_t kk = 0; kk < g->K; kk++)
        At[r * g->K + kk] = A.val[bt * A.bstride + (v.a_kmajor ? r * A.ld + kk : kk * A.ld + r)];
    for (int64_t c = 0; c < g->N; c++)
      for (int64_t kk = 0; kk < g->K; kk++)
        Bt[c * g->K + kk] = B.val[bt * B.bstride + (v.b_kmajor ? c * B.ld + kk : kk * B.ld + c)];
    for (int64_t r = 0; r < g->M; r++)
      for (int64_t c = 0; c < p.ldc; c++) {
        size_t at = (size_t)(bt * p.c_bstride + r * p.ldc + c);
        int poisoned;
        double got = out_val(host, at, v.out, &poisoned);
        if (c >= g->N) {   /* row padding: never written */
          unpoisoned += !poisoned;
          continue;
        }
        double ref = 0, mag = 0;
        for (int64_t kk = 0; kk < g->K; kk++) {
          double t = At[r * g->K + kk] * Bt[c * g->K + kk];
          ref += t;
          mag += fabs(t);
        }
        double tol = (double)g->K * 0x1p-22 * mag + fabs(ref) * ulp + 1e-30;
        if (g->epi) {   /* alpha ref + (r - 2c), rounded twice in f32 */
          tol = ALPHA * tol + (fabs(ALPHA * ref) + fabs((double)(r - 2 * c))) * 0x1p-22;
          ref = ALPHA * ref + (double)(r - 2 * c);
        }
        double err = fabs(got - ref);
        checked++;
        if (!(err <= tol)) {
          if (bad < 3)
            fprintf(stderr, "  %s: D[%lld][%lld][%lld] = %.9g, expected %.9g (tol %.3g)\n", label, (long long)bt,
                    (long long)r, (long long)c, got, ref, tol);
          bad++;
        } else if (err / (tol + 1e-300) > worst) {
          worst = err / tol;
        }
      }
    if (bt + 1 < g->batch)   /* the batch-stride gap after this batch: never written */
      for (int64_t e = g->M * p.ldc; e < p.c_bstride; e++) {
        int poisoned;
        out_val(host, (size_t)(bt * p.c_bstride + e), v.out, &poisoned);
        unpoisoned += !poisoned;
      }
  }
  CHECK(bad == 0, "%s: %lld of %lld elements outside the bound", label, (long long)bad, (long long)checked);
  CHECK(unpoisoned == 0, "%s: %lld padding elements written", label, (long long)unpoisoned);
  if (n_counts > 0) {   /* each launch leaves the split tail's counts zero for the next */
    int *cnt = malloc((size_t)n_counts * sizeof(int));
    int64_t left = 0;
    if (evtc_cuda_copy_dtoh(dev, cnt, tw.cnt, (size_t)n_counts * sizeof(int), &d) == EVTC_OK)
      for (int64_t i = 0; i < n_counts; i++) left += cnt[i] != 0;
    else
      left = -1;
    CHECK(left == 0, "%s: %lld split tail counts left nonzero (-1: not read back)", label, (long long)left);
    free(cnt);
  }
  const char *path = g->epi                                   ? "hook"
                     : !L.dims.tma_store                       ? "direct"
                     : g->N * (int64_t)es % 16 == 0              ? "staged"
                                                               : "mixed";   /* the column-edge tile direct */
  printf("ok   %-72s %-6s worst err/tol %.3f\n", label, path, worst);
  free(At);
  free(Bt);
  free(host);
out:
  if (da) drv->cuMemFree(da);
  if (db) drv->cuMemFree(db);
  if (dc) drv->cuMemFree(dc);
  evtc_cuda_gemm_workspace_free(dev, &tw);
  operand_free(&A);
  operand_free(&B);
  return alive;
}

/* ---- host-side checks (no GPU needed) ---- */

static void check_host_side(void) {
  char why[256];
  evtc_cuda_gemm_variant v = {.in = EVTC_BF16, .out = EVTC_F32, .a_kmajor = true, .b_kmajor = false};
  for (int c = 0; c < N_CFG; c++) CHECK(evtc_cuda_gemm_config_check(&cfgs[c], &v, why, sizeof why), "cfg %d: %s", c, why);
  evtc_cuda_gemm_config bad = cfgs[SM80];
  bad.pingpong = true;
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "sm_80"), "sm_80 pingpong refused: %s", why);
  bad = cfgs[SM80];
  bad.stages = 9;   /* cp.async groups in flight */
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "stages"), "sm_80 9 stages refused: %s", why);
  const unsigned a100 = 163 * 1024, h200 = 227 * 1024;   /* the bytes a block may opt in to */
  evtc_cuda_gemm_config d80 = evtc_cuda_gemm_config_default_sm80((int)a100),
                        big = evtc_cuda_gemm_config_default_sm80((int)h200);
  CHECK(d80.sm80 && evtc_cuda_gemm_config_check(&d80, &v, why, sizeof why) && evtc_cuda_gemm_smem_bytes(&d80) <= a100 &&
            evtc_cuda_gemm_threads(&d80) == 256,
        "the sm_80 default fits an A100 (%u bytes of shared memory, %u threads): %s", evtc_cuda_gemm_smem_bytes(&d80),
        evtc_cuda_gemm_threads(&d80), why);
  CHECK(big.sm80 && big.tile_m == 256 && evtc_cuda_gemm_config_check(&big, &v, why, sizeof why) &&
            evtc_cuda_gemm_smem_bytes(&big) > a100 && evtc_cuda_gemm_smem_bytes(&big) <= h200,
        "the sm_80 default on an H200 takes 256x128 tiles (%u bytes): %s", evtc_cuda_gemm_smem_bytes(&big), why);
  bad = cfgs[0];
  bad.tile_n = 96;
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "tile_n"), "tile_n 96 refused: %s", why);
  bad = cfgs[0];
  bad.stages = 6;   /* 6 x 48 KiB */
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "shared memory"), "smem refused: %s",
        why);
  bad = cfgs[2];
  bad.consumers = 1;   /* 2 x 256 / 2 = 256 accumulators per thread */
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "registers"), "regs refused: %s", why);
  bad = cfgs[4];
  bad.consumers = 1;
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "pingpong"), "pingpong alone refused: %s",
        why);
  bad = cfgs[0];
  bad.pingpong = true;   /* 128 x 256 whole per warpgroup: 256 accumulators per thread */
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "registers"),
        "pingpong 128x256 refused: %s", why);
  for (int c = 0; c < N_CFG; c++) {
    char name[64], again[64] = "";
    evtc_cuda_gemm_config back;
    evtc_cuda_gemm_config_name(&cfgs[c], name, sizeof name);
    if (evtc_cuda_gemm_config_parse(name, &back)) evtc_cuda_gemm_config_name(&back, again, sizeof again);
    CHECK(strcmp(name, again) == 0 && back.pingpong == cfgs[c].pingpong && back.sm80 == cfgs[c].sm80 &&
              back.cluster_m == cfgs[c].cluster_m,
          "config name '%s' parses back ('%s')", name,
          again);
  }
  bad = cfgs[CLUSTER];
  bad.sm80 = true;
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "cluster"), "sm_80 cluster refused: %s",
        why);
  bad = cfgs[CLUSTER];
  bad.cluster_m = 4;
  CHECK(!evtc_cuda_gemm_config_check(&bad, &v, why, sizeof why) && strstr(why, "cluster"), "4x1 cluster refused: %s",
        why);
  evtc_cuda_gemm_config junk;
  CHECK(!evtc_cuda_gemm_config_parse("128x256x64 s4 c2", &junk) && !evtc_cuda_gemm_config_parse("128x256x64 s4 c2 g8 px", &junk),
        "malformed config names refused");
  evtc_cuda_gemm_variant f64 = v;
  f64.in = EVTC_F64;
  CHECK(!evtc_cuda_gemm_config_check(&cfgs[0], &f64, why, sizeof why), "f64 input refused");

  evtc_cuda_gemm_problem p = {.M = 2039, .N = 1, .K = 17, .batch = 1, .lda = 17, .ldb = 8, .ldc = 1};
  CHECK(!evtc_cuda_gemm_problem_check(&v, &p, 256, 512, why, sizeof why) && strstr(why, "lda"),
        "packed K = 17 refused naming lda: %s", why);
  p.lda = 24;
  CHECK(evtc_cuda_gemm_problem_check(&v, &p, 256, 512, why, sizeof why), "padded lda accepted: %s", why);
  CHECK(!evtc_cuda_gemm_problem_check(&v, &p, 256, 520, why, sizeof why) && strstr(why, "operand B"),
        "misaligned B refused: %s", why);
  p.batch = 2;
  p.a_bstride = 2039 * 24;
  p.b_bstride = 12;
  CHECK(!evtc_cuda_gemm_problem_check(&v, &p, 256, 512, why, sizeof why) && strstr(why, "batch stride"),
        "odd batch stride refused: %s", why);
  p.N = 0;
  CHECK(!evtc_cuda_gemm_problem_check(&v, &p, 256, 512, why, sizeof why), "empty GEMM refused");
}

/* The cases of the module that runs on arch: all of them on sm_90a, the sm_80 template's elsewhere. */
static bool runs_on(const gcase *g, const char *arch) { return strcmp(arch, "sm_90a") == 0 || cfgs[g->cfg].sm80; }

int main(void) {
  check_rng = 0x5DEECE66Dull;
  make_cases();
  check_host_side();
  evtc_diag d = {0};
  evtc_cuda_device dev;
  bool have_gpu = evtc_cuda_device_open(&dev, 0, &d) == EVTC_OK;
  const char *arch = have_gpu ? dev.arch : "sm_90a";
  static const char *const opts[] = {"--std=c++17", "-lineinfo"};
  /* the sm_80 template's kernels for sm_80 itself: nothing in them may need a later GPU */
  char *src80 = module_source(true);
  evtc_cuda_cubin cubin;
  evtc_diag cd = {0};
  evtc_status cs = evtc_cuda_compile(src80, "sm80 GEMM test kernels", "sm_80", opts, 2, &cubin, &cd);
  free(src80);
  if (cs == EVTC_ERR_UNSUPPORTED && !have_gpu) {
    printf("SKIPPED: no NVRTC and no GPU (%s)\n", cd.msg);
    int rc = check_summary();
    return rc ? rc : 77;
  }
  CHECK(cs == EVTC_OK, "NVRTC for sm_80: %s", cd.msg);
  if (cs == EVTC_OK) evtc_cuda_cubin_free(&cubin);
  const bool sm80_only = strcmp(arch, "sm_90a") != 0;
  char *src = module_source(sm80_only);
  cs = evtc_cuda_compile(src, "GEMM test kernels", have_gpu ? arch : "sm_90a", opts, 2, &cubin, &cd);
  CHECK(cs == EVTC_OK, "NVRTC: %s", cd.msg);
  if (cs == EVTC_OK) printf("compiled %s cases' kernels (%s)\n", sm80_only ? "the sm_80" : "all", cubin.cache_hit ? "cache hit" : "NVRTC");
  if (!have_gpu || dev.cc_major < 8 || cs != EVTC_OK) {
    if (have_gpu) evtc_cuda_device_close(&dev);
    if (cs == EVTC_OK) evtc_cuda_cubin_free(&cubin);
    free(src);
    int rc = check_summary();
    if (rc) return rc;
    printf("SKIPPED: %s\n", have_gpu ? "the GPU is older than sm_80 (mma.sync, cp.async)" : d.msg);
    return 77;
  }
  printf("device %s (%s), %d SMs%s\n", dev.name, arch, dev.sm_count, sm80_only ? ": the sm_80 template only" : "");
  CUmodule mod;
  if (evtc_cuda_module_load(&dev, &cubin, "GEMM test kernels", &mod, &d) == EVTC_OK) {
    for (int i = 0; i < n_cases; i++) {
      if (!runs_on(&cases[i], arch)) continue;
      char name[64];
      kernel_name(&cases[i], name, sizeof name);
      evtc_cuda_kernel k;
      if (evtc_cuda_kernel_get(&dev, mod, name, &k, &d) != EVTC_OK) {
        CHECK(0, "%s", d.msg);
        break;
      }
      if (!run_case(&dev, &k, &cases[i])) {
        fprintf(stderr, "device fault: the remaining %d cases are not run\n", n_cases - i - 1);
        check_failed++;
        break;
      }
    }
    evtc_cuda_module_unload(&dev, mod);
    if (!sm80_only)   /* five cases on few SMs, five on the device's 132 (160 tiles, 80 pairs) */
      CHECK(tail_cases >= 5, "only %d cases walked a split tail: the cases no longer cover it", tail_cases);
  } else {
    CHECK(0, "%s", d.msg);
  }
  evtc_cuda_cubin_free(&cubin);
  evtc_cuda_device_close(&dev);
  free(src);
  return check_summary();
}
