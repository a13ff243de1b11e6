/* rules.h -- the inside of autodiff: the vector-Jacobian rule table and the
 * helpers the rules share.
 *
 * A rule receives one forward node n of the joint graph and the gradient dy
 * of its output (n's type), and builds, for every input i with need[i], the
 * gradient dx[i] in input i's type (or leaves it NULL: zero contribution).
 * Rules build primitive ops only (plus the *_backward ops of ops.def) with
 * the builder; a builder error lands in g->diag and the driver reports it.
 * The final node of dx[i] carries name[i] when the driver asks for one
 * (so that "grad.<x>" names the gradient of x); the evtc_vjp_* helpers do
 * that bookkeeping.
 */
#ifndef EVTC_AUTODIFF_RULES_H
#define EVTC_AUTODIFF_RULES_H

#include "autodiff/autodiff.h"

typedef struct evtc_vjp {
  evtc_graph *g;
  evtc_node *n;              /* the forward node */
  evtc_node *dy;             /* the gradient of n (n's type) */
  const bool *need;          /* need[i]: input i wants a gradient */
  const char *const *name;   /* name[i]: name for dx[i]'s last node, or NULL */
  evtc_node **dx;            /* out: dx[i] in input i's type, NULL = zero */
  int32_t first;             /* nodes from this id on were built by autodiff */
} evtc_vjp;

typedef void (*evtc_vjp_rule)(evtc_vjp *v);

/* The rule of each op, indexed by evtc_op (rules.c); NULL: no gradient
 * flows through the op (leaves, comparisons, sign, one_hot, integer ops,
 * batchnorm running statistics). */
extern const evtc_vjp_rule evtc_vjp_rules[EVTC_OP_COUNT];

/* Sums x over the broadcast dims so that it has the shape of `to` (which
 * broadcasts to x's shape): leading extra dims and dims where `to` has 1.
 * Returns x itself when the shapes already agree; otherwise the last new
 * node gets `name` (NULL: automatic). */
evtc_node *evtc_sum_to_shape(evtc_graph *g, evtc_node *x, const evtc_type *to, const char *name);

/* ---- helpers for rules (autodiff.c) ---- */

/* Sets dx[i] = op(ins) whose result has input i's shape, named name[i]. */
void evtc_vjp_set(evtc_vjp *v, int i, evtc_op op, evtc_node *const *ins, int n_ins, const evtc_attr *attrs,
                  int n_attrs);
/* Sets dx[i] = op(ins) of the forward output's (broadcast) shape, summed back
 * to input i's shape. */
void evtc_vjp_set_bcast(evtc_vjp *v, int i, evtc_op op, evtc_node *const *ins, int n_ins);
/* Sets dx[i] = an existing node of output or input shape (summed back when needed). */
void evtc_vjp_pass(evtc_vjp *v, int i, evtc_node *x);
/* A scalar CONST of dtype dt: an unnamed one that autodiff built (id >=
 * from) when there is one, so the joint graph holds each constant once;
 * else a new one. */
evtc_node *evtc_vjp_scalar(evtc_graph *g, int32_t from, evtc_dtype dt, double value);
/* evtc_vjp_scalar of dy's dtype. */
evtc_node *evtc_vjp_const(evtc_vjp *v, double value);
/* reduce op over the listed (normalised) axes; n_axes 0 means all. */
evtc_node *evtc_vjp_reduce(evtc_graph *g, evtc_op op, evtc_node *x, int n_axes, const int64_t *axes, bool keepdims);
evtc_node *evtc_vjp_reshape(evtc_graph *g, evtc_node *x, int rank, const int64_t *shape);

/* ---- the rules, by family ---- */

/* rules_elementwise.c */
void evtc_vjp_neg(evtc_vjp *v);
void evtc_vjp_abs(evtc_vjp *v);
void evtc_vjp_exp(evtc_vjp *v);
void evtc_vjp_log(evtc_vjp *v);
void evtc_vjp_sqrt(evtc_vjp *v);
void evtc_vjp_rsqrt(evtc_vjp *v);
void evtc_vjp_reciprocal(evtc_vjp *v);
void evtc_vjp_tanh(evtc_vjp *v);
void evtc_vjp_sigmoid(evtc_vjp *v);
void evtc_vjp_relu(evtc_vjp *v);
void evtc_vjp_gelu(evtc_vjp *v);
void evtc_vjp_gelu_tanh(evtc_vjp *v);
void evtc_vjp_erf(evtc_vjp *v);
void evtc_vjp_sin(evtc_vjp *v);
void evtc_vjp_cos(evtc_vjp *v);
void evtc_vjp_cast(evtc_vjp *v);
void evtc_vjp_add(evtc_vjp *v);
void evtc_vjp_sub(evtc_vjp *v);
void evtc_vjp_mul(evtc_vjp *v);
void evtc_vjp_div(evtc_vjp *v);
void evtc_vjp_pow(evtc_vjp *v);
void evtc_vjp_max(evtc_vjp *v);
void evtc_vjp_min(evtc_vjp *v);
void evtc_vjp_where(evtc_vjp *v);

/* rules_layout.c */
void evtc_vjp_reduce_sum(evtc_vjp *v);
void evtc_vjp_reduce_mean(evtc_vjp *v);
void evtc_vjp_reduce_extremum(evtc_vjp *v);   /* reduce_max and reduce_min */
void evtc_vjp_reshape_rule(evtc_vjp *v);
void evtc_vjp_permute(evtc_vjp *v);
void evtc_vjp_expand_rule(evtc_vjp *v);
void evtc_vjp_slice(evtc_vjp *v);
void evtc_vjp_concat(evtc_vjp *v);
void evtc_vjp_pad(evtc_vjp *v);
void evtc_vjp_gather(evtc_vjp *v);
void evtc_vjp_scatter_add(evtc_vjp *v);
void evtc_vjp_embedding(evtc_vjp *v);

/* rules_mainloop.c */
void evtc_vjp_matmul(evtc_vjp *v);             /* matmul and batch_matmul */
void evtc_vjp_conv2d(evtc_vjp *v);
void evtc_vjp_conv2d_backward_input(evtc_vjp *v);
void evtc_vjp_conv2d_backward_weight(evtc_vjp *v);
void evtc_vjp_maxpool2d(evtc_vjp *v);
void evtc_vjp_maxpool2d_backward(evtc_vjp *v);
void evtc_vjp_avgpool2d(evtc_vjp *v);
void evtc_vjp_avgpool2d_backward(evtc_vjp *v);
void evtc_vjp_global_avgpool(evtc_vjp *v);

/* rules_composite.c */
void evtc_vjp_softmax(evtc_vjp *v);
void evtc_vjp_log_softmax(evtc_vjp *v);
void evtc_vjp_layernorm(evtc_vjp *v);
void evtc_vjp_batchnorm(evtc_vjp *v);
void evtc_vjp_dropout(evtc_vjp *v);
void evtc_vjp_cross_entropy(evtc_vjp *v);
void evtc_vjp_mse(evtc_vjp *v);

/* rules_attention.c */
void evtc_vjp_attention(evtc_vjp *v);

/* ---- optimizer updates (optim.c) ---- */

/* Appends the update ops of opt (SGD or ADAMW) for params[k] with gradient
 * grads[k] (k < n) and the matching outputs; constants are shared with
 * nodes from id `from` on (evtc_vjp_scalar).  false with g->diag set on a
 * builder error. */
bool evtc_optim_build(evtc_graph *g, int32_t from, const evtc_optim_config *opt, evtc_node *const *params,
                      evtc_node *const *grads, int n);

#endif
