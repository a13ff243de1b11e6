/* cuda_gemm_tune.c -- measuring the candidates of the GEMM tuner (see
 * cuda_gemm_tune.h for the space, the families and the cache).
 *
 * A run for one family (either template; the default is the family's, for
 * the sm_80 template the one that fits the device's shared memory):
 *   1. compile the default config and every candidate with group_m 8, one
 *      NVRTC program each, on `jobs` OpenMP threads (the CUBIN cache answers
 *      when bench/gpu_gemm_tune.sh prepare compiled them beforehand);
 *   2. upload random inputs (uniform in [-1, 1], stored in the family's
 *      layouts) for every representative problem; run the default config,
 *      its output poisoned with NaN first, check 1024 sampled elements
 *      against a float64 host dot product and every element for NaN: that
 *      output is the reference; time it;
 *   3. per candidate and problem: poison D, launch once, count on the GPU
 *      the elements that differ from the reference by more than 2^-7 |ref|
 *      + 2^-14 sqrt(K) (different tilings accumulate each element in the same
 *      k order, so a correct config agrees to rounding, while a lost k-step
 *      or a misplaced tile is off by far more); any difference rejects the
 *      candidate, else it is timed: CUDA events around each launch, median
 *      of 5 after 2 warm-ups;
 *   4. score = geometric mean over the problems of default time / time;
 *      the best three shapes are tried again with group_m 4 and 16
 *      (compiled now, in parallel);
 *   5. the best four and the default are timed again (median of 20) and the
 *      fastest of those by the same score wins -- the default unless the
 *      best beats it by 1 % (MARGIN) -- and is saved in the cache.
 * A candidate whose kernel faults takes the context with it: the device is
 * reopened, the inputs uploaded again and the default re-run, and tuning
 * goes on with the next candidate.
 */
#include "backend/cuda/cuda_gemm_tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_gemm.h"
#include "runtime/elements.h"

enum { WARM = 2, ITERS = 5, FINAL_ITERS = 20, SAMPLES = 1024, TOP = 3, FINALISTS = 4, SPACE_CAP = 512 };
/* A challenger replaces the default only when faster by this factor: the same config timed twice differs by
 * up to 1.4 % on one problem, 0.4 % in the geometric mean (H200, 2026-11-29). */
#define MARGIN 1.01
static const int64_t representative[][3] = {{8192, 8192, 4096}, {16384, 4096, 1024}, {16384, 1024, 4096},
                                            {4096, 4096, 4096}};
/* the backend's options without -lineinfo (CUBINs a third the size: less to carry to the GPU machine) */
static const char *const nvrtc_opts[] = {"--std=c++17", "--diag-suppress=177,550"};
#define KERNEL "evtc_tune_gemm"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool same_cfg(const evtc_cuda_gemm_config *a, const evtc_cuda_gemm_config *b) {
  return a->tile_m == b->tile_m && a->tile_n == b->tile_n && a->tile_k == b->tile_k && a->stages == b->stages &&
         a->consumers == b->consumers && a->pingpong == b->pingpong && a->cluster_m == b->cluster_m &&
         a->cluster_n == b->cluster_n && a->group_m == b->group_m;
}

/* ---- the visitor family's epilogue: D = gelu(acc + bias[c]) in the input type, paired direct stores ---- */

static void vis_params(evtc_sb *b, void *ctx) { evtc_sb_printf(b, ", const float *__restrict__ tune_bias"); }
static void vis_setup(evtc_sb *b, const char *ind, void *ctx) {
  evtc_sb_printf(b, "%schar *const tune_out = (char *)out_ptr;\n", ind);
}
static void vis_pair_begin(evtc_sb *b, const char *ind, void *ctx) {
  evtc_sb_printf(b, "%sfloat tv[2] = {0.f, 0.f};\n", ind);
}
static void vis_element(evtc_sb *b, const char *ind, const char *acc, void *ctx) {
  evtc_sb_printf(b, "%s{ const float x = %s + tune_bias[c]; tv[e] = 0.5f * x * (1.0f + erff(x * 0.70710678f)); }\n",
                 ind, acc);
}
static void vis_pair_end(evtc_sb *b, const char *ind, void *ctx) {
  const char *t = *(const evtc_dtype *)ctx == EVTC_F16 ? "f16" : "bf16";
  evtc_sb_printf(b,
                 "%sif (r < dims.M && c0 < dims.N) {\n"
                 "%s  char *const p = tune_out + (rg * dims.ldc + c0) * 2;\n"
                 "%s  if (c0 + 1 < dims.N) evtc_st2_%s(p, tv[0], tv[1]); else evtc_st1_%s(p, tv[0]);\n%s}\n",
                 ind, ind, ind, t, t, ind);
}

char *evtc_cuda_gemm_tune_source(const evtc_cuda_gemm_family *f, const evtc_cuda_gemm_config *cfg) {
  evtc_sb b = {0};
  evtc_cuda_gemm_variant v = evtc_cuda_gemm_family_variant(f);
  evtc_dtype in = f->in;
  evtc_cuda_gemm_epilogue vis = {.emit_params = vis_params, .emit_setup = vis_setup, .emit_element = vis_element,
                                 .ctx = &in, .emit_pair_begin = vis_pair_begin, .emit_pair_end = vis_pair_end};
  evtc_cuda_gemm_emit(&b, KERNEL, cfg, &v, f->visitor ? &vis : NULL);
  return b.s;
}

/* ---- candidates and their compilation ---- */

typedef struct cand {
  evtc_cuda_gemm_config cfg;
  evtc_cuda_cubin cubin;
  evtc_status st;               /* of the compile, then of the measurement */
  char err[1024];
  bool ok;                      /* built, matched the reference on every problem, timed */
  double ms[EVTC_TUNE_MAX_PROBLEMS], score;
} cand;

/* Compiles cs[0..n) in parallel; each keeps its own status.  Counts into *compiled / *cached. */
static void compile_all(const char *arch, const evtc_cuda_gemm_family *f, cand *cs, int n, int jobs, int *compiled,
                        int *cached) {
  if (jobs <= 0) jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (jobs <= 0) jobs = 1;
  int built = 0, hits = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(jobs) reduction(+ : built, hits)
  for (int i = 0; i < n; i++) {
    if (cs[i].cubin.data) continue;
    char *src = evtc_cuda_gemm_tune_source(f, &cs[i].cfg), name[64];
    evtc_cuda_gemm_config_name(&cs[i].cfg, name, sizeof name);
    evtc_diag d = {0};
    cs[i].st = evtc_cuda_compile(src, name, arch, nvrtc_opts, 2, &cs[i].cubin, &d);
    free(src);
    if (cs[i].st != EVTC_OK) snprintf(cs[i].err, sizeof cs[i].err, "%s", d.msg);
    else if (cs[i].cubin.cache_hit) hits++;
    else built++;
  }
  if (compiled) *compiled += built;
  if (cached) *cached += hits;
}

static int problems_of(const evtc_cuda_gemm_tune_options *o, int64_t (*mnk)[3]) {
  int n = o && o->n_problems > 0 ? o->n_problems : (int)(sizeof representative / sizeof representative[0]);
  if (n > EVTC_TUNE_MAX_PROBLEMS) n = EVTC_TUNE_MAX_PROBLEMS;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 3; j++) mnk[i][j] = o && o->n_problems > 0 ? o->mnk[i][j] : representative[i][j];
  return n;
}

/* The first pass: the default, then the space with group_m 8 (the default's shape again only if it differs), on a
 * device whose blocks may opt in to smem_optin bytes of shared memory. */
static int first_pass(const evtc_cuda_gemm_family *f, bool reduced, int smem_optin, cand **out) {
  evtc_cuda_gemm_config *space = malloc(sizeof *space * SPACE_CAP);
  int n = evtc_cuda_gemm_tune_space(f, 8, reduced, smem_optin, space, SPACE_CAP);
  if (n > SPACE_CAP) n = SPACE_CAP;
  cand *cs = calloc((size_t)n + 1, sizeof *cs);
  cs[0].cfg = evtc_cuda_gemm_family_default(f, smem_optin);
  int m = 1;
  for (int i = 0; i < n; i++)
    if (!same_cfg(&space[i], &cs[0].cfg)) cs[m++].cfg = space[i];
  free(space);
  *out = cs;
  return m;
}

evtc_status evtc_cuda_gemm_tune_compile(const char *arch, const evtc_cuda_gemm_family *f,
                                        const evtc_cuda_gemm_tune_options *o, int *compiled, int *cached,
                                        evtc_diag *d) {
  cand *cs;
  int n = first_pass(f, o && o->reduced, EVTC_CUDA_GEMM_SMEM_LIMIT, &cs);
  compile_all(arch, f, cs, n, o ? o->jobs : 0, compiled, cached);
  evtc_status s = EVTC_OK;
  for (int i = 0; i < n; i++) {
    if (cs[i].st != EVTC_OK && s == EVTC_OK) s = evtc_diag_set(d, cs[i].st, "%s", cs[i].err);
    evtc_cuda_cubin_free(&cs[i].cubin);
  }
  free(cs);
  return s;
}

/* ---- the problems on the device ---- */

typedef struct prob {
  int64_t M, N, K;
  uint16_t *ha, *hb;            /* host inputs as stored */
  float *hbias;
  CUdeviceptr a, b, bias, dd, ref;
  double default_ms;
} prob;

typedef struct bench {
  evtc_cuda_device *dev;
  evtc_cuda_gemm_family f;
  evtc_cuda_gemm_variant v;
  int np;
  prob p[EVTC_TUNE_MAX_PROBLEMS];
  evtc_cuda_cubin cmp_cubin;
  CUmodule cmp_mod;
  evtc_cuda_kernel cmp;
  CUdeviceptr bad;
  evtc_cuda_gemm_workspace tail;   /* the split tail's, grown to the largest a candidate needs */
  FILE *log;
} bench;

static const char cmp_source[] =
    "/* the GEMM tuner's check: elements of x off ref by more than rel |ref| + abs_tol (NaN counts) */\n"
    "__device__ __forceinline__ float evtc_tune_f(unsigned short u, int f16) {\n"
    "  float r;\n"
    "  if (f16) asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(r) : \"h\"(u)); else r = __uint_as_float((unsigned)u << 16);\n"
    "  return r;\n"
    "}\n"
    "extern \"C\" __global__ void evtc_tune_compare(const unsigned short *x, const unsigned short *ref, long long n,\n"
    "                                               int f16, float rel, float abs_tol, unsigned long long *bad) {\n"
    "  unsigned long long local = 0;\n"
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {\n"
    "    const float a = evtc_tune_f(x[i], f16), b = evtc_tune_f(ref[i], f16);\n"
    "    if (!(fabsf(a - b) <= rel * fabsf(b) + abs_tol)) local++;\n"
    "  }\n"
    "  if (local) atomicAdd(bad, local);\n"
    "}\n";

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static uint16_t to_half(evtc_dtype t, double x) {
  return t == EVTC_F16 ? evtc_double_to_f16(x) : evtc_double_to_bf16(x);
}
static double from_half(evtc_dtype t, uint16_t h) {
  return t == EVTC_F16 ? evtc_f16_to_double(h) : evtc_bf16_to_double(h);
}

static void host_inputs(bench *B) {
  for (int i = 0; i < B->np; i++) {
    prob *p = &B->p[i];
    size_t na = (size_t)(p->M * p->K), nb = (size_t)(p->N * p->K);
    p->ha = malloc(na * 2);
    p->hb = malloc(nb * 2);
    p->hbias = malloc((size_t)p->N * sizeof(float));
    for (size_t j = 0; j < na; j++) p->ha[j] = to_half(B->f.in, urand() * 2 - 1);
    for (size_t j = 0; j < nb; j++) p->hb[j] = to_half(B->f.in, urand() * 2 - 1);
    for (int64_t j = 0; j < p->N; j++) p->hbias[j] = (float)(urand() * 2 - 1);
  }
}

static evtc_cuda_gemm_problem problem_of(const bench *B, const prob *p) {
  return (evtc_cuda_gemm_problem){.M = p->M, .N = p->N, .K = p->K, .batch = 1, .lda = B->v.a_kmajor ? p->K : p->M,
                                  .ldb = B->v.b_kmajor ? p->K : p->N, .ldc = p->N,
                                  .tail_split = evtc_cuda_gemm_tail_split(),
                                  .tail_min_kblocks = EVTC_CUDA_GEMM_TAIL_MIN_KBLOCKS};
}

static evtc_status alloc_copy(bench *B, CUdeviceptr *dst, const void *src, size_t bytes, evtc_diag *d) {
  evtc_status s = evtc_cuda_fail(B->dev->drv, B->dev->drv->cuMemAlloc(dst, bytes), "cuMemAlloc (GEMM tuner)",
                                 EVTC_ERR_RUNTIME, d);
  if (s == EVTC_OK && src) s = evtc_cuda_copy_htod(B->dev, *dst, src, bytes, d);
  return s;
}

/* Device buffers of every problem and the compare kernel. */
static evtc_status bench_upload(bench *B, evtc_diag *d) {
  evtc_status s = evtc_cuda_module_load(B->dev, &B->cmp_cubin, "GEMM tuner check", &B->cmp_mod, d);
  if (s == EVTC_OK) s = evtc_cuda_kernel_get(B->dev, B->cmp_mod, "evtc_tune_compare", &B->cmp, d);
  if (s == EVTC_OK) s = alloc_copy(B, &B->bad, NULL, 8, d);
  for (int i = 0; i < B->np && s == EVTC_OK; i++) {
    prob *p = &B->p[i];
    size_t nd = (size_t)(p->M * p->N) * 2;
    s = alloc_copy(B, &p->a, p->ha, (size_t)(p->M * p->K) * 2, d);
    if (s == EVTC_OK) s = alloc_copy(B, &p->b, p->hb, (size_t)(p->N * p->K) * 2, d);
    if (s == EVTC_OK) s = alloc_copy(B, &p->bias, p->hbias, (size_t)p->N * sizeof(float), d);
    if (s == EVTC_OK) s = alloc_copy(B, &p->dd, NULL, nd, d);
    if (s == EVTC_OK) s = alloc_copy(B, &p->ref, NULL, nd, d);
  }
  return s;
}

static void bench_release(bench *B) {
  const evtc_cuda_driver *drv = B->dev->drv;
  for (int i = 0; i < B->np; i++) {
    CUdeviceptr *bufs[] = {&B->p[i].a, &B->p[i].b, &B->p[i].bias, &B->p[i].dd, &B->p[i].ref};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) {
      if (*bufs[j]) drv->cuMemFree(*bufs[j]);
      *bufs[j] = 0;
    }
  }
  if (B->bad) drv->cuMemFree(B->bad);
  B->bad = 0;
  evtc_cuda_gemm_workspace_free(B->dev, &B->tail);
  if (B->cmp_mod) evtc_cuda_module_unload(B->dev, B->cmp_mod);
  B->cmp_mod = NULL;
}

/* Elements of x (M x N, 16-bit) off ref by more than the bound of the top; ref == x counts NaNs only. */
static evtc_status count_bad(bench *B, const prob *p, CUdeviceptr x, CUdeviceptr ref, unsigned long long *bad,
                             evtc_diag *d) {
  long long n = p->M * p->N;
  int f16 = B->f.in == EVTC_F16;
  float rel = 0x1p-7f, abs_tol = (float)(sqrt((double)p->K) * 0x1p-14);
  void *params[] = {&x, &ref, &n, &f16, &rel, &abs_tol, &B->bad};
  const unsigned grid[3] = {1024, 1, 1}, block[3] = {256, 1, 1};
  evtc_status s = evtc_cuda_fill32(B->dev, B->bad, 0, 2, d);
  if (s == EVTC_OK) s = evtc_cuda_launch(B->dev, &B->cmp, grid, block, 0, params, d);
  if (s == EVTC_OK) s = evtc_cuda_copy_dtoh(B->dev, bad, B->bad, 8, d);
  return s;
}

/* One launch of the GEMM kernel k for problem p into out. */
typedef struct launch {
  evtc_cuda_gemm_launch L;
  evtc_cuda_kernel *k;
  CUdeviceptr bias;
  void *params[6];
} launch;

static evtc_status launch_init(bench *B, launch *l, const evtc_cuda_gemm_config *cfg, evtc_cuda_kernel *k,
                               const prob *p, CUdeviceptr out, evtc_diag *d) {
  evtc_cuda_gemm_problem pr = problem_of(B, p);
  evtc_status s = evtc_cuda_gemm_launch_init(&l->L, B->dev->drv, cfg, &B->v, &pr, p->a, p->b, out, B->dev->sm_count, d);
  if (s == EVTC_OK) s = evtc_cuda_gemm_workspace_fit(B->dev, &B->tail, cfg, &pr, B->dev->sm_count, &l->L, d);
  if (s == EVTC_OK) s = evtc_cuda_gemm_fit_clusters(B->dev, k, cfg, &l->L, NULL, d);
  l->k = k;
  l->bias = p->bias;
  memcpy(l->params, l->L.params, sizeof l->L.params);
  l->params[5] = &l->bias;
  return s;
}

static evtc_status launch_run(bench *B, launch *l, evtc_diag *d) {
  return evtc_cuda_launch(B->dev, l->k, l->L.grid, l->L.block, l->L.smem, l->params, d);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Median ms of iters launches after WARM, each between two events. */
static evtc_status time_launch(bench *B, launch *l, int iters, double *ms, evtc_diag *d) {
  CUevent e0 = NULL, e1 = NULL;
  float t[FINAL_ITERS];
  evtc_status s = evtc_cuda_event_new(B->dev, &e0, d);
  if (s == EVTC_OK) s = evtc_cuda_event_new(B->dev, &e1, d);
  for (int i = 0; i < WARM + iters && s == EVTC_OK; i++) {
    s = evtc_cuda_event_record(B->dev, e0, d);
    if (s == EVTC_OK) s = launch_run(B, l, d);
    if (s == EVTC_OK) s = evtc_cuda_event_record(B->dev, e1, d);
    float x = 0;
    if (s == EVTC_OK) s = evtc_cuda_event_ms(B->dev, e0, e1, &x, d);
    if (i >= WARM) t[i - WARM] = x;
  }
  if (e0) evtc_cuda_event_free(B->dev, e0);
  if (e1) evtc_cuda_event_free(B->dev, e1);
  if (s != EVTC_OK) return s;
  qsort(t, (size_t)iters, sizeof t[0], cmp_float);
  *ms = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
  return EVTC_OK;
}

/* Max over SAMPLES elements of the reference output of |d - ref| / tol against a float64 host computation. */
static evtc_status check_reference(bench *B, const prob *p, double *worst, evtc_diag *d) {
  uint16_t *out = malloc((size_t)(p->M * p->N) * 2);
  evtc_status s = evtc_cuda_copy_dtoh(B->dev, out, p->ref, (size_t)(p->M * p->N) * 2, d);
  *worst = 0;
  for (int i = 0; i < SAMPLES && s == EVTC_OK; i++) {
    int64_t r = (int64_t)(urand() * (double)p->M), c = (int64_t)(urand() * (double)p->N);
    double ref = 0, mag = 0;
    for (int64_t k = 0; k < p->K; k++) {
      double a = from_half(B->f.in, B->v.a_kmajor ? p->ha[r * p->K + k] : p->ha[k * p->M + r]);
      double b = from_half(B->f.in, B->v.b_kmajor ? p->hb[c * p->K + k] : p->hb[k * p->N + c]);
      ref += a * b;
      mag += fabs(a * b);
    }
    double tol = (double)p->K * 0x1p-22 * mag;
    if (B->f.visitor) {   /* gelu's slope is below 1.13 */
      double x = ref + p->hbias[c];
      ref = 0.5 * x * (1 + erf(x / sqrt(2.0)));
      tol = tol * 1.2 + 1e-6;
    }
    tol += fabs(ref) * 0x1p-7 + 1e-30;
    double e = fabs(from_half(B->f.in, out[r * p->N + c]) - ref) / tol;
    if (!(e <= *worst)) *worst = e;   /* NaN sticks */
  }
  free(out);
  return s;
}

/* Runs candidate c on every problem: with is_default its output becomes the reference (checked against
 * the host), else it is compared with the reference first.  iters > 0: timed too.  A rejection (wrong
 * output, refused launch) sets c->ok false with c->err and returns EVTC_OK; a driver failure returns it. */
static evtc_status run_cand(bench *B, cand *c, bool is_default, int iters, evtc_diag *d) {
  CUmodule mod = NULL;
  evtc_cuda_kernel k;
  char name[64];
  evtc_cuda_gemm_config_name(&c->cfg, name, sizeof name);
  c->ok = false;
  evtc_status s = evtc_cuda_module_load(B->dev, &c->cubin, name, &mod, d);
  if (s == EVTC_OK) s = evtc_cuda_kernel_get(B->dev, mod, KERNEL, &k, d);
  for (int i = 0; i < B->np && s == EVTC_OK; i++) {
    prob *p = &B->p[i];
    CUdeviceptr out = is_default ? p->ref : p->dd;
    launch l;
    s = launch_init(B, &l, &c->cfg, &k, p, out, d);
    if (s == EVTC_ERR_INVALID) {   /* the template refuses the problem for this config */
      snprintf(c->err, sizeof c->err, "%s", d->msg);
      *d = (evtc_diag){0};
      goto out;
    }
    unsigned long long bad = 0;
    if (s == EVTC_OK) s = evtc_cuda_fill32(B->dev, out, 0xFFFFFFFFu, (size_t)(p->M * p->N) / 2, d);
    if (s == EVTC_OK) s = launch_run(B, &l, d);
    if (s == EVTC_OK) s = count_bad(B, p, out, is_default ? out : p->ref, &bad, d);
    if (s != EVTC_OK) break;
    double worst = 0;
    if (is_default && (s = check_reference(B, p, &worst, d)) != EVTC_OK) break;
    if (bad || !(worst <= 1)) {
      snprintf(c->err, sizeof c->err, "%lldx%lldx%lld: %llu elements off the default's output%s", (long long)p->M,
               (long long)p->N, (long long)p->K, bad, worst <= 1 ? "" : ", and off the float64 reference");
      goto out;
    }
    if (iters > 0 && (s = time_launch(B, &l, iters, &c->ms[i], d)) != EVTC_OK) break;
  }
  if (s == EVTC_OK) c->ok = true;
out:
  if (mod) evtc_cuda_module_unload(B->dev, mod);
  return s;
}

static double score_of(const bench *B, const cand *c) {
  double lg = 0;
  for (int i = 0; i < B->np; i++) lg += log(B->p[i].default_ms / c->ms[i]);
  return exp(lg / B->np);
}

/* Reopens the device after a fault and rebuilds the problems and the reference. */
static evtc_status recover(bench *B, cand *def, evtc_diag *d) {
  bench_release(B);
  int ordinal = B->dev->ordinal;
  evtc_cuda_device_close(B->dev);
  evtc_status s = evtc_cuda_device_open(B->dev, ordinal, d);
  if (s == EVTC_OK) s = bench_upload(B, d);
  if (s == EVTC_OK) s = run_cand(B, def, true, 0, d);
  if (s == EVTC_OK && !def->ok)
    s = evtc_diag_set(d, EVTC_ERR_RUNTIME, "GEMM tuner: the default config failed after recovery: %s", def->err);
  return s;
}

/* Measures cs[0..n) (cs[0] is done already when from > 0); logs each. */
static evtc_status measure(bench *B, cand *cs, int from, int n, cand *def, int *rejected, evtc_diag *d) {
  for (int i = from; i < n; i++) {
    cand *c = &cs[i];
    char name[64];
    evtc_cuda_gemm_config_name(&c->cfg, name, sizeof name);
    if (B->log) {   /* the name first: a kernel that hangs is named in the log */
      fprintf(B->log, "  %-24s ", name);
      fflush(B->log);
    }
    if (c->st == EVTC_OK) {
      evtc_status s = run_cand(B, c, false, ITERS, d);
      if (s != EVTC_OK) {
        snprintf(c->err, sizeof c->err, "%s", d->msg);
        *d = (evtc_diag){0};
        if ((s = recover(B, def, d)) != EVTC_OK) return s;
      }
    }
    if (!c->ok) {
      (*rejected)++;
      if (B->log) fprintf(B->log, "rejected: %s\n", c->err);
      continue;
    }
    c->score = score_of(B, c);
    if (B->log) {
      fprintf(B->log, "%.3f x default (ms:", c->score);
      for (int j = 0; j < B->np; j++) fprintf(B->log, " %.4f", c->ms[j]);
      fprintf(B->log, ")\n");
    }
  }
  return EVTC_OK;
}

static int by_score(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->ok != y->ok) return x->ok ? -1 : 1;
  return x->score > y->score ? -1 : x->score < y->score;
}

static evtc_status tune_run(bench *B, const evtc_cuda_gemm_tune_options *o, evtc_cuda_gemm_tuned *out, evtc_diag *d) {
  int jobs = o ? o->jobs : 0, n_compiled = 0, n_cached = 0;
  double t0 = now_s();
  cand *cs;
  int n = first_pass(&B->f, o && o->reduced, B->dev->smem_per_block_optin, &cs);
  cand *pool = realloc(cs, sizeof *cs * (size_t)(n + 2 * TOP));
  cs = pool;
  compile_all(B->dev->arch, &B->f, cs, n, jobs, &n_compiled, &n_cached);
  evtc_status s = evtc_cuda_compile(cmp_source, "GEMM tuner check", B->dev->arch, nvrtc_opts, 1, &B->cmp_cubin, d);
  if (s == EVTC_OK && cs[0].st != EVTC_OK) s = evtc_diag_set(d, cs[0].st, "%s", cs[0].err);
  double compile_s = now_s() - t0, t1 = now_s();
  if (B->log)
    fprintf(B->log, "%d candidates: %d compiled by NVRTC, %d from the CUBIN cache, %.1f s\n", n, n_compiled, n_cached,
            compile_s);
  cand def = cs[0];
  int rejected = 0, total = n;
  if (s == EVTC_OK) s = bench_upload(B, d);
  if (s == EVTC_OK) s = run_cand(B, &def, true, ITERS, d);
  if (s == EVTC_OK && !def.ok)
    s = evtc_diag_set(d, EVTC_ERR_RUNTIME, "GEMM tuner: the default config is wrong: %s", def.err);
  if (s == EVTC_OK) {
    for (int i = 0; i < B->np; i++) B->p[i].default_ms = def.ms[i];
    if (B->log) {
      char name[64];
      evtc_cuda_gemm_config_name(&def.cfg, name, sizeof name);
      fprintf(B->log, "  %-24s the default, checked against float64 (ms:", name);
      for (int i = 0; i < B->np; i++) fprintf(B->log, " %.4f", def.ms[i]);
      fprintf(B->log, ")\n");
    }
    cs[0] = def;
    cs[0].score = 1;
    s = measure(B, cs, 1, n, &def, &rejected, d);
  }
  if (s == EVTC_OK) {   /* group_m around the best shapes */
    qsort(cs, (size_t)n, sizeof *cs, by_score);
    int m = n;
    for (int i = 0; i < TOP && i < n && cs[i].ok; i++)
      for (int g = 4; g <= 16; g *= 4) {
        cand c = {.cfg = cs[i].cfg};
        c.cfg.group_m = g;
        bool dup = false;
        for (int j = 0; j < m && !dup; j++) dup = same_cfg(&cs[j].cfg, &c.cfg);
        if (!dup) cs[m++] = c;
      }
    double tc = now_s();
    compile_all(B->dev->arch, &B->f, cs + n, m - n, jobs, &n_compiled, &n_cached);
    compile_s += now_s() - tc;
    if (B->log)
      fprintf(B->log, "group_m 4 and 16 for the best %d: %d candidates, compiled in %.1f s\n", TOP, m - n,
              now_s() - tc);
    s = measure(B, cs, n, m, &def, &rejected, d);
    total = m;
    n = m;
  }
  if (s == EVTC_OK) {   /* finalists, timed longer, against the default timed the same way */
    qsort(cs, (size_t)n, sizeof *cs, by_score);
    s = run_cand(B, &def, true, FINAL_ITERS, d);
    if (s == EVTC_OK && !def.ok)
      s = evtc_diag_set(d, EVTC_ERR_RUNTIME, "GEMM tuner: the default config is wrong: %s", def.err);
    for (int i = 0; i < B->np && s == EVTC_OK; i++) B->p[i].default_ms = def.ms[i];
    def.score = 1;
    const cand *best = &def;
    for (int i = 0; i < FINALISTS && i < n && cs[i].ok && s == EVTC_OK; i++) {
      if (same_cfg(&cs[i].cfg, &def.cfg)) continue;   /* timed just now */
      s = run_cand(B, &cs[i], false, FINAL_ITERS, d);
      if (s != EVTC_OK || !cs[i].ok) continue;   /* a fault now is a driver failure: give up */
      cs[i].score = score_of(B, &cs[i]);
      if (cs[i].score > (best == &def ? MARGIN : best->score)) best = &cs[i];
    }
    if (s == EVTC_OK) {
      memset(out, 0, sizeof *out);
      out->cfg = best->cfg;
      out->n_problems = B->np;
      for (int i = 0; i < B->np; i++) {
        const prob *p = &B->p[i];
        double flop = 2.0 * (double)p->M * (double)p->N * (double)p->K;
        memcpy(out->mnk[i], (int64_t[3]){p->M, p->N, p->K}, sizeof out->mnk[i]);
        out->tflops[i] = flop / (best->ms[i] * 1e-3) / 1e12;
        out->default_tflops[i] = flop / (p->default_ms * 1e-3) / 1e12;
      }
      out->candidates = total;
      out->rejected = rejected;
      out->compile_s = compile_s;
      out->measure_s = now_s() - t1;
    }
  }
  for (int i = 0; i < n; i++) evtc_cuda_cubin_free(&cs[i].cubin);
  free(cs);
  return s;
}

evtc_status evtc_cuda_gemm_tune(evtc_cuda_device *dev, const evtc_cuda_gemm_family *f,
                                const evtc_cuda_gemm_tune_options *o, evtc_cuda_gemm_tuned *out, evtc_diag *d) {
  if (f->sm80 ? dev->cc_major < 8 : strcmp(dev->arch, "sm_90a") != 0)
    return evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "GEMM tuner: %s is %s (the %s template needs %s)", dev->name,
                         dev->arch, f->sm80 ? "sm_80" : "sm_90a", f->sm80 ? "sm_80 or later" : "sm_90a");
  bench B = {.dev = dev, .f = *f, .v = evtc_cuda_gemm_family_variant(f), .log = o ? o->log : NULL};
  int64_t mnk[EVTC_TUNE_MAX_PROBLEMS][3];
  B.np = problems_of(o, mnk);
  for (int i = 0; i < B.np; i++) B.p[i] = (prob){.M = mnk[i][0], .N = mnk[i][1], .K = mnk[i][2]};
  host_inputs(&B);
  evtc_status s = tune_run(&B, o, out, d);
  bench_release(&B);
  evtc_cuda_cubin_free(&B.cmp_cubin);
  for (int i = 0; i < B.np; i++) {
    free(B.p[i].ha);
    free(B.p[i].hb);
    free(B.p[i].hbias);
  }
  if (s == EVTC_OK) {
    evtc_cuda_tune_device id = evtc_cuda_tune_device_of(dev);
    s = evtc_cuda_gemm_tune_save(&id, f, out, d);
  }
  return s;
}
