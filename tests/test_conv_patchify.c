/* test_conv_patchify.c -- the conv-patchify pass: convolutions whose
 * windows tile the image become one GEMM, before autodiff, with the same
 * outputs and the same gradients; every other convolution stays.
 *
 * Each rewritten case is a small f64 model with a loss and the image as a
 * PARAM (so that its gradient, the backward of the patch permute, is
 * checked too).  The pass list runs on it (verifying the result); the
 * conv2d must be gone, the matmuls and permutes must number what the case
 * says.  Then both graphs are differentiated (evtc_autodiff, optimizer
 * none) and, over several seeds, the interpreter runs each forward graph
 * and each joint graph on the same fresh random leaves (uniform in
 * [-1, 1)): every output and every gradient must agree to 1e-12 relative
 * to the largest magnitude of the original's.  The cases that must not be
 * rewritten (stride != kernel, padding, dilation, groups, a size the
 * kernel does not divide) must come out of the pass printing exactly as
 * they went in.  Last, the forward passes `evtc train` runs before autodiff
 * (evtc_program_optimize_forward) keep the patchified conv on both targets,
 * also when the backend refuses the attention the same pipeline formed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "check.h"
#include "graph_outputs.h"
#include "ir/text.h"
#include "passes/manager.h"
#include "runtime/interp.h"
#include "runtime/program_plan.h"

enum { N_SEEDS = 3 };

typedef struct rcase {
  const char *name, *passes;
  int matmuls, permutes;    /* in the result; -1: not checked */
  const char *text;
} rcase;

/* The loss of every rewritten case: the outputs weighted by a random input
 * r, so that every element's gradient differs. */
static const rcase rewritten[] = {
    {"vit patch embedding", "conv-patchify,dce", 1, 3,
     "graph t {\n"
     "  %x = param() : f64[2,3,8,12]\n"
     "  %w = param() : f64[5,3,4,4]\n"
     "  %b = param() : f64[5]\n"
     "  %c = conv2d(%x, %w) {stride=[4,4], padding=[0,0,0,0], dilation=[1,1]} : f64[2,5,2,3]\n"
     "  %b3 = reshape(%b) {shape=[5,1,1]} : f64[5,1,1]\n"
     "  %cb = add(%c, %b3) : f64[2,5,2,3]\n"
     "  %f = reshape(%cb) {shape=[2,5,6]} : f64[2,5,6]\n"
     "  %tok = permute(%f) {perm=[0,2,1]} : f64[2,6,5]\n"
     "  %r = input() : f64[2,6,5]\n"
     "  %p = mul(%tok, %r) : f64[2,6,5]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %loss\n  loss %loss\n}\n"},
    /* with permute-fold, the flatten's transpose and ViT's cancel: only the patch permute is left */
    {"vit patch embedding, h200-forward", "conv-patchify,permute-fold,attention-fuse,dce", 1, 1,
     "graph t {\n"
     "  %x = param() : f64[2,3,8,12]\n"
     "  %w = param() : f64[5,3,4,4]\n"
     "  %b = param() : f64[5]\n"
     "  %c = conv2d(%x, %w) {stride=[4,4]} : f64[2,5,2,3]\n"
     "  %b3 = reshape(%b) {shape=[5,1,1]} : f64[5,1,1]\n"
     "  %cb = add(%b3, %c) : f64[2,5,2,3]\n"
     "  %f = reshape(%cb) {shape=[2,5,6]} : f64[2,5,6]\n"
     "  %tok = permute(%f) {perm=[0,2,1]} : f64[2,6,5]\n"
     "  %r = input() : f64[2,6,5]\n"
     "  %p = mul(%tok, %r) : f64[2,6,5]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %loss\n  loss %loss\n}\n"},
    /* non-square windows, a [1,O,1,1] bias first, the NCHW result an output too */
    {"2x3 windows, bias [1,O,1,1]", "conv-patchify,dce", 1, 2,
     "graph t {\n"
     "  %x = param() : f64[3,2,6,9]\n"
     "  %w = param() : f64[4,2,2,3]\n"
     "  %b = param() : f64[1,4,1,1]\n"
     "  %c = conv2d(%x, %w) {stride=[2,3]} : f64[3,4,3,3]\n"
     "  %cb = add(%b, %c) : f64[3,4,3,3]\n"
     "  %r = input() : f64[3,4,3,3]\n"
     "  %p = mul(%cb, %r) : f64[3,4,3,3]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %cb\n  output %loss\n  loss %loss\n}\n"},
    /* 1x1, stride 1; two consumers, so the bias add is not folded into the rows */
    {"1x1 conv, two consumers", "conv-patchify,dce", 1, 2,
     "graph t {\n"
     "  %x = param() : f64[2,3,4,5]\n"
     "  %w = param() : f64[6,3,1,1]\n"
     "  %b = param() : f64[6,1,1]\n"
     "  %c = conv2d(%x, %w) : f64[2,6,4,5]\n"
     "  %cb = add(%c, %b) : f64[2,6,4,5]\n"
     "  %e = exp(%c) : f64[2,6,4,5]\n"
     "  %s = mul(%cb, %e) : f64[2,6,4,5]\n"
     "  %r = input() : f64[2,6,4,5]\n"
     "  %p = mul(%s, %r) : f64[2,6,4,5]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %loss\n  loss %loss\n}\n"},
    /* one window covering the image (OH = OW = 1), a scalar bias, flattened */
    {"one window, scalar bias", "conv-patchify,permute-fold,dce", 1, 2,
     "graph t {\n"
     "  %x = param() : f64[4,2,3,3]\n"
     "  %w = param() : f64[7,2,3,3]\n"
     "  %b = param() : f64[]\n"
     "  %c = conv2d(%x, %w) {stride=[3,3]} : f64[4,7,1,1]\n"
     "  %cb = add(%c, %b) : f64[4,7,1,1]\n"
     "  %f = reshape(%cb) {shape=[4,7,1]} : f64[4,7,1]\n"
     "  %r = input() : f64[4,7,1]\n"
     "  %p = mul(%f, %r) : f64[4,7,1]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %loss\n  loss %loss\n}\n"},
    /* a window as tall as the image (any stride there) beside stride == kernel across */
    {"whole-height window, stride [1,2]", "conv-patchify,dce", 1, 2,
     "graph t {\n"
     "  %x = param() : f64[2,4,5,6]\n"
     "  %w = param() : f64[3,4,5,2]\n"
     "  %c = conv2d(%x, %w) {stride=[1,2]} : f64[2,3,1,3]\n"
     "  %r = input() : f64[2,3,1,3]\n"
     "  %p = mul(%c, %r) : f64[2,3,1,3]\n"
     "  %loss = reduce_sum(%p) : f64[]\n"
     "  output %loss\n  loss %loss\n}\n"},
};

/* Convolutions the pass must leave alone (each graph printed back unchanged). */
static const struct {
  const char *name, *text;
} kept[] = {
    {"stride != kernel", "graph t {\n  %x = input() : f64[1,2,9,9]\n  %w = param() : f64[3,2,3,3]\n"
                         "  %c = conv2d(%x, %w) {stride=[2,2]} : f64[1,3,4,4]\n  output %c\n}\n"},
    {"stride 1, kernel 2", "graph t {\n  %x = input() : f64[1,2,8,8]\n  %w = param() : f64[3,2,2,2]\n"
                           "  %c = conv2d(%x, %w) : f64[1,3,7,7]\n  output %c\n}\n"},
    {"whole-image kernel, padding", "graph t {\n  %x = input() : f64[1,2,4,4]\n  %w = param() : f64[3,2,4,4]\n"
                                    "  %c = conv2d(%x, %w) {padding=[1,1,1,1]} : f64[1,3,3,3]\n  output %c\n}\n"},
    {"padding", "graph t {\n  %x = input() : f64[1,2,8,8]\n  %w = param() : f64[3,2,4,4]\n"
                "  %c = conv2d(%x, %w) {stride=[4,4], padding=[0,0,0,4]} : f64[1,3,2,3]\n  output %c\n}\n"},
    {"dilation", "graph t {\n  %x = input() : f64[1,2,8,8]\n  %w = param() : f64[3,2,2,2]\n"
                 "  %c = conv2d(%x, %w) {stride=[2,2], dilation=[2,2]} : f64[1,3,3,3]\n  output %c\n}\n"},
    {"groups", "graph t {\n  %x = input() : f64[1,4,8,8]\n  %w = param() : f64[4,2,4,4]\n"
               "  %c = conv2d(%x, %w) {stride=[4,4], groups=2} : f64[1,4,2,2]\n  output %c\n}\n"},
    {"H not divisible", "graph t {\n  %x = input() : f64[1,2,9,8]\n  %w = param() : f64[3,2,4,4]\n"
                        "  %c = conv2d(%x, %w) {stride=[4,4]} : f64[1,3,2,2]\n  output %c\n}\n"},
    {"W not divisible", "graph t {\n  %x = input() : f64[1,2,8,10]\n  %w = param() : f64[3,2,4,4]\n"
                        "  %c = conv2d(%x, %w) {stride=[4,4]} : f64[1,3,2,2]\n  output %c\n}\n"},
};

/* Every output of a (matched by name in b) agrees over N_SEEDS seeds; returns the worst relative error. */
static double compare(const char *what, const evtc_graph *a, const evtc_graph *b) {
  CHECK(a->n_outputs == b->n_outputs, "%s: output count %d -> %d", what, a->n_outputs, b->n_outputs);
  double worst = 0;
  for (uint64_t seed = 1; seed <= N_SEEDS && a->n_outputs == b->n_outputs; seed++) {
    double **va = graph_outputs(a, seed), **vb = graph_outputs(b, seed);
    for (int32_t o = 0; va && vb && o < a->n_outputs; o++) {
      const evtc_node *n = a->outputs[o].node;
      int32_t ob = 0;
      while (ob < b->n_outputs && strcmp(b->outputs[ob].node->name, n->name) != 0) ob++;
      CHECK(ob < b->n_outputs, "%s: output %%%s is missing after the pass", what, n->name);
      if (ob == b->n_outputs) continue;
      double diff = 0, scale = 1e-300;
      for (int64_t j = 0, k = evtc_type_numel(&n->type); j < k; j++) {
        diff = fmax(diff, isnan(vb[ob][j]) ? INFINITY : fabs(va[o][j] - vb[ob][j]));
        scale = fmax(scale, fabs(va[o][j]));
      }
      worst = fmax(worst, diff / scale);
      CHECK(diff / scale < 1e-12, "%s seed %llu output %%%s: relative error %.3g", what, (unsigned long long)seed,
            n->name, diff / scale);
    }
    graph_outputs_free(va, a->n_outputs);
    graph_outputs_free(vb, b->n_outputs);
  }
  return worst;
}

static int count_op(const evtc_graph *g, evtc_op op) {
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i]->op == op;
  return n;
}

static evtc_graph *run_passes(const char *list, const evtc_graph *g, const char *what) {
  const char *names[8];
  char buf[256];
  int n = 0;
  snprintf(buf, sizeof buf, "%s", list);
  for (char *s = strtok(buf, ","); s && n < 8; s = strtok(NULL, ",")) names[n++] = s;
  evtc_diag d = {0};
  evtc_graph *h = evtc_pipeline_run(g, names, n, NULL, &d);
  CHECK(h != NULL, "%s: %s", what, d.msg);
  return h;
}

static void check_rewritten(const rcase *c) {
  char err[512];
  evtc_graph *g = evtc_graph_parse_string(c->text, c->name, err, sizeof err);
  CHECK(g != NULL, "%s: %s", c->name, err);
  if (!g) return;
  evtc_graph *h = run_passes(c->passes, g, c->name);
  if (h) {
    CHECK(count_op(h, EVTC_OP_CONV2D) == 0, "%s: a conv2d is left", c->name);
    CHECK(count_op(h, EVTC_OP_MATMUL) == c->matmuls, "%s: %d matmuls, expected %d", c->name,
          count_op(h, EVTC_OP_MATMUL), c->matmuls);
    CHECK(count_op(h, EVTC_OP_PERMUTE) == c->permutes, "%s: %d permutes, expected %d", c->name,
          count_op(h, EVTC_OP_PERMUTE), c->permutes);
    double fwd = compare(c->name, g, h);
    evtc_optim_config opt = evtc_optim_default(EVTC_OPTIM_NONE);
    evtc_diag d1 = {0}, d2 = {0};
    evtc_graph *jg = evtc_autodiff(g, NULL, 0, &opt, &d1), *jh = evtc_autodiff(h, NULL, 0, &opt, &d2);
    CHECK(jg && jh, "%s: autodiff: %s%s", c->name, d1.msg, d2.msg);
    if (jg && jh) {
      CHECK(count_op(jh, EVTC_OP_CONV2D_BACKWARD_INPUT) + count_op(jh, EVTC_OP_CONV2D_BACKWARD_WEIGHT) == 0,
            "%s: the joint graph still has a conv2d backward", c->name);
      double grad = compare(c->name, jg, jh);
      printf("%-36s nodes %3d -> %3d, joint %3d -> %3d; max rel err fwd %.2g grad %.2g\n", c->name, g->n_nodes,
             h->n_nodes, jg->n_nodes, jh->n_nodes, fwd, grad);
    }
    evtc_graph_free(jg);
    evtc_graph_free(jh);
    evtc_graph_free(h);
  }
  evtc_graph_free(g);
}

static void check_kept(const char *name, const char *text) {
  char err[512];
  evtc_graph *g = evtc_graph_parse_string(text, name, err, sizeof err);
  CHECK(g != NULL, "%s: %s", name, err);
  if (!g) return;
  evtc_graph *h = run_passes("conv-patchify", g, name);
  if (h) {
    char *before = evtc_graph_to_string(g), *after = evtc_graph_to_string(h);
    CHECK(strcmp(before, after) == 0, "%s: rewritten:\n%s", name, after);
    free(before);
    free(after);
    printf("%-36s kept\n", name);
  }
  evtc_graph_free(h);
  evtc_graph_free(g);
}

/* A bf16 attention (which the CPU backend refuses) beside a patch embedding. */
static const char *const attention_and_patches =
    "graph t {\n"
    "  %q = input() : bf16[1,2,4,8]\n"
    "  %k = input() : bf16[1,2,4,8]\n"
    "  %v = input() : bf16[1,2,4,8]\n"
    "  %s = batch_matmul(%q, %k) {trans_b=1} : bf16[1,2,4,4]\n"
    "  %p = softmax(%s) : bf16[1,2,4,4]\n"
    "  %o = batch_matmul(%p, %v) : bf16[1,2,4,8]\n"
    "  %x = input() : bf16[2,3,8,8]\n"
    "  %w = param() : bf16[4,3,4,4]\n"
    "  %c = conv2d(%x, %w) {stride=[4,4]} : bf16[2,4,2,2]\n"
    "  output %o\n  output %c\n}\n";

/* evtc_program_optimize_forward (what `evtc train` runs before autodiff) keeps the patchified conv: for the CPU
 * target, and for h200 when the backend refuses the attention node the same pipeline formed (the CPU backend
 * stands in and refuses bf16 attention), by running again without attention-fuse. */
static void check_forward_passes(void) {
  char err[512];
  evtc_graph *g = evtc_graph_parse_string(attention_and_patches, "forward", err, sizeof err);
  CHECK(g != NULL, "forward: %s", err);
  if (!g) return;
  const char *targets[2] = {"cpu", "h200"};
  for (int t = 0; t < 2; t++) {
    evtc_diag d = {0};
    evtc_graph *h = evtc_program_optimize_forward(g, targets[t], evtc_backend_cpu(), NULL, &d);
    CHECK(h && d.status == EVTC_OK, "forward passes for %s: nothing kept: %s", targets[t], d.msg);
    if (h)
      CHECK(count_op(h, EVTC_OP_CONV2D) == 0 && count_op(h, EVTC_OP_MATMUL) == 1 &&
                count_op(h, EVTC_OP_ATTENTION) == 0 && count_op(h, EVTC_OP_SOFTMAX) == 1,
            "forward passes for %s: %d conv2d, %d matmul, %d attention, %d softmax", targets[t],
            count_op(h, EVTC_OP_CONV2D), count_op(h, EVTC_OP_MATMUL), count_op(h, EVTC_OP_ATTENTION),
            count_op(h, EVTC_OP_SOFTMAX));
    evtc_graph_free(h);
  }
  evtc_graph_free(g);
}

int main(void) {
  for (size_t i = 0; i < sizeof rewritten / sizeof rewritten[0]; i++) check_rewritten(&rewritten[i]);
  for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) check_kept(kept[i].name, kept[i].text);
  check_forward_passes();
  return check_summary();
}
