/* rules_layout.c -- gradients of reductions and data movement.
 *
 * Each op's adjoint is another layout op: reductions broadcast back
 * (expand), reshape and permute invert, slice pads (interior = step - 1),
 * pad and concat slice, gather and embedding scatter-add, scatter_add
 * gathers.  reduce_max/min share the gradient equally among the positions
 * equal to the result.
 */
#include "autodiff/rules.h"

static evtc_node *X(evtc_vjp *v, int i) { return v->n->inputs[i]; }

/* The reduced axes of a reduce node as a mask; returns their element count. */
static int64_t reduced_axes(const evtc_node *n, bool *mask) {
  const evtc_type *t = &n->inputs[0]->type;
  const evtc_attr *a = evtc_node_attr(n, "axes");
  for (int d = 0; d < t->rank; d++) mask[d] = a->n == 0;
  for (int i = 0; i < a->n; i++) mask[evtc_axis_norm(a->v.ints[i], t->rank)] = true;
  int64_t count = 1;
  for (int d = 0; d < t->rank; d++)
    if (mask[d]) count *= t->shape[d];
  return count;
}

/* A reduce node's output (or its gradient) reshaped to keepdims form. */
static evtc_node *kept(evtc_vjp *v, evtc_node *y) {
  const evtc_type *t = &X(v, 0)->type;
  if (evtc_node_int(v->n, "keepdims")) return y;
  bool mask[EVTC_MAX_RANK];
  reduced_axes(v->n, mask);
  int64_t shape[EVTC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) shape[d] = mask[d] ? 1 : t->shape[d];
  return evtc_vjp_reshape(v->g, y, t->rank, shape);
}

/* dx[0] = g (of keepdims shape) broadcast to the input's shape. */
static void spread(evtc_vjp *v, evtc_node *g) {
  const evtc_type *t = &X(v, 0)->type;
  if (g && g->type.rank == t->rank && evtc_type_numel(&g->type) == evtc_type_numel(t)) {
    evtc_vjp_pass(v, 0, g);
    return;
  }
  evtc_attr at = evtc_attr_ints("shape", t->rank, t->shape);
  evtc_vjp_set(v, 0, EVTC_OP_EXPAND, &g, 1, &at, 1);
}

void evtc_vjp_reduce_sum(evtc_vjp *v) { spread(v, kept(v, v->dy)); }

void evtc_vjp_reduce_mean(evtc_vjp *v) {
  bool mask[EVTC_MAX_RANK];
  double count = (double)reduced_axes(v->n, mask);
  spread(v, kept(v, evtc_binary(v->g, EVTC_OP_MUL, v->dy, evtc_vjp_const(v, 1.0 / count))));
}

/* dx = mask * dy / count, mask = (x == y) as a float, count = ties per result. */
void evtc_vjp_reduce_extremum(evtc_vjp *v) {
  evtc_graph *g = v->g;
  evtc_node *x = X(v, 0);
  bool mask[EVTC_MAX_RANK];
  reduced_axes(v->n, mask);
  int64_t axes[EVTC_MAX_RANK];
  int n_axes = 0;
  for (int d = 0; d < x->type.rank; d++)
    if (mask[d]) axes[n_axes++] = d;
  evtc_attr cast = evtc_attr_dtype("dtype", x->type.dtype);
  evtc_node *eq = evtc_binary(g, EVTC_OP_EQ, x, kept(v, v->n));
  evtc_node *m = evtc_node_add(g, EVTC_OP_CAST, &eq, 1, &cast, 1, NULL);
  evtc_node *count = evtc_vjp_reduce(g, EVTC_OP_REDUCE_SUM, m, n_axes, axes, true);
  evtc_node *in[2] = {m, evtc_binary(g, EVTC_OP_DIV, kept(v, v->dy), count)};
  evtc_vjp_set(v, 0, EVTC_OP_MUL, in, 2, NULL, 0);
}

void evtc_vjp_reshape_rule(evtc_vjp *v) {
  const evtc_type *t = &X(v, 0)->type;
  evtc_attr at = evtc_attr_ints("shape", t->rank, t->shape);
  evtc_vjp_set(v, 0, EVTC_OP_RESHAPE, &v->dy, 1, &at, 1);
}

void evtc_vjp_permute(evtc_vjp *v) {
  const evtc_attr *p = evtc_node_attr(v->n, "perm");
  int64_t inv[EVTC_MAX_RANK];
  for (int i = 0; i < p->n; i++) inv[p->v.ints[i]] = i;
  evtc_attr at = evtc_attr_ints("perm", p->n, inv);
  evtc_vjp_set(v, 0, EVTC_OP_PERMUTE, &v->dy, 1, &at, 1);
}

void evtc_vjp_expand_rule(evtc_vjp *v) { evtc_vjp_pass(v, 0, v->dy); }

/* Python's clamped start of start:end over a dim of size s. */
static int64_t clamp_index(int64_t i, int64_t s) {
  if (i < 0) i += s;
  return i < 0 ? 0 : i > s ? s : i;
}

/* slice start:end:step picks start, start+step, ... : pad dy back with
 * lo = start, interior = step - 1 and the rest of the dim as hi. */
void evtc_vjp_slice(evtc_vjp *v) {
  const evtc_type *t = &X(v, 0)->type;
  const evtc_attr *axes = evtc_node_attr(v->n, "axes"), *starts = evtc_node_attr(v->n, "starts"),
                  *steps = evtc_node_attr(v->n, "steps");
  int64_t pads[2 * EVTC_MAX_RANK] = {0}, interior[EVTC_MAX_RANK] = {0};
  for (int i = 0; i < starts->n; i++) {
    int ax = axes->n ? evtc_axis_norm(axes->v.ints[i], t->rank) : i;
    int64_t step = steps->n ? steps->v.ints[i] : 1, len = v->n->type.shape[ax];
    int64_t lo = clamp_index(starts->v.ints[i], t->shape[ax]);
    if (len == 0) lo = t->shape[ax];
    pads[ax] = lo;
    interior[ax] = step - 1;
    pads[t->rank + ax] = t->shape[ax] - (len ? lo + (len - 1) * step + 1 : lo);
  }
  evtc_attr at[2] = {evtc_attr_ints("pads", 2 * t->rank, pads), evtc_attr_ints("interior", t->rank, interior)};
  evtc_vjp_set(v, 0, EVTC_OP_PAD, &v->dy, 1, at, 2);
}

/* pad: slice the input's elements back out (step = interior + 1). */
void evtc_vjp_pad(evtc_vjp *v) {
  const evtc_type *t = &X(v, 0)->type;
  const evtc_attr *pads = evtc_node_attr(v->n, "pads"), *inter = evtc_node_attr(v->n, "interior");
  int64_t starts[EVTC_MAX_RANK], ends[EVTC_MAX_RANK], steps[EVTC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) {
    int64_t lo = pads->v.ints[d], step = (inter->n ? inter->v.ints[d] : 0) + 1, s = t->shape[d];
    starts[d] = lo;
    ends[d] = s ? lo + (s - 1) * step + 1 : lo;
    steps[d] = step;
  }
  evtc_attr at[3] = {evtc_attr_ints("starts", t->rank, starts), evtc_attr_ints("ends", t->rank, ends),
                     evtc_attr_ints("steps", t->rank, steps)};
  evtc_vjp_set(v, 0, EVTC_OP_SLICE, &v->dy, 1, at, 3);
}

/* concat: each input's gradient is its slab of dy along the axis. */
void evtc_vjp_concat(evtc_vjp *v) {
  int ax = evtc_axis_norm(evtc_node_int(v->n, "axis"), v->n->type.rank);
  int64_t off = 0;
  for (int i = 0; i < v->n->n_inputs; i++) {
    int64_t len = X(v, i)->type.shape[ax], axis = ax, start = off, end = off + len;
    off = end;
    if (!v->need[i]) continue;
    evtc_attr at[3] = {evtc_attr_ints("axes", 1, &axis), evtc_attr_ints("starts", 1, &start),
                       evtc_attr_ints("ends", 1, &end)};
    evtc_vjp_set(v, i, EVTC_OP_SLICE, &v->dy, 1, at, 3);
  }
}

void evtc_vjp_gather(evtc_vjp *v) {
  const evtc_type *t = &X(v, 0)->type;
  int ax = evtc_axis_norm(evtc_node_int(v->n, "axis"), t->rank);
  evtc_node *in[2] = {v->dy, X(v, 1)};
  evtc_attr at[2] = {evtc_attr_int("axis", ax), evtc_attr_int("size", t->shape[ax])};
  evtc_vjp_set(v, 0, EVTC_OP_SCATTER_ADD, in, 2, at, 2);
}

void evtc_vjp_scatter_add(evtc_vjp *v) {
  int ax = evtc_axis_norm(evtc_node_int(v->n, "axis"), v->n->type.rank);
  evtc_node *in[2] = {v->dy, X(v, 1)};
  evtc_attr at = evtc_attr_int("axis", ax);
  if (v->need[0]) evtc_vjp_set(v, 0, EVTC_OP_GATHER, in, 2, &at, 1);
  if (v->n->n_inputs == 3 && v->need[2]) evtc_vjp_pass(v, 2, v->dy);    /* the base: added as it is */
}

/* embedding(table, ids) is gather along axis 0. */
void evtc_vjp_embedding(evtc_vjp *v) {
  evtc_node *in[2] = {v->dy, X(v, 1)};
  evtc_attr at[2] = {evtc_attr_int("axis", 0), evtc_attr_int("size", X(v, 0)->type.shape[0])};
  evtc_vjp_set(v, 0, EVTC_OP_SCATTER_ADD, in, 2, at, 2);
}
