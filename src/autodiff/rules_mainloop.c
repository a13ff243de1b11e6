/* rules_mainloop.c -- gradients of matmul, convolution and pooling.
 *
 * matmul: the four trans_a/trans_b cases each give two matmuls; batched
 * results are summed back over broadcast batch dims -- or, for a weight
 * the whole batch shares, computed as one matmul over the folded batch.  conv2d and pooling map
 * to their *_backward ops with the same geometry; the backward ops are
 * linear in their gradient operand, so their own rules are the forward op
 * or the other backward op (the adjoint pairs of conv2d).
 */
#include "autodiff/rules.h"

static evtc_node *X(evtc_vjp *v, int i) { return v->n->inputs[i]; }

/* x [batch.., R, C] as [batch*R, C]: a view of the same data. */
static evtc_node *fold_rows(evtc_graph *g, evtc_node *x) {
  const evtc_type *t = &x->type;
  int64_t shape[2] = {evtc_type_numel(t) / t->shape[t->rank - 1], t->shape[t->rank - 1]};
  evtc_attr at = evtc_attr_ints("shape", 2, shape);
  return evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &at, 1, NULL);
}

/* Whether the sum over y's batch of op(a) x op(b) is one matmul with the batch folded into the contraction:
 * the target t is broadcast over every batch dim (a weight shared by the batch), a and b carry y's whole
 * batch and both are contracted over their rows (ta, !tb), so [batch.., K, *] is [batch*K, *] as it lies. */
static bool batch_folds(const evtc_type *t, const evtc_type *y, const evtc_node *a, const evtc_node *b, int ta,
                        int tb) {
  if (!ta || tb || y->rank < 3 || a->type.rank != y->rank || b->type.rank != y->rank) return false;
  for (int d = 0; d < t->rank - 2; d++)
    if (t->shape[d] != 1) return false;
  for (int d = 0; d < y->rank - 2; d++)
    if (a->type.shape[d] != y->shape[d] || b->type.shape[d] != y->shape[d]) return false;
  return true;
}

/* dx[i] = op(a) x op(b), summed back over broadcast batch dims: for a weight shared by the whole batch one
 * matmul over the folded batch (dW = X^T dY over every row, as a GEMM of contraction batch*K), not a batched
 * product and a sum. */
static void mm_out(evtc_vjp *v, int i, evtc_node *a, evtc_node *b, int ta, int tb) {
  const evtc_type *t = &X(v, i)->type, *y = &v->n->type;
  if (batch_folds(t, y, a, b, ta, tb)) {
    evtc_node *in[2] = {fold_rows(v->g, a), fold_rows(v->g, b)};
    evtc_attr at[2] = {evtc_attr_int("trans_a", 1), evtc_attr_int("trans_b", 0)};
    evtc_node *r = evtc_node_add(v->g, EVTC_OP_MATMUL, in, 2, at, 2, t->rank == 2 ? v->name[i] : NULL);
    if (t->rank > 2) {
      evtc_attr to = evtc_attr_ints("shape", t->rank, t->shape);
      r = evtc_node_add(v->g, EVTC_OP_RESHAPE, &r, 1, &to, 1, v->name[i]);
    }
    v->dx[i] = r;
    return;
  }
  bool direct = t->rank == y->rank;
  for (int d = 0; direct && d < t->rank - 2; d++) direct = t->shape[d] == y->shape[d];
  evtc_node *in[2] = {a, b};
  evtc_attr at[2] = {evtc_attr_int("trans_a", ta), evtc_attr_int("trans_b", tb)};
  evtc_node *r = evtc_node_add(v->g, v->n->op, in, 2, at, 2, direct ? v->name[i] : NULL);
  v->dx[i] = direct ? r : evtc_sum_to_shape(v->g, r, t, v->name[i]);
}

void evtc_vjp_matmul(evtc_vjp *v) {
  evtc_node *a = X(v, 0), *b = X(v, 1), *dy = v->dy;
  bool ta = evtc_node_int(v->n, "trans_a") != 0, tb = evtc_node_int(v->n, "trans_b") != 0;
  if (v->need[0]) {
    if (!ta) mm_out(v, 0, dy, b, 0, !tb);        /* dA = dY op(B)^T */
    else mm_out(v, 0, b, dy, tb, 1);             /* dA^T = dY op(B)^T  =>  dA = op(B) dY^T */
  }
  if (v->need[1]) {
    if (!tb) mm_out(v, 1, a, dy, !ta, 0);        /* dB = op(A)^T dY */
    else mm_out(v, 1, dy, a, 1, ta);             /* dB^T = op(A)^T dY  =>  dB = dY^T op(A) */
  }
}

/* The geometry attributes of a conv node, plus `shape` when shape != NULL. */
static int conv_attrs(const evtc_node *n, const evtc_type *shape, evtc_attr *at) {
  const char *names[4] = {"stride", "padding", "dilation", "groups"};
  for (int k = 0; k < 4; k++) at[k] = *evtc_node_attr(n, names[k]);
  if (!shape) return 4;
  at[4] = evtc_attr_ints("shape", shape->rank, shape->shape);
  return 5;
}

static void conv_out(evtc_vjp *v, int i, evtc_op op, evtc_node *a, evtc_node *b, const evtc_type *shape) {
  evtc_attr at[5];
  evtc_node *in[2] = {a, b};
  evtc_vjp_set(v, i, op, in, 2, at, conv_attrs(v->n, shape, at));
}

/* y = conv2d(x, w) */
void evtc_vjp_conv2d(evtc_vjp *v) {
  evtc_node *x = X(v, 0), *w = X(v, 1);
  if (v->need[0]) conv_out(v, 0, EVTC_OP_CONV2D_BACKWARD_INPUT, v->dy, w, &x->type);
  if (v->need[1]) conv_out(v, 1, EVTC_OP_CONV2D_BACKWARD_WEIGHT, x, v->dy, &w->type);
}

/* dx = conv2d_backward_input(g, w): <G, dx> = <conv2d(G, w), g> */
void evtc_vjp_conv2d_backward_input(evtc_vjp *v) {
  evtc_node *g = X(v, 0), *w = X(v, 1);
  if (v->need[0]) conv_out(v, 0, EVTC_OP_CONV2D, v->dy, w, NULL);
  if (v->need[1]) conv_out(v, 1, EVTC_OP_CONV2D_BACKWARD_WEIGHT, v->dy, g, &w->type);
}

/* dw = conv2d_backward_weight(x, g): <G, dw> = <conv2d(x, G), g> */
void evtc_vjp_conv2d_backward_weight(evtc_vjp *v) {
  evtc_node *x = X(v, 0), *g = X(v, 1);
  if (v->need[0]) conv_out(v, 0, EVTC_OP_CONV2D_BACKWARD_INPUT, g, v->dy, &x->type);
  if (v->need[1]) conv_out(v, 1, EVTC_OP_CONV2D, x, v->dy, NULL);
}

/* The attributes of a pool node (kernel, stride, padding[, count_include_pad])
 * plus `shape` when shape != NULL. */
static int pool_attrs(const evtc_node *n, bool avg, const evtc_type *shape, evtc_attr *at) {
  int k = 0;
  at[k++] = *evtc_node_attr(n, "kernel");
  at[k++] = *evtc_node_attr(n, "stride");
  at[k++] = *evtc_node_attr(n, "padding");
  if (avg) at[k++] = *evtc_node_attr(n, "count_include_pad");
  if (shape) at[k++] = evtc_attr_ints("shape", shape->rank, shape->shape);
  return k;
}

void evtc_vjp_maxpool2d(evtc_vjp *v) {
  evtc_attr at[5];
  evtc_node *in[2] = {v->dy, X(v, 0)};
  evtc_vjp_set(v, 0, EVTC_OP_MAXPOOL2D_BACKWARD, in, 2, at, pool_attrs(v->n, false, NULL, at));
}

/* maxpool2d_backward(g, x) is linear in g, piecewise constant in x (no
 * gradient for x).  The gradient for g would gather G at each window's
 * first maximum, which no op of ops.def expresses yet. */
void evtc_vjp_maxpool2d_backward(evtc_vjp *v) {
  if (v->need[0])
    evtc_graph_fail(v->g, EVTC_ERR_UNSUPPORTED, v->n->name, v->n->op,
                    "no gradient with respect to the incoming gradient (second derivative of maxpool2d)");
}

void evtc_vjp_avgpool2d(evtc_vjp *v) {
  evtc_attr at[5];
  evtc_vjp_set(v, 0, EVTC_OP_AVGPOOL2D_BACKWARD, &v->dy, 1, at, pool_attrs(v->n, true, &X(v, 0)->type, at));
}

/* avgpool2d_backward is the adjoint of avgpool2d, so its adjoint is avgpool2d. */
void evtc_vjp_avgpool2d_backward(evtc_vjp *v) {
  evtc_attr at[5];
  evtc_vjp_set(v, 0, EVTC_OP_AVGPOOL2D, &v->dy, 1, at, pool_attrs(v->n, true, NULL, at));
}

void evtc_vjp_global_avgpool(evtc_vjp *v) {
  const evtc_type *t = &X(v, 0)->type;
  evtc_node *s = evtc_binary(v->g, EVTC_OP_MUL, v->dy, evtc_vjp_const(v, 1.0 / (double)(t->shape[2] * t->shape[3])));
  evtc_attr at = evtc_attr_ints("shape", t->rank, t->shape);
  evtc_vjp_set(v, 0, EVTC_OP_EXPAND, &s, 1, &at, 1);
}
