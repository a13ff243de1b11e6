/* test_fusion_run.c -- memory-bound training graphs plan to the fewest
 * passes over memory, and those plans run.
 *
 * Three joint graphs (no optimizer) of the shapes of issue 7, small:
 * layernorm forward + backward, cross-entropy over wide rows, and dropout
 * + residual add + layernorm.  For both targets the ILP must plan each in
 * the fewest kernels the kernel IR allows -- one (the column sums of the
 * bias and gain gradients join as sibling reductions of %dy), plus for
 * cross-entropy the one-element kernel that scales the summed loss (a
 * reduction's value is not read inside the kernel that computes it) --
 * and model exactly the minimal bytes: every large input read once, every
 * large output written once, plus the small vectors.  The independent
 * checker accepts every plan.  Then the CPU backend's own plan (the ILP
 * asking the kernel builder and supports() about every set) must be the
 * same kernel count, build without splits or interpreter fallbacks, and
 * match the float64 interpreter on fresh random inputs with poisoned
 * outputs.  Last, attention's head split and merge: each split chain one
 * copy, the merge's reshape a buffer alias (no kernel), right numbers; the
 * same around an attention node, forward and backward, where the attention
 * kernels read and write the heads in place (no copy at all); a
 * cross-entropy's gradient written over the logits it no longer needs; and
 * SGD's updates written over the weights and momenta they replace.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"
#include "fusion/partition.h"
#include "passes/manager.h"
#include "runtime/program_plan.h"

static const double TOL = 2e-5;

typedef struct case_ {
  const char *name, *text;
  int kernels;           /* fused kernels of the optimal plan */
  double big_bytes;      /* large tensors read + written once each */
  double small_bytes;    /* at most this many more: vectors, labels, scalars */
  int64_t int_hi;        /* integer inputs in [0, int_hi) */
} case_;

enum { R = 48, C = 80 };

static const case_ cases[] = {
    {"ln",
     "graph ln {\n  %x = param() : f32[48,80]\n  %dy = input() : f32[48,80]\n  %g = param() : f32[80]\n"
     "  %b = param() : f32[80]\n  %y = layernorm(%x, %g, %b) : f32[48,80]\n  %p = mul(%y, %dy) : f32[48,80]\n"
     "  %loss = reduce_sum(%p) : f32[]\n  output %y\n  loss %loss\n}\n",
     1, 4.0 * R * C * 4, 4 * C * 4 + 64, 1},
    {"ce",
     "graph ce {\n  %x = param() : f32[48,80]\n  %lab = input() : i64[48]\n"
     "  %loss = cross_entropy(%x, %lab) : f32[]\n  output %loss\n  loss %loss\n}\n",
     2, 2.0 * R * C * 4, R * 8 + 64, C},
    {"drl",
     "graph drl {\n  %x = param() : f32[48,80]\n  %res = param() : f32[48,80]\n  %dy = input() : f32[48,80]\n"
     "  %g = param() : f32[80]\n  %b = param() : f32[80]\n  %d = dropout(%x) {p=0.1, seed=1} : f32[48,80]\n"
     "  %h = add(%d, %res) : f32[48,80]\n  %y = layernorm(%h, %g, %b) : f32[48,80]\n"
     "  %p = mul(%y, %dy) : f32[48,80]\n  %loss = reduce_sum(%p) : f32[]\n  output %y\n  loss %loss\n}\n",
     1, 6.0 * R * C * 4, 4 * C * 4 + 64, 1},
};

/* The joint graph (gradients of every parameter, no optimizer) of the model in text, after target's pipeline
 * (NULL: none); NULL after a failed check. */
static evtc_graph *joint_of(const char *text, const char *name, const char *target) {
  evtc_graph *fwd = oracle_parse(text, name);
  if (!fwd) return NULL;
  evtc_optim_config none = evtc_optim_default(EVTC_OPTIM_NONE);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &none, &d);
  CHECK(joint != NULL, "%s: autodiff: %s", name, d.msg);
  evtc_graph_free(fwd);
  if (!joint || !target) return joint;
  const evtc_pipeline *pl = evtc_pipeline_find(target);
  evtc_graph *g = evtc_pipeline_run(joint, pl->passes, pl->n_passes, NULL, &d);
  CHECK(g != NULL, "%s: pipeline %s: %s", name, target, d.msg);
  evtc_graph_free(joint);
  return g;
}

/* The ILP plan of c on target (template rules only): kernel count and bytes. */
static void test_plan(const case_ *c, const char *target) {
  evtc_graph *g = joint_of(c->text, c->name, target);
  if (!g) return;
  evtc_device dev;
  evtc_diag d = {0};
  CHECK(evtc_device_load(target, &dev, &d), "%s", d.msg);
  evtc_fusion_options o = {0};
  evtc_partition *p = evtc_fusion_partition(g, &dev, "ilp", &o, &d);
  CHECK(p != NULL, "%s/%s: %s", c->name, target, d.msg);
  if (p) {
    char why[256];
    CHECK(evtc_fusion_check(p, &dev, why, sizeof why), "%s/%s: plan infeasible: %s", c->name, target, why);
    CHECK(p->n_kernels == c->kernels && p->ilp.gap == 0, "%s/%s: %d kernels (want %d), gap %g", c->name, target,
          p->n_kernels, c->kernels, p->ilp.gap);
    CHECK(p->bytes >= c->big_bytes && p->bytes <= c->big_bytes + c->small_bytes,
          "%s/%s: %.0f bytes modelled, minimal %.0f + at most %.0f of small tensors", c->name, target, p->bytes,
          c->big_bytes, c->small_bytes);
  }
  evtc_partition_free(p);
  evtc_graph_free(g);
}

/* The CPU backend's plan of c: the same kernel count, built as planned, right numbers. */
static void test_run(const case_ *c) {
  evtc_graph *g = joint_of(c->text, c->name, "cpu");
  if (!g) return;
  evtc_diag d = {0};
  int nk = 0;
  int32_t *plan = evtc_program_plan(g, "ilp", evtc_backend_cpu(), &nk, NULL, &d);
  CHECK(plan != NULL, "%s: cpu plan: %s", c->name, d.msg);
  if (plan) {
    CHECK(nk == c->kernels, "%s: the CPU backend's plan has %d kernels, want %d", c->name, nk, c->kernels);
    char label[64];
    snprintf(label, sizeof label, "%s (cpu ilp plan)", c->name);
    evtc_program *p = cpu_compare(g, plan, nk, TOL, c->int_hi, label);
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      CHECK(st.splits == 0 && st.interpreted == 0 && st.kernels == nk,
            "%s: %d kernels planned, %d run, %d split, %d interpreted", label, nk, st.kernels, st.splits,
            st.interpreted);
    }
    evtc_program_free(p);
  }
  free(plan);
  evtc_graph_free(g);
}

/* Attention's head split and merge on the CPU backend's own plan: slice -> reshape -> permute of the packed
 * q/k/v runs as one copy each (the kernel walks the stored permute, reading through the slice), the merge's
 * reshape after its permute copy shares that copy's buffer instead of running, and the numbers are right. */
static void test_heads(void) {
  static const char text[] =
      "graph heads {\n  %qkv = param() : f32[2,8,48]\n  %w = param() : f32[16,16]\n"
      "  %q = slice(%qkv) {axes=[2], starts=[0], ends=[16], steps=[1]} : f32[2,8,16]\n"
      "  %k = slice(%qkv) {axes=[2], starts=[16], ends=[32], steps=[1]} : f32[2,8,16]\n"
      "  %qh = reshape(%q) {shape=[2,8,2,8]} : f32[2,8,2,8]\n  %kh = reshape(%k) {shape=[2,8,2,8]} : f32[2,8,2,8]\n"
      "  %qt = permute(%qh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n  %kt = permute(%kh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n"
      "  %s = batch_matmul(%qt, %kt) {trans_b=1} : f32[2,2,8,8]\n"
      "  %st = permute(%s) {perm=[0,2,1,3]} : f32[2,8,2,8]\n  %m = reshape(%st) {shape=[16,16]} : f32[16,16]\n"
      "  %y = matmul(%m, %w) : f32[16,16]\n  output %y\n}\n";
  evtc_graph *g = oracle_parse(text, "heads");
  if (!g) return;
  evtc_diag d = {0};
  int nk = 0;
  int32_t *plan = evtc_program_plan(g, "ilp", evtc_backend_cpu(), &nk, NULL, &d);
  CHECK(plan != NULL, "heads: cpu plan: %s", d.msg);
  if (plan) {
    const char *chains[][3] = {{"q", "qh", "qt"}, {"k", "kh", "kt"}};
    for (int c = 0; c < 2; c++) {
      int32_t a = evtc_graph_find(g, chains[c][0])->id;
      for (int j = 1; j < 3; j++)
        CHECK(plan[evtc_graph_find(g, chains[c][j])->id] == plan[a], "heads: %%%s is not in %%%s's kernel",
              chains[c][j], chains[c][0]);
    }
    evtc_program *p = cpu_compare(g, plan, nk, TOL, 1, "heads (cpu ilp plan)");
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      CHECK(st.aliases == 1 && st.kernels + st.aliases == nk && st.splits == 0 && st.interpreted == 0,
            "heads: %d kernels planned, %d run, %d reshape aliases (want 1), %d split, %d interpreted", nk, st.kernels,
            st.aliases, st.splits, st.interpreted);
    }
    evtc_program_free(p);
  }
  free(plan);
  evtc_graph_free(g);
}

/* g on the CPU backend's ILP plan (*nk planned kernels) against the interpreter: the program (the caller frees
 * it), or NULL after a failed check. */
static evtc_program *ilp_compare(const evtc_graph *g, int64_t int_hi, const char *what, int *nk) {
  evtc_diag d = {0};
  int32_t *plan = evtc_program_plan(g, "ilp", evtc_backend_cpu(), nk, NULL, &d);
  CHECK(plan != NULL, "%s: cpu plan: %s", what, d.msg);
  evtc_program *p = plan ? cpu_compare(g, plan, *nk, TOL, int_hi, what) : NULL;
  free(plan);
  return p;
}

/* The heads of a packed f32 [2, 8, 48] projection %qkv: q, k, v as [2, 2 heads, 8, 8] (%qt, %kt, %vt). */
#define HEAD_SPLIT                                                                                                 \
  "  %q = slice(%qkv) {axes=[2], starts=[0], ends=[16], steps=[1]} : f32[2,8,16]\n"                               \
  "  %k = slice(%qkv) {axes=[2], starts=[16], ends=[32], steps=[1]} : f32[2,8,16]\n"                              \
  "  %v = slice(%qkv) {axes=[2], starts=[32], ends=[48], steps=[1]} : f32[2,8,16]\n"                              \
  "  %qh = reshape(%q) {shape=[2,8,2,8]} : f32[2,8,2,8]\n  %kh = reshape(%k) {shape=[2,8,2,8]} : f32[2,8,2,8]\n" \
  "  %vh = reshape(%v) {shape=[2,8,2,8]} : f32[2,8,2,8]\n"                                                         \
  "  %qt = permute(%qh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n  %kt = permute(%kh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n"  \
  "  %vt = permute(%vh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n"

/* Attention's head split and merge around an attention node, forward and backward, on the CPU backend's own
 * plan: the attention kernels read q, k, v from the packed projection and their gradients' layouts in place
 * and write the merged output (and dq) where the merge copy would have put them, so those copy chains do not
 * run (stats.views), and every gradient matches the interpreter's. */
static void test_attention_views(void) {
  static const char text[] =
      "graph heads {\n  %qkv = param() : f32[2,8,48]\n  %w = param() : f32[16,16]\n"
      HEAD_SPLIT
      "  %a = attention(%qt, %kt, %vt) {scale=0.35, causal=1} : f32[2,2,8,8]\n"
      "  %at = permute(%a) {perm=[0,2,1,3]} : f32[2,8,2,8]\n  %m = reshape(%at) {shape=[16,16]} : f32[16,16]\n"
      "  %y = matmul(%m, %w) : f32[16,16]\n  %s = mul(%y, %y) : f32[16,16]\n  %loss = reduce_sum(%s) : f32[]\n"
      "  output %loss\n  loss %loss\n}\n";
  evtc_graph *g = joint_of(text, "attention views", NULL);
  if (!g) return;
  int nk = 0;
  evtc_program *p = ilp_compare(g, 1, "attention views (cpu ilp plan)", &nk);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    /* q, k and v read from %qkv, the output written merged; the backward's dout read from its layout */
    CHECK(st.views >= 4 && st.kernels + st.aliases + st.views + st.by_products == nk - st.splits &&
          st.interpreted == 0, "attention views: %d kernels planned, %d run, %d views (want >= 4), %d aliases, %d "
          "by-products, %d split, %d interpreted", nk, st.kernels, st.views, st.aliases, st.by_products, st.splits,
          st.interpreted);
    printf("attention views: %d of %d planned kernels are views read or written in place\n", st.views, nk);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* The backward's side on the one-kernel-per-node plan: dq, dk and dv go through permutes (dk and dv sliced off
 * attention_backward_kv's output first) and reshapes into one concat, the gradient of the packed projection;
 * the attention kernels write their parts of the concat's buffer (dv apart from dk), and the chains, the
 * aliases and the concat do not run. */
static void test_attention_concat_views(void) {
  static const char text[] =
      "graph grads {\n  %qkv = param() : f32[2,8,48]\n  %do = param() : f32[2,8,16]\n"
      HEAD_SPLIT
      "  %a = attention(%qt, %kt, %vt) {scale=0.35, causal=0} : f32[2,2,8,8]\n"
      "  %l = attention_lse(%qt, %kt) {scale=0.35, causal=0} : f32[2,2,8]\n"
      "  %doh = reshape(%do) {shape=[2,8,2,8]} : f32[2,8,2,8]\n  %dot = permute(%doh) {perm=[0,2,1,3]} : f32[2,2,8,8]\n"
      "  %dq = attention_backward_q(%qt, %kt, %vt, %a, %dot, %l) {scale=0.35, causal=0} : f32[2,2,8,8]\n"
      "  %dkv = attention_backward_kv(%qt, %kt, %vt, %a, %dot, %l) {scale=0.35, causal=0} : f32[2,2,8,16]\n"
      "  %dk = slice(%dkv) {axes=[3], starts=[0], ends=[8]} : f32[2,2,8,8]\n"
      "  %dv = slice(%dkv) {axes=[3], starts=[8], ends=[16]} : f32[2,2,8,8]\n"
      "  %dqp = permute(%dq) {perm=[0,2,1,3]} : f32[2,8,2,8]\n  %dkp = permute(%dk) {perm=[0,2,1,3]} : f32[2,8,2,8]\n"
      "  %dvp = permute(%dv) {perm=[0,2,1,3]} : f32[2,8,2,8]\n  %dqr = reshape(%dqp) {shape=[2,8,16]} : f32[2,8,16]\n"
      "  %dkr = reshape(%dkp) {shape=[2,8,16]} : f32[2,8,16]\n  %dvr = reshape(%dvp) {shape=[2,8,16]} : f32[2,8,16]\n"
      "  %gr = concat(%dqr, %dkr, %dvr) {axis=2} : f32[2,8,48]\n  %gb = reduce_sum(%gr) {axes=[0,1]} : f32[48]\n"
      "  %at = permute(%a) {perm=[0,2,1,3]} : f32[2,8,2,8]\n  %m = reshape(%at) {shape=[2,8,16]} : f32[2,8,16]\n"
      "  output %gr\n  output %gb\n  output %m\n}\n";
  evtc_graph *g = oracle_parse(text, "attention concat views");
  if (!g) return;
  int nk = 0;
  int32_t *plan = evtc_plan_single(g, &nk);
  evtc_program *p = cpu_compare(g, plan, nk, TOL, 1, "attention concat views (one kernel per node)");
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    /* q, k, v: their permutes read %qkv's slices (the slices still copy: kernels of their own); the merge's
       permute written by attention; dout's permute read; dq's permute, dk's and dv's slices and permutes, the
       three reshapes and the concat: 3 + 1 + 1 + 9 */
    CHECK(st.views == 14 && st.kernels + st.aliases + st.views + st.by_products == nk && st.interpreted == 0,
          "attention concat views: %d kernels planned, %d run, %d views (want 14), %d aliases, %d by-products, %d "
          "interpreted", nk, st.kernels, st.views, st.aliases, st.by_products, st.interpreted);
  }
  evtc_program_free(p);
  free(plan);
  evtc_graph_free(g);
}

/* A cross-entropy over a GEMM's logits: the logits' gradient, the rows kernel's last pass, is written over the
 * logits (their last use), and the gradients still match the interpreter's. */
static void test_in_place_outputs(void) {
  evtc_graph *g = joint_of("graph lm {\n  %x = input() : f32[24,32]\n  %w = param() : f32[32,1000]\n"
                           "  %l = matmul(%x, %w) : f32[24,1000]\n  %lab = input() : i64[24]\n"
                           "  %loss = cross_entropy(%l, %lab) : f32[]\n  output %loss\n  loss %loss\n}\n",
                           "in-place outputs", NULL);
  if (!g) return;
  int nk = 0;
  evtc_program *p = ilp_compare(g, 1000, "in-place outputs (cpu ilp plan)", &nk);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.in_place_outputs >= 1, "in-place outputs: %d outputs written over their dead input (want the logits' "
          "gradient over the logits)", st.in_place_outputs);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* SGD with momentum on a linear layer: the weight's and the momentum's next values are written over the
 * values they replace (no second copy), and three steps still match the interpreter's. */
static void test_in_place_updates(void) {
  evtc_graph *fwd = oracle_parse("graph lin {\n  %x = input() : f32[8,16]\n  %w = param() : f32[16,4]\n"
                                 "  %b = param() : f32[4]\n  %y = matmul(%x, %w) : f32[8,4]\n"
                                 "  %z = add(%y, %b) : f32[8,4]\n  %s = mul(%z, %z) : f32[8,4]\n"
                                 "  %loss = reduce_sum(%s) : f32[]\n  output %loss\n  loss %loss\n}\n",
                                 "lin");
  if (!fwd) return;
  evtc_optim_config sgd = evtc_optim_default(EVTC_OPTIM_SGD);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &sgd, &d);
  int nk = 0;
  CHECK(joint != NULL, "in-place: autodiff: %s", d.msg);
  evtc_graph_free(fwd);
  if (!joint) return;
  int updates = 0;
  for (int i = 0; i < joint->n_outputs; i++) updates += joint->outputs[i].updates != NULL;
  evtc_program *p = evtc_program_new(joint, NULL, 0, evtc_backend_cpu(), NULL, &d);
  CHECK(p != NULL, "in-place: program: %s", d.msg);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(updates == 4 && st.in_place == updates, "in-place: %d of %d updates in place", st.in_place, updates);
  }
  evtc_program_free(p);
  cpu_train_compare(joint, 3, TOL, 1, "in-place (sgd, 3 steps)");
  evtc_graph_free(joint);
  /* loss = sum(w * w^T): the ILP plan computes w's update in a kernel that reads w transposed too, so it is not
     written over w (an element would read its transpose's new value: the numbers differ) */
  fwd = oracle_parse("graph sym {\n  %w = param() : f32[16,16]\n  %t = permute(%w) {perm=[1,0]} : f32[16,16]\n"
                     "  %s = mul(%w, %t) : f32[16,16]\n  %loss = reduce_sum(%s) : f32[]\n  output %loss\n"
                     "  loss %loss\n}\n",
                     "sym");
  joint = fwd ? evtc_autodiff(fwd, NULL, 0, &sgd, &d) : NULL;
  CHECK(joint != NULL, "in-place (transposed read): autodiff: %s", d.msg);
  evtc_graph_free(fwd);
  int32_t *plan = joint ? evtc_program_plan(joint, "ilp", evtc_backend_cpu(), &nk, NULL, &d) : NULL;
  CHECK(!joint || plan, "in-place (transposed read): plan: %s", d.msg);
  if (plan) {
    evtc_program *q = evtc_program_new(joint, plan, nk, evtc_backend_cpu(), NULL, &d);
    CHECK(q && evtc_program_get_stats(q).in_place == 1,
          "in-place (transposed read): %d updates in place (want 1: the momentum, not w)",
          q ? evtc_program_get_stats(q).in_place : -1);
    evtc_program_free(q);
    cpu_train_compare_plan(joint, plan, nk, 3, TOL, 1, "in-place (transposed read, ilp plan, sgd, 3 steps)");
  }
  free(plan);
  evtc_graph_free(joint);
}

/* SGD with momentum on two layers whose biases and scale share a shape: the ILP plan leaves their updates in
 * kernels of their own, which the program launches as one (launch packing, pack.c), and three steps of that
 * program match the interpreter's. */
static void test_packed_updates(void) {
  evtc_graph *fwd = oracle_parse("graph pk {\n  %x = input() : f32[8,32]\n  %w1 = param() : f32[32,32]\n"
                                 "  %b1 = param() : f32[32]\n  %w2 = param() : f32[32,32]\n  %b2 = param() : f32[32]\n"
                                 "  %g = param() : f32[32]\n  %h = matmul(%x, %w1) : f32[8,32]\n"
                                 "  %h1 = add(%h, %b1) : f32[8,32]\n  %h2 = matmul(%h1, %w2) : f32[8,32]\n"
                                 "  %h3 = add(%h2, %b2) : f32[8,32]\n  %h4 = mul(%h3, %g) : f32[8,32]\n"
                                 "  %s = mul(%h4, %h4) : f32[8,32]\n  %loss = reduce_mean(%s) : f32[]\n  output %loss\n"
                                 "  loss %loss\n}\n",
                                 "pk");
  if (!fwd) return;
  evtc_optim_config sgd = evtc_optim_default(EVTC_OPTIM_SGD);
  sgd.lr = 1e-3;     /* small steps: the loss is a mean of squares of products */
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &sgd, &d);
  evtc_graph_free(fwd);
  CHECK(joint != NULL, "packed updates: autodiff: %s", d.msg);
  if (!joint) return;
  char *info = NULL;
  size_t info_len = 0;
  FILE *f = open_memstream(&info, &info_len);
  int nk = 0, packed = -1;
  int32_t *plan = evtc_program_plan(joint, "ilp", evtc_backend_cpu(), &nk, f, &d);
  fclose(f);
  CHECK(plan != NULL, "packed updates: plan: %s", d.msg);
  const char *at = info ? strstr(info, "small elementwise ones packed") : NULL;
  for (const char *q = at; q && q > info && packed < 0; q--)
    if (*q == ',') packed = atoi(q + 1);
  CHECK(packed >= 2, "packed updates: the [32] updates' kernels share a launch (%d packed): %s", packed,
        info ? info : "");
  if (plan) cpu_train_compare_plan(joint, plan, nk, 3, TOL, 1, "packed updates (ilp plan, sgd, 3 steps)");
  free(info);
  free(plan);
  evtc_graph_free(joint);
}

/* BERT's MLP block as ONNX spells its GELU (div, erf, add, mul, mul), bf16 at BERT-Large's sizes: after the
 * h200 pipeline (grad-factor) the gradient of the GELU's input is the backward GEMM's output times one
 * coefficient of forward values, and the ILP computes that coefficient in the forward GEMM's epilogue, so
 * the backward GEMM's kernel is the GEMM, that multiply and the bias gradient's column sum. */
static void test_gelu_gradient_factored(void) {
  static const char text[] =
      "graph gelu_block {\n  %x = input() : bf16[16384,1024]\n  %w1 = param() : bf16[4096,1024]\n"
      "  %b1 = param() : bf16[4096]\n  %w2 = param() : bf16[1024,4096]\n"
      "  %h0 = matmul(%x, %w1) {trans_b=1} : bf16[16384,4096]\n  %h = add(%h0, %b1) : bf16[16384,4096]\n"
      "  %s2 = const() {value=1.4142135623730951} : bf16[]\n  %one = const() {value=1.0} : bf16[]\n"
      "  %half = const() {value=0.5} : bf16[]\n  %a = div(%h, %s2) : bf16[16384,4096]\n"
      "  %e = erf(%a) : bf16[16384,4096]\n  %e1 = add(%e, %one) : bf16[16384,4096]\n"
      "  %m = mul(%h, %e1) : bf16[16384,4096]\n  %g = mul(%m, %half) : bf16[16384,4096]\n"
      "  %y = matmul(%g, %w2) {trans_b=1} : bf16[16384,1024]\n  %p = mul(%y, %y) : bf16[16384,1024]\n"
      "  %loss = reduce_sum(%p) : bf16[]\n  output %loss\n  loss %loss\n}\n";
  evtc_graph *g = joint_of(text, "gelu block", "h200");
  if (!g) return;
  const evtc_node *gh = evtc_graph_find(g, "grad.h"), *h0 = evtc_graph_find(g, "h0");
  const bool factored = gh && h0 && gh->op == EVTC_OP_MUL &&
                        (gh->inputs[0]->op == EVTC_OP_MATMUL || gh->inputs[1]->op == EVTC_OP_MATMUL);
  CHECK(factored, "gelu block: %%grad.h is %s, not the backward GEMM's output times a coefficient",
        gh ? evtc_op_get(gh->op)->name : "missing");
  evtc_device dev;
  evtc_diag d = {0};
  CHECK(evtc_device_load("h200", &dev, &d), "%s", d.msg);
  evtc_fusion_options o = {0};
  evtc_partition *p = factored ? evtc_fusion_partition(g, &dev, "ilp", &o, &d) : NULL;
  CHECK(!factored || p != NULL, "gelu block: %s", d.msg);
  if (p) {
    const evtc_node *coef = gh->inputs[gh->inputs[0]->op == EVTC_OP_MATMUL ? 1 : 0];
    const int32_t kb = p->kernel_of[gh->id];
    int members = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) members += p->kernel_of[i] == kb;
    CHECK(p->kernel_of[coef->id] == p->kernel_of[h0->id] && members == 3,
          "gelu block: the coefficient %%%s in kernel %d (the forward GEMM's: %d); the backward GEMM's kernel has %d "
          "nodes (want 3)", coef->name, p->kernel_of[coef->id], p->kernel_of[h0->id], members);
    printf("gelu block: dh = dg * %%%s, made in the forward GEMM's kernel; the backward GEMM's kernel: %d nodes\n",
           coef->name, members);
  }
  evtc_partition_free(p);
  evtc_graph_free(g);
}

int main(int argc, char **argv) {
  const char *src_dir = argc > 1 ? argv[1] : ".";
  char data[4096], dir[] = "/tmp/evtc-fusion-run-XXXXXX";
  snprintf(data, sizeof data, "%s/data", src_dir);
  setenv("EVTC_DATA_DIR", data, 1);
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);       /* kernel and plan caches */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    test_plan(&cases[i], "h200");
    test_plan(&cases[i], "cpu");
    test_run(&cases[i]);
  }
  test_heads();
  test_attention_views();
  test_attention_concat_views();
  test_in_place_outputs();
  test_in_place_updates();
  test_packed_updates();
  test_gelu_gradient_factored();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
