/* test_cpu_half.c -- f16 and bf16 storage with f32 math on the CPU backend.
 *
 * f16 / bf16 buffers hold 2-byte elements; kernels widen them to float at
 * loads and round to nearest even at stores and casts (cpu_visitor.c).
 * Exact checks where the kernel must give the interpreter's bits
 * (half_oracle.h: 2-byte set/get, all 65536 bit patterns, casts at ties,
 * casts a double rounding would get wrong).  Tolerance checks against the
 * float64 interpreter on fresh random inputs with poisoned outputs:
 * elementwise chains with broadcasts, rows kernels (softmax, log-softmax,
 * layernorm, reductions), an f32 GEMM with a bf16 epilogue, bf16 / f16
 * GEMMs (operands widened to f32 by the packers: every layout, batches, a
 * K past the KC block, an implicit-GEMM conv2d) and a cross-entropy
 * forward + backward on bf16 logits cast to f32.  There the
 * interpreter rounds every op's output to its dtype while a fused kernel
 * keeps f32 inside and rounds only at its stores, so results differ by a
 * few roundings of relative size 2^-8 (bf16) or 2^-11 (f16) each: the
 * tolerances below allow about four.  Pad, concat, gather and embedding
 * move 2-byte values and must be exact; scatter_add sums them in f32.  A refusal (bf16 maxpool2d) names
 * its reason and runs in the interpreter.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"
#include "half_oracle.h"
#include "kernel/kernel.h"

/* about four roundings of each format, relative (cpu_compare: |got - want| <= tol (1 + |want|)) */
static const double TOL_BF16 = 4.0 / 256, TOL_F16 = 4.0 / 2048;

/* where compares loaded values: a computed one is f32 in the kernel but rounded in the interpreter */
#define EW_TEXT(T)                                                                                               \
  "graph ew {\n  %a = input() : " T "[67,129]\n  %b = input() : " T "[129]\n  %c = input() : " T "[67,1]\n"     \
  "  %s = const() {value=0.3} : " T "[]\n"                                                                      \
  "  %e1 = add(%a, %b) : " T "[67,129]\n  %e2 = mul(%e1, %c) : " T "[67,129]\n  %e3 = gelu(%e2) : " T "[67,129]\n" \
  "  %e4 = sigmoid(%e3) : " T "[67,129]\n  %e5 = mul(%e4, %s) : " T "[67,129]\n"                              \
  "  %cmp = gt(%a, %b) : bool[67,129]\n  %wh = where(%cmp, %a, %e3) : " T "[67,129]\n"                        \
  "  %pm = permute(%a) {perm=[1,0]} : " T "[129,67]\n  %ex = exp(%pm) : " T "[129,67]\n"                        \
  "  %f = cast(%e2) {dtype=f32} : f32[67,129]\n  %g = tanh(%f) : f32[67,129]\n"                                 \
  "  %back = cast(%g) {dtype=" T "} : " T "[67,129]\n"                                                         \
  "  output %e5\n  output %wh\n  output %ex\n  output %g\n  output %back\n}\n"

/* An f32 GEMM whose epilogue loads and stores bf16 (the CPU GEMM itself is f32 / f64 only). */
static const char gemm_epilogue_text[] =
    "graph ge {\n  %x = input() : f32[33,67]\n  %w = input() : f32[67,129]\n  %b = input() : bf16[129]\n"
    "  %h = matmul(%x, %w) : f32[33,129]\n  %hb = cast(%h) {dtype=bf16} : bf16[33,129]\n"
    "  %y = add(%hb, %b) : bf16[33,129]\n  %z = relu(%y) : bf16[33,129]\n  output %z\n}\n";

/* GEMMs of 2-byte operands: a linear layer with bias + GELU (trans_b, K past the KC block), trans_a, a batched
 * product with a broadcast B, and a grouped, strided conv2d; T is bf16 or f16. */
#define HALF_GEMM_TEXT(T)                                                                                         \
  "graph hg {\n  %x = input() : " T "[37,300]\n  %w = input() : " T "[129,300]\n  %b = input() : " T "[129]\n"    \
  "  %h = matmul(%x, %w) {trans_b=1} : " T "[37,129]\n  %hb = add(%h, %b) : " T "[37,129]\n"                      \
  "  %y = gelu(%hb) : " T "[37,129]\n"                                                                           \
  "  %xt = input() : " T "[67,33]\n  %w2 = input() : " T "[67,17]\n"                                             \
  "  %m2 = matmul(%xt, %w2) {trans_a=1} : " T "[33,17]\n"                                                        \
  "  %ba = input() : " T "[3,17,67]\n  %bw = input() : " T "[67,129]\n"                                         \
  "  %bm = batch_matmul(%ba, %bw) : " T "[3,17,129]\n  %bt = tanh(%bm) : " T "[3,17,129]\n"                      \
  "  %cx = input() : " T "[2,4,9,11]\n  %cw = input() : " T "[6,2,3,3]\n"                                       \
  "  %cy = conv2d(%cx, %cw) {stride=[2,1], padding=[1,0,1,2], groups=2} : " T "[2,6,5,11]\n"                     \
  "  output %y\n  output %m2\n  output %bt\n  output %cy\n}\n"

/* g compiled, on random inputs, vs the interpreter; every kernel compiled. */
static void compare(const char *text, const char *what, double tol, int64_t int_hi) {
  evtc_graph *g = oracle_parse(text, what);
  if (!g) return;
  evtc_program *p = cpu_compare(g, NULL, 0, tol, int_hi, what);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted == 0, "%s: %d of %d kernels ran in the interpreter", what, st.interpreted, st.kernels);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* Cross-entropy on bf16 logits cast to f32, forward and backward (the gradient is bf16). */
static void test_cross_entropy(void) {
  evtc_graph *fwd = oracle_parse("graph ce {\n  %x = input() : bf16[37,1000]\n  %lab = input() : i64[37]\n"
                                 "  %xf = cast(%x) {dtype=f32} : f32[37,1000]\n"
                                 "  %loss = cross_entropy(%xf, %lab) : f32[]\n  output %loss\n  loss %loss\n}\n",
                                 "ce");
  if (!fwd) return;
  evtc_optim_config none = evtc_optim_default(EVTC_OPTIM_NONE);
  evtc_diag d = {0};
  const char *wrt[] = {"x"};
  evtc_graph *g = evtc_autodiff(fwd, wrt, 1, &none, &d);
  CHECK(g != NULL, "ce: autodiff: %s", d.msg);
  if (g) {
    bool bf16_grad = false;
    for (int k = 0; k < g->n_outputs; k++) bf16_grad |= g->outputs[k].node->type.dtype == EVTC_BF16;
    CHECK(bf16_grad, "ce: the gradient wrt bf16 logits is bf16");
    evtc_program *p = cpu_compare(g, NULL, 0, TOL_BF16, 1000, "cross-entropy fwd+bwd on bf16 logits");
    if (p) CHECK(evtc_program_get_stats(p).interpreted == 0, "ce: every kernel compiled");
    evtc_program_free(p);
  }
  evtc_graph_free(g);
  evtc_graph_free(fwd);
}

/* The ops that only move values (pad with a fill value that is not a bf16 / f16 number as given, concat, gather,
 * embedding), on 2-byte storage: exact, compiled. */
#define HALF_MOVES_TEXT(T)                                                                                        \
  "graph mv {\n  %x = input() : " T "[2,3,7,9]\n  %x2 = input() : " T "[2,2,7,9]\n"                               \
  "  %pd = pad(%x) {pads=[0,1,2,0,0,0,1,3], interior=[0,0,1,0], value=0.3} : " T "[2,4,16,12]\n"                 \
  "  %cat = concat(%x, %x2) {axis=1} : " T "[2,5,7,9]\n"                                                        \
  "  %tab = input() : " T "[11,5]\n  %ix = input() : i64[3,4]\n"                                               \
  "  %ga = gather(%tab, %ix) : " T "[3,4,5]\n  %gb = gather(%x, %ix) {axis=1} : " T "[2,3,4,7,9]\n"              \
  "  %em = embedding(%tab, %ix) : " T "[3,4,5]\n"                                                               \
  "  output %pd\n  output %cat\n  output %ga\n  output %gb\n  output %em\n}\n"

/* scatter_add (an embedding's gradient) on f16 / bf16: repeated indices summed in f32, rounded once. */
#define HALF_SCATTER_TEXT(T)                                                                                      \
  "graph sc {\n  %u = input() : " T "[12,5]\n  %i = input() : i64[12]\n"                                        \
  "  %y = scatter_add(%u, %i) {size=7} : " T "[7,5]\n  %u2 = input() : " T "[2,12,3]\n"                         \
  "  %y2 = scatter_add(%u2, %i) {size=7, axis=1} : " T "[2,7,3]\n  output %y\n  output %y2\n}\n"

/* What the CPU backend refuses says why, and runs in the interpreter (exactly). */
static void test_refusals(void) {
  evtc_graph *g = oracle_parse("graph r {\n  %a = input() : bf16[2,3,7,9]\n"
                               "  %p = maxpool2d(%a) {kernel=[3,2], stride=[2,2], padding=[1,0,1,1]} : bf16[2,3,4,5]\n"
                               "  output %p\n}\n", "refuse");
  if (!g) return;
  static const char *const names[] = {"p"}, *const reasons[] = {"bf16 values in maxpool2d"};
  for (int i = 0; i < 1; i++) {
    int32_t id = evtc_graph_find(g, names[i])->id;
    evtc_diag d = {0};
    evtc_kernel *k = evtc_kernel_build(g, &id, 1, &d);
    char why[128] = "";
    CHECK(k && !evtc_backend_cpu()->supports(evtc_backend_cpu(), k, why, sizeof why) && strstr(why, reasons[i]),
          "refuse %%%s: '%s' (%s)", names[i], why, d.msg);
    evtc_kernel_free(k);
  }
  evtc_program *p = cpu_compare(g, NULL, 0, 0.0, 1, "refused bf16 node in the interpreter");
  if (p) CHECK(evtc_program_get_stats(p).interpreted == 1, "refuse: the node interpreted");
  evtc_program_free(p);
  evtc_graph_free(g);
}

int main(void) {
  char dir[] = "/tmp/evtc-cpu-half-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  half_exact_tests();
  compare(EW_TEXT("bf16"), "bf16 elementwise", TOL_BF16, 1);
  compare(EW_TEXT("f16"), "f16 elementwise", TOL_F16, 1);
  compare(HALF_ROWS_TEXT("bf16", 23, 300), "bf16 rows", TOL_BF16, 1);
  compare(HALF_ROWS_TEXT("f16", 23, 300), "f16 rows", TOL_F16, 1);
  compare(HALF_ROWS_TEXT("bf16", 1, 5000), "bf16 rows (one long row)", TOL_BF16, 1);
  compare(gemm_epilogue_text, "f32 GEMM with a bf16 epilogue", TOL_BF16, 1);
  compare(HALF_GEMM_TEXT("bf16"), "bf16 GEMMs", TOL_BF16, 1);
  compare(HALF_GEMM_TEXT("f16"), "f16 GEMMs", TOL_F16, 1);
  compare(HALF_MOVES_TEXT("bf16"), "bf16 pad, concat, gather, embedding", 0.0, 3);
  compare(HALF_MOVES_TEXT("f16"), "f16 pad, concat, gather, embedding", 0.0, 3);
  compare(HALF_SCATTER_TEXT("bf16"), "bf16 scatter_add", TOL_BF16, 7);
  compare(HALF_SCATTER_TEXT("f16"), "f16 scatter_add", TOL_F16, 7);
  test_cross_entropy();
  test_refusals();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
