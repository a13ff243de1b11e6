/* decompose.c -- the `decompose` pass: composite ops into primitives.
 *
 * Rewrites (axes normalised; every reduction keeps its dims unless said):
 *   softmax(x, a)      m = reduce_max(x, a); e = exp(x - m); e / reduce_sum(e, a)
 *   log_softmax(x, a)  d = x - m; d - log(reduce_sum(exp(d), a))   (never log(softmax):
 *                      that underflows to log 0 where this stays finite)
 *   layernorm(x, g, b) over axes a..r-1: mean, xc = x - mean, var = mean(xc xc),
 *                      xhat = xc rsqrt(var + eps); xhat g + b -- the same nodes
 *                      autodiff's backward recomputes, so CSE shares them
 *   batchnorm(x, g, b) over every axis but 1: mean = E[x], var = E[x x] - mean^2
 *                      (EVT's batch_norm_stat: both reductions read x once, in one
 *                      kernel; in f32 it loses digits when |mean| >> std);
 *                      (x - mean) (rsqrt(var + eps) g) + b, g and b reshaped to [C,1,..]
 *   batchnorm_running_mean(x, rm)  (1-m) rm + m reshape(mean, [C])
 *   batchnorm_running_var(x, rv)   (1-m) rv + m reshape(var n/(n-1), [C]), var as in
 *                      batchnorm (kept whole when a channel has n < 2 values, so the
 *                      interpreter's error stays)
 *   gelu(x)            (x 0.5) (erf(x / sqrt 2) + 1)
 *   gelu_tanh(x)       (x 0.5) (tanh((x + x 0.044715 x x) sqrt(2/pi)) + 1)
 *   cross_entropy(z, y) reduce_sum(log_softmax(z, 1) one_hot(y, C)) (-1/N): the
 *                      log-softmax nodes are those of softmax(z, 1), which the
 *                      backward holds ((softmax - one_hot) dy / N), so CSE merges
 *                      forward and backward
 *   mse(a, b)          reduce_mean((a - b)(a - b)) over all axes
 *   embedding(t, ids)  gather(t, ids, axis 0)
 *   global_avgpool(x)  reduce_mean(x, [2,3])
 * Each agrees with the interpreter's composite kernel up to rounding (most
 * are the same operations in the same order).  One difference on bad
 * input: an out-of-range label of cross_entropy gives a zero one-hot row
 * instead of a run-time error (gather keeps embedding's range check).
 * Dropout stays: it is already ELEMENTWISE, and no primitive op draws random
 * numbers; its Philox mask is computed in the epilogue (EVT's VisitorRand).
 */
#include <math.h>
#include <stdio.h>

#include "passes/pass.h"
#include "passes/pattern.h"

#define SQRT1_2 0.70710678118654752440
#define SQRT_2_OVER_PI 0.79788456080286535588

static evtc_node *scalar(evtc_rewrite *rw, const evtc_node *like, double v, const char *base, const char *tag) {
  return evtc_pat_const(rw, like->type.dtype, 0, NULL, v, base, tag);
}

/* softmax (log_form false) or log_softmax of x over axis ax, the final node named `name`. */
static evtc_node *softmax_parts(evtc_rewrite *rw, evtc_node *x, int64_t ax, bool log_form, const char *name) {
  evtc_node *m = evtc_pat_reduce(rw, EVTC_OP_REDUCE_MAX, x, 1, &ax, true, name, "max");
  evtc_node *d = evtc_pat_bin(rw, EVTC_OP_SUB, x, m, name, "shift");
  evtc_node *e = evtc_pat_un(rw, EVTC_OP_EXP, d, name, "exp");
  evtc_node *s = evtc_pat_reduce(rw, EVTC_OP_REDUCE_SUM, e, 1, &ax, true, name, "sum");
  if (!log_form) return evtc_pat_bin(rw, EVTC_OP_DIV, e, s, name, NULL);
  return evtc_pat_bin(rw, EVTC_OP_SUB, d, evtc_pat_un(rw, EVTC_OP_LOG, s, name, "lse"), name, NULL);
}

static evtc_node *cross_entropy(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const evtc_type *t = &in[0]->type;
  char lsm_name[256];
  snprintf(lsm_name, sizeof lsm_name, "%.200s.lsm", n->name);
  evtc_node *lsm = softmax_parts(rw, in[0], 1, true, lsm_name);
  evtc_attr oh[3] = {evtc_attr_int("depth", t->shape[1]), evtc_attr_dtype("dtype", t->dtype),
                     evtc_attr_int("checked", 1)};   /* a label out of range stays an error */
  evtc_node *hot = evtc_pat_op(rw, EVTC_OP_ONE_HOT, &in[1], 1, oh, 3, n->name, "onehot");
  evtc_node *picked = evtc_pat_bin(rw, EVTC_OP_MUL, lsm, hot, n->name, "picked");
  evtc_node *sum = evtc_pat_reduce(rw, EVTC_OP_REDUCE_SUM, picked, 0, NULL, false, n->name, "sum");
  return evtc_pat_bin(rw, EVTC_OP_MUL, sum, scalar(rw, n, -1.0 / (double)t->shape[0], n->name, "scale"), n->name,
                      NULL);
}

static evtc_node *gelu(evtc_rewrite *rw, const evtc_node *n, evtc_node *x) {
  const char *b = n->name;
  evtc_node *half = evtc_pat_bin(rw, EVTC_OP_MUL, x, scalar(rw, n, 0.5, b, "c.half"), b, "half");
  evtc_node *inner;
  if (n->op == EVTC_OP_GELU) {
    inner = evtc_pat_un(rw, EVTC_OP_ERF, evtc_pat_bin(rw, EVTC_OP_MUL, x, scalar(rw, n, SQRT1_2, b, "c.k"), b, "arg"),
                        b, "erf");
  } else {
    evtc_node *c = evtc_pat_bin(rw, EVTC_OP_MUL, x, scalar(rw, n, 0.044715, b, "c.cubic"), b, "cubic");
    c = evtc_pat_bin(rw, EVTC_OP_MUL, evtc_pat_bin(rw, EVTC_OP_MUL, c, x, b, "cubic2"), x, b, "cubic3");
    evtc_node *arg = evtc_pat_bin(rw, EVTC_OP_MUL, evtc_pat_bin(rw, EVTC_OP_ADD, x, c, b, "poly"),
                                  scalar(rw, n, SQRT_2_OVER_PI, b, "c.k"), b, "arg");
    inner = evtc_pat_un(rw, EVTC_OP_TANH, arg, b, "tanh");
  }
  evtc_node *one = evtc_pat_bin(rw, EVTC_OP_ADD, inner, scalar(rw, n, 1.0, b, "c.one"), b, "plus1");
  return evtc_pat_bin(rw, EVTC_OP_MUL, half, one, b, NULL);
}

static evtc_node *layernorm(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const char *b = n->name;
  int rank = n->type.rank, ax = evtc_axis_norm(evtc_node_int(n, "axis"), rank);
  int64_t axes[EVTC_MAX_RANK];
  for (int d = ax; d < rank; d++) axes[d - ax] = d;
  evtc_node *mean = evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, in[0], rank - ax, axes, true, b, "mean");
  evtc_node *xc = evtc_pat_bin(rw, EVTC_OP_SUB, in[0], mean, b, "xc");
  evtc_node *var = evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, evtc_pat_bin(rw, EVTC_OP_MUL, xc, xc, b, "sq"),
                                   rank - ax, axes, true, b, "var");
  evtc_node *veps = evtc_pat_bin(rw, EVTC_OP_ADD, var, scalar(rw, n, evtc_node_float(n, "eps"), b, "c.eps"), b,
                                 "veps");
  evtc_node *xhat = evtc_pat_bin(rw, EVTC_OP_MUL, xc, evtc_pat_un(rw, EVTC_OP_RSQRT, veps, b, "rstd"), b, "xhat");
  return evtc_pat_bin(rw, EVTC_OP_ADD, evtc_pat_bin(rw, EVTC_OP_MUL, xhat, in[1], b, "scaled"), in[2], b, NULL);
}

/* The batch mean of x[N,C,...] over every axis but 1 (kept dims), named after b. */
static evtc_node *batch_mean(evtc_rewrite *rw, evtc_node *x, const char *b) {
  int64_t axes[EVTC_MAX_RANK];
  int n = 0;
  for (int d = 0; d < x->type.rank; d++)
    if (d != 1) axes[n++] = d;
  return evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, x, n, axes, true, b, "mean");
}

/* The biased batch variance E[x x] - mean^2 over the axes of `mean`. */
static evtc_node *batch_var(evtc_rewrite *rw, evtc_node *x, evtc_node *mean, const char *b) {
  const evtc_attr *axes = evtc_node_attr(mean, "axes");
  evtc_node *msq = evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, evtc_pat_bin(rw, EVTC_OP_MUL, x, x, b, "sq"), axes->n,
                                   axes->v.ints, true, b, "meansq");
  return evtc_pat_bin(rw, EVTC_OP_SUB, msq, evtc_pat_bin(rw, EVTC_OP_MUL, mean, mean, b, "mean2"), b, "var");
}

static evtc_node *batchnorm(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const char *b = n->name;
  int64_t cshape[EVTC_MAX_RANK];
  evtc_node *mean = batch_mean(rw, in[0], b), *var = batch_var(rw, in[0], mean, b);
  evtc_node *veps = evtc_pat_bin(rw, EVTC_OP_ADD, var, scalar(rw, n, evtc_node_float(n, "eps"), b, "c.eps"), b,
                                 "veps");
  int rank = n->type.rank;
  cshape[0] = n->type.shape[1];
  for (int d = 1; d < rank - 1; d++) cshape[d] = 1;
  evtc_node *gamma = evtc_pat_reshape(rw, in[1], rank - 1, cshape, b, "gamma");
  evtc_node *beta = evtc_pat_reshape(rw, in[2], rank - 1, cshape, b, "beta");
  evtc_node *scale = evtc_pat_bin(rw, EVTC_OP_MUL, evtc_pat_un(rw, EVTC_OP_RSQRT, veps, b, "rstd"), gamma, b,
                                  "scale");
  evtc_node *xc = evtc_pat_bin(rw, EVTC_OP_SUB, in[0], mean, b, "xc");
  return evtc_pat_bin(rw, EVTC_OP_ADD, evtc_pat_bin(rw, EVTC_OP_MUL, xc, scale, b, "scaled"), beta, b, NULL);
}

/* (1-m) running + m stat, stat the batch mean or unbiased variance per channel;
 * NULL (keep the composite) when the variance has fewer than 2 values. */
static evtc_node *batchnorm_running(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const char *b = n->name;
  int64_t count = evtc_type_numel(&in[0]->type) / in[0]->type.shape[1];
  double m = evtc_node_float(n, "momentum");
  if (n->op == EVTC_OP_BATCHNORM_RUNNING_VAR && count < 2) return NULL;
  evtc_node *stat = batch_mean(rw, in[0], b);
  if (n->op == EVTC_OP_BATCHNORM_RUNNING_VAR) {
    evtc_node *bessel = scalar(rw, n, (double)count / (double)(count - 1), b, "c.bessel");
    stat = evtc_pat_bin(rw, EVTC_OP_MUL, batch_var(rw, in[0], stat, b), bessel, b, "unbiased");
  }
  stat = evtc_pat_reshape(rw, stat, 1, &in[0]->type.shape[1], b, "stat");
  evtc_node *old = evtc_pat_bin(rw, EVTC_OP_MUL, in[1], scalar(rw, n, 1.0 - m, b, "c.keep"), b, "old");
  evtc_node *now = evtc_pat_bin(rw, EVTC_OP_MUL, stat, scalar(rw, n, m, b, "c.momentum"), b, "new");
  return evtc_pat_bin(rw, EVTC_OP_ADD, old, now, b, NULL);
}

static evtc_node *decompose(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const char *b = n->name;
  switch (n->op) {
    case EVTC_OP_SOFTMAX:
    case EVTC_OP_LOG_SOFTMAX:
      return softmax_parts(rw, in[0], evtc_axis_norm(evtc_node_int(n, "axis"), n->type.rank),
                           n->op == EVTC_OP_LOG_SOFTMAX, b);
    case EVTC_OP_LAYERNORM: return layernorm(rw, n, in);
    case EVTC_OP_BATCHNORM: return batchnorm(rw, n, in);
    case EVTC_OP_BATCHNORM_RUNNING_MEAN:
    case EVTC_OP_BATCHNORM_RUNNING_VAR: return batchnorm_running(rw, n, in);
    case EVTC_OP_GELU:
    case EVTC_OP_GELU_TANH: return gelu(rw, n, in[0]);
    case EVTC_OP_CROSS_ENTROPY: return cross_entropy(rw, n, in);
    case EVTC_OP_MSE: {
      evtc_node *d = evtc_pat_bin(rw, EVTC_OP_SUB, in[0], in[1], b, "diff");
      return evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, evtc_pat_bin(rw, EVTC_OP_MUL, d, d, b, "sq"), 0, NULL, false,
                             b, NULL);
    }
    case EVTC_OP_EMBEDDING: {
      evtc_attr ax = evtc_attr_int("axis", 0);
      return evtc_pat_op(rw, EVTC_OP_GATHER, in, 2, &ax, 1, b, NULL);
    }
    case EVTC_OP_GLOBAL_AVGPOOL:
      return evtc_pat_reduce(rw, EVTC_OP_REDUCE_MEAN, in[0], 2, (int64_t[]){2, 3}, true, b, NULL);
    default: return NULL;
  }
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, decompose, d); }

const evtc_pass evtc_pass_decompose = {
    .name = "decompose",
    .summary = "softmax, log_softmax, layernorm, batchnorm (+running stats), gelu, cross_entropy, mse, "
               "embedding, global_avgpool into primitives",
    .run = run,
};
