/* test_rows_online.c -- which CUDA rows kernels finish a row's max and its
 * sum of exponentials in one round (src/backend/cuda/cuda_emit_rows.c's
 * decide_online), checked on the CPU in their emitted source: no GPU needed.
 *
 * A softmax over 32000 f32 columns (1024 threads a row), one over bf16
 * values (held as floats in the kernel) and a cross-entropy of bf16 logits
 * in f32 math take the max in one pass and the sum of
 * e^(x - max) in the next: their kernels run the sum's pass right after the
 * max's with each warp's own max, combine the warps' pairs in one round
 * (evtc_warp_reduce_lse) and so wait at one barrier a row where
 * EVTC_CUDA_ONLINE=0 waits at two.  Not where the max is also stored (its
 * store would see a warp's max), where the sum's pass finishes another
 * reduction of the shifted values, or where a row is one warp's (no barrier
 * to save).  test_gpu_kernels runs these kernels, and the same ones with
 * EVTC_CUDA_ONLINE=0, against the interpreter on the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "rows_emit.h"

/* Barriers in the main kernel's source (up to NAME_fin). */
static int barriers(const char *src) {
  const char *end = strstr(src, "_fin(");
  return count_in(src, end ? end : src + strlen(src), "__syncthreads();");
}

/* The kernel of graph text t emitted for an H200 with EVTC_CUDA_ONLINE as `online` (NULL: unset); to free. */
static char *emit_text(const char *t, const char *what, const char *online) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(t, what, &g);
  if (!k) return NULL;
  evtc_cuda_rows_plan pl;
  char *src = rows_emit_h200_with(k, "online", &pl, "EVTC_CUDA_ONLINE", online);
  evtc_kernel_free(k);
  evtc_graph_free(g);
  return src;
}

/* Kernel t finishes its max and sum online by default, with one barrier a row fewer than with EVTC_CUDA_ONLINE=0. */
static void check_online(const char *t, const char *what) {
  char *on = emit_text(t, what, NULL), *off = emit_text(t, what, "0");
  CHECK(on && strstr(on, "evtc_warp_reduce_lse(om, os);"), "%s: not finished online", what);
  CHECK(off && !strstr(off, "evtc_warp_reduce_lse(om, os);"), "%s: online under EVTC_CUDA_ONLINE=0", what);
  if (on && off)
    CHECK(barriers(on) + 1 == barriers(off), "%s: %d barriers online, %d not", what, barriers(on), barriers(off));
  free(on);
  free(off);
}

/* Kernel t keeps its max's own round. */
static void check_not_online(const char *t, const char *what) {
  char *src = emit_text(t, what, NULL);
  CHECK(src && !strstr(src, "evtc_warp_reduce_lse(om, os);"), "%s: finished online", what);
  free(src);
}

static const char softmax_f32[] =
    "graph sm {\n  %x = input() : f32[64,32000]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %s = sub(%x, %m) : f32[64,32000]\n  %e = exp(%s) : f32[64,32000]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n  %p = div(%e, %z) : f32[64,32000]\n"
    "  output %p\n}\n";

/* f32 math on bf16 logits: the log-softmax's picked sum and the logits' bf16 gradient */
static const char ce_f32_of_bf16[] =
    "graph ce {\n  %x = input() : bf16[64,32000]\n  %lab = input() : i64[64]\n"
    "  %xf = cast(%x) {dtype=f32} : f32[64,32000]\n"
    "  %m = reduce_max(%xf) {axes=[1], keepdims=1} : f32[64,1]\n  %s = sub(%xf, %m) : f32[64,32000]\n"
    "  %e = exp(%s) : f32[64,32000]\n  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %lse = log(%z) : f32[64,1]\n  %lsm = sub(%s, %lse) : f32[64,32000]\n"
    "  %oh = one_hot(%lab) {depth=32000, dtype=f32, checked=1} : f32[64,32000]\n"
    "  %pk = mul(%lsm, %oh) : f32[64,32000]\n  %psum = reduce_sum(%pk) : f32[]\n"
    "  %t0 = div(%e, %z) : f32[64,32000]\n  %t1 = sub(%t0, %oh) : f32[64,32000]\n"
    "  %g = cast(%t1) {dtype=bf16} : bf16[64,32000]\n  output %psum\n  output %g\n}\n";

static const char max_stored[] =
    "graph sm {\n  %x = input() : f32[64,32000]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %s = sub(%x, %m) : f32[64,32000]\n  %e = exp(%s) : f32[64,32000]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n  %p = div(%e, %z) : f32[64,32000]\n"
    "  output %p\n  output %m\n}\n";

static const char two_sums[] =
    "graph sm {\n  %x = input() : f32[64,32000]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %s = sub(%x, %m) : f32[64,32000]\n  %e = exp(%s) : f32[64,32000]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n  %q = mul(%s, %s) : f32[64,32000]\n"
    "  %v = reduce_sum(%q) {axes=[1], keepdims=1} : f32[64,1]\n  %p = div(%e, %z) : f32[64,32000]\n"
    "  %w = mul(%p, %v) : f32[64,32000]\n  output %w\n}\n";

static const char warp_rows[] =
    "graph sm {\n  %x = input() : f32[64,256]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : f32[64,1]\n"
    "  %s = sub(%x, %m) : f32[64,256]\n  %e = exp(%s) : f32[64,256]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : f32[64,1]\n  %p = div(%e, %z) : f32[64,256]\n"
    "  output %p\n}\n";

static const char softmax_bf16[] =
    "graph sm {\n  %x = input() : bf16[64,32000]\n  %m = reduce_max(%x) {axes=[1], keepdims=1} : bf16[64,1]\n"
    "  %s = sub(%x, %m) : bf16[64,32000]\n  %e = exp(%s) : bf16[64,32000]\n"
    "  %z = reduce_sum(%e) {axes=[1], keepdims=1} : bf16[64,1]\n  %p = div(%e, %z) : bf16[64,32000]\n"
    "  output %p\n}\n";

int main(void) {
  check_online(softmax_f32, "f32 softmax 64x32000");
  check_online(softmax_bf16, "bf16 softmax 64x32000");
  check_online(ce_f32_of_bf16, "f32 cross-entropy of bf16 logits 64x32000");
  check_not_online(max_stored, "softmax storing its max");
  check_not_online(two_sums, "softmax with a second sum of the shifted values");
  check_not_online(warp_rows, "softmax over 256 columns (a warp a row)");

  return check_summary();
}
