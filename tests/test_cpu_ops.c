/* test_cpu_ops.c -- the CPU backend's templates of ops without a visitor
 * form (cpu_emit_opaque.c) against the float64 interpreter: pad, concat,
 * gather, embedding, scatter_add, max/avg pooling and their backward ops,
 * both conv2d backward ops (groups, stride, dilation, asymmetric padding),
 * training-mode batchnorm and its running statistics, reductions over
 * middle axes, batch-1 softmax / cross-entropy, and the attention family
 * (forward, log-sum-exp, the three backward ops; causal and not).  Fresh random inputs,
 * poisoned outputs, odd sizes; every node must run compiled (none in the
 * interpreter), under the greedy plan and one node per kernel.  Indices out
 * of range raise the same run-time error as in the interpreter.  The fusion
 * partitioners' plans (ilp, greedy, none) of these graphs and of the joint
 * AdamW graph of examples/mlp.evt build as planned -- no kernel split, none
 * interpreted -- and match the interpreter too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "runtime/program_plan.h"

static const double TOL = 2e-5;

static const char ops_text[] =
    "graph ops {\n"
    "  %x = input() : f32[2,3,7,9]\n  %x2 = input() : f32[2,2,7,9]\n"
    "  %pd = pad(%x) {pads=[0,1,2,0,0,0,1,3], interior=[0,0,1,0], value=0.5} : f32[2,4,16,12]\n"
    "  %cat = concat(%x, %x2) {axis=1} : f32[2,5,7,9]\n"
    "  %tab = input() : f32[11,5]\n  %ix = input() : i64[3,4]\n"
    "  %ga = gather(%tab, %ix) : f32[3,4,5]\n  %gb = gather(%x, %ix) {axis=1} : f32[2,3,4,7,9]\n"
    "  %em = embedding(%tab, %ix) : f32[3,4,5]\n  %sa = scatter_add(%ga, %ix) {size=6} : f32[6,5]\n"
    "  %ipd = pad(%ix) {pads=[1,0,0,2]} : i64[4,6]\n"
    "  %mp = maxpool2d(%x) {kernel=[3,2], stride=[2,2], padding=[1,0,1,1]} : f32[2,3,4,5]\n"
    "  %dmp = input() : f32[2,3,4,5]\n"
    "  %mpb = maxpool2d_backward(%dmp, %x) {kernel=[3,2], stride=[2,2], padding=[1,0,1,1]} : f32[2,3,7,9]\n"
    "  %ap = avgpool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1]} : f32[2,3,4,5]\n"
    "  %api = avgpool2d(%x) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1], count_include_pad=1} : f32[2,3,4,5]\n"
    "  %apb = avgpool2d_backward(%dmp) {kernel=[3,3], stride=[2,2], padding=[1,1,1,1], shape=[2,3,7,9]} : f32[2,3,7,9]\n"
    "  %dy = input() : f32[2,6,5,11]\n  %cw = input() : f32[6,2,3,3]\n  %cx = input() : f32[2,4,9,11]\n"
    "  %cbi = conv2d_backward_input(%dy, %cw) {stride=[2,1], padding=[1,0,1,2], groups=2, shape=[2,4,9,11]} : f32[2,4,9,11]\n"
    "  %cbw = conv2d_backward_weight(%cx, %dy) {stride=[2,1], padding=[1,0,1,2], groups=2, shape=[6,2,3,3]} : f32[6,2,3,3]\n"
    "  %dy2 = input() : f32[1,5,8,8]\n  %w2 = input() : f32[5,3,3,3]\n  %xx2 = input() : f32[1,3,8,8]\n"
    "  %cbi2 = conv2d_backward_input(%dy2, %w2) {padding=[2,2,2,2], dilation=[2,2], shape=[1,3,8,8]} : f32[1,3,8,8]\n"
    "  %cbw2 = conv2d_backward_weight(%xx2, %dy2) {padding=[2,2,2,2], dilation=[2,2], shape=[5,3,3,3]} : f32[5,3,3,3]\n"
    "  %g = input() : f32[3]\n  %be = input() : f32[3]\n  %rm = input() : f32[3]\n"
    "  %bn = batchnorm(%x, %g, %be) : f32[2,3,7,9]\n"
    "  %bnm = batchnorm_running_mean(%x, %rm) : f32[3]\n  %bnv = batchnorm_running_var(%x, %rm) {momentum=0.25} : f32[3]\n"
    "  %r1 = reduce_sum(%x) {axes=[1]} : f32[2,7,9]\n  %r2 = reduce_mean(%x) {axes=[0,2,3]} : f32[3]\n"
    "  %r3 = reduce_max(%x) {axes=[0,2], keepdims=1} : f32[1,3,1,9]\n  %r4 = reduce_min(%x) {axes=[1,3]} : f32[2,7]\n"
    "  %l1 = input() : f32[1,10]\n  %lab1 = input() : i64[1]\n"
    "  %sm1 = softmax(%l1) : f32[1,10]\n  %ce1 = cross_entropy(%l1, %lab1) : f32[]\n"
    "  %aq = input() : f32[2,3,5,16]\n  %ak = input() : f32[2,3,7,16]\n  %av = input() : f32[2,3,7,8]\n"
    "  %ado = input() : f32[2,3,5,8]\n"
    "  %at = attention(%aq, %ak, %av) {scale=0.25, causal=1} : f32[2,3,5,8]\n"
    "  %atn = attention(%aq, %ak, %av) {scale=0.25} : f32[2,3,5,8]\n"
    "  %al = attention_lse(%aq, %ak) {scale=0.25, causal=1} : f32[2,3,5]\n"
    "  %adq = attention_backward_q(%aq, %ak, %av, %at, %ado, %al) {scale=0.25, causal=1} : f32[2,3,5,16]\n"
    "  %adkv = attention_backward_kv(%aq, %ak, %av, %at, %ado, %al) {scale=0.25, causal=1} : f32[2,3,7,24]\n"
    "  output %pd\n  output %cat\n  output %ga\n  output %gb\n  output %em\n  output %sa\n  output %ipd\n"
    "  output %mp\n  output %mpb\n  output %ap\n  output %api\n  output %apb\n  output %cbi\n  output %cbw\n"
    "  output %cbi2\n  output %cbw2\n  output %bn\n  output %bnm\n  output %bnv\n  output %r1\n  output %r2\n"
    "  output %r3\n  output %r4\n  output %sm1\n  output %ce1\n"
    "  output %atn\n  output %adq\n  output %adkv\n"
    "}\n";

static void test_ops(void) {
  evtc_graph *g = oracle_parse(ops_text, "ops");
  if (!g) return;
  evtc_program *p = cpu_compare(g, NULL, 0, TOL, 3, "ops");
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted == 0 && st.compiled == st.kernels, "ops: %d of %d kernels interpreted", st.interpreted,
          st.kernels);
    evtc_program_free(p);
  }
  int nk;
  int32_t *plan = evtc_plan_single(g, &nk);
  p = cpu_compare(g, plan, nk, TOL, 3, "ops (one node per kernel)");
  if (p) CHECK(evtc_program_get_stats(p).interpreted == 0, "ops: none interpreted with one node per kernel");
  evtc_program_free(p);
  free(plan);
  /* a middle-axis reduction runs alone (OPAQUE); fused with its producer it is refused */
  int32_t ids[2] = {evtc_graph_find(g, "r1")->id, 0};
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, ids, 1, &d);
  CHECK(k && k->kind == EVTC_ML_OPAQUE, "a lone middle-axis reduce_sum is an opaque kernel: %s", d.msg);
  evtc_kernel_free(k);
  evtc_graph_free(g);

  g = oracle_parse("graph r {\n  %x = input() : f32[3,4,5]\n  %e = exp(%x) : f32[3,4,5]\n"
            "  %s = reduce_sum(%e) {axes=[1]} : f32[3,5]\n  output %s\n}\n", "refuse");
  if (!g) return;
  ids[0] = evtc_graph_find(g, "e")->id;
  ids[1] = evtc_graph_find(g, "s")->id;
  evtc_diag_clear(&d);
  k = evtc_kernel_build(g, ids, 2, &d);
  CHECK(!k && d.status == EVTC_ERR_UNSUPPORTED && strstr(d.msg, "%s (reduce_sum)"), "fused middle-axis reduce: %s",
        d.msg);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* Out-of-range indices: the same run-time error both ways (cpu_compare checks the statuses agree). */
static void test_index_errors(void) {
  static const char *texts[] = {
      "graph e1 {\n  %t = input() : f32[4,3]\n  %i = input() : i64[5]\n  %y = gather(%t, %i) : f32[5,3]\n  output %y\n}\n",
      "graph e2 {\n  %t = input() : f32[4,3]\n  %i = input() : i64[5]\n  %y = embedding(%t, %i) : f32[5,3]\n  output %y\n}\n",
      "graph e3 {\n  %u = input() : f32[5,3]\n  %i = input() : i64[5]\n  %y = scatter_add(%u, %i) {size=4} : f32[4,3]\n"
      "  output %y\n}\n"};
  for (int t = 0; t < 3; t++) {
    evtc_graph *g = oracle_parse(texts[t], "index");
    if (!g) continue;
    evtc_program_free(cpu_compare(g, NULL, 0, TOL, 1000000, "index out of range"));
    evtc_graph_free(g);
  }
}

/* Each partitioner's plan of g runs as planned and matches the interpreter. */
static void plans_of(const evtc_graph *g, const char *what, int64_t int_hi) {
  static const char *const names[] = {"ilp", "greedy", "none"};
  for (int i = 0; i < 3; i++) {
    evtc_diag d = {0};
    int nk = 0;
    int32_t *plan = evtc_program_plan(g, names[i], evtc_backend_cpu(), &nk, NULL, &d);
    CHECK(plan != NULL && nk > 0, "%s: %s plan: %s", what, names[i], d.msg);
    if (!plan) continue;
    char label[96];
    snprintf(label, sizeof label, "%s (%s plan)", what, names[i]);
    evtc_program *p = cpu_compare(g, plan, nk, TOL, int_hi, label);
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      CHECK(st.splits == 0 && st.interpreted == 0 && st.kernels == nk, "%s: %d kernels planned, %d run, %d split, %d interpreted",
            label, nk, st.kernels, st.splits, st.interpreted);
    }
    evtc_program_free(p);
    free(plan);
  }
}

static void test_partitioner_plans(const char *src_dir) {
  evtc_graph *g = oracle_parse(ops_text, "ops");
  if (g) plans_of(g, "ops", 3);
  evtc_graph_free(g);
  char path[1024], err[512];
  snprintf(path, sizeof path, "%s/examples/mlp.evt", src_dir);
  evtc_graph *fwd = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(fwd != NULL, "examples/mlp.evt: %s", err);
  if (!fwd) return;
  evtc_optim_config opt = evtc_optim_default(EVTC_OPTIM_ADAMW);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &opt, &d);
  CHECK(joint != NULL, "autodiff: %s", d.msg);
  if (joint) plans_of(joint, "mlp adamw step", 10);
  int nk = 0;
  evtc_diag_clear(&d);
  int32_t *plan = joint ? evtc_program_plan(joint, "builtin", evtc_backend_cpu(), &nk, NULL, &d) : NULL;
  CHECK(plan == NULL && nk == 0 && d.status == EVTC_OK, "builtin: no plan (the program makes its own)");
  plan = joint ? evtc_program_plan(joint, "fastest", evtc_backend_cpu(), &nk, NULL, &d) : NULL;
  CHECK(plan == NULL && d.status == EVTC_ERR_INVALID && strstr(d.msg, "unknown partitioner 'fastest'"), "unknown: %s",
        d.msg);
  evtc_graph_free(joint);
  evtc_graph_free(fwd);
}

/* scatter_add into a base (the simplify pass's form of an embedding table's gradient beside a tied weight's), the
 * base with rows beyond the indices' range: written over its dead base (program.c), read from a live one. */
static void test_scatter_base(void) {
  static const char text[] =
      "graph sb {\n  %u = input() : f32[9,5]\n  %i = input() : i64[9]\n  %x = input() : f32[7,5]\n"
      "  %two = const() {value=2} : f32[]\n  %b = mul(%x, %two) : f32[7,5]\n"
      "  %y = scatter_add(%u, %i, %b) {size=6} : f32[7,5]\n  %z = mul(%y, %y) : f32[7,5]\n"
      "  %w = scatter_add(%u, %i, %x) {size=6} : f32[7,5]\n  output %z\n  output %w\n}\n";
  evtc_graph *g = oracle_parse(text, "scatter base");
  if (!g) return;
  int nk;
  int32_t *plan = evtc_plan_single(g, &nk);
  evtc_program *p = cpu_compare(g, plan, nk, TOL, 6, "scatter_add into a base");
  if (p) CHECK(evtc_program_get_stats(p).in_place_outputs == 1, "scatter_add over its dead base: %d in place, want 1",
               evtc_program_get_stats(p).in_place_outputs);
  evtc_program_free(p);
  free(plan);
  evtc_graph_free(g);
}

int main(int argc, char **argv) {
  char dir[] = "/tmp/evtc-cpu-ops-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  test_ops();
  test_index_errors();
  test_scatter_base();
  if (argc > 1) test_partitioner_plans(argv[1]);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
