/* test_gpu_evt.c -- GEMM kernels with their visitor DAG in evtc's own GEMM
 * epilogue (cuda_emit_evt.c) against the float64 interpreter.
 *
 * Each case is a generated text-IR graph: a matmul (or batch_matmul) of
 * bf16 or f16 inputs in every layout (trans_a, trans_b), cast to f32, then
 * a random chain (fixed seed) of add / mul / gelu (erf at odd steps, tanh at
 * even ones) / tanh / relu / sigmoid /
 * where / dropout, and x - one_hot(label), with row-vector (bias [N]), column-vector ([.., M, 1])
 * and scalar broadcasts and FULL aux loads (f32 and bf16), several outputs
 * (f32 values, a value stored as bf16 / f16; plain GEMMs, whose store is
 * the template's own staged TMA store or its direct one), and reductions: sum over the
 * rows (ROW, a bias gradient), sum and max over the columns (COL, a
 * layernorm's statistics), mean over everything (SCALAR).  The greedy plan
 * with the CUDA backend's acceptance puts every node into the GEMM kernel
 * when evtc's template takes it, reductions included (the test checks
 * that a case with reductions is that one kernel).
 * The tile config is the plan's (pingpong for epilogues that reduce, cooperative
 * 128x256 for the others) unless EVTC_GEMM_CONFIG names another (bench/gpu_gemm.sh runs both).  Odd sizes (M 2039, N 1 and 17, K 17,
 * more tiles than SMs) and batches; cases the template refuses (K = 17
 * gives lda 17, not a multiple of 8 elements; a batch-broadcast B has
 * batch stride 0, which only A's stacked batches fold away) must run correctly through the cuBLASLt fallback, and
 * the test checks which path each GEMM kernel took (evtc_cuda_gemm_use_evt
 * on the host; the backend's counts of loaded GEMM kernels on the GPU).
 * Weight-gradient shapes (few output tiles over a long K) choose cuBLASLt,
 * which splits K, and with EVTC_GEMM_SPLIT_K=1 split K on evtc's GEMM;
 * others run unsplit (split_k_choice).  The GPU cases run with
 * EVTC_GEMM_SPLIT_K=1, two of them split K.
 *
 * Tolerance: the interpreter rounds the matmul's bf16 (f16) output before
 * the f32 chain; the kernel keeps the f32 accumulator, so values differ by
 * about one bf16 rounding (2^-9 relative) of the accumulator carried
 * through the chain, plus the rounding of a bf16 store: 4 x 2^-8 (4 x
 * 2^-11 for f16) of (1 + |want|), as in test_gpu_kernels.c.  The `where`
 * conditions compare aux inputs only, so no branch flips on a rounding.
 * Reductions are checked against the interpreter's float64 results: a max
 * with that tolerance, a sum (mean) with the random walk of its terms'
 * tolerances, tol sqrt(sum (1 + |term|)^2) (cpu_oracle.h's
 * oracle_sum_walk): the kernel's sums are of the unrounded accumulator's
 * chain, each term off by one bf16 rounding of the interpreter's, unbiased
 * (measured on the H200: 2600-term row sums differed by 0.08 with the
 * plain per-element tolerance of 0.02).
 * Two cases are bf16 chains of the ops the sm_90a template computes two columns an instruction (packed bf16x2,
 * cuda_emit_evt.c: choose_packed; the test checks which cases it packs): there each op rounds to bf16 as the
 * interpreter's does, and GELU's steps in bf16 stay within the same tolerance.
 * Outputs are NaN-poisoned before each run (cpu_oracle.h).  The cases with long
 * chains run again with EVTC_EVT_TMA_AUX=0: their bf16 aux load through
 * registers instead of the TMA tile in shared memory.
 *
 * Every case runs a second time with EVTC_GEMM=sm80: the GEMM kernels on
 * the sm_80 template (mma.sync, cp.async; cuda_emit_gemm80.c).
 *
 * Without a GPU every case's kernels are emitted as the backend does and
 * compiled through NVRTC for sm_90a (and, on the sm_80 template, for
 * sm_80), and the path checks run; then the test prints SKIPPED and exits 77.  CUBINs go to the usual disk cache
 * (cuda_compile.h; bench/gpu_gemm.sh points it at its stage), as in
 * test_gpu_gemm, so a second run compiles nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_compile.h"
#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_gemm.h"
#include "cpu_oracle.h"
#include "gpu_session.h"
#include "kernel/kernel.h"

typedef struct evt_case {
  const char *name;
  int64_t M, N, K, batch;   /* batch 0: matmul */
  int ta, tb, f16, chain;
  int bcast_b;              /* batch_matmul with a rank-2 B (batch stride 0) */
  int reduce;               /* ROW, COL and SCALAR reductions */
  int want_evt;             /* the GEMM kernel runs on evtc's GEMM */
  int coef;                 /* an output 0.5 x * (res * 1.125) * 0.70703125 + x (GELU's coefficient's shape: the
                               emitter folds the constants into one), and GELU decomposed with its coefficient's
                               0.5 (1 + erf) (the emitter folds the 0.5 into 1 + erf): in f32 (1) or, as in
                               BERT-Large's fc GEMM after the passes, in bf16 (2) */
  int split;                /* few tiles over a long K: split-K on the sm_90a template; beside the sm_80 one (and on
                               2x1 clusters) cuBLASLt (1) or, for an epilogue cuBLASLt's path cannot run
                               (reductions), evtc's unsplit (2) */
  int packed;               /* instead of the f32 chain, one in bf16 that the sm_90a template computes in packed
                               bf16x2 arithmetic (cuda_emit_evt.c: choose_packed): a bias, tanh GELU, a constant
                               factor, sub, tanh and neg, with the GELU stored too (2) or alone (1) */
} evt_case;

static const evt_case cases[] = {
    {"evt-256x512x128", 256, 512, 128, 0, 0, 0, 0, 7, 0, 1, 1, 0, 0, 0},
    {"evt-2039x1x64", 2039, 1, 64, 0, 0, 0, 0, 5, 0, 1, 1, 0, 0, 0},
    {"evt-fallback-2039x24x17", 2039, 24, 17, 0, 0, 0, 0, 5, 0, 1, 0, 0, 0, 0},
    {"evt-trans_a-136x200x64", 136, 200, 64, 0, 1, 0, 0, 6, 0, 1, 1, 0, 0, 0},
    {"evt-trans_b-77x17x64", 77, 17, 64, 0, 0, 1, 0, 6, 0, 1, 1, 0, 0, 0},
    {"evt-trans_ab-136x264x80", 136, 264, 80, 0, 1, 1, 0, 6, 0, 0, 1, 0, 0, 0},
    {"evt-fallback-trans_a-130x64x64", 130, 64, 64, 0, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0},
    {"evt-batched-3x100x72x64", 100, 72, 64, 3, 0, 0, 0, 6, 0, 1, 1, 0, 0, 0},
    {"evt-batch-bcast-folded", 200, 40, 32, 3, 0, 0, 0, 4, 1, 1, 1, 0, 0, 0},   /* 600 rows: 5 row tiles, not 3 x 2 */
    {"evt-fallback-batch-bcast-trans_a", 48, 40, 32, 2, 1, 0, 0, 4, 1, 0, 0, 0, 0, 0},
    {"evt-f16-300x264x96", 300, 264, 96, 0, 0, 0, 1, 6, 0, 1, 1, 0, 0, 0},
    {"evt-persistent-2100x2600x64", 2100, 2600, 64, 0, 0, 0, 0, 5, 0, 1, 1, 0, 0, 0},
    {"evt-plain-2039x264x64", 2039, 264, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
    {"evt-plain-f16-trans_b-100x17x64", 100, 17, 64, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0},
    {"evt-coef-256x512x128", 256, 512, 128, 0, 0, 0, 0, 4, 0, 0, 1, 1, 0, 0},
    {"evt-coef-bf16-300x264x96", 300, 264, 96, 0, 0, 0, 0, 4, 0, 0, 1, 2, 0, 0},
    /* split-K (few tiles over a long K): a weight gradient's layout, and reductions on pingpong tiles */
    {"evt-split-k-trans_a-256x384x2048", 256, 384, 2048, 0, 1, 0, 0, 6, 0, 0, 1, 0, 1, 0},
    {"evt-split-k-reduce-264x296x2048", 264, 296, 2048, 0, 0, 0, 0, 5, 0, 1, 1, 0, 2, 0},
    /* packed bf16x2 epilogues: two outputs (quad stores) over 16 row tiles and an edge row; one (the staged TMA
       store) with column-edge tiles, A K x M */
    {"evt-packed-2039x264x64", 2039, 264, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2},
    {"evt-packed-trans_a-296x200x96", 296, 200, 96, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 1},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* Whether case c's GEMM runs on evtc's GEMM with the template EVTC_GEMM picks, and whether it splits K there
 * (split-K is the sm_90a template's, on tiles without a cluster: EVTC_GEMM_CONFIG may ask for 2x1 clusters). */
static bool sm80_pass(void) { return evtc_cuda_gemm_mode_get() == EVTC_CUDA_GEMM_SM80; }
/* EVTC_GEMM_CONFIG into *cfg: whether it is set and parses. */
static bool env_config(evtc_cuda_gemm_config *cfg) {
  const char *e = getenv("EVTC_GEMM_CONFIG");
  return e && *e && evtc_cuda_gemm_config_parse(e, cfg);
}
static bool cluster_pass(void) {
  evtc_cuda_gemm_config cfg;
  return env_config(&cfg) && cfg.cluster_m > 1;
}
static bool no_split(void) { return sm80_pass() || cluster_pass(); }
/* Whether EVTC_GEMM_CONFIG (when set) builds on the sm_80 template, which has no pingpong and no clusters: the
 * sm_80 passes run only then. */
static bool config_fits_sm80(void) {
  const char *e = getenv("EVTC_GEMM_CONFIG");
  evtc_cuda_gemm_config cfg;
  if (!e || !*e) return true;
  if (!env_config(&cfg)) return false;
  cfg.sm80 = true;
  char why[160];
  const evtc_cuda_gemm_variant v = {.in = EVTC_BF16, .out = EVTC_BF16, .a_kmajor = true, .b_kmajor = true};
  return evtc_cuda_gemm_config_check(&cfg, &v, why, sizeof why);
}
static bool wants_evt(const evt_case *c) { return c->want_evt && !(c->split == 1 && no_split()); }
static bool wants_split(const evt_case *c) { return c->split && !no_split(); }

static uint64_t gen_rng = 99;
static int gen_pick(int n) {
  gen_rng = gen_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (int)((gen_rng >> 33) % (uint64_t)n);
}

/* "[b,]r,c" into buf. */
static void dims(char *buf, size_t cap, int64_t batch, int64_t r, int64_t c) {
  if (batch) snprintf(buf, cap, "%lld,%lld,%lld", (long long)batch, (long long)r, (long long)c);
  else snprintf(buf, cap, "%lld,%lld", (long long)r, (long long)c);
}

/* The graph text of case c (malloc'd). */
static char *case_text(const evt_case *c) {
  evtc_sb b = {0};
  gen_rng = 1000 + (uint64_t)(c - cases);
  const char *t = c->f16 ? "f16" : "bf16";
  char sa[64], sb[64], s[64], cv[64];
  dims(sa, sizeof sa, c->batch, c->ta ? c->K : c->M, c->ta ? c->M : c->K);
  if (c->bcast_b) dims(sb, sizeof sb, 0, c->tb ? c->N : c->K, c->tb ? c->K : c->N);
  else dims(sb, sizeof sb, c->batch, c->tb ? c->N : c->K, c->tb ? c->K : c->N);
  dims(s, sizeof s, c->batch, c->M, c->N);
  dims(cv, sizeof cv, c->batch, c->M, 1);
  evtc_sb_printf(&b, "graph evt {\n  %%a = input() : %s[%s]\n  %%b = input() : %s[%s]\n", t, sa, t, sb);
  evtc_sb_printf(&b, "  %%h = %s(%%a, %%b) {trans_a=%d, trans_b=%d} : %s[%s]\n", c->batch ? "batch_matmul" : "matmul",
                 c->ta, c->tb, t, s);
  if (c->packed) {
    evtc_sb_printf(&b, "  %%bias = input() : bf16[%lld]\n  %%k = const() {value=0.375} : bf16[]\n"
                       "  %%x1 = add(%%h, %%bias) : bf16[%s]\n  %%x2 = gelu_tanh(%%x1) : bf16[%s]\n",
                   (long long)c->N, s, s);
    if (c->packed == 2)
      evtc_sb_printf(&b, "  %%x3 = mul(%%x2, %%k) : bf16[%s]\n  %%x4 = sub(%%x3, %%x1) : bf16[%s]\n"
                         "  %%x5 = tanh(%%x4) : bf16[%s]\n  %%x6 = neg(%%x5) : bf16[%s]\n  output %%x6\n",
                     s, s, s, s);
    evtc_sb_printf(&b, "  output %%x2\n}\n");
    return b.s;
  }
  if (c->chain == 0) {      /* a plain GEMM: the template's own store */
    evtc_sb_printf(&b, "  output %%h\n}\n");
    return b.s;
  }
  evtc_sb_printf(&b, "  %%x0 = cast(%%h) {dtype=f32} : f32[%s]\n", s);
  evtc_sb_printf(&b, "  %%bias = input() : f32[%lld]\n  %%cv = input() : f32[%s]\n  %%sc = input() : f32[]\n",
                 (long long)c->N, cv);
  evtc_sb_printf(&b, "  %%res = input() : f32[%s]\n  %%resh = input() : %s[%s]\n  %%resf = cast(%%resh) {dtype=f32} : f32[%s]\n",
                 s, t, s, s);
  evtc_sb_printf(&b, "  %%cond = gt(%%res, %%cv) : bool[%s]\n", s);
  char lab[64];
  if (c->batch) snprintf(lab, sizeof lab, "%lld,%lld", (long long)c->batch, (long long)c->M);
  else snprintf(lab, sizeof lab, "%lld", (long long)c->M);
  evtc_sb_printf(&b, "  %%lab = input() : i64[%s]\n  %%oh = one_hot(%%lab) {depth=%lld} : f32[%s]\n", lab,
                 (long long)c->N, s);
  int mid = c->chain / 2;
  for (int j = 1; j <= c->chain; j++) {
    char x[16];
    snprintf(x, sizeof x, "%%x%d", j - 1);
    switch (j == 2 ? 11 : gen_pick(11)) {     /* step 2: x - one_hot(label), as a cross-entropy gradient */
      case 11: evtc_sb_printf(&b, "  %%x%d = sub(%s, %%oh) : f32[%s]\n", j, x, s); break;
      case 0: evtc_sb_printf(&b, "  %%x%d = add(%s, %%bias) : f32[%s]\n", j, x, s); break;
      case 1: evtc_sb_printf(&b, "  %%x%d = mul(%s, %%cv) : f32[%s]\n", j, x, s); break;
      case 2: evtc_sb_printf(&b, "  %%x%d = add(%s, %%sc) : f32[%s]\n", j, x, s); break;
      case 3: evtc_sb_printf(&b, "  %%x%d = %s(%s) : f32[%s]\n", j, j % 2 ? "gelu" : "gelu_tanh", x, s); break;
      case 4: evtc_sb_printf(&b, "  %%x%d = tanh(%s) : f32[%s]\n", j, x, s); break;
      case 5: evtc_sb_printf(&b, "  %%x%d = relu(%s) : f32[%s]\n", j, x, s); break;
      case 6: evtc_sb_printf(&b, "  %%x%d = sigmoid(%s) : f32[%s]\n", j, x, s); break;
      case 7: evtc_sb_printf(&b, "  %%x%d = where(%%cond, %s, %%res) : f32[%s]\n", j, x, s); break;
      case 8: evtc_sb_printf(&b, "  %%x%d = dropout(%s) {p=0.25, seed=%d} : f32[%s]\n", j, x, 5 + j, s); break;
      case 9: evtc_sb_printf(&b, "  %%x%d = add(%s, %%res) : f32[%s]\n", j, x, s); break;
      default: evtc_sb_printf(&b, "  %%x%d = mul(%s, %%resf) : f32[%s]\n", j, x, s); break;
    }
  }
  int n = c->chain;
  evtc_sb_printf(&b, "  %%half = cast(%%x%d) {dtype=%s} : %s[%s]\n", mid, t, t, s);
  evtc_sb_printf(&b, "  output %%x%d\n  output %%half\n", n);
  if (c->coef)
    evtc_sb_printf(&b, "  %%k1 = const() {value=0.5} : f32[]\n  %%k2 = const() {value=1.125} : f32[]\n"
                       "  %%k3 = const() {value=0.70703125} : f32[]\n  %%q1 = mul(%%k1, %%x%d) : f32[%s]\n"
                       "  %%q2 = mul(%%resf, %%k2) : f32[%s]\n  %%q3 = mul(%%q1, %%q2) : f32[%s]\n"
                       "  %%q4 = mul(%%q3, %%k3) : f32[%s]\n  %%cf = add(%%q4, %%x%d) : f32[%s]\n  output %%cf\n",
                   n, s, s, s, s, n, s);
  if (c->coef == 1)     /* GELU as ONNX spells it, g = x (1 + erf(x k3)) 0.5, beside its coefficient's 0.5 (1 + erf):
                           both products' 0.5 goes into evtc_erf1p_scaledf */
    evtc_sb_printf(&b, "  %%one = const() {value=1.0} : f32[]\n  %%ga = mul(%%x%d, %%k3) : f32[%s]\n"
                       "  %%ge = erf(%%ga) : f32[%s]\n  %%ge1 = add(%%ge, %%one) : f32[%s]\n"
                       "  %%gm = mul(%%x%d, %%ge1) : f32[%s]\n  %%gg = mul(%%gm, %%k1) : f32[%s]\n"
                       "  %%gt = mul(%%k1, %%ge1) : f32[%s]\n  %%gj = add(%%gt, %%q4) : f32[%s]\n"
                       "  output %%gg\n  output %%gj\n",
                   n, s, s, s, n, s, s, s, s);
  if (c->coef == 2)     /* BERT-Large's fc epilogue after the passes: GELU and its gradient's coefficient, in bf16
                           (evtc_erf1p_bf16_scaledf) */
    evtc_sb_printf(&b, "  %%gx = cast(%%x%d) {dtype=%s} : %s[%s]\n  %%gk = const() {value=0.7071067811865475} : %s[]\n"
                       "  %%gone = const() {value=1.0} : %s[]\n  %%ghalf = const() {value=0.5} : %s[]\n"
                       "  %%gdc = const() {value=0.7978845608028653} : %s[]\n  %%ga = mul(%%gx, %%gk) : %s[%s]\n"
                       "  %%ge = erf(%%ga) : %s[%s]\n  %%ge1 = add(%%ge, %%gone) : %s[%s]\n"
                       "  %%gm = mul(%%gx, %%ge1) : %s[%s]\n  %%gg = mul(%%gm, %%ghalf) : %s[%s]\n"
                       "  %%gaa = mul(%%ga, %%ga) : %s[%s]\n  %%gna = neg(%%gaa) : %s[%s]\n  %%gex = exp(%%gna) : %s[%s]\n"
                       "  %%gda = mul(%%gex, %%gdc) : %s[%s]\n  %%ghd = mul(%%gx, %%gda) : %s[%s]\n"
                       "  %%gs = add(%%ge1, %%ghd) : %s[%s]\n  %%gj = mul(%%gs, %%ghalf) : %s[%s]\n"
                       "  output %%gg\n  output %%gj\n"
                       /* constants added to scaled values, either side of a sub: 0.25 - (0.5 x + 0.25) 0.5 (factors
                          below 1: x's own tolerance is not amplified) */
                       "  %%gc3 = const() {value=0.5} : %s[]\n  %%gc4 = const() {value=0.25} : %s[]\n"
                       "  %%gp0 = mul(%%gx, %%gc3) : %s[%s]\n  %%gp1 = add(%%gp0, %%gc4) : %s[%s]\n"
                       "  %%gp2 = mul(%%gp1, %%gc3) : %s[%s]\n  %%gp3 = sub(%%gc4, %%gp2) : %s[%s]\n  output %%gp3\n",
                   n, t, t, s, t, t, t, t, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, s, t, t, t,
                   s, t, s, t, s, t, s);
  if (c->reduce) {
    if (c->batch) {
      evtc_sb_printf(&b, "  %%rsum = reduce_sum(%%x%d) {axes=[0,1]} : f32[%lld]\n", n, (long long)c->N);
      evtc_sb_printf(&b, "  %%csum = reduce_sum(%%x%d) {axes=[2]} : f32[%lld,%lld]\n", n, (long long)c->batch,
                     (long long)c->M);
      evtc_sb_printf(&b, "  %%sq = mul(%%x%d, %%x%d) : f32[%s]\n", n, n, s);
      evtc_sb_printf(&b, "  %%csq = reduce_sum(%%sq) {axes=[2]} : f32[%lld,%lld]\n", (long long)c->batch, (long long)c->M);
      evtc_sb_printf(&b, "  %%cmax = reduce_max(%%x%d) {axes=[2]} : f32[%lld,%lld]\n", mid, (long long)c->batch,
                     (long long)c->M);
      evtc_sb_printf(&b, "  %%all = reduce_mean(%%x%d) {axes=[0,1,2]} : f32[]\n", mid);
    } else {
      evtc_sb_printf(&b, "  %%rsum = reduce_sum(%%x%d) {axes=[0]} : f32[%lld]\n", n, (long long)c->N);
      evtc_sb_printf(&b, "  %%csum = reduce_sum(%%x%d) {axes=[1]} : f32[%lld]\n", n, (long long)c->M);
      evtc_sb_printf(&b, "  %%sq = mul(%%x%d, %%x%d) : f32[%s]\n", n, n, s);
      evtc_sb_printf(&b, "  %%csq = reduce_sum(%%sq) {axes=[1]} : f32[%lld]\n", (long long)c->M);
      evtc_sb_printf(&b, "  %%cmax = reduce_max(%%x%d) {axes=[1]} : f32[%lld]\n", mid, (long long)c->M);
      evtc_sb_printf(&b, "  %%all = reduce_mean(%%x%d) {axes=[0,1]} : f32[]\n", mid);
    }
    evtc_sb_printf(&b, "  output %%rsum\n  output %%csum\n  output %%csq\n  output %%cmax\n  output %%all\n");
  }
  evtc_sb_printf(&b, "}\n");
  return b.s;
}

/* What the CUDA backend accepts as a kernel (mirrors cuda_backend.c's supports()). */
static bool accepts(const evtc_kernel *k, void *ctx) {
  char why[256];
  evtc_cuda_evt_plan pl;
  (void)ctx;
  if (k->kind == EVTC_ML_OPAQUE || k->kind == EVTC_ML_CONV || k->n_args > EVTC_CUDA_MAX_ARGS) return false;
  if (k->kind == EVTC_ML_GEMM)
    return evtc_cuda_gemm_use_evt(k, NULL, &pl, why, sizeof why) ||
           (evtc_cuda_gemm_fits(k, why, sizeof why) && evtc_kernel_visitor_fits(k, why, sizeof why));
  return evtc_kernel_visitor_fits(k, why, sizeof why);
}

/* BERT-Large's fc epilogue (coef 2): 1 + erf is emitted as 0.5 (1 + erf(0.70703125 w)) (cuda_evt_factors.c), the
 * factor that leaves GELU and its coefficient without a product before their stores. */
static void check_erf_factor(const evt_case *c, const char *src) {
  const char *call = strstr(src, "evtc_erf1p_scaledf<true>(");
  float fx = 0, k = 0;
  int w = 0;
  CHECK(call && sscanf(call, "evtc_erf1p_scaledf<true>(w%d, %ff, %ff,", &w, &fx, &k) == 3 && fx == 0.70703125f &&
            k == 0.5f,
        "%s: 1 + erf not emitted as 0.5 (1 + erf(0.70703125 w)): %.80s", c->name, call ? call : "(no call)");
}

/* The plan of g: every node in the GEMM kernel when accepts() takes that (a partitioner's best), else the greedy
 * plan under accepts(); for each kernel, emits its CUDA C as the backend does for an H200 into *src
 * (when src) and checks the GEMM kernel's path; returns the plan. */
static int32_t *plan_case(const evt_case *c, const evtc_graph *g, int *nk, evtc_sb *src) {
  int32_t *plan = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1)), all[1024];
  int n_all = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    plan[i] = evtc_op_is_leaf(g->nodes[i]->op) ? -1 : 0;
    if (plan[i] == 0 && n_all < 1024) all[n_all++] = i;
  }
  evtc_diag dd = {0};
  evtc_kernel *one = evtc_kernel_build(g, all, n_all, &dd);
  bool fused = one && accepts(one, NULL);
  evtc_kernel_free(one);
  CHECK(fused || !wants_evt(c) || c->reduce, "%s: the whole graph is not one evtc GEMM kernel: %s", c->name, dd.msg);
  *nk = 1;
  if (!fused) {
    free(plan);
    plan = evtc_plan_greedy(g, accepts, NULL, nk);
  }
  int gemms = 0;
  for (int t = 0; t < *nk; t++) {
    int32_t ids[512];
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes && n < 512; i++)
      if (plan[i] == t) ids[n++] = i;
    evtc_diag d = {0};
    evtc_kernel *k = evtc_kernel_build(g, ids, n, &d);
    CHECK(k && accepts(k, NULL), "%s: kernel %d is refused: %s", c->name, t, d.msg);
    if (!k || !accepts(k, NULL)) {
      evtc_kernel_free(k);
      continue;
    }
    snprintf(k->name, sizeof k->name, "k%d_%d", (int)(c - cases), t);
    evtc_cuda_evt_plan pl;
    char why[256] = "";
    bool evt = k->kind == EVTC_ML_GEMM && evtc_cuda_gemm_use_evt(k, NULL, &pl, why, sizeof why);
    if (k->kind == EVTC_ML_GEMM) {
      gemms++;
      CHECK(evt == wants_evt(c), "%s: GEMM kernel on %s (%s)", c->name, evt ? "evtc's GEMM" : "cuBLASLt", why);
      CHECK(!evt || (pl.prob.splits > 1) == wants_split(c), "%s: split-K into %d units a tile", c->name, pl.prob.splits);
      if (evt && c->reduce) {
        const int kinds = evtc_kernel_has_reduce(k, EVTC_VC_SCALAR) + evtc_kernel_has_reduce(k, EVTC_VC_ROW) +
                          evtc_kernel_has_reduce(k, EVTC_VC_COL);
        CHECK(kinds > 0 && *nk == 1, "%s: %d reduction kinds in evtc's GEMM epilogue, %d kernels (want all in one)",
              c->name, kinds, *nk);
      }
      /* the packed form on the sm_90a template, unless the bias is in the accumulators (pingpong tiles) */
      if (evt && !pl.cfg.sm80 && !pl.acc_bias)
        CHECK(pl.packed == (c->packed > 0), "%s: the epilogue %s packed bf16x2 arithmetic", c->name,
              pl.packed ? "computes in" : "does not compute in");
      if (!evt) printf("%s: cuBLASLt path: %s\n", c->name, why);
    }
    if (src) {
      evtc_sb_printf(src, "/* kernel %s: %d nodes */\n", k->name, k->n_nodes);
      if (evt) evtc_cuda_emit_evt(src, k, &pl);
      else if (k->kind == EVTC_ML_GEMM) evtc_cuda_emit_elementwise(src, k, "float");
      else if (evtc_kernel_flat_fits(k)) evtc_cuda_emit_elementwise(src, k, NULL);
      else {
        evtc_cuda_rows_plan rp = evtc_cuda_rows_plan_of(k, 132, 227 * 1024);
        evtc_cuda_emit_rows(src, k, &rp);
      }
    }
    evtc_kernel_free(k);
  }
  CHECK(gemms == 1, "%s: %d GEMM kernels", c->name, gemms);
  return plan;
}

/* Every case's kernels emitted as the backend does and compiled for arch (the current EVTC_GEMM's template). */
static void compile_only(const char *arch) {
  evtc_diag d = {0};
  bool nvrtc = evtc_cuda_nvrtc_get(&d) != NULL;
  if (!nvrtc) printf("no NVRTC (%s): the kernels are not compiled\n", d.msg);
  for (int i = 0; i < N_CASES; i++) {
    char *text = case_text(&cases[i]);
    evtc_graph *g = oracle_parse(text, cases[i].name);
    free(text);
    if (!g) continue;
    evtc_sb src = {0};
    evtc_cuda_emit_prelude(&src);
    int nk = 0;
    free(plan_case(&cases[i], g, &nk, &src));
    if (cases[i].coef == 2) check_erf_factor(&cases[i], src.s);
    if (nvrtc) {
      static const char *const opts[] = {"--std=c++17", "-lineinfo", "--diag-suppress=177,550"};
      evtc_cuda_cubin cubin = {0};
      evtc_diag cd = {0};
      CHECK(evtc_cuda_compile(src.s, cases[i].name, arch, opts, 3, &cubin, &cd) == EVTC_OK && cubin.size > 0,
            "%s: NVRTC for %s: %s", cases[i].name, arch, cd.msg);
      printf("%s: %d kernels compiled for %s (%s)\n", cases[i].name, nk, arch, cubin.cache_hit ? "cache hit" : "NVRTC");
      evtc_cuda_cubin_free(&cubin);
    }
    free(src.s);
    evtc_graph_free(g);
  }
}

static void run_case(const evt_case *c) {
  char *text = case_text(c);
  evtc_graph *g = oracle_parse(text, c->name);
  free(text);
  if (!g) return;
  int nk = 0;
  int32_t *plan = plan_case(c, g, &nk, NULL);
  evtc_cuda_gemm_counts before = evtc_cuda_gemm_counts_get();
  const double tol = c->f16 ? 4.0 / 2048 : 4.0 / 256;
  evtc_program *p = cpu_compare(g, plan, nk, tol, c->N, c->name);   /* labels in [0, N) */
  evtc_cuda_gemm_counts after = evtc_cuda_gemm_counts_get();
  CHECK(after.evt - before.evt == (wants_evt(c) ? 1 : 0) && after.cublaslt - before.cublaslt == (wants_evt(c) ? 0 : 1),
        "%s: GEMM kernels loaded: %d on evtc's GEMM, %d on cuBLASLt", c->name, after.evt - before.evt,
        after.cublaslt - before.cublaslt);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted == 0, "%s: %d kernels fell back to the interpreter", c->name, st.interpreted);
    CHECK(!wants_evt(c) || c->reduce || st.compiled == 1, "%s: %d kernels, not the one GEMM kernel", c->name,
          st.compiled);
    printf("%s: %d kernels (%s GEMM)\n", c->name, st.compiled, wants_evt(c) ? "evtc" : "cuBLASLt");
  }
  evtc_program_free(p);
  free(plan);
  evtc_graph_free(g);
}

/* The split-K choice (cuda_gemm.c): a weight gradient of few output tiles over a long K goes to cuBLASLt, which
 * splits K, or with EVTC_GEMM_SPLIT_K=1 (on) splits K on evtc's GEMM into the fewest units that fill 90 % of their
 * waves of 132 SMs (GPT-2's 768 x 768: 18 tiles of 128 x 256, 7 units each; its 3072 x 768: 72 tiles, 5 each); a
 * GEMM of many tiles, or of a short K, is not split. */
static void split_k_choice(bool on) {
  static const struct {
    int64_t m, n, k;
    int splits;   /* 0: cuBLASLt */
  } shapes[] = {{768, 768, 8192, 7}, {3072, 768, 8192, 5}, {4096, 1024, 16384, 1}, {768, 768, 512, 1}};
  if (on) setenv("EVTC_GEMM_SPLIT_K", "1", 1);
  else unsetenv("EVTC_GEMM_SPLIT_K");
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "graph dw {\n  %%x = input() : bf16[%lld,%lld]\n  %%dy = input() : bf16[%lld,%lld]\n"
             "  %%w = param() : bf16[%lld,%lld]\n  %%g = matmul(%%dy, %%x) {trans_a=1} : bf16[%lld,%lld]\n"
             "  %%c = const() {value=0.5} : bf16[]\n  %%s = mul(%%g, %%c) : bf16[%lld,%lld]\n"
             "  %%u = sub(%%w, %%s) : bf16[%lld,%lld]\n  output %%u\n}\n",
             (long long)shapes[i].k, (long long)shapes[i].n, (long long)shapes[i].k, (long long)shapes[i].m,
             (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].m, (long long)shapes[i].n,
             (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].m, (long long)shapes[i].n);
    evtc_graph *g = oracle_parse(text, "dw");
    if (!g) continue;
    int32_t ids[3] = {evtc_graph_find(g, "g")->id, evtc_graph_find(g, "s")->id, evtc_graph_find(g, "u")->id};
    evtc_diag d = {0};
    evtc_kernel *k = evtc_kernel_build(g, ids, 3, &d);
    CHECK(k != NULL, "split-K %lldx%lldx%lld: %s", (long long)shapes[i].m, (long long)shapes[i].n,
          (long long)shapes[i].k, d.msg);
    evtc_cuda_evt_plan pl;
    char why[256] = "";
    const bool evt = k && evtc_cuda_gemm_use_evt(k, NULL, &pl, why, sizeof why);
    const int want = (!on || cluster_pass()) && shapes[i].splits > 1 ? 0 : shapes[i].splits, got = evt ? (pl.prob.splits > 1 ? pl.prob.splits : 1) : 0;
    CHECK(k && got == want && (evt || strstr(why, "cuBLASLt splits K")), "split-K %lldx%lldx%lld%s: %s, %d units a tile (%s)",
          (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].k, on ? " (EVTC_GEMM_SPLIT_K=1)" : "",
          evt ? "evtc's GEMM" : "cuBLASLt", got, why);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
  unsetenv("EVTC_GEMM_SPLIT_K");
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setenv("EVTC_GEMM", "evtc", 1);          /* the path under test (the default; EVTC_GEMM=cublaslt would skip it) */
  oracle_sum_walk = true;
  const char *cfg = getenv("EVTC_GEMM_CONFIG");
  printf("tile config %s\n", cfg && *cfg ? cfg : "the plan's");
  split_k_choice(false);
  split_k_choice(true);
  setenv("EVTC_GEMM_SPLIT_K", "1", 1);     /* the cases' split-K path (off by default: cuda_gemm.c) */
  evtc_diag d = {0};
  oracle_be = evtc_backend_cuda(&d);
  const bool sm80_too = config_fits_sm80();
  if (!sm80_too) printf("no sm_80 pass: the tile config does not build on the sm_80 template\n");
  if (!oracle_be) {
    compile_only("sm_90a");
    setenv("EVTC_GEMM", "sm80", 1);
    if (sm80_too) compile_only("sm_80");
    return gpu_skip(d.msg);
  }
  for (int i = 0; i < N_CASES; i++) run_case(&cases[i]);
  /* the bf16 aux loads (%resh) again through registers, as without the TMA tile (cuda_emit_evt.c) */
  setenv("EVTC_EVT_TMA_AUX", "0", 1);
  for (int i = 0; i < N_CASES; i++)
    if (cases[i].want_evt && cases[i].chain >= 6) run_case(&cases[i]);
  unsetenv("EVTC_EVT_TMA_AUX");
  /* every case again on the sm_80 template (on an sm_8x GPU the runs above already were) */
  if (sm80_too) {
    printf("== EVTC_GEMM=sm80: the sm_80 template\n");
    setenv("EVTC_GEMM", "sm80", 1);
    for (int i = 0; i < N_CASES; i++) run_case(&cases[i]);
  }
  return check_summary();
}
