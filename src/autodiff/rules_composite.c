/* rules_composite.c -- gradients of the composite ops, in primitives.
 *
 * softmax:      dx = y (dy - sum(dy y))           (sums over the axis, kept)
 * log_softmax:  dx = dy - exp(y) sum(dy)
 * layernorm and batchnorm (training statistics) recompute mean and rstd from
 * x, then dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy gamma,
 * dgamma = sum(dy xhat), dbeta = sum(dy) over the non-parameter axes.
 * dropout:      the same dropout (same p, seed: the mask comes from the counter).
 * cross_entropy: (softmax(logits) - one_hot(labels)) dy / N.
 * mse:          2 (a - b) dy / numel, negated for b.
 */
#include "autodiff/rules.h"

static evtc_node *X(evtc_vjp *v, int i) { return v->n->inputs[i]; }
static evtc_node *bin(evtc_vjp *v, evtc_op op, evtc_node *a, evtc_node *b) { return evtc_binary(v->g, op, a, b); }

static int64_t softmax_axis(const evtc_vjp *v) {
  return evtc_axis_norm(evtc_node_int(v->n, "axis"), v->n->type.rank);
}

void evtc_vjp_softmax(evtc_vjp *v) {
  int64_t ax = softmax_axis(v);
  evtc_node *y = v->n;
  evtc_node *s = evtc_vjp_reduce(v->g, EVTC_OP_REDUCE_SUM, bin(v, EVTC_OP_MUL, v->dy, y), 1, &ax, true);
  evtc_node *in[2] = {y, bin(v, EVTC_OP_SUB, v->dy, s)};
  evtc_vjp_set(v, 0, EVTC_OP_MUL, in, 2, NULL, 0);
}

void evtc_vjp_log_softmax(evtc_vjp *v) {
  int64_t ax = softmax_axis(v);
  evtc_node *s = evtc_vjp_reduce(v->g, EVTC_OP_REDUCE_SUM, v->dy, 1, &ax, true);
  evtc_node *in[2] = {v->dy, bin(v, EVTC_OP_MUL, evtc_unary(v->g, EVTC_OP_EXP, v->n), s)};
  evtc_vjp_set(v, 0, EVTC_OP_SUB, in, 2, NULL, 0);
}

/* Shared by layernorm and batchnorm: recomputes the statistics over
 * axes[0..n_axes) of x (kept dims), sets dx[0] when needed (gamma_b = gamma
 * shaped to broadcast against x) and returns xhat for the parameter grads. */
static evtc_node *norm_backward(evtc_vjp *v, int n_axes, const int64_t *axes, evtc_node *gamma_b, double eps) {
  evtc_graph *g = v->g;
  evtc_node *x = X(v, 0);
  evtc_node *mean = evtc_vjp_reduce(g, EVTC_OP_REDUCE_MEAN, x, n_axes, axes, true);
  evtc_node *xc = bin(v, EVTC_OP_SUB, x, mean);
  evtc_node *var = evtc_vjp_reduce(g, EVTC_OP_REDUCE_MEAN, bin(v, EVTC_OP_MUL, xc, xc), n_axes, axes, true);
  evtc_node *rstd = evtc_unary(g, EVTC_OP_RSQRT, bin(v, EVTC_OP_ADD, var, evtc_vjp_const(v, eps)));
  evtc_node *xhat = bin(v, EVTC_OP_MUL, xc, rstd);
  if (!v->need[0]) return xhat;
  evtc_node *gx = bin(v, EVTC_OP_MUL, v->dy, gamma_b);
  evtc_node *m1 = evtc_vjp_reduce(g, EVTC_OP_REDUCE_MEAN, gx, n_axes, axes, true);
  evtc_node *m2 = evtc_vjp_reduce(g, EVTC_OP_REDUCE_MEAN, bin(v, EVTC_OP_MUL, gx, xhat), n_axes, axes, true);
  evtc_node *inner = bin(v, EVTC_OP_SUB, bin(v, EVTC_OP_SUB, gx, m1), bin(v, EVTC_OP_MUL, xhat, m2));
  evtc_node *in[2] = {rstd, inner};
  evtc_vjp_set(v, 0, EVTC_OP_MUL, in, 2, NULL, 0);
  return xhat;
}

/* gamma and beta have x's trailing dims: sums over the leading ones. */
void evtc_vjp_layernorm(evtc_vjp *v) {
  int rank = v->n->type.rank, ax = evtc_axis_norm(evtc_node_int(v->n, "axis"), rank);
  int64_t axes[EVTC_MAX_RANK];
  for (int d = ax; d < rank; d++) axes[d - ax] = d;
  evtc_node *xhat = norm_backward(v, rank - ax, axes, X(v, 1), evtc_node_float(v->n, "eps"));
  if (v->need[1]) evtc_vjp_pass(v, 1, bin(v, EVTC_OP_MUL, v->dy, xhat));
  if (v->need[2]) evtc_vjp_pass(v, 2, v->dy);
}

/* Statistics over every axis but 1; gamma [C] reshaped to [C,1,...]. */
void evtc_vjp_batchnorm(evtc_vjp *v) {
  const evtc_type *t = &v->n->type;
  int64_t axes[EVTC_MAX_RANK], shape[EVTC_MAX_RANK];
  int n = 0;
  for (int d = 0; d < t->rank; d++)
    if (d != 1) axes[n++] = d;
  shape[0] = t->shape[1];
  for (int d = 1; d < t->rank - 1; d++) shape[d] = 1;
  evtc_node *gamma_b = v->need[0] ? evtc_vjp_reshape(v->g, X(v, 1), t->rank - 1, shape) : NULL;
  evtc_node *xhat = norm_backward(v, n, axes, gamma_b, evtc_node_float(v->n, "eps"));
  evtc_attr at = evtc_attr_ints("axes", n, axes);
  for (int i = 1; i <= 2; i++) {
    if (!v->need[i]) continue;
    evtc_node *s = i == 1 ? bin(v, EVTC_OP_MUL, v->dy, xhat) : v->dy;
    evtc_vjp_set(v, i, EVTC_OP_REDUCE_SUM, &s, 1, &at, 1);
  }
}

void evtc_vjp_dropout(evtc_vjp *v) {
  evtc_attr at[2] = {*evtc_node_attr(v->n, "p"), *evtc_node_attr(v->n, "seed")};
  evtc_vjp_set(v, 0, EVTC_OP_DROPOUT, &v->dy, 1, at, 2);
}

void evtc_vjp_cross_entropy(evtc_vjp *v) {
  evtc_node *logits = X(v, 0), *labels = X(v, 1);
  int64_t n = logits->type.shape[0], c = logits->type.shape[1];
  evtc_attr ax = evtc_attr_int("axis", 1);
  evtc_attr oh[3] = {evtc_attr_int("depth", c), evtc_attr_dtype("dtype", logits->type.dtype),
                     evtc_attr_int("checked", 1)};   /* labels out of range are an error, as in the forward */
  evtc_node *sm = evtc_node_add(v->g, EVTC_OP_SOFTMAX, &logits, 1, &ax, 1, NULL);
  evtc_node *hot = evtc_node_add(v->g, EVTC_OP_ONE_HOT, &labels, 1, oh, 3, NULL);
  evtc_node *in[2] = {bin(v, EVTC_OP_SUB, sm, hot), bin(v, EVTC_OP_MUL, v->dy, evtc_vjp_const(v, 1.0 / (double)n))};
  evtc_vjp_set(v, 0, EVTC_OP_MUL, in, 2, NULL, 0);
}

void evtc_vjp_mse(evtc_vjp *v) {
  double scale = 2.0 / (double)evtc_type_numel(&X(v, 0)->type);
  evtc_node *diff = bin(v, EVTC_OP_SUB, X(v, 0), X(v, 1));
  evtc_node *s = bin(v, EVTC_OP_MUL, v->dy, evtc_vjp_const(v, scale));
  if (v->need[0]) {
    evtc_node *in[2] = {diff, s};
    evtc_vjp_set(v, 0, EVTC_OP_MUL, in, 2, NULL, 0);
  }
  if (v->need[1]) {
    evtc_node *in[2] = {diff, evtc_unary(v->g, EVTC_OP_NEG, s)};
    evtc_vjp_set(v, 1, EVTC_OP_MUL, in, 2, NULL, 0);
  }
}
