/* test_rows_plain.c -- the plain vectors of a CUDA rows kernel
 * (src/backend/cuda/cuda_rows_plain.c), checked on the CPU: no GPU needed.
 *
 * GPT-2's masked cross-entropy (bf16 logits plus gemm-pad's mask, a step
 * of 0 below column 50257; log-softmax, the loss picked by the label's
 * one-hot, the logits' gradient): on a vector that the label misses and
 * that lies below the step, the masked logits are the loaded ones (kept
 * over them in shared memory: nothing to write back), the one-hot product
 * and its sum vanish and the gradient is the scaled softmax.  The facts
 * are checked node by node and in the emitted kernel, whose plain loops
 * must not round, write back or compare against the label.  A step with
 * no zero side folds nothing, and neither does a softmax with no one-hot
 * or step: their kernels keep one loop a pass.  A bf16 e^(a - max) is
 * emitted as one FFMA and the exp2 (evtc_exp_shiftf), an f32 one is not;
 * the row max's warp shuffles stay in f32 (exact for a max of floats).  An f32 cross-entropy of bf16 logits
 * packs its max through the widening, stores its bf16 gradient rounded once and scales it by the mean's power of
 * two in the row's factor.  test_gpu_kernels runs the
 * masked cross-entropy (300 x 50264, random labels: each row takes both
 * loops) against the interpreter on the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "kernel_values.h"
#include "rows_emit.h"
#include "step_const.h"

/* The kernel of the masked cross-entropy over 64 rows of 50264 columns, the mask a step from lo to hi at column
 * 50257 (its graph in *g), or NULL after a failed check. */
static evtc_kernel *ce_kernel(double lo, double hi, const char *what, evtc_graph **g) {
  evtc_sb b = {0};
  evtc_sb_printf(&b, "graph ce {\n  %%lp = input() : bf16[64,50264]\n  %%labels = input() : i64[64]\n");
  step_const_line(&b, "mask", "bf16", 50264, 50257, lo, hi, "50264");
  evtc_sb_printf(&b,
    "  %%y = add(%%lp, %%mask) : bf16[64,50264]\n"
    "  %%max = reduce_max(%%y) {axes=[1], keepdims=1} : bf16[64,1]\n  %%shift = sub(%%y, %%max) : bf16[64,50264]\n"
    "  %%exp = exp(%%shift) : bf16[64,50264]\n  %%sum = reduce_sum(%%exp) {axes=[1], keepdims=1} : bf16[64,1]\n"
    "  %%lse = log(%%sum) : bf16[64,1]\n  %%lsm = sub(%%shift, %%lse) : bf16[64,50264]\n"
    "  %%onehot = one_hot(%%labels) {depth=50264, dtype=bf16, checked=1} : bf16[64,50264]\n"
    "  %%picked = mul(%%lsm, %%onehot) : bf16[64,50264]\n  %%psum = reduce_sum(%%picked) : bf16[]\n"
    "  %%t0 = div(%%exp, %%sum) : bf16[64,50264]\n  %%t2 = sub(%%t0, %%onehot) : bf16[64,50264]\n"
    "  %%sc = const() {value=0.015625} : bf16[]\n  %%grad = mul(%%t2, %%sc) : bf16[64,50264]\n"
    "  output %%psum\n  output %%grad\n}\n");
  evtc_kernel *k = oracle_kernel(b.s, what, g);
  free(b.s);
  return k;
}

static const char softmax_f32_text[] =
    "graph sm {\n  %x = input() : f32[64,4096]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %s = sub(%x, %m) : f32[64,4096]\n  %e = exp(%s) : f32[64,4096]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n  %p = div(%e, %z) : f32[64,4096]\n"
    "  output %p\n}\n";

static const char softmax_text[] =
    "graph sm {\n  %x = input() : bf16[64,4096]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : bf16[64,1]\n"
    "  %s = sub(%x, %m) : bf16[64,4096]\n  %e = exp(%s) : bf16[64,4096]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : bf16[64,1]\n  %p = div(%e, %z) : bf16[64,4096]\n"
    "  output %p\n}\n";

/* The emitted kernel of k with the plan for an H200-sized device; to free. */
static char *emit(evtc_kernel *k) {
  evtc_cuda_rows_plan pl;
  return rows_emit_h200(k, "plain", &pl);
}

/* The text of the plain loop that starts at condition `cond` in src (up to its "} else {"), into buf. */
static bool plain_loop(const char *src, const char *cond, char *buf, size_t cap) {
  const char *at = src ? strstr(src, cond) : NULL;
  const char *end = at ? strstr(at, "} else {") : NULL;
  if (!end) return false;
  snprintf(buf, cap, "%.*s", (int)(end - at), at);
  return true;
}

static void test_facts(void) {
  evtc_graph *g;
  evtc_kernel *k = ce_kernel(0, -1.6947656946257677e38, "masked cross-entropy", &g);
  if (!k) return;
  bool *all = malloc((size_t)k->n_v);
  for (int i = 0; i < k->n_v; i++) all[i] = true;
  evtc_cuda_plain pf;
  bool any = evtc_cuda_plain_facts(k, all, 8, &pf);
  CHECK(any, "masked cross-entropy: no plain facts");
  if (any) {
    const int lp = value_of(k, "lp"), y = value_of(k, "y"), mask = value_of(k, "mask"), onehot = value_of(k, "onehot");
    const int picked = value_of(k, "picked"), t0 = value_of(k, "t0"), t2 = value_of(k, "t2"), lsm = value_of(k, "lsm");
    CHECK(lp >= 0 && y >= 0 && mask >= 0 && onehot >= 0 && picked >= 0 && t0 >= 0 && t2 >= 0 && lsm >= 0,
          "masked cross-entropy: a value not found");
    if (lp >= 0 && y >= 0 && mask >= 0 && onehot >= 0 && picked >= 0 && t0 >= 0 && t2 >= 0 && lsm >= 0) {
      CHECK(pf.fact[mask] == EVTC_PLAIN_ZERO, "the step below its depth: fact %d, not zero", pf.fact[mask]);
      CHECK(pf.fact[onehot] == EVTC_PLAIN_ZERO, "the one-hot off the label: fact %d, not zero", pf.fact[onehot]);
      CHECK(pf.fact[picked] == EVTC_PLAIN_ZERO, "the picked log-softmax: fact %d, not zero", pf.fact[picked]);
      CHECK(pf.fact[y] == EVTC_PLAIN_SAME && pf.same[y] == lp, "the masked logits: fact %d same %d, not the load %d",
            pf.fact[y], pf.same[y], lp);
      CHECK(pf.fact[t2] == EVTC_PLAIN_SAME && pf.same[t2] >= 0 && node_of(k, pf.same[t2]) == node_of(k, t0),
            "softmax minus one-hot: fact %d same %d, not the softmax", pf.fact[t2], pf.same[t2]);
      CHECK(pf.fact[lsm] == EVTC_PLAIN_NONE, "the log-softmax: fact %d, not computed", pf.fact[lsm]);
    }
    CHECK(strstr(pf.cond, "cb + 8 <= 50257") && strstr(pf.cond, ">= 8u"),
          "masked cross-entropy: condition [%s], not below the step and off the label", pf.cond);
    evtc_cuda_plain_free(&pf);
  }
  free(all);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

static void test_emitted(void) {
  evtc_graph *g;
  evtc_kernel *k = ce_kernel(0, -1.6947656946257677e38, "masked cross-entropy", &g);
  if (!k) return;
  char *src = emit(k);
  char loop[4096];
  bool below = plain_loop(src, "if (cb + 8 <= 50257) {", loop, sizeof loop);
  CHECK(below, "masked cross-entropy: no plain loop below the step");
  if (below)
    CHECK(!strstr(loop, "evtc_f2bf(") && !strstr(loop, "hw") && !strstr(loop, "50257LL ?"),
          "masked cross-entropy: the plain loop below the step rounds, writes back or computes the mask:\n%s", loop);
  bool off = plain_loop(src, ">= 8u) {", loop, sizeof loop);
  CHECK(off, "masked cross-entropy: no plain loop off the label");
  if (off)
    CHECK(!strstr(loop, " == e)") && strstr(loop, "sv") && !strstr(loop, "pa"),
          "masked cross-entropy: the plain loop off the label compares, sums the pick or stores nothing:\n%s", loop);
  CHECK(src && strstr(src, "= evtc_exp_shiftf(v"), "masked cross-entropy: e^(shift) not by evtc_exp_shiftf");
  /* a row of 50264 bf16 columns spans warps: the max is each warp's before the sum's pass (decide_online) */
  CHECK(src && strstr(src, " = evtc_warp_reducef<1>((float)acc"), "masked cross-entropy: the max's shuffles not in f32");
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* A bf16 row max over a load's vectors as they are: packed, two values a max.NaN.bf16x2 -- in the masked
 * cross-entropy's plain loop (the masked logits are the loaded ones there) and in a bf16 softmax's only loop. */
static void test_packed_max(void) {
  evtc_graph *g;
  evtc_kernel *k = ce_kernel(0, -1.6947656946257677e38, "masked cross-entropy", &g);
  if (k) {
    char *src = emit(k);
    char loop[4096];
    CHECK(plain_loop(src, "if (cb + 8 <= 50257) {", loop, sizeof loop) && strstr(loop, "evtc_comb_bf16x2<1>(acp") &&
              !strstr(loop, "evtc_combf<1>(acc"),
          "masked cross-entropy: the plain loop's max is not packed");
    free(src);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
  k = oracle_kernel(softmax_text, "bf16 softmax", &g);
  if (k) {
    char *src = emit(k);
    CHECK(src && strstr(src, "evtc_comb_bf16x2<1>(acp") && strstr(src, "uint32_t acp"), "bf16 softmax: the max is not packed");
    free(src);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

/* The issue-7 cross-entropy: bf16 logits, f32 math (the graph autodiff gives for cross_entropy(cast(x))), the
 * gradient rounded to bf16 and stored.  Its row max is packed through the exact widening; the gradient's store
 * rounds the f32 value once, not the rounded value again; and the plain loop's gradient, the softmax times the
 * power of two 1 / N, is one product by the row's 1 / sum times 1 / N. */
static const char ce_f32_text[] =
    "graph ce {\n  %x = input() : bf16[64,32000]\n  %lab = input() : i64[64]\n"
    "  %xf = cast(%x) {dtype=f32} : f32[64,32000]\n"
    "  %max = reduce_max(%xf) {axes=[1], keepdims=1} : f32[64,1]\n  %shift = sub(%xf, %max) : f32[64,32000]\n"
    "  %exp = exp(%shift) : f32[64,32000]\n  %sum = reduce_sum(%exp) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %lse = log(%sum) : f32[64,1]\n  %lsm = sub(%shift, %lse) : f32[64,32000]\n"
    "  %onehot = one_hot(%lab) {depth=32000, dtype=f32, checked=1} : f32[64,32000]\n"
    "  %picked = mul(%lsm, %onehot) : f32[64,32000]\n  %psum = reduce_sum(%picked) : f32[]\n"
    "  %t0 = div(%exp, %sum) : f32[64,32000]\n  %t2 = sub(%t0, %onehot) : f32[64,32000]\n"
    "  %sc = const() {value=0.015625} : f32[]\n  %grad = mul(%t2, %sc) : f32[64,32000]\n"
    "  %gb = cast(%grad) {dtype=bf16} : bf16[64,32000]\n  output %psum\n  output %gb\n}\n";

static void test_f32_cross_entropy(void) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(ce_f32_text, "f32 cross-entropy of bf16 logits", &g);
  if (!k) return;
  char *src = emit(k);
  const int grad = value_of(k, "grad"), gb = value_of(k, "gb"), ex = value_of(k, "exp");
  CHECK(grad >= 0 && gb >= 0 && ex >= 0, "f32 cross-entropy: a value not found");
  CHECK(src && strstr(src, "evtc_comb_bf16x2<1>(acp") && strstr(src, "uint32_t acp"),
        "f32 cross-entropy: the max of the widened logits is not packed");
  char want[96], twice[96];
  snprintf(want, sizeof want, ".v[e] = evtc_f2bf(v%d);", grad);
  snprintf(twice, sizeof twice, ".v[e] = evtc_f2bf(v%d);", gb);
  CHECK(src && strstr(src, want) && !strstr(src, twice), "f32 cross-entropy: the gradient's store lacks \"%s\" or has \"%s\"",
        want, twice);
  char loop[4096];
  bool off = plain_loop(src, ">= 8u) {", loop, sizeof loop);
  CHECK(off, "f32 cross-entropy: no plain loop off the label");
  snprintf(want, sizeof want, "float v%d = v%d * (v", grad, ex);
  if (off) CHECK(strstr(loop, want), "f32 cross-entropy: the plain loop's gradient is not \"%s...\":\n%s", want, loop);
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
  /* a scale that is no power of two would round differently: two products */
  char *text = strdup(ce_f32_text);
  memcpy(strstr(text, "value=0.015625"), "value=0.010000", 14);
  k = oracle_kernel(text, "f32 cross-entropy scaled by 0.01", &g);
  free(text);
  if (!k) return;
  src = emit(k);
  CHECK(src && !strstr(src, " * (v"), "f32 cross-entropy scaled by 0.01: the scale folded into the row's factor");
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* Kernel k's emitted source has none of `absent` and has `present` (when not NULL); k and g freed. */
static void check_source(evtc_kernel *k, evtc_graph *g, const char *what, const char *absent, const char *present) {
  if (!k) return;
  char *src = emit(k);
  CHECK(src && !strstr(src, absent) && (!present || strstr(src, present)), "%s: the source has \"%s\" or lacks \"%s\"",
        what, absent, present ? present : "");
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

int main(void) {
  test_facts();
  test_emitted();
  test_packed_max();
  test_f32_cross_entropy();
  evtc_graph *g;
  const char *what = "cross-entropy with a step of no zero side";
  evtc_kernel *k = ce_kernel(0.5, -3, what, &g);
  check_source(k, g, what, "50257) {", NULL);     /* no plain loop on the step */
  k = oracle_kernel(softmax_text, "bf16 softmax", &g);
  check_source(k, g, "bf16 softmax (nothing folds)", "} else {\n#pragma unroll", NULL);
  /* e^(a - max) by one FFMA and the exp2 only where the value is stored as bf16 (the rounded max log2 e's error) */
  k = oracle_kernel(softmax_f32_text, "f32 softmax", &g);
  check_source(k, g, "f32 softmax", "= evtc_exp_shiftf(v", "evtc_expf(v");
  return check_summary();
}
