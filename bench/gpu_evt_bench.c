/* gpu_evt_bench.c -- the Epilogue Visitor Tree on evtc's own GEMM, through
 * evtc graphs on the CUDA backend (issue 8's EVT rows).
 *
 * A linear layer's forward on 16384 x 4096 x 1024 (M x N x K; x bf16
 * [M, K], W bf16 [N, K] with trans_b, as torch.nn.Linear stores it; `--shape
 * MxNxK` another, as issue 8's other GEMM shapes 16384x1024x4096 and
 * 8192x8192x8192):
 *   gemm        h = x W^T, bf16                        (the GEMM alone)
 *   gemm_one    h times 1 through the visitor epilogue (its store's cost)
 *   bias        h + b, bf16
 *   bias_gelu   gelu_tanh(h + b), bf16                 (cuBLASLt offers GELU_BIAS)
 *   ln_stats    z = dropout(gelu_tanh(h + b)) + res (bf16), and the row sums
 *               of z and z^2 in f32 for the following layernorm (no
 *               library epilogue does this)
 *   dgelu_bgrad the backward of linear + bias + GELU: g = dy W2^T (the same
 *               GEMM shape), dh = g gelu_tanh'(h) (bf16, h the saved
 *               pre-activation) and the bias gradient db = column sums of
 *               dh (f32): cuBLASLt's DGELU_BGRAD epilogue, written out
 *   bert_fwd    as a bf16 BERT step has it: hb = h + b and gelu(hb) (erf),
 *               both stored (hb: the pre-activation the backward reads)
 *   bert_bwd    its backward as the autodiff writes it, every node bf16:
 *               dh = g (cdf(hs) + hs pdf(hs)) from the saved hs, and the
 *               bias gradient db = column sums of dh
 * each with EVTC_GEMM=evtc (evtc's GEMM, the whole graph as one kernel
 * plus the reductions' finishing kernel: the plan puts every node in the GEMM kernel when
 * the backend accepts that, else the built-in greedy plan), with the tile
 * config the plan picks and with others named through EVTC_GEMM_CONFIG
 * (pingpong vs cooperative consumers), and EVTC_GEMM=cublaslt (cuBLASLt
 * into f32 scratch, the epilogue kernel, the reductions in a rows kernel),
 * plus cuBLASLt called directly: with its DEFAULT epilogue (the bf16 GEMM
 * alone, D bf16: cuBLAS's GEMM under the same load, the base of what its
 * own epilogues cost), its GELU_BIAS epilogue (tanh GELU,
 * bias bf16, D bf16) and its DGELU_BGRAD epilogue (D = dh bf16 from the
 * saved pre-activation h, bf16, as the aux matrix; the bias gradient in
 * bf16, cuBLASLt's output type), on the very inputs evtc's variants read
 * (random: a GEMM on constant data draws less power and, at the power cap,
 * runs faster), its D compared with evtc's on the plan's tiles (~evtc) and
 * both with a float64 reference at the sampled elements (~f64).
 * Two times each, after 3 warm-ups: on the
 * device clock (BENCHMARKS.md's method, the ratios' basis): for evtc the
 * sum of its kernels' times from evtc_program_profile (CUDA events between
 * the kernels, mean of R runs), for cuBLASLt the median of R event pairs
 * around its call; and on the host, the median of R runs of
 * evtc_program_run (launches + one synchronisation + the error-flag read) or
 * of cublasLtMatmul + a stream synchronisation, whose fixed cost the row
 * "sync only" (a one-element graph) shows.  Every variant of a graph
 * gets the same inputs; its first output is compared with the cuBLASLt
 * run's on 65536 sampled elements (max |difference| / max |value|: both
 * GPU, rounding order only, dropout masks identical).  TFLOP/s counts the
 * GEMM's 2 M N K.  Arguments name the graphs to run (the GEMM alone always
 * runs: the ratios' base); none: all.  `--rounds N` first runs every
 * variant (and cuBLASLt's calls) N times in turn and reports each time's
 * median over the rounds: a machine drifts by a few per cent from one
 * minute to the next, as much as the differences the targets ask
 * about.  `--runs R` (default 20) times R runs of each: 20 are a burst
 * after which the GPU idles while the next variant is set up, so its
 * clock stays above what a training step's sustained load allows; 2000
 * (each about 0.25 ms, with a synchronisation after each, as in `evtc
 * explain --profile 2000`) hold every variant, cuBLASLt's calls included,
 * at the power cap.  `--configs 'CFG,CFG,...'` (EVTC_GEMM_CONFIG strings) times
 * those tile configs in place of the built-in ones, beside each graph's plan
 * and cuBLASLt rows: a sweep of tiles, clusters or raster groups (g16) in
 * the same rounds as cuBLAS's own.  The table comes last, then one line
 * `RESULT evt NAME DEV_MS` per row for scripts (bench/ab.sh --evt).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_gemm.h"
#include "runtime/elements.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

enum { WARM = 3, SAMPLES = 65536, MAX_ROUNDS = 15, MAX_RUNS = 5000 };
/* timed runs of each variant (--runs; 20: a burst that leaves the GPU below its power cap) */
static int runs = 20;
/* cublasLt.h's values (cuBLASLt is opened with dlopen, its header not included) */
enum { DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8, DESC_EPILOGUE_AUX_POINTER = 11, DESC_EPILOGUE_AUX_LD = 12 };
enum { EPILOGUE_DEFAULT = 1, EPILOGUE_GELU_BIAS = 32 | 4, EPILOGUE_DGELU_BGRAD = 64 | 128 | 16 };
static int64_t M = 16384, N = 4096, K = 1024;   /* --shape */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (double)((rng * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of t[0..n) (sorted in place). */
static double median_of(double *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static double median(double *t) { return median_of(t, runs); }

/* Sample s's element of an output of numel elements: where evtc's rows, cuBLASLt's calls and the float64 reference
 * all sample, so that their samples compare element for element. */
static int64_t sample_at(int s, int64_t numel) { return (int64_t)s * 7919 % numel; }

/* The graph text of variant `name` (malloc'd). */
static char *graph_text(const char *name) {
  char *s = malloc(4096);
  int n = snprintf(s, 4096,
                   "graph %s {\n  %%x = input() : bf16[%lld,%lld]\n  %%w = input() : bf16[%lld,%lld]\n"
                   "  %%h = matmul(%%x, %%w) {trans_b=1} : bf16[%lld,%lld]\n",
                   name, (long long)M, (long long)K, (long long)N, (long long)K, (long long)M, (long long)N);
  if (strcmp(name, "gemm") == 0) {
    snprintf(s + n, 4096 - (size_t)n, "  output %%h\n}\n");
    return s;
  }
  if (strcmp(name, "gemm_one") == 0) {   /* the visitor epilogue with nothing to compute: its store's own cost */
    snprintf(s + n, 4096 - (size_t)n,
             "  %%one = const() {value=1.0} : bf16[]\n  %%y = mul(%%h, %%one) : bf16[%lld,%lld]\n  output %%y\n}\n",
             (long long)M, (long long)N);
    return s;
  }
  if (strcmp(name, "bias") == 0) {
    snprintf(s + n, 4096 - (size_t)n,
             "  %%b = input() : bf16[%lld]\n  %%y = add(%%h, %%b) : bf16[%lld,%lld]\n  output %%y\n}\n", (long long)N,
             (long long)M, (long long)N);
    return s;
  }
  if (strncmp(name, "bert_", 5) == 0) {   /* as in a bf16 BERT step: every node bf16, the autodiff's dGELU */
    static const char *const fwd[] = {"%%b = input() : bf16[%lld]", "%%hb = add(%%h, %%b) : bf16[%s]",
                                      "%%y = gelu(%%hb) : bf16[%s]", "output %%hb", "output %%y"};
    static const char *const bwd[] = {
        "%%hs = input() : bf16[%s]", "%%k1 = const() {value=0.7071067811865476} : bf16[]",
        "%%one = const() {value=1.0} : bf16[]", "%%half = const() {value=0.5} : bf16[]",
        "%%mh = const() {value=-0.5} : bf16[]", "%%cp = const() {value=0.3989422804014327} : bf16[]",
        "%%a0 = mul(%%hs, %%k1) : bf16[%s]", "%%e0 = erf(%%a0) : bf16[%s]", "%%e1 = add(%%e0, %%one) : bf16[%s]",
        "%%cdf = mul(%%e1, %%half) : bf16[%s]", "%%x2 = mul(%%hs, %%hs) : bf16[%s]", "%%x3 = mul(%%x2, %%mh) : bf16[%s]",
        "%%ex = exp(%%x3) : bf16[%s]", "%%pdf = mul(%%ex, %%cp) : bf16[%s]", "%%xp = mul(%%hs, %%pdf) : bf16[%s]",
        "%%dg = add(%%cdf, %%xp) : bf16[%s]", "%%dh = mul(%%h, %%dg) : bf16[%s]",
        "%%db = reduce_sum(%%dh) {axes=[0]} : bf16[%lld]", "output %%dh", "output %%db"};
    const bool is_fwd = strcmp(name, "bert_fwd") == 0;
    const char *const *lines = is_fwd ? fwd : bwd;
    const size_t nl = is_fwd ? sizeof fwd / sizeof fwd[0] : sizeof bwd / sizeof bwd[0];
    char shape[64];
    snprintf(shape, sizeof shape, "%lld,%lld", (long long)M, (long long)N);
    for (size_t l = 0; l < nl; l++) {
      n += snprintf(s + n, 4096 - (size_t)n, "  ");
      if (strstr(lines[l], "%lld")) n += snprintf(s + n, 4096 - (size_t)n, lines[l], (long long)N);
      else n += snprintf(s + n, 4096 - (size_t)n, lines[l], shape);
      n += snprintf(s + n, 4096 - (size_t)n, "\n");
    }
    snprintf(s + n, 4096 - (size_t)n, "}\n");
    return s;
  }
  n += snprintf(s + n, 4096 - (size_t)n,
                "  %%b = input() : bf16[%lld]\n  %%hb = add(%%h, %%b) : bf16[%lld,%lld]\n"
                "  %%y = gelu_tanh(%%hb) : bf16[%lld,%lld]\n",
                (long long)N, (long long)M, (long long)N, (long long)M, (long long)N);
  if (strcmp(name, "bias_gelu") == 0) {
    snprintf(s + n, 4096 - (size_t)n, "  output %%y\n}\n");
    return s;
  }
  if (strcmp(name, "dgelu_bgrad") == 0) {   /* %x, %w read as dy, W2; %b unused: the saved h instead */
    static const char *const lines[] = {
        "%%hs = input() : bf16[%s]", "%%hf = cast(%%hs) {dtype=f32} : f32[%s]", "%%gf = cast(%%h) {dtype=f32} : f32[%s]",
        "%%h2 = mul(%%hf, %%hf) : f32[%s]", "%%a = mul(%%h2, %%c1) : f32[%s]", "%%a1 = add(%%a, %%one) : f32[%s]",
        "%%u0 = mul(%%hf, %%a1) : f32[%s]", "%%u = mul(%%u0, %%ck) : f32[%s]", "%%t = tanh(%%u) : f32[%s]",
        "%%t1 = add(%%t, %%one) : f32[%s]", "%%left = mul(%%t1, %%half) : f32[%s]", "%%tt = mul(%%t, %%t) : f32[%s]",
        "%%omt = sub(%%one, %%tt) : f32[%s]", "%%b0 = mul(%%h2, %%c3) : f32[%s]", "%%b1 = add(%%b0, %%one) : f32[%s]",
        "%%b2 = mul(%%b1, %%ck) : f32[%s]", "%%r0 = mul(%%omt, %%b2) : f32[%s]", "%%r1 = mul(%%r0, %%hf) : f32[%s]",
        "%%right = mul(%%r1, %%half) : f32[%s]", "%%dg = add(%%left, %%right) : f32[%s]",
        "%%dhf = mul(%%gf, %%dg) : f32[%s]", "%%dh = cast(%%dhf) {dtype=bf16} : bf16[%s]"};
    char shape[64];
    snprintf(shape, sizeof shape, "%lld,%lld", (long long)M, (long long)N);
    n += snprintf(s + n, 4096 - (size_t)n,
                  "  %%one = const() {value=1.0} : f32[]\n  %%half = const() {value=0.5} : f32[]\n"
                  "  %%ck = const() {value=0.7978845608028654} : f32[]\n  %%c1 = const() {value=0.044715} : f32[]\n"
                  "  %%c3 = const() {value=0.134145} : f32[]\n");
    for (size_t l = 0; l < sizeof lines / sizeof lines[0]; l++) {
      n += snprintf(s + n, 4096 - (size_t)n, "  ");
      n += snprintf(s + n, 4096 - (size_t)n, lines[l], shape);
      n += snprintf(s + n, 4096 - (size_t)n, "\n");
    }
    snprintf(s + n, 4096 - (size_t)n, "  %%db = reduce_sum(%%dhf) {axes=[0]} : f32[%lld]\n  output %%dh\n  output %%db\n}\n",
             (long long)N);
    return s;
  }
  snprintf(s + n, 4096 - (size_t)n,
           "  %%res = input() : bf16[%lld,%lld]\n  %%d = dropout(%%y) {p=0.1, seed=7} : bf16[%lld,%lld]\n"
           "  %%z = add(%%d, %%res) : bf16[%lld,%lld]\n  %%zf = cast(%%z) {dtype=f32} : f32[%lld,%lld]\n"
           "  %%s1 = reduce_sum(%%zf) {axes=[1]} : f32[%lld]\n  %%sq = mul(%%zf, %%zf) : f32[%lld,%lld]\n"
           "  %%s2 = reduce_sum(%%sq) {axes=[1]} : f32[%lld]\n  output %%z\n  output %%s1\n  output %%s2\n}\n",
           (long long)M, (long long)N, (long long)M, (long long)N, (long long)M, (long long)N, (long long)M,
           (long long)N, (long long)M, (long long)M, (long long)N, (long long)M);
  return s;
}

typedef struct result {
  double ms;                /* host clock */
  double dev_ms;            /* device clock: the kernels' sum */
  int kernels;
  double *sample;           /* SAMPLES values of the first output */
  bool ok;
} result;

/* Every input of graph g in node order, as each run of it reads them: numel values 2 urand() - 1 each from the
 * generator restarted, handed to take(node, values, ctx). */
static void draw_graph_inputs(const evtc_graph *g, void (*take)(const evtc_node *, const double *, void *), void *ctx) {
  rng = 0x2545F4914F6CDD1Dull;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *nd = g->nodes[i];
    if (nd->op != EVTC_OP_INPUT) continue;
    const int64_t numel = evtc_type_numel(&nd->type);
    double *v = malloc(sizeof(double) * (size_t)numel);
    for (int64_t e = 0; e < numel; e++) v[e] = 2 * urand() - 1;
    take(nd, v, ctx);
    free(v);
  }
}

static void set_input(const evtc_node *nd, const double *v, void *p) { evtc_program_set(p, nd, v); }

/* Runs graph `name` with EVTC_GEMM=mode; every leaf random in [-1, 1]. */
static result run_graph(const evtc_backend *be, const char *name, const char *mode) {
  result r = {0};
  setenv("EVTC_GEMM", mode, 1);
  char *text = graph_text(name), err[512];
  evtc_graph *g = evtc_graph_parse_string(text, name, err, sizeof err);
  free(text);
  if (!g) {
    fprintf(stderr, "%s: %s\n", name, err);
    return r;
  }
  int32_t *plan = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1)), *ids = malloc(sizeof(int32_t) * (size_t)g->n_nodes);
  int n = 0, nk = 1;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    plan[i] = evtc_op_is_leaf(g->nodes[i]->op) ? -1 : 0;
    if (plan[i] == 0) ids[n++] = i;
  }
  if (strcmp(mode, "evtc") != 0 || !evtc_program_plan_accept(g, ids, n, (void *)be)) {
    free(plan);
    plan = NULL;
    nk = 0;
  }
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, plan, nk, be, NULL, &d);
  if (!p) {
    fprintf(stderr, "%s (%s): %s\n", name, mode, d.msg);
    goto out;
  }
  draw_graph_inputs(g, set_input, p);   /* the same inputs for every variant of a graph */
  double t[MAX_RUNS];
  for (int i = 0; i < WARM + runs; i++) {
    double t0 = now_ms();
    if (evtc_program_run(p, 1, &d) != EVTC_OK) {
      fprintf(stderr, "%s (%s): %s\n", name, mode, d.msg);
      goto out;
    }
    if (i >= WARM) t[i - WARM] = now_ms() - t0;
  }
  r.ms = median(t);
  const int nk_run = evtc_program_kernel_count(p);
  double *us = calloc((size_t)nk_run, sizeof(double));
  bool device_clock = false;
  if (evtc_program_profile(p, runs, 1, us, &device_clock, &d) != EVTC_OK || !device_clock) {
    fprintf(stderr, "%s (%s): no device-clock profile: %s\n", name, mode, d.msg);
    free(us);
    goto out;
  }
  for (int k = 0; k < nk_run; k++) r.dev_ms += us[k] * 1e-3;
  free(us);
  r.kernels = evtc_program_get_stats(p).compiled;
  const evtc_node *o = g->outputs[0].node;
  int64_t numel = evtc_type_numel(&o->type);
  double *all = malloc(sizeof(double) * (size_t)numel);
  r.ok = evtc_program_get(p, o, all);
  r.sample = malloc(sizeof(double) * SAMPLES);
  for (int s = 0; s < SAMPLES; s++) r.sample[s] = all[sample_at(s, numel)];
  free(all);
out:
  evtc_program_free(p);
  free(plan);
  free(ids);
  evtc_graph_free(g);
  return r;
}

/* The inputs of graph bias_gelu or dgelu_bgrad as its runs read them (draw_graph_inputs), as bf16 bits by name:
 * x, w, b, and dgelu_bgrad's saved pre-activation hs (NULL in bias_gelu); for cuBLASLt's calls and the float64
 * reference. */
typedef struct drawn_inputs {
  uint16_t *x, *w, *b, *hs;
} drawn_inputs;

static void take_input(const evtc_node *nd, const double *v, void *ctx) {
  drawn_inputs *in = ctx;
  uint16_t **dst = strcmp(nd->name, "x") == 0 ? &in->x : strcmp(nd->name, "w") == 0 ? &in->w
                 : strcmp(nd->name, "b") == 0 ? &in->b : strcmp(nd->name, "hs") == 0 ? &in->hs : NULL;
  if (!dst) return;
  const int64_t numel = evtc_type_numel(&nd->type);
  *dst = malloc(sizeof(uint16_t) * (size_t)numel);
  for (int64_t e = 0; e < numel; e++) (*dst)[e] = evtc_double_to_bf16(v[e]);
}

static drawn_inputs draw_inputs(const char *graph) {
  drawn_inputs in = {0};
  char *text = graph_text(graph), err[512];
  evtc_graph *g = evtc_graph_parse_string(text, graph, err, sizeof err);
  free(text);
  if (g) draw_graph_inputs(g, take_input, &in);
  else fprintf(stderr, "%s: %s\n", graph, err);
  evtc_graph_free(g);
  return in;
}

static void drawn_free(drawn_inputs *in) {
  free(in->x), free(in->w), free(in->b), free(in->hs);
}

/* n bf16 values from the host into dst. */
static evtc_status upload(evtc_cuda_device *dev, CUdeviceptr dst, const uint16_t *h, int64_t n, evtc_diag *d) {
  return dev->drv->cuMemcpyHtoDAsync(dst, h, sizeof(uint16_t) * (size_t)n, dev->stream)
             ? evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuMemcpyHtoD failed")
             : evtc_cuda_sync(dev, "upload", d);
}

/* cuBLASLt with epilogue `epi` (EPILOGUE_DEFAULT: D = the product alone; EPILOGUE_GELU_BIAS: bias read;
 * EPILOGUE_DGELU_BGRAD: aux h read, bias gradient written) on the inputs evtc's variants of the graph read: median
 * ms per call + synchronisation (returned), into *dev_ms the median device time between events around the call,
 * into *sample (malloc'd) D's elements at the sample positions (sample_at). */
static double lt_epilogue(int32_t epi, const char *what, const drawn_inputs *in, double *dev_ms, double **sample,
                          evtc_diag *d) {
  evtc_cuda_device dev;
  if (evtc_cuda_device_open(&dev, 0, d) != EVTC_OK) return 0;
  const evtc_cuda_cublaslt *lt = evtc_cuda_cublaslt_get(d);
  double ms = 0;
  CUdeviceptr x = 0, w = 0, b = 0, out = 0, ws = 0, aux = 0;
  CUevent ev0 = NULL, ev1 = NULL;
  const size_t ws_bytes = (size_t)32 << 20;
  cublasLtHandle_t h = NULL;
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
  if (!lt || lt->cublasLtCreate(&h)) goto out;
  const evtc_cuda_driver *drv = dev.drv;
  if (drv->cuMemAlloc(&x, (size_t)(M * K) * 2) || drv->cuMemAlloc(&w, (size_t)(N * K) * 2) ||
      drv->cuMemAlloc(&b, (size_t)N * 2) || drv->cuMemAlloc(&out, (size_t)(M * N) * 2) || drv->cuMemAlloc(&ws, ws_bytes) ||
      (epi == EPILOGUE_DGELU_BGRAD && drv->cuMemAlloc(&aux, (size_t)(M * N) * 2))) {
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuMemAlloc failed");
    goto out;
  }
  /* what evtc's variants read, value for value (DGELU_BGRAD writes the bias gradient over b) */
  const bool has_bias = epi != EPILOGUE_DEFAULT;
  if (!in->x || !in->w || (has_bias && !in->b) || (aux && !in->hs)) {
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "the graph's inputs x, w%s%s were not drawn", has_bias ? ", b" : "",
                  aux ? ", hs" : "");
    goto out;
  }
  if (upload(&dev, x, in->x, M * K, d) || upload(&dev, w, in->w, N * K, d) ||
      (has_bias && upload(&dev, b, in->b, N, d)) ||
      (aux && upload(&dev, aux, in->hs, M * N, d)))
    goto out;
  int32_t ta = EVTC_CUBLAS_OP_T, tb = EVTC_CUBLAS_OP_N;
  void *bias = (void *)(uintptr_t)b, *auxp = (void *)(uintptr_t)aux;
  int64_t aux_ld = N;      /* column-major D is N x M: h row-major [M, N] */
  cublasStatus_t st = lt->cublasLtMatmulDescCreate(&desc, EVTC_CUBLAS_COMPUTE_32F, EVTC_CUDA_R_32F);
  if (!st) st = lt->cublasLtMatmulDescSetAttribute(desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (!st) st = lt->cublasLtMatmulDescSetAttribute(desc, EVTC_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (!st) st = lt->cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE, &epi, sizeof epi);
  if (!st && has_bias) st = lt->cublasLtMatmulDescSetAttribute(desc, DESC_BIAS_POINTER, &bias, sizeof bias);
  if (!st && aux) st = lt->cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE_AUX_POINTER, &auxp, sizeof auxp);
  if (!st && aux) st = lt->cublasLtMatmulDescSetAttribute(desc, DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld);
  if (!st) st = lt->cublasLtMatrixLayoutCreate(&la, EVTC_CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K);
  if (!st) st = lt->cublasLtMatrixLayoutCreate(&lb, EVTC_CUDA_R_16BF, (uint64_t)K, (uint64_t)M, K);
  if (!st) st = lt->cublasLtMatrixLayoutCreate(&lc, EVTC_CUDA_R_16BF, (uint64_t)N, (uint64_t)M, N);
  cublasLtMatmulPreference_t pref = NULL;
  unsigned long long wsb = ws_bytes;
  if (!st) st = lt->cublasLtMatmulPreferenceCreate(&pref);
  if (!st) st = lt->cublasLtMatmulPreferenceSetAttribute(pref, EVTC_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  evtc_cublasLtHeuristic algo;
  int found = 0;
  if (!st) st = lt->cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 1, &algo, &found);
  if (pref) lt->cublasLtMatmulPreferenceDestroy(pref);
  if (st || found < 1) {
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuBLASLt %s setup: status %d, %d algorithms", what, st, found);
    goto out;
  }
  float one = 1, zero = 0;
  double t[MAX_RUNS], te[MAX_RUNS];
  if (drv->cuEventCreate(&ev0, EVTC_CU_EVENT_DEFAULT) || drv->cuEventCreate(&ev1, EVTC_CU_EVENT_DEFAULT)) {
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "cuEventCreate failed");
    goto out;
  }
  for (int i = 0; i < WARM + runs; i++) {
    double t0 = now_ms();
    drv->cuEventRecord(ev0, dev.stream);
    st = lt->cublasLtMatmul(h, desc, &one, (const void *)(uintptr_t)w, la, (const void *)(uintptr_t)x, lb, &zero,
                            (void *)(uintptr_t)out, lc, (void *)(uintptr_t)out, lc, &algo.algo, (void *)(uintptr_t)ws,
                            ws_bytes, dev.stream);
    drv->cuEventRecord(ev1, dev.stream);
    if (st || evtc_cuda_sync(&dev, what, d)) {
      evtc_diag_set(d, EVTC_ERR_RUNTIME, "cublasLtMatmul (%s): status %d", what, st);
      goto out;
    }
    if (i >= WARM) {
      t[i - WARM] = now_ms() - t0;
      float e = 0;
      drv->cuEventElapsedTime(&e, ev0, ev1);
      te[i - WARM] = e;
    }
  }
  uint16_t *all = malloc(sizeof(uint16_t) * (size_t)(M * N));
  if (drv->cuMemcpyDtoHAsync(all, out, sizeof(uint16_t) * (size_t)(M * N), dev.stream) ||
      evtc_cuda_sync(&dev, what, d)) {
    free(all);
    goto out;
  }
  *sample = malloc(sizeof(double) * SAMPLES);
  for (int s = 0; s < SAMPLES; s++) (*sample)[s] = evtc_bf16_to_double(all[sample_at(s, M * N)]);
  free(all);
  ms = median(t);
  *dev_ms = median(te);
out:
  if (ev0) dev.drv->cuEventDestroy(ev0);
  if (ev1) dev.drv->cuEventDestroy(ev1);
  if (la) lt->cublasLtMatrixLayoutDestroy(la);
  if (lb) lt->cublasLtMatrixLayoutDestroy(lb);
  if (lc) lt->cublasLtMatrixLayoutDestroy(lc);
  if (desc) lt->cublasLtMatmulDescDestroy(desc);
  if (h) lt->cublasLtDestroy(h);
  CUdeviceptr bufs[] = {x, w, b, out, ws, aux};
  for (int i = 0; i < 6; i++)
    if (bufs[i]) dev.drv->cuMemFree(bufs[i]);
  evtc_cuda_device_close(&dev);
  return ms;
}

/* The fixed cost of one evtc_program_run (a one-element graph). */
static double sync_only(const evtc_backend *be) {
  char err[256];
  evtc_graph *g = evtc_graph_parse_string("graph s {\n  %a = input() : f32[1]\n  %b = neg(%a) : f32[1]\n  output %b\n}\n",
                                          "sync", err, sizeof err);
  evtc_diag d = {0};
  evtc_program *p = g ? evtc_program_new(g, NULL, 0, be, NULL, &d) : NULL;
  double t[MAX_RUNS], ms = 0;
  for (int i = 0; p && i < WARM + runs; i++) {
    double t0 = now_ms();
    if (evtc_program_run(p, 0, &d) != EVTC_OK) break;
    if (i >= WARM) t[i - WARM] = now_ms() - t0;
    if (i == WARM + runs - 1) ms = median(t);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
  return ms;
}

/* Largest |a - b| over the samples, relative to the largest |b| (the output's scale). */
static double max_rel(const double *a, const double *b) {
  double worst = 0, scale = 0;
  for (int s = 0; s < SAMPLES; s++) {
    if (isnan(a[s]) != isnan(b[s])) return INFINITY;
    if (fabs(a[s] - b[s]) > worst) worst = fabs(a[s] - b[s]);
    if (fabs(b[s]) > scale) scale = fabs(b[s]);
  }
  return scale > 0 ? worst / scale : worst;
}

/* One row of the table: graph, EVTC_GEMM mode, tile config (NULL: the plan's choice). */
typedef struct variant {
  const char *graph, *mode, *config;
} variant;

static const variant table[] = {
    {"gemm", "evtc", NULL},
    {"gemm", "evtc", "64x256x64 s4 c2 g8 pp"},
    {"gemm", "evtc", "128x128x64 s6 c2 g8 pp"},
    {"gemm", "evtc", "256x128x64 s4 c2 g8"},
    {"gemm", "evtc", "128x256x64 s4 c2 g8 cl2"},
    {"gemm", "evtc", "64x256x64 s4 c2 g8 pp cl2"},
    {"gemm", "evtc", "128x128x64 s6 c2 g8 pp cl2"},
    {"gemm", "cublaslt", NULL},
    {"gemm_one", "evtc", NULL},
    {"gemm_one", "evtc", "64x256x64 s4 c2 g8 pp"},
    {"gemm_one", "evtc", "128x128x64 s6 c2 g8 pp"},
    {"gemm_one", "evtc", "256x128x64 s4 c2 g8"},
    {"gemm_one", "evtc", "64x256x64 s4 c2 g8 pp cl2"},
    {"gemm_one", "cublaslt", NULL},
    {"bias", "evtc", NULL},
    {"bias", "evtc", "64x256x64 s4 c2 g8 pp"},
    {"bias", "evtc", "64x256x64 s4 c2 g8 pp cl2"},
    {"bias", "cublaslt", NULL},
    {"bias_gelu", "evtc", NULL},
    {"bias_gelu", "evtc", "64x256x64 s4 c2 g8 pp"},
    {"bias_gelu", "evtc", "128x256x64 s4 c2 g8"},
    {"bias_gelu", "evtc", "128x128x64 s6 c2 g8 pp"},
    {"bias_gelu", "evtc", "256x128x64 s4 c2 g8"},
    {"bias_gelu", "evtc", "128x256x64 s4 c2 g8 cl2"},
    {"bias_gelu", "evtc", "64x256x64 s4 c2 g8 pp cl2"},
    {"bias_gelu", "evtc", "128x128x64 s6 c2 g8 pp cl2"},
    {"bias_gelu", "cublaslt", NULL},
    {"ln_stats", "evtc", NULL},
    {"ln_stats", "evtc", "128x256x64 s4 c2 g8"},
    {"ln_stats", "cublaslt", NULL},
    {"dgelu_bgrad", "evtc", NULL},
    {"dgelu_bgrad", "cublaslt", NULL},
    {"bert_fwd", "evtc", NULL},
    {"bert_fwd", "cublaslt", NULL},
    {"bert_bwd", "evtc", NULL},
    {"bert_bwd", "cublaslt", NULL},
};
enum { N_TABLE = sizeof table / sizeof table[0], MAX_CONFIGS = 12, MAX_VARIANTS = N_TABLE * (MAX_CONFIGS + 1) };
/* The variants this run times: the table, or with `--configs 'CFG,CFG,...'` (EVTC_GEMM_CONFIG strings) each graph's
 * plan and cuBLASLt rows of the table with the configs named in place of its own (a sweep of tile configs or raster
 * groups, interleaved with cuBLASLt's calls in the same rounds). */
static variant variants[MAX_VARIANTS];
static int N_VARIANTS;

/* Fills variants from the table and configs (NULL: the table as it is); false with a message for a config that is
 * not one, or too many. */
static bool choose_variants(char *configs) {
  const char *named[MAX_CONFIGS];
  int n = 0;
  for (char *c = configs ? strtok(configs, ",") : NULL; c; c = strtok(NULL, ",")) {
    evtc_cuda_gemm_config parsed;
    if (n == MAX_CONFIGS || !evtc_cuda_gemm_config_parse(c, &parsed)) {
      fprintf(stderr, "gpu_evt_bench: --configs takes at most %d tile configs like '128x256x64 s4 c2 g8' (+ ' pp', "
              "' cl2'), comma-separated; not '%s'\n", MAX_CONFIGS, c);
      return false;
    }
    named[n++] = c;
  }
  for (int t = 0; t < N_TABLE; t++) {
    if (configs && table[t].config) continue;
    variants[N_VARIANTS++] = table[t];
    if (configs && strcmp(table[t].mode, "evtc") == 0)
      for (int i = 0; i < n; i++) variants[N_VARIANTS++] = (variant){table[t].graph, "evtc", named[i]};
  }
  return true;
}

/* The float64 reference of graph g's first output (gemm: x w^T; bias_gelu: gelu_tanh(x w^T + b); dgelu_bgrad:
 * dh = (x w^T) gelu_tanh'(hs)) at the sample positions (sample_at), from its inputs (bf16 values, no rounding in
 * between). */
static double *reference(const char *g, const drawn_inputs *in) {
  const bool product = strcmp(g, "gemm") == 0, fwd = strcmp(g, "bias_gelu") == 0;
  double *ref = malloc(sizeof(double) * SAMPLES);
  const double c = 0.79788456080286535588;
  for (int s = 0; s < SAMPLES; s++) {
    const int64_t e = sample_at(s, M * N), m = e / N, n = e % N;
    double h = 0;
    for (int64_t k = 0; k < K; k++) h += evtc_bf16_to_double(in->x[m * K + k]) * evtc_bf16_to_double(in->w[n * K + k]);
    if (product) {
      ref[s] = h;
    } else if (fwd) {
      const double z = h + evtc_bf16_to_double(in->b[n]);
      ref[s] = 0.5 * z * (1 + tanh(c * (z + 0.044715 * z * z * z)));
    } else {
      const double z = evtc_bf16_to_double(in->hs[e]), th = tanh(c * (z + 0.044715 * z * z * z));
      ref[s] = h * (0.5 * (1 + th) + 0.5 * z * (1 - th * th) * c * (1 + 3 * 0.044715 * z * z));
    }
  }
  return ref;
}

/* The agreement of a direct cuBLASLt call's D with evtc's run of graph g on the plan's tiles (the same inputs in):
 * "~evtc " and max |diff| / max |value|, then both against the float64 reference; "" where either is missing. */
static const char *agreement(const char *g, const result *res, const double *lt_sample, const drawn_inputs *in) {
  static char text[96];
  text[0] = 0;
  double *ref = lt_sample ? reference(g, in) : NULL;
  for (int v = 0; v < N_VARIANTS; v++)
    if (lt_sample && res[v].sample && strcmp(variants[v].graph, g) == 0 && strcmp(variants[v].mode, "evtc") == 0 &&
        !variants[v].config) {
      int n = snprintf(text, sizeof text, "~evtc %.2e", max_rel(res[v].sample, lt_sample));
      if (ref)
        snprintf(text + n, sizeof text - (size_t)n, "; ~f64: evtc %.2e, cuBLASLt %.2e", max_rel(res[v].sample, ref),
                 max_rel(lt_sample, ref));
    }
  free(ref);
  return text;
}

/* cuBLASLt called directly with one of its epilogues: the graph it is compared with, the epilogue, its name. */
typedef struct direct {
  const char *graph;
  int32_t epi;
  const char *what;
} direct;

static const direct directs[] = {{"gemm", EPILOGUE_DEFAULT, "DEFAULT"},
                                 {"bias_gelu", EPILOGUE_GELU_BIAS, "GELU_BIAS"},
                                 {"dgelu_bgrad", EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD"}};
enum { N_DIRECT = sizeof directs / sizeof directs[0], MAX_ROWS = MAX_VARIANTS + N_DIRECT };

/* Whether graph g is asked for: every graph without arguments, else those named (the GEMM alone always: the
 * ratios' base). */
static bool wanted(const char *g, int argc, char **argv) {
  if (argc < 2 || strcmp(g, "gemm") == 0) return true;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], g) == 0) return true;
  return false;
}

int main(int argc, char **argv) {
  int rounds = 1;
  char *configs = NULL;
  while (argc >= 3 && (strcmp(argv[1], "--rounds") == 0 || strcmp(argv[1], "--runs") == 0 ||
                       strcmp(argv[1], "--shape") == 0 || strcmp(argv[1], "--configs") == 0)) {
    if (strcmp(argv[1], "--configs") == 0) {
      configs = argv[2];
      argv[2] = argv[0];
      argc -= 2, argv += 2;
      continue;
    }
    if (strcmp(argv[1], "--shape") == 0) {
      long long m, n, k;
      char end;
      if (sscanf(argv[2], "%lldx%lldx%lld%c", &m, &n, &k, &end) != 3 || m < 1 || n < 8 || k < 8 || n % 8 || k % 8 ||
          m > 65536 || n > 65536 || k > 65536) {
        fprintf(stderr, "gpu_evt_bench: --shape takes MxNxK (N and K multiples of 8, each at most 65536), not '%s'\n",
                argv[2]);
        return 2;
      }
      M = m, N = n, K = k;
      argv[2] = argv[0];
      argc -= 2, argv += 2;
      continue;
    }
    const bool is_rounds = strcmp(argv[1], "--rounds") == 0;
    const int n = atoi(argv[2]), most = is_rounds ? MAX_ROUNDS : MAX_RUNS;
    if (n < 1 || n > most) {
      fprintf(stderr, "gpu_evt_bench: %s takes 1 to %d, not '%s'\n", argv[1], most, argv[2]);
      return 2;
    }
    *(is_rounds ? &rounds : &runs) = n;
    argv[2] = argv[0];
    argc -= 2, argv += 2;
  }
  if (!choose_variants(configs)) return 2;
  evtc_diag d = {0};
  const evtc_backend *be = evtc_backend_cuda(&d);
  if (!be) {
    printf("SKIPPED: %s\n", d.msg);
    return 77;
  }
  /* every round runs every variant and cuBLASLt's calls in turn; a row's times are their medians over the rounds
   * (zero, FAILED, if any round failed), its samples the first round's; rows N_VARIANTS + i are directs[i]'s */
  const int N_ROWS = N_VARIANTS + N_DIRECT;
  static result res[MAX_ROWS];
  static double dev[MAX_ROWS][MAX_ROUNDS], host[MAX_ROWS][MAX_ROUNDS];
  drawn_inputs in[N_DIRECT] = {{0}};
  for (int i = 0; i < N_DIRECT; i++)
    if (wanted(directs[i].graph, argc, argv)) in[i] = draw_inputs(directs[i].graph);
  for (int r = 0; r < rounds; r++) {
    for (int v = 0; v < N_ROWS; v++) {
      result x = {0};
      if (v < N_VARIANTS && wanted(variants[v].graph, argc, argv)) {
        if (variants[v].config) setenv("EVTC_GEMM_CONFIG", variants[v].config, 1);
        else unsetenv("EVTC_GEMM_CONFIG");
        x = run_graph(be, variants[v].graph, variants[v].mode);
        unsetenv("EVTC_GEMM_CONFIG");
      } else if (v >= N_VARIANTS && wanted(directs[v - N_VARIANTS].graph, argc, argv)) {
        const direct *c = &directs[v - N_VARIANTS];
        evtc_diag dd = {0};
        x.ms = lt_epilogue(c->epi, c->what, &in[v - N_VARIANTS], &x.dev_ms, &x.sample, &dd);
        if (dd.status != EVTC_OK) fprintf(stderr, "cuBLASLt %s: %s\n", c->what, dd.msg);
      }
      dev[v][r] = x.dev_ms, host[v][r] = x.ms;
      if (r == 0) res[v] = x;
      else free(x.sample);
    }
  }
  for (int v = 0; v < N_ROWS; v++) {
    bool all = true;
    for (int r = 0; r < rounds; r++) all = all && host[v][r] > 0 && dev[v][r] > 0;
    res[v].dev_ms = all ? median_of(dev[v], rounds) : 0;
    res[v].ms = all ? median_of(host[v], rounds) : 0;
  }
  double sync_ms = sync_only(be);
  const double flop = 2.0 * (double)M * (double)N * (double)K, base = res[0].dev_ms;
  printf("\n== EVT on evtc's GEMM: %lldx%lldx%lld bf16 (M x N x K), H200\n", (long long)M, (long long)N, (long long)K);
  if (rounds > 1) printf("(times: medians over %d rounds, each round every variant in turn)\n", rounds);
  printf("(dev ms: device clock, evtc's kernels summed, mean of %d runs; cuBLASLt's call between events, median of %d;\n"
         " TFLOP/s and /gemm(evtc) from dev ms; host ms: median of %d runs with launch + synchronisation;\n"
         " tile: EVTC_GEMM_CONFIG, '-' = the plan's choice; ~cublaslt: max |diff| / max |value| against the"
         " EVTC_GEMM=cublaslt run on the same inputs)\n", runs, runs, runs);
  printf("%-11s %-9s %-22s %7s %8s %8s %8s %11s %10s\n", "graph", "gemm", "tile", "kernels", "dev ms", "host ms",
         "TFLOP/s", "/gemm(evtc)", "~cublaslt");
  for (int v = 0; v < N_VARIANTS; v++) {
    const variant *x = &variants[v];
    const result *r = &res[v];
    char agree[32] = "";
    for (int u = 0; u < N_VARIANTS; u++)
      if (u != v && strcmp(variants[u].graph, x->graph) == 0 && strcmp(variants[u].mode, "cublaslt") == 0 &&
          strcmp(x->mode, "evtc") == 0 && r->sample && res[u].sample)
        snprintf(agree, sizeof agree, "%.2e", max_rel(r->sample, res[u].sample));
    if (!wanted(x->graph, argc, argv)) continue;
    printf("%-11s %-9s %-22s ", x->graph, x->mode, x->config ? x->config : "-");
    if (!r->dev_ms) {
      printf("  FAILED\n");
      continue;
    }
    printf("%7d %8.3f %8.3f %8.1f %11.3f %10s\n", r->kernels, r->dev_ms, r->ms, flop / r->dev_ms * 1e-9,
           base ? r->dev_ms / base : 0, agree);
  }
  for (int i = 0; i < N_DIRECT; i++) {
    const result *r = &res[N_VARIANTS + i];
    char tile[32];
    snprintf(tile, sizeof tile, "%s epilogue", directs[i].what);
    if (r->ms)
      printf("%-11s %-9s %-22s %7d %8.3f %8.3f %8.1f %11.3f %10s\n", directs[i].graph, "cuBLASLt", tile, 1, r->dev_ms,
             r->ms, flop / r->dev_ms * 1e-9, base ? r->dev_ms / base : 0, agreement(directs[i].graph, res, r->sample, &in[i]));
  }
  printf("%-11s %-9s %-22s %7d %8s %8.3f\n", "sync only", "-", "(fixed cost per run)", 1, "-", sync_ms);
  /* machine-readable device times (bench/ab.sh --evt): RESULT evt NAME dev_ms, NAME graph_mode[_config] */
  for (int v = 0; v < N_VARIANTS; v++) {
    if (!wanted(variants[v].graph, argc, argv) || !res[v].dev_ms) continue;
    char cfg[64] = "";
    if (variants[v].config) {
      snprintf(cfg, sizeof cfg, "_%s", variants[v].config);
      for (char *c = cfg; *c; c++)
        if (*c == ' ') *c = '-';
    }
    printf("RESULT evt %s_%s%s %.4f\n", variants[v].graph, variants[v].mode, cfg, res[v].dev_ms);
  }
  for (int i = 0; i < N_DIRECT; i++)
    if (res[N_VARIANTS + i].ms)
      printf("RESULT evt %s_cuBLASLt-%s %.4f\n", directs[i].graph, directs[i].what, res[N_VARIANTS + i].dev_ms);
  for (int v = 0; v < N_ROWS; v++) free(res[v].sample);
  for (int i = 0; i < N_DIRECT; i++) drawn_free(&in[i]);
  return 0;
}
