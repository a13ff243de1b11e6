/* gemm_emu.c -- evtc's sm_90a GEMM template, host side and kernels, with and without a visitor epilogue, on a
 * CPU emulation of the GPU (tests/test_gemm_emu_slow.py builds it against libevtc and runs it).
 *
 *   gemm_emu emit         one CUDA module on stdout, for the test to turn into C++: the CUDA prelude, every
 *                         plain case's kernel (emu0, emu1, ...: cuda_emit_gemm.c's evtc_cuda_gemm_emit,
 *                         built-in store; sm_80 configs on cuda_emit_gemm80.c's template) and every visitor case's (evt0, ...: the one kernel of a graph,
 *                         planned and emitted as the CUDA backend does, cuda_emit_evt.c)
 *   gemm_emu run LIB.so   each case through that module built into LIB.so (shim_gemm.h, launch.h):
 *                         evtc_cuda_gemm_launch_init fills the launch (grid, shared memory, tensor maps,
 *                         whether D goes through TMA stores) on an emulated driver whose
 *                         cuTensorMapEncodeTiled writes what it was given into the map (emu_tmap.h), the
 *                         library runs the grid (and a visitor's NAME_fin); every element of a plain D is
 *                         checked against a float64 product of the same 16-bit inputs (its padding columns
 *                         must keep their poison), every output of a visitor case against the float64
 *                         interpreter (tests/cpu_oracle.h; outputs and reduction scratch poisoned first);
 *                         and the prelude's 1 + erf of bf16 values (the polynomial GELU epilogues compute)
 *                         over every bf16 of [-6, 6], within erf_check.h's bounds.
 * Prints one line a case and "N checks, F failed"; exits 1 on any failure.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_gemm.h"
#include "cpu_oracle.h"
#include "erf_check.h"
#include "gemm_emu/emu_tmap.h"
#include "runtime/elements.h"
#include "util/diag.h"

typedef struct gemm_case {
  const char *config;          /* evtc_cuda_gemm_config_parse's format */
  evtc_cuda_gemm_variant v;
  int64_t M, N, K, batch, ldc_pad;
  int sms;                     /* the grid's SMs: fewer than the tiles, so each CTA walks several (and where the
                                  tiles are no multiple of them, the split tail cuts the last ones into units) */
  const char *what;
} gemm_case;

static const gemm_case cases[] = {
    {"128x256x64 s4 c2 g8", {EVTC_BF16, EVTC_BF16, true, true}, 200, 299, 136, 1, 1, 3,
     "cooperative, edges in M, N (odd) and K; rows of 600 bytes: direct stores, the last column alone; 4 tiles "
     "on 3 SMs: the last in 3 units (the split tail)"},
    {"128x256x64 s4 c2 g8", {EVTC_BF16, EVTC_BF16, true, true}, 200, 300, 136, 1, 4, 2,
     "N 300 into rows of 608 bytes: TMA stores, direct ones for the column-edge tiles"},
    {"128x128x64 s6 c2 g8 pp", {EVTC_F16, EVTC_F32, false, false}, 130, 264, 200, 2, 8, 5,
     "pingpong, A K x M and B K x N (MN-major), two batches, f32 TMA stores; 12 tiles on 5 SMs: the last 2 in 2 "
     "units each"},
    {"128x128x64 s4 c1 g2", {EVTC_BF16, EVTC_F16, true, false}, 257, 136, 72, 1, 0, 4,
     "one consumer warpgroup of two atoms, B K x N, f16 TMA stores; 6 tiles on 4 SMs: the last 2 in 2 units each"},
    /* 2x1 clusters (B multicast): 3 tile rows, so the last pair's lower tile is a ghost; 6 SMs, 3 clusters */
    {"128x256x64 s4 c2 g8 cl2", {EVTC_BF16, EVTC_BF16, true, true}, 300, 299, 136, 1, 0, 6,
     "2x1 clusters, a ghost tile, the second column's lower half of B wholly past N; 4 pairs on 3 clusters: the "
     "last in 3 units"},
    {"64x256x64 s3 c2 g4 pp cl2", {EVTC_F16, EVTC_F32, false, false}, 136, 200, 200, 2, 8, 6,
     "2x1 clusters of pingpong tiles, A K x M and B K x N (each CTA half of every panel's k-rows), two batches; 4 "
     "pairs on 3 clusters: the last in 3 units"},
    /* the sm_80 template (cuda_emit_gemm80.c: cp.async ring, ldmatrix, mma.sync; direct stores) */
    {"128x128x64 s4 c2 g8 sm80", {EVTC_BF16, EVTC_BF16, true, false}, 200, 136, 136, 1, 0, 2,
     "sm_80 template, warps of 16 rows, B K x N"},
    {"256x128x64 s3 c2 g8 sm80", {EVTC_F16, EVTC_F32, false, true}, 300, 264, 200, 2, 8, 2,
     "sm_80 template, warps of 32 rows, A K x M, two batches, f32"},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Graphs whose one kernel is a GEMM with its visitor epilogue (cuda_emit_evt.c), the plan's tile config; on 3 or 4
 * SMs, their 4 or 6 tiles of 128 x 256 (and gelu_grad_bias_sum's 9 of 128 x 128) end in a split tail, on 6
 * bias_f32_tanh's 4 pairs of 64 x 256 tiles on 3 clusters, and on 5 bert_fc's 6 pingpong tiles of 128 x 128 (the
 * bias in the accumulators of the first of 3 units only). */
typedef struct evt_case {
  const char *name, *text;
  int sms;
} evt_case;

static const evt_case evt_cases[] = {
    {"bias_gelu_tanh",
     "graph bias_gelu_tanh {\n  %x = input() : bf16[200,136]\n  %w = input() : bf16[296,136]\n"
     "  %h = matmul(%x, %w) {trans_b=1} : bf16[200,296]\n  %b = input() : bf16[296]\n"
     "  %hb = add(%h, %b) : bf16[200,296]\n  %y = gelu_tanh(%hb) : bf16[200,296]\n  output %y\n}\n",
     3},
    /* a bias over 3 tile rows and 3 tile columns on one CTA or one 2x1 cluster: the walk of a cluster's rank 1
       alternates ghost and real tiles, each real one in another tile column than the one before */
    {"bias_ghost_walk",
     "graph bias_ghost_walk {\n  %x = input() : bf16[264,136]\n  %w = input() : bf16[520,136]\n"
     "  %h = matmul(%x, %w) {trans_b=1} : bf16[264,520]\n  %b = input() : bf16[520]\n"
     "  %y = add(%h, %b) : bf16[264,520]\n  output %y\n}\n",
     2},
    /* an f32 bias (a lane vector of float pairs, 296 columns: the last tile's group partly past N) and tanh, stored
       as bf16 */
    {"bias_f32_tanh",
     "graph bias_f32_tanh {\n  %x = input() : bf16[200,136]\n  %w = input() : bf16[296,136]\n"
     "  %h = matmul(%x, %w) {trans_b=1} : bf16[200,296]\n  %hf = cast(%h) {dtype=f32} : f32[200,296]\n"
     "  %b = input() : f32[296]\n  %hb = add(%hf, %b) : f32[200,296]\n  %t = tanh(%hb) : f32[200,296]\n"
     "  %y = cast(%t) {dtype=bf16} : bf16[200,296]\n  output %y\n}\n",
     6},
    /* BERT-Large's fc: the erf GELU and its gradient's coefficient, both stored (bench/epilogue/bert_fc.evt) */
    {"bert_fc",
     "graph bert_fc {\n  %x = input() : bf16[200,136]\n  %w1 = param() : bf16[296,136]\n  %b1 = param() : bf16[296]\n"
     "  %h0 = matmul(%x, %w1) {trans_b=1} : bf16[200,296]\n  %h = add(%h0, %b1) : bf16[200,296]\n"
     "  %s2 = const() {value=1.4142135623730951} : bf16[]\n  %one = const() {value=1.0} : bf16[]\n"
     "  %half = const() {value=0.5} : bf16[]\n  %k = const() {value=1.1283791670955126} : bf16[]\n"
     "  %a = div(%h, %s2) : bf16[200,296]\n  %e = erf(%a) : bf16[200,296]\n  %e1 = add(%e, %one) : bf16[200,296]\n"
     "  %m = mul(%h, %e1) : bf16[200,296]\n  %g = mul(%m, %half) : bf16[200,296]\n  %aa = mul(%a, %a) : bf16[200,296]\n"
     "  %na = neg(%aa) : bf16[200,296]\n  %ex = exp(%na) : bf16[200,296]\n  %de = mul(%ex, %k) : bf16[200,296]\n"
     "  %da = div(%de, %s2) : bf16[200,296]\n  %hd = mul(%h, %da) : bf16[200,296]\n  %sum = add(%e1, %hd) : bf16[200,296]\n"
     "  %coef = mul(%sum, %half) : bf16[200,296]\n  output %g\n  output %coef\n}\n",
     5},
    /* the GELU gradient times its stored coefficient (an aux tile), with the bias gradient: a sum over the rows */
    {"gelu_grad_bias_sum",
     "graph gelu_grad_bias_sum {\n  %dy = input() : bf16[264,72]\n  %w2 = param() : bf16[72,296]\n"
     "  %j = input() : bf16[264,296]\n  %d0 = matmul(%dy, %w2) : bf16[264,296]\n  %dh = mul(%d0, %j) : bf16[264,296]\n"
     "  %db = reduce_sum(%dh) {axes=[0]} : bf16[296]\n  output %dh\n  output %db\n}\n",
     4},
    /* dropout, a residual, and the row sums and sums of squares of the next layernorm, f32 (sums over columns), with a
       mean over everything */
    {"dropout_residual_row_stats",
     "graph dropout_residual_row_stats {\n  %x = input() : f16[136,200]\n  %w = input() : f16[200,264]\n"
     "  %h = matmul(%x, %w) : f16[136,264]\n  %hf = cast(%h) {dtype=f32} : f32[136,264]\n"
     "  %b = input() : f32[264]\n  %hb = add(%hf, %b) : f32[136,264]\n  %t = tanh(%hb) : f32[136,264]\n"
     "  %dr = dropout(%t) {p=0.25, seed=11} : f32[136,264]\n  %res = input() : f32[136,264]\n"
     "  %z = add(%dr, %res) : f32[136,264]\n  %zh = cast(%z) {dtype=f16} : f16[136,264]\n"
     "  %sum = reduce_sum(%z) {axes=[1]} : f32[136]\n  %zz = mul(%z, %z) : f32[136,264]\n"
     "  %sq = reduce_sum(%zz) {axes=[1]} : f32[136]\n  %all = reduce_mean(%t) {axes=[0,1]} : f32[]\n"
     "  output %zh\n  output %sum\n  output %sq\n  output %all\n}\n",
     3},
    /* split-K (evtc_cuda_gemm_use_evt): a weight gradient of 4 (2) output tiles over K = 2048 with its SGD update,
       and the GELU gradient with its bias gradient (pingpong tiles, an aux TMA tile, NAME_fin) over K = 2048 */
    {"wgrad_sgd_split_k",
     "graph wgrad_sgd_split_k {\n  %x = input() : bf16[2048,384]\n  %dy = input() : bf16[2048,256]\n"
     "  %w = param() : bf16[256,384]\n  %g = matmul(%dy, %x) {trans_a=1} : bf16[256,384]\n"
     "  %c = const() {value=0.5} : bf16[]\n  %s = mul(%g, %c) : bf16[256,384]\n  %u = sub(%w, %s) : bf16[256,384]\n"
     "  output %u\n}\n",
     8},
    {"gelu_grad_bias_sum_split_k",
     "graph gelu_grad_bias_sum_split_k {\n  %dy = input() : bf16[264,2048]\n  %w2 = param() : bf16[2048,296]\n"
     "  %j = input() : bf16[264,296]\n  %d0 = matmul(%dy, %w2) : bf16[264,296]\n  %dh = mul(%d0, %j) : bf16[264,296]\n"
     "  %db = reduce_sum(%dh) {axes=[0]} : bf16[296]\n  output %dh\n  output %db\n}\n",
     8},
    /* the next layernorm's row sums and sums of squares (sums over columns only: the plan's cooperative tiles) over
       K = 2048, split */
    {"row_stats_split_k",
     "graph row_stats_split_k {\n  %x = input() : bf16[264,2048]\n  %w = input() : bf16[2048,296]\n"
     "  %h = matmul(%x, %w) : bf16[264,296]\n  %hf = cast(%h) {dtype=f32} : f32[264,296]\n"
     "  %sum = reduce_sum(%hf) {axes=[1]} : f32[264]\n  %hh = mul(%hf, %hf) : f32[264,296]\n"
     "  %sq = reduce_sum(%hh) {axes=[1]} : f32[264]\n  output %h\n  output %sum\n  output %sq\n}\n",
     8},
};
enum { N_EVT = sizeof evt_cases / sizeof evt_cases[0] };
/* Each visitor case on the plan's tile config and, through EVTC_GEMM_CONFIG, on the cooperative tiles of the
 * built-in store (two warpgroups splitting each tile's rows), alone and in 2x1 clusters, on pingpong tiles of
 * two 64-row atoms a warpgroup (the staged store's two buffers per warp, one per atom) and on pingpong tiles of
 * one atom in 2x1 clusters (B multicast; the 136- and 264-row cases end on a ghost tile). */
static const char *const evt_configs[] = {NULL, "128x256x64 s4 c2 g8", "128x256x64 s4 c2 g8 cl2",
                                          "128x128x64 s4 c2 g8 pp", "64x256x64 s4 c2 g8 pp cl2"};
enum { N_EVT_CONFIGS = sizeof evt_configs / sizeof evt_configs[0] };

/* Whether case i runs on config c: not a split-K case on the cluster's (a 2x1 cluster walks whole tiles, so the
 * plan would not split K, and the weight gradient would go to cuBLASLt). */
static bool evt_runs(int i, int c) {
  return !(evt_configs[c] && strstr(evt_configs[c], "cl2") && strstr(evt_cases[i].name, "_split_k"));
}

/* Case i's kernel on config c (named evtI_C) and its plan on evtc's GEMM; NULL (a failed check) when it is not
 * one. */
static evtc_kernel *evt_kernel(int i, int c, evtc_graph **g, evtc_cuda_evt_plan *pl) {
  evtc_kernel *k = oracle_kernel(evt_cases[i].text, evt_cases[i].name, g);
  char why[256] = "";
  if (!k) return NULL;
  if (evt_configs[c]) setenv("EVTC_GEMM_CONFIG", evt_configs[c], 1);
  const bool evt = k->kind == EVTC_ML_GEMM && evtc_cuda_gemm_use_evt(k, NULL, pl, why, sizeof why);
  unsetenv("EVTC_GEMM_CONFIG");
  if (!evt) {
    CHECK(false, "%s: not one GEMM kernel on evtc's GEMM: %s", evt_cases[i].name, why);
    evtc_kernel_free(k);
    return NULL;
  }
  pl->prob.tail_min_kblocks = 1;   /* split tails of the cases' few k-blocks too (the backend's need 32) */
  snprintf(k->name, sizeof k->name, "evt%d_%d", i, c);
  return k;
}

static evtc_cuda_gemm_config config_of(const gemm_case *c) {
  evtc_cuda_gemm_config cfg;
  char why[256];
  if (!evtc_cuda_gemm_config_parse(c->config, &cfg) || !evtc_cuda_gemm_config_check(&cfg, &c->v, why, sizeof why)) {
    fprintf(stderr, "gemm_emu: config '%s' does not build: %s\n", c->config, why);
    exit(2);
  }
  return cfg;
}

static int emit(void) {
  evtc_sb b = {0};
  evtc_cuda_emit_prelude(&b);
  for (int i = 0; i < N_CASES; i++) {
    const evtc_cuda_gemm_config cfg = config_of(&cases[i]);
    char name[16];
    snprintf(name, sizeof name, "emu%d", i);
    evtc_cuda_gemm_emit(&b, name, &cfg, &cases[i].v, NULL);
  }
  for (int i = 0; i < N_EVT * N_EVT_CONFIGS; i++) {
    if (!evt_runs(i / N_EVT_CONFIGS, i % N_EVT_CONFIGS)) continue;
    evtc_graph *g = NULL;
    evtc_cuda_evt_plan pl;
    evtc_kernel *k = evt_kernel(i / N_EVT_CONFIGS, i % N_EVT_CONFIGS, &g, &pl);
    if (k) evtc_cuda_emit_evt(&b, k, &pl);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
  fputs(b.s, stdout);
  free(b.s);
  return 0;
}

/* The emulated driver's tensor map encoder: what the GEMM asked for, into the map's opaque bytes. */
static CUresult encode_tiled(void *map, int type, unsigned rank, void *base, const unsigned long long *dim,
                             const unsigned long long *stride, const unsigned *box, const unsigned *estride,
                             int interleave, int swizzle, int l2, int oob) {
  (void)estride, (void)interleave, (void)l2, (void)oob;
  if (rank != 3) return 1;
  emu_tmap m = {.base = (uint64_t)(uintptr_t)base, .elem = type == 7 ? 4u : 2u, .swizzle = (uint32_t)swizzle};
  for (int i = 0; i < 3; i++) m.dim[i] = dim[i], m.box[i] = box[i];
  m.stride[0] = stride[0];
  m.stride[1] = stride[1];
  memset(map, 0, 128);
  memcpy(map, &m, sizeof m);
  return 0;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {   /* in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}
/* A random operand of `rows` x `cols` stored in rows of ld elements, `batch` of them `bstride` apart; its
 * values (the rounded ones) in val. */
static uint16_t *operand(evtc_dtype t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t bstride,
                         double *val) {
  uint16_t *s = calloc((size_t)(batch * bstride), 2);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        const double x = (float)uniform();
        const uint16_t h = t == EVTC_BF16 ? evtc_double_to_bf16(x) : evtc_double_to_f16(x);
        s[b * bstride + r * ld + c] = h;
        val[(b * rows + r) * cols + c] = t == EVTC_BF16 ? evtc_bf16_to_double(h) : evtc_f16_to_double(h);
      }
  return s;
}

/* Element e of a buffer of type t as a double (runtime/elements.h), and v stored there, rounded to t, as read back. */
static double load_as_double(const void *buf, evtc_dtype t, int64_t e) {
  double v;
  evtc_elements_decode(t, (const unsigned char *)buf + e * (int64_t)evtc_dtype_size(t), 1, &v);
  return v;
}
static double store_double(void *buf, evtc_dtype t, int64_t e, double v) {
  evtc_elements_encode(t, &v, 1, (unsigned char *)buf + e * (int64_t)evtc_dtype_size(t));
  return load_as_double(buf, t, e);
}

/* Launches (plain and visitor) whose grid walked a split tail. */
static int tail_runs;

typedef int (*gemm_launch_fn)(void *kernel, int n_params, unsigned grid, unsigned threads, unsigned smem,
                              unsigned cluster, void **params);
typedef int (*kernel_launch_fn)(void *kernel, unsigned grid, unsigned threads, unsigned smem, void **params);

static int run_case(void *lib, int i, int *checks) {
  const gemm_case *c = &cases[i];
  const evtc_cuda_gemm_config cfg = config_of(c);
  const evtc_cuda_gemm_variant *v = &c->v;
  const int64_t M = c->M, N = c->N, K = c->K, B = c->batch;
  evtc_cuda_gemm_problem p = {.M = M, .N = N, .K = K, .batch = B};
  p.lda = v->a_kmajor ? K : (M + 7) / 8 * 8;
  p.ldb = v->b_kmajor ? K : (N + 7) / 8 * 8;
  p.ldc = N + c->ldc_pad;
  p.a_bstride = (v->a_kmajor ? M : K) * p.lda;
  p.b_bstride = (v->b_kmajor ? N : K) * p.ldb;
  p.c_bstride = M * p.ldc;
  p.tail_split = 4;
  double *av = malloc(sizeof(double) * (size_t)(B * M * K)), *bv = malloc(sizeof(double) * (size_t)(B * N * K));
  /* av[b][m][k] and bv[b][n][k] whatever the storage: a K x M operand is drawn as rows of k */
  double *tmp = malloc(sizeof(double) * (size_t)(B * (M > N ? M : N) * K));
  uint16_t *a = operand(v->in, v->a_kmajor ? M : K, v->a_kmajor ? K : M, p.lda, B, p.a_bstride, v->a_kmajor ? av : tmp);
  if (!v->a_kmajor)
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t m = 0; m < M; m++) av[(b * M + m) * K + k] = tmp[(b * K + k) * M + m];
  uint16_t *bm = operand(v->in, v->b_kmajor ? N : K, v->b_kmajor ? K : N, p.ldb, B, p.b_bstride, v->b_kmajor ? bv : tmp);
  if (!v->b_kmajor)
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) bv[(b * N + n) * K + k] = tmp[(b * K + k) * N + n];
  const size_t es = evtc_dtype_size(v->out), d_bytes = (size_t)(B * p.c_bstride) * es;
  unsigned char *d = malloc(d_bytes);
  memset(d, 0x7E, d_bytes);   /* a NaN in f16, bf16 and f32 */

  evtc_cuda_driver drv = {0};
  drv.cuTensorMapEncodeTiled = encode_tiled;
  evtc_cuda_gemm_launch L;
  evtc_diag diag = {0};
  if (evtc_cuda_gemm_launch_init(&L, &drv, &cfg, v, &p, (CUdeviceptr)(uintptr_t)a, (CUdeviceptr)(uintptr_t)bm,
                                 (CUdeviceptr)(uintptr_t)d, c->sms, &diag) != EVTC_OK) {
    printf("case %d (%s): launch_init: %s\n", i, c->config, diag.msg);
    return 1;
  }
  /* the split tail's workspace (poisoned) and counts (zero, and zero again after the launch) */
  const int64_t ws_floats = evtc_cuda_gemm_split_floats(&cfg, &p, c->sms), n_counts = evtc_cuda_gemm_split_counts(&cfg, &p, c->sms);
  float *split_ws = malloc((size_t)(ws_floats > 0 ? ws_floats : 1) * sizeof(float));
  int *split_cnt = calloc((size_t)(n_counts > 0 ? n_counts : 1), sizeof(int));
  memset(split_ws, 0x7F, (size_t)(ws_floats > 0 ? ws_floats : 1) * sizeof(float));
  L.dims.split_ws = (uint64_t)(uintptr_t)split_ws;
  L.dims.split_cnt = (uint64_t)(uintptr_t)split_cnt;
  tail_runs += L.dims.tail_tiles > 0;
  char name[16];
  snprintf(name, sizeof name, "emu%d", i);
  gemm_launch_fn launch = (gemm_launch_fn)dlsym(lib, "emu_gemm_launch");
  void *kernel = dlsym(lib, name);
  if (!launch || !kernel || launch(kernel, 5, L.grid[0], L.block[0], L.smem, (unsigned)cfg.cluster_m, L.params) != 0) {
    printf("case %d (%s): no kernel %s or launch in the library\n", i, c->config, name);
    return 1;
  }
  const double rel = v->out == EVTC_F32 ? ldexp(1, -18) : v->out == EVTC_BF16 ? ldexp(1, -8) : ldexp(1, -10);
  int bad = 0, poison = 0;
  double worst = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < p.ldc; n++) {
        const unsigned char *e = d + (size_t)((b * p.c_bstride + m * p.ldc + n) * (int64_t)es);
        if (n >= N) {   /* padding: untouched */
          for (size_t x = 0; x < es; x++) poison += e[x] != 0x7E;
          continue;
        }
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          const double t = av[(b * M + m) * K + k] * bv[(b * N + n) * K + k];
          ref += t;
          mag += fabs(t);
        }
        const double got = load_as_double(e, v->out, 0);
        const double err = fabs(got - ref), tol = rel * fabs(ref) + ldexp(mag, -18);
        if (!(err <= tol)) {
          if (bad < 4)
            printf("  case %d batch %lld D[%lld][%lld] = %g, want %g\n", i, (long long)b, (long long)m, (long long)n, got,
                   ref);
          bad++;
        }
        if (err / (tol > 0 ? tol : 1) > worst) worst = err / (tol > 0 ? tol : 1);
      }
  int counts = 0;
  for (int64_t t = 0; t < n_counts; t++) counts += split_cnt[t] != 0;
  printf("case %d: %s, %lldx%lldx%lld x%lld, %s, grid %u (split tail %d x %d), %u threads, %u B shared, %s: %d of %lld "
         "elements off, worst at %.0f%% of the tolerance, %d padding bytes written, %d counts left nonzero\n",
         i, c->config, (long long)M, (long long)N, (long long)K, (long long)B, c->what, L.grid[0], L.dims.tail_tiles, L.dims.tail_splits,
         L.block[0], L.smem, L.dims.tma_store ? "TMA store" : "direct stores", bad, (long long)(B * M * N), 100 * worst,
         poison, counts);
  *checks += 3;
  free(split_ws), free(split_cnt);
  free(av), free(bv), free(tmp), free(a), free(bm), free(d);
  return (bad > 0) + (poison > 0) + (counts > 0);
}

/* Visitor case i on config `config`: its kernel launched as the CUDA backend's run_evt does (cuda_backend.c: launch_init, the
 * epilogue's TMA tile, then NAME_fin with reductions) on random inputs, every output against the interpreter.
 * Tolerance as test_gpu_evt.c's: the interpreter rounds the matmul's output before the epilogue. */
static int run_evt(void *lib, int i, int config, int *checks) {
  const evt_case *c = &evt_cases[i];
  evtc_graph *g = NULL;
  evtc_cuda_evt_plan pl;
  evtc_kernel *k = evt_kernel(i, config, &g, &pl);
  if (!k) {
    evtc_graph_free(g);
    return 1;
  }
  oracle_vals o = oracle_fill(g, 16);
  evtc_interp *it = evtc_interp_new(g);
  void *args[EVTC_CUDA_MAX_ARGS] = {0};
  for (int a = 0; a < k->n_args; a++) {
    const evtc_node *n = k->args[a].node;
    const int64_t numel = evtc_type_numel(&n->type);
    args[a] = malloc((size_t)(numel > 0 ? numel : 1) * evtc_dtype_size(n->type.dtype));   /* exact: ASan sees overruns */
    if (k->args[a].output) memset(args[a], 0x7E, (size_t)numel * evtc_dtype_size(n->type.dtype));   /* NaN */
    else if (o.v[n->id])
      for (int64_t e = 0; e < numel; e++) o.v[n->id][e] = store_double(args[a], n->type.dtype, e, o.v[n->id][e]);
  }
  for (int32_t n = 0; n < g->n_nodes; n++)
    if (o.v[n]) evtc_interp_set(it, g->nodes[n], o.v[n]);
  evtc_diag di = {0};
  CHECK(evtc_interp_run(it, 7, &di) == EVTC_OK, "%s: interpreter: %s", c->name, di.msg);

  evtc_cuda_driver drv = {0};
  drv.cuTensorMapEncodeTiled = encode_tiled;
  evtc_cuda_gemm_launch L;
  evtc_diag d = {0};
  void *out = pl.builtin_store || pl.staged_store ? args[pl.out_arg] : NULL;
  int failed = 0;
  if (evtc_cuda_gemm_launch_init(&L, &drv, &pl.cfg, &pl.var, &pl.prob, (CUdeviceptr)(uintptr_t)args[k->gemm.a_arg],
                                 (CUdeviceptr)(uintptr_t)args[k->gemm.b_arg], (CUdeviceptr)(uintptr_t)out, c->sms,
                                 &d) != EVTC_OK) {
    printf("%s: launch_init: %s\n", c->name, d.msg);
    failed = 1;
    goto done;
  }
  CHECK(!pl.staged_store || L.dims.tma_store, "%s: the staged store's output does not suit TMA", c->name);
  if (pl.tma_load) {
    const CUdeviceptr base = (CUdeviceptr)(uintptr_t)args[pl.tma_arg] + (CUdeviceptr)(pl.tma_offset * (int64_t)evtc_dtype_size(pl.tma_dtype));
    CHECK(evtc_cuda_gemm_tile_map(&drv, &L.map_x, pl.tma_dtype, base, pl.tma_cols, pl.tma_rows, pl.tma_ld,
                                  pl.tma_box_rows, &d) == EVTC_OK, "%s: tile map: %s", c->name, d.msg);
    L.smem = evtc_cuda_gemm_smem_bytes_aux(&pl.cfg, pl.aux_bytes);
  }
  {
    struct { void *a[EVTC_CUDA_MAX_ARGS]; } params;
    memcpy(params.a, args, sizeof params.a);
    const uint64_t step = 7;
    const uint64_t *stepp = &step;
    int err = 0, *errp = &err;
    void *scratch = malloc((size_t)(pl.scratch_doubles > 0 ? pl.scratch_doubles : 1) * sizeof(double));
    memset(scratch, 0x7F, (size_t)(pl.scratch_doubles > 0 ? pl.scratch_doubles : 1) * sizeof(double));   /* NaN */
    /* split-K's or the split tail's workspace (poisoned) and counts (zero, and zero again after the launch), for this
     * grid (the plan sized them for the H200's SMs) */
    const int64_t ws_floats = evtc_cuda_gemm_split_floats(&pl.cfg, &pl.prob, c->sms),
                  n_counts = evtc_cuda_gemm_split_counts(&pl.cfg, &pl.prob, c->sms);
    float *split_ws = malloc((size_t)(ws_floats > 0 ? ws_floats : 1) * sizeof(float));
    int *split_cnt = calloc((size_t)(n_counts > 0 ? n_counts : 1), sizeof(int));
    memset(split_ws, 0x7F, (size_t)(ws_floats > 0 ? ws_floats : 1) * sizeof(float));
    tail_runs += L.dims.tail_tiles > 0;
    L.dims.split_ws = (uint64_t)(uintptr_t)split_ws;
    L.dims.split_cnt = (uint64_t)(uintptr_t)split_cnt;
    void *pv[] = {L.params[0], L.params[1], L.params[2], L.params[3], L.params[4], &params, &stepp, &errp, &scratch,
                  &L.map_x};
    gemm_launch_fn launch = (gemm_launch_fn)dlsym(lib, "emu_gemm_launch");
    kernel_launch_fn launch_plain = (kernel_launch_fn)dlsym(lib, "emu_kernel_launch");
    char fin[80];
    snprintf(fin, sizeof fin, "%s_fin", k->name);
    void *kernel = dlsym(lib, k->name), *fin_kernel = pl.has_fin ? dlsym(lib, fin) : NULL;
    const int n_params = pl.builtin_store ? 5 : pl.tma_load ? 10 : 9;
    if (!launch || !kernel || launch(kernel, n_params, L.grid[0], L.block[0], L.smem, (unsigned)pl.cfg.cluster_m, pv) != 0 ||
        (pl.has_fin && (!fin_kernel || launch_plain(fin_kernel, pl.fin_grid, 256, 0, pv + 5) != 0))) {
      printf("%s: no kernel %s (or its NAME_fin) or launch in the library\n", c->name, k->name);
      failed = 1;
    }
    CHECK(err == 0, "%s: the kernel's error flag is %d", c->name, err);
    int counts = 0;
    for (int64_t t = 0; t < n_counts; t++) counts += split_cnt[t] != 0;
    CHECK(counts == 0, "%s: %d split-K or split tail counts left nonzero", c->name, counts);
    free(scratch);
    free(split_ws);
    free(split_cnt);
  }
  if (!failed) {
    oracle_sum_walk = true;
    const double tol = 4.0 / 256;
    for (int a = 0; a < k->n_args; a++) {
      if (!k->args[a].output) continue;
      const evtc_node *n = k->args[a].node;
      const int64_t numel = evtc_type_numel(&n->type);
      double *got = malloc(sizeof(double) * (size_t)numel);
      for (int64_t e = 0; e < numel; e++) got[e] = load_as_double(args[a], n->type.dtype, e);
      failed += oracle_check_value(c->name, n, got, evtc_interp_value(it, n), tol, it);
      free(got);
      *checks += 1;
    }
    char cfg[64];
    evtc_cuda_gemm_config_name(&pl.cfg, cfg, sizeof cfg);
    printf("%s: %s, grid %u (split tail %d x %d), %u B shared%s%s, %d split%s: %s\n", c->name, cfg, L.grid[0],
           L.dims.tail_tiles, L.dims.tail_splits, L.smem, pl.tma_load ? ", TMA aux tile" : "", pl.has_fin ? ", NAME_fin" : "", L.dims.splits,
           L.dims.splits == 1 ? "" : "s", failed ? "DIFFERS from the interpreter" : "every output as the interpreter's");
  }
done:
  for (int a = 0; a < k->n_args; a++) free(args[a]);
  evtc_interp_free(it);
  oracle_free(g, &o);
  evtc_kernel_free(k);
  evtc_graph_free(g);
  return failed;
}

/* The library's emu_erf1p_bf16 (the prelude's evtc_erf1p_bf16f) over every bf16 of [-6, 6], within erf_check.h's
 * bounds: the polynomial the GELU epilogues compute, checked for its accuracy, which the visitor cases' bf16
 * tolerance does not resolve. */
static void check_prelude_erf1p(void *lib) {
  float (*erf1p)(float) = (float (*)(float))dlsym(lib, "emu_erf1p_bf16");
  CHECK(erf1p != NULL, "no emu_erf1p_bf16 in the library");
  double *x = malloc(sizeof(double) * BF16_SWEEP_N), *y = malloc(sizeof(double) * BF16_SWEEP_N);
  if (erf1p && x && y) {
    const int used = bf16_sweep_inputs(erf1p_bf16_special, ERF1P_BF16_N_SPECIAL, 6.0f, false, x);
    for (int i = 0; i < used; i++) y[i] = erf1p((float)x[i]);
    check_erf1p_bf16_values("the prelude's evtc_erf1p_bf16f", x, y, used);
  }
  free(x);
  free(y);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);   /* each case's line out before the next runs: a hang's abort names the last done */
  setenv("EVTC_GEMM_SPLIT_K", "1", 1);   /* the split-K cases' path, off by default (cuda_gemm.c) */
  setenv("EVTC_GEMM_TAIL_SPLIT", "4", 1);   /* the visitor cases' split tails */
  if (argc == 2 && strcmp(argv[1], "emit") == 0) return emit();
  if (argc != 3 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: gemm_emu emit | gemm_emu run LIB.so\n");
    return 2;
  }
  void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "gemm_emu: %s\n", dlerror());
    return 2;
  }
  int checks = 0, failed = 0;
  for (int i = 0; i < N_CASES; i++) failed += run_case(lib, i, &checks);
  for (int i = 0; i < N_EVT * N_EVT_CONFIGS; i++)
    if (evt_runs(i / N_EVT_CONFIGS, i % N_EVT_CONFIGS)) failed += run_evt(lib, i / N_EVT_CONFIGS, i % N_EVT_CONFIGS, &checks) > 0;
  check_prelude_erf1p(lib);
  CHECK(tail_runs >= 6, "only %d launches walked a split tail: the cases no longer cover it", tail_runs);
  /* with the CHECKs of the visitor cases and of the prelude's 1 + erf (check.h) */
  checks += check_passed + check_failed;
  failed += check_failed;
  printf("%d checks, %d failed\n", checks, failed);
  return failed ? 1 : 0;
}
