/* test_gpu_kernels.c -- the CUDA backend against the float64 interpreter.
 *
 * Every kernel family and row scheme of the CUDA emitters on fresh random
 * inputs with NaN-poisoned outputs (cpu_oracle.h with the CUDA backend):
 * elementwise chains with broadcasts, views, casts, one-hot, where and
 * dropout; rows kernels with a warp per row (<= 512 columns), a block per
 * row keeping the row in registers (<= 16 columns per thread), in shared
 * memory (20000 columns) and re-reading it (70000 columns); reductions
 * over rows and over everything (partial slots + finishing kernel);
 * cuBLASLt GEMMs (transposed operands, batches with broadcast, f64) with
 * epilogues; whole training steps (forward, backward, SGD / AdamW) of
 * examples/mlp.evt and a dropout + residual + layernorm block; and the
 * run-time error flag (a label out of range) naming its kernel.  Without a
 * GPU it prints SKIPPED and exits 77 (a CTest skip, label gpu).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"

static const double TOL = 2e-5;

static const char ew_text[] =
    "graph ew {\n"
    "  %a = input() : f32[333,517]\n  %b = input() : f32[517]\n  %c = input() : f32[333,1]\n"
    "  %e1 = add(%a, %b) : f32[333,517]\n  %e2 = mul(%e1, %c) : f32[333,517]\n  %e3 = gelu(%e2) : f32[333,517]\n"
    "  %dp = dropout(%e3) {p=0.3, seed=5} : f32[333,517]\n  %sg = sigmoid(%dp) : f32[333,517]\n"
    "  %pm = permute(%a) {perm=[1,0]} : f32[517,333]\n  %pr = tanh(%pm) : f32[517,333]\n"
    "  %lab = input() : i64[333]\n  %oh = one_hot(%lab) {depth=517} : f32[333,517]\n  %ohm = mul(%oh, %a) : f32[333,517]\n"
    "  %ci = cast(%a) {dtype=i32} : i32[333,517]\n  %cmp = gt(%a, %e1) : bool[333,517]\n"
    "  %wh = where(%cmp, %a, %e3) : f32[333,517]\n  %d = input() : f64[1000]\n  %de = exp(%d) : f64[1000]\n"
    "  output %sg\n  output %pr\n  output %ohm\n  output %ci\n  output %wh\n  output %de\n"
    "}\n";

/* Softmax, log-softmax, layernorm, cross-entropy and MSE at one width. */
#define ROWS_TEXT(R, C)                                                                                           \
  "graph rows {\n"                                                                                                \
  "  %a = input() : f32[" #R "," #C "]\n  %a2 = input() : f32[" #R "," #C "]\n"                                   \
  "  %sm = softmax(%a) : f32[" #R "," #C "]\n  %ls = log_softmax(%a2) {axis=1} : f32[" #R "," #C "]\n"             \
  "  %g = input() : f32[" #C "]\n  %be = input() : f32[" #C "]\n"                                                 \
  "  %ln = layernorm(%a, %g, %be) : f32[" #R "," #C "]\n"                                                         \
  "  %lab = input() : i64[" #R "]\n  %ce = cross_entropy(%a2, %lab) : f32[]\n  %ms = mse(%a, %a2) : f32[]\n"      \
  "  %rs0 = reduce_sum(%a) {axes=[0]} : f32[" #C "]\n  %rmax = reduce_max(%a2) {axes=[1]} : f32[" #R "]\n"        \
  "  %rall = reduce_mean(%a2) : f32[]\n  %rmin = reduce_min(%a) {axes=[0]} : f32[" #C "]\n"                       \
  "  %dp = dropout(%a) {p=0.5, seed=11} : f32[" #R "," #C "]\n  %dps = reduce_sum(%dp) {axes=[1]} : f32[" #R "]\n" \
  "  output %sm\n  output %ls\n  output %ln\n  output %ce\n  output %ms\n  output %rs0\n  output %rmax\n"         \
  "  output %rall\n  output %rmin\n  output %dps\n"                                                               \
  "}\n"

static const char gemm_text[] =
    "graph gemm {\n"
    "  %x = input() : f32[33,67]\n  %w = param() : f32[67,129]\n  %b = param() : f32[129]\n"
    "  %h = matmul(%x, %w) : f32[33,129]\n  %hb = add(%h, %b) : f32[33,129]\n  %hr = relu(%hb) : f32[33,129]\n"
    "  %plain = matmul(%x, %w) : f32[33,129]\n"
    "  %xt = input() : f32[67,5]\n  %w2 = input() : f32[129,67]\n"
    "  %m2 = matmul(%xt, %w2) {trans_a=1, trans_b=1} : f32[5,129]\n"
    "  %ba = input() : f32[3,33,67]\n  %bm = batch_matmul(%ba, %w) : f32[3,33,129]\n  %bt = tanh(%bm) : f32[3,33,129]\n"
    "  %p = input() : f32[2,1,5,7]\n  %q = input() : f32[3,7,9]\n  %pq = batch_matmul(%p, %q) : f32[2,3,5,9]\n"
    "  %d1 = input() : f64[17,67]\n  %d2 = input() : f64[67,17]\n  %dm = matmul(%d1, %d2) : f64[17,17]\n"
    "  output %hr\n  output %plain\n  output %m2\n  output %bt\n  output %pq\n  output %dm\n"
    "}\n";

static const char block_text[] =
    "graph block {\n"
    "  %x = input() : f32[64,1024]\n  %res = input() : f32[64,1024]\n"
    "  %g = param() {init=\"ones\"} : f32[1024]\n  %b = param() {init=\"zeros\"} : f32[1024]\n"
    "  %w = param() : f32[1024,10]\n  %y = input() : i64[64]\n"
    "  %d = dropout(%x) {p=0.1, seed=9} : f32[64,1024]\n  %r = add(%d, %res) : f32[64,1024]\n"
    "  %ln = layernorm(%r, %g, %b) : f32[64,1024]\n  %z = matmul(%ln, %w) : f32[64,10]\n"
    "  %loss = cross_entropy(%z, %y) : f32[]\n  output %loss\n  loss %loss\n"
    "}\n";

/* g on the GPU vs the interpreter; want_interpreted: kernels allowed to fall back. */
static void compare(const char *text, const char *name, int64_t int_hi, double tol) {
  evtc_graph *g = oracle_parse(text, name);
  if (!g) return;
  evtc_program *p = cpu_compare(g, NULL, 0, tol, int_hi, name);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted == 0, "%s: %d kernels fell back to the interpreter", name, st.interpreted);
    printf("%s: %d kernels on the GPU\n", name, st.compiled);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

static void train(evtc_graph *fwd, evtc_optimizer kind, int64_t int_hi, const char *what) {
  evtc_optim_config opt = evtc_optim_default(kind);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &opt, &d);
  CHECK(joint != NULL, "%s: autodiff: %s", what, d.msg);
  if (joint) cpu_train_compare(joint, 3, 1e-4, int_hi, what);
  evtc_graph_free(joint);
}

/* A label out of range raises the kernel's error flag; the message names the kernel. */
static void test_error_flag(void) {
  evtc_graph *g = oracle_parse(ROWS_TEXT(8, 40), "bad-label");
  if (!g) return;
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, oracle_be, NULL, &d);
  CHECK(p != NULL, "bad-label: %s", d.msg);
  if (p) {
    double labels[8] = {0, 1, 2, 3, 4, 5, 6, 400};
    evtc_program_set(p, evtc_graph_find(g, "lab"), labels);
    evtc_status s = evtc_program_run(p, 0, &d);
    CHECK(s == EVTC_ERR_RUNTIME && strstr(d.msg, "kernel k") && strstr(d.msg, "out of range"),
          "bad-label: status %d: %s", s, d.msg);
    evtc_diag d2 = {0};
    labels[7] = 7;
    evtc_program_set(p, evtc_graph_find(g, "lab"), labels);
    CHECK(evtc_program_run(p, 0, &d2) == EVTC_OK, "bad-label: the flag is cleared: %s", d2.msg);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

int main(int argc, char **argv) {
  evtc_diag d = {0};
  oracle_be = evtc_backend_cuda(&d);
  if (!oracle_be) {
    printf("SKIPPED: %s\n", d.msg);
    return 77;
  }
  compare(ew_text, "elementwise", 517, TOL);
  compare(ROWS_TEXT(37, 300), "rows-warp-300", 300, TOL);
  compare(ROWS_TEXT(29, 3000), "rows-block-regs-3000", 3000, TOL);
  compare(ROWS_TEXT(5, 20000), "rows-block-smem-20000", 20000, 1e-4);
  compare(ROWS_TEXT(3, 70000), "rows-block-reread-70000", 70000, 1e-4);
  compare(ROWS_TEXT(3000, 40), "rows-warp-many-40", 40, TOL);
  compare(gemm_text, "gemm", 3, 1e-4);
  test_error_flag();
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/examples/mlp.evt", argc > 1 ? argv[1] : ".");
  evtc_graph *mlp = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(mlp != NULL, "%s: %s", path, err);
  if (mlp) {
    train(mlp, EVTC_OPTIM_SGD, 10, "mlp.evt with sgd");
    train(mlp, EVTC_OPTIM_ADAMW, 10, "mlp.evt with adamw");
    evtc_graph_free(mlp);
  }
  evtc_graph *blk = oracle_parse(block_text, "block");
  if (blk) {
    train(blk, EVTC_OPTIM_SGD, 10, "dropout+residual+layernorm block with sgd");
    evtc_graph_free(blk);
  }
  return check_summary();
}
