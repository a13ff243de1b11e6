/* simplify.c -- the `simplify` pass: algebraic simplification, EVT's
 * "constant propagation" bundle without the folding (constant-fold does that).
 *
 * Identities (only where exact; a forwarded operand must already have the
 * node's type, and outputs and the loss keep their node):
 *   x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1 -> x       (x + 0 turns -0 into +0: equal values)
 *   neg(neg(x)) -> x;  a + neg(b) -> a - b;  neg(a) + b -> b - a;  a - neg(b) -> a + b
 *   x * 0 -> 0 for integer x only (for floats inf * 0 and nan * 0 are nan)
 *   x - x is left alone (nan - nan is nan, inf - inf too)
 * Strength reduction and reassociation (up to rounding):
 *   x / C -> x * (1/C) for a float CONST C (elementwise reciprocal)
 *   x - c -> x + (-c) for a uniform CONST c (exact), so constant chains meet
 *   (x op c1) op c2 -> x op (c1 op c2) for op in {+, *}, c1 and c2 uniform CONSTs
 * Common-factor extraction: a*b + a*c -> a*(b + c), a*b - a*c -> a*(b - c)
 *   when both products have no other consumer (a matched by node identity,
 *   in any operand position).
 * Reduction elimination (reduce = reduce_sum, _mean, _max, _min):
 *   a reduce over axes that all have size 1 -> reshape (or nothing);
 *   reduce(expand(x)) -> the reduce over the axes x really has, times the
 *   broadcast count for sums (when the dtype holds the count exactly), then
 *   reshape/expand to the result;
 *   reduce(reduce(x, A1), A2) of the same kind -> one reduce over A1 u A2
 *   when the inner one has no other consumer;
 *   reduce(reshape(x)) over a leading run of dims (keepdims 0) that the
 *   reshape only split or merged -> the reduce of x over its own leading
 *   dims (a bias gradient summed over [B, T, N] where the gradient was born
 *   as [B*T, N] rows: the sum then joins the kernel that makes the rows,
 *   and the reshape is left to those that need [B, T, N], a buffer alias).
 * Scatters into their base (one rounding fewer for f16 / bf16):
 *   add(x, scatter_add(u, idx)) -> scatter_add(u, idx, x) when the scatter
 *   has no other consumer: an embedding table's gradient beside a tied
 *   weight's (GPT-2's wte, BERT's word embeddings) in one kernel, which can
 *   write over x; when x is a slice of p's first `size` rows along the
 *   scatter's axis (gemm-pad's padded LM head), -> slice(scatter_add(u,
 *   idx, p)), which keeps p's rows beyond size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/pattern.h"
#include "runtime/precision.h"

/* The uniform value of n when it is a CONST with one, else NAN. */
static double uval(const evtc_node *n) {
  double v;
  return evtc_pat_uniform(n, &v) ? v : NAN;
}

/* x in place of n when that keeps n's type and n may be forwarded. */
static evtc_node *forward(evtc_rewrite *rw, const evtc_node *n, evtc_node *x) {
  if (x->type.dtype != n->type.dtype || !evtc_pat_same_shape(&x->type, &n->type)) return NULL;
  return evtc_pat_may_forward(rw, n) ? x : NULL;
}

/* A uniform CONST with value v and the broadcast shape of a and b (both CONSTs). */
static evtc_node *merged_const(evtc_rewrite *rw, const evtc_node *n, const evtc_node *a, const evtc_node *b,
                               double v) {
  int rank;
  int64_t shape[EVTC_MAX_RANK];
  const evtc_type *t[2] = {&a->type, &b->type};
  EVTC_ASSERT(evtc_pat_broadcast(2, t, &rank, shape));
  return evtc_pat_const(rw, n->type.dtype, rank, shape, v, n->name, "c");
}

/* op(x, c) with x = op(y, c1), c and c1 uniform CONSTs, op in {ADD, MUL}:
 * op(y, c1 op c) named n; NULL when the pattern does not apply. */
static evtc_node *reassociate(evtc_rewrite *rw, const evtc_node *n, evtc_op op, evtc_node *x, evtc_node *c) {
  if (x->op != op || isnan(uval(c))) return NULL;
  for (int k = 0; k < 2; k++) {
    evtc_node *c1 = x->inputs[k], *y = x->inputs[1 - k];
    if (isnan(uval(c1))) continue;
    double v = op == EVTC_OP_ADD ? uval(c1) + uval(c) : uval(c1) * uval(c);
    return evtc_pat_bin(rw, op, y, merged_const(rw, n, c1, c, v), n->name, NULL);
  }
  return NULL;
}

/* a*b +- a*c -> a*(b +- c) (see the file comment); NULL when it does not apply. */
static evtc_node *common_factor(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (in[0]->op != EVTC_OP_MUL || in[1]->op != EVTC_OP_MUL || in[0] == in[1] ||
      !evtc_pat_single_use(rw, n, 0) || !evtc_pat_single_use(rw, n, 1))
    return NULL;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      if (in[0]->inputs[i] != in[1]->inputs[j]) continue;
      evtc_node *s = evtc_pat_bin(rw, n->op, in[0]->inputs[1 - i], in[1]->inputs[1 - j], n->name, "factor");
      return evtc_pat_bin(rw, EVTC_OP_MUL, in[0]->inputs[i], s, n->name, NULL);
    }
  return NULL;
}

/* x / C -> x * (1/C) for a float CONST C, elementwise. */
static evtc_node *div_to_mul(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const evtc_node *c = in[1];
  if (c->op != EVTC_OP_CONST || !evtc_dtype_is_float(c->type.dtype)) return NULL;
  const evtc_attr *data = evtc_node_attr(c, "data");
  evtc_node *r;
  if (data->n == 0) {
    r = evtc_pat_const(rw, c->type.dtype, c->type.rank, c->type.shape, 1.0 / evtc_node_float(c, "value"), n->name,
                       "recip");
  } else {
    double *inv = malloc(sizeof(double) * (size_t)data->n);
    for (int i = 0; i < data->n; i++) inv[i] = 1.0 / data->v.floats[i];
    char name[256];
    snprintf(name, sizeof name, "%.200s.recip", n->name);
    evtc_attr at = evtc_attr_floats("data", data->n, inv);
    r = evtc_leaf_add(rw->dst, EVTC_OP_CONST, c->type, &at, 1, name);
    free(inv);
  }
  evtc_node *x = reassociate(rw, n, EVTC_OP_MUL, in[0], r);
  return x ? x : evtc_pat_bin(rw, EVTC_OP_MUL, in[0], r, n->name, NULL);
}

/* reduce over axes that all have size 1 -> reshape(x) or x. */
static evtc_node *reduce_trivial(evtc_rewrite *rw, const evtc_node *n, evtc_node *x) {
  bool mask[EVTC_MAX_RANK];
  evtc_pat_reduce_mask(n, x->type.rank, mask);
  for (int d = 0; d < x->type.rank; d++)
    if (mask[d] && x->type.shape[d] != 1) return NULL;
  if (evtc_pat_same_shape(&x->type, &n->type)) return forward(rw, n, x);
  return evtc_pat_reshape(rw, x, n->type.rank, n->type.shape, n->name, NULL);
}

/* reduce(expand(x, S), A) (see the file comment). */
static evtc_node *reduce_expand(evtc_rewrite *rw, const evtc_node *n, evtc_node *e) {
  evtc_node *x = e->inputs[0];
  if (e->op != EVTC_OP_EXPAND || evtc_type_numel(&e->type) <= evtc_type_numel(&x->type)) return NULL;
  int r = e->type.rank, lead = r - x->type.rank;
  bool mask[EVTC_MAX_RANK];
  evtc_pat_reduce_mask(n, r, mask);
  int64_t axes[EVTC_MAX_RANK], target[EVTC_MAX_RANK], kept[EVTC_MAX_RANK], count = 1;
  int n_axes = 0, t_rank = 0;
  bool keep = evtc_node_int(n, "keepdims") != 0;
  for (int d = 0; d < r; d++) {
    int64_t xs = d < lead ? 1 : x->type.shape[d - lead];
    if (mask[d] && xs == 1) count *= e->type.shape[d];
    else if (mask[d]) axes[n_axes++] = d - lead;
    if (!mask[d] || keep) target[t_rank++] = mask[d] ? 1 : xs;
  }
  /* r1 = x reduced over its real axes (kept dims), times the count for sums */
  bool has_reduce = n_axes > 0, has_mul = n->op == EVTC_OP_REDUCE_SUM && count > 1;
  if (has_mul && evtc_round_to(n->type.dtype, (double)count) != (double)count) return NULL;  /* f16: > 2048 */
  int64_t r1_shape[EVTC_MAX_RANK];
  for (int d = 0; d < x->type.rank; d++) r1_shape[d] = mask[d + lead] ? 1 : x->type.shape[d];
  evtc_type r1_type = evtc_type_make(x->type.dtype, x->type.rank, r1_shape), t_type;
  t_type = evtc_type_make(x->type.dtype, t_rank, target);
  bool has_reshape = !evtc_pat_same_shape(&r1_type, &t_type);
  bool has_expand = !evtc_pat_same_shape(&t_type, &n->type);
  for (int d = 0; d < n->type.rank; d++) kept[d] = n->type.shape[d];
  if (!has_reduce && !has_mul && !has_reshape && !has_expand) return forward(rw, n, x);
  const char *b = n->name;
  evtc_node *v = x;
  if (has_reduce)
    v = evtc_pat_reduce(rw, n->op, v, n_axes, axes, true, b, has_mul || has_reshape || has_expand ? "inner" : NULL);
  if (has_mul) {
    evtc_node *c = evtc_pat_const(rw, n->type.dtype, 0, NULL, (double)count, b, "count");
    v = evtc_pat_bin(rw, EVTC_OP_MUL, v, c, b, has_reshape || has_expand ? "scaled" : NULL);
  }
  if (has_reshape) v = evtc_pat_reshape(rw, v, t_rank, target, b, has_expand ? "shaped" : NULL);
  if (has_expand) v = evtc_pat_expand(rw, v, n->type.rank, kept, b, NULL);
  return v;
}

/* reduce(reduce(x, A1, k1), A2, k2) of the same op -> one reduce over A1 u A2. */
static evtc_node *reduce_reduce(evtc_rewrite *rw, const evtc_node *n, evtc_node *inner) {
  if (inner->op != n->op || !evtc_pat_single_use(rw, n, 0)) return NULL;
  evtc_node *x = inner->inputs[0];
  int xr = x->type.rank;
  bool m1[EVTC_MAX_RANK], m2[EVTC_MAX_RANK];
  evtc_pat_reduce_mask(inner, xr, m1);
  evtc_pat_reduce_mask(n, inner->type.rank, m2);
  bool k1 = evtc_node_int(inner, "keepdims") != 0, k2 = evtc_node_int(n, "keepdims") != 0;
  int64_t axes[EVTC_MAX_RANK];
  int n_axes = 0;
  for (int d = 0, j = 0; d < xr; d++) {
    bool in2 = false;
    if (k1) in2 = m2[d];
    else if (!m1[d]) in2 = m2[j++];
    if (m1[d] || in2) axes[n_axes++] = d;
  }
  /* equal keepdims give n's shape directly; otherwise a reshape follows */
  if (k1 == k2) return evtc_pat_reduce(rw, n->op, x, n_axes, axes, k1, n->name, NULL);
  int64_t rs[EVTC_MAX_RANK];
  int rr = 0;
  for (int d = 0, a = 0; d < xr; d++) {
    if (a < n_axes && axes[a] == d) a++;
    else rs[rr++] = x->type.shape[d];
  }
  evtc_type rt = evtc_type_make(x->type.dtype, rr, rs);
  bool last = evtc_pat_same_shape(&rt, &n->type);
  evtc_node *r = evtc_pat_reduce(rw, n->op, x, n_axes, axes, false, n->name, last ? NULL : "merged");
  return evtc_pat_reshape(rw, r, n->type.rank, n->type.shape, n->name, NULL);
}

/* reduce(reshape(x), leading axes [0, k), keepdims 0) -> reduce(x, [0, j)) where x's first j dims hold the
 * same elements as the reshape's first k and the rest are equal. */
static evtc_node *reduce_reshape(evtc_rewrite *rw, const evtc_node *n, evtc_node *r) {
  if (r->op != EVTC_OP_RESHAPE || evtc_node_int(n, "keepdims") != 0) return NULL;
  const evtc_type *rt = &r->type, *xt = &r->inputs[0]->type;
  bool mask[EVTC_MAX_RANK];
  evtc_pat_reduce_mask(n, rt->rank, mask);
  int k = 0;
  while (k < rt->rank && mask[k]) k++;
  for (int d = k; d < rt->rank; d++)
    if (mask[d]) return NULL;
  int64_t lead = 1, xlead = 1;
  for (int d = 0; d < k; d++) lead *= rt->shape[d];
  int j = 0;
  while (j < xt->rank && xlead < lead) xlead *= xt->shape[j++];
  if (k == 0 || xlead != lead || xt->rank - j != rt->rank - k) return NULL;
  for (int d = 0; d < rt->rank - k; d++)
    if (xt->shape[j + d] != rt->shape[k + d]) return NULL;
  int64_t axes[EVTC_MAX_RANK];
  for (int d = 0; d < j; d++) axes[d] = d;
  return evtc_pat_reduce(rw, n->op, r->inputs[0], j, axes, false, n->name, NULL);
}

/* p when slice x takes the first `size` elements of p along axis ax and all of p along every other axis, else NULL. */
static evtc_node *prefix_of(const evtc_node *x, int ax, int64_t size) {
  if (x->op != EVTC_OP_SLICE) return NULL;
  evtc_node *p = x->inputs[0];
  const evtc_attr *st = evtc_node_attr(x, "starts"), *sp = evtc_node_attr(x, "steps");
  for (int i = 0; i < st->n; i++)
    if (st->v.ints[i] != 0 || (sp->n && sp->v.ints[i] != 1)) return NULL;
  for (int d = 0; d < p->type.rank; d++)
    if (d == ax ? x->type.shape[d] != size || p->type.shape[d] <= size : x->type.shape[d] != p->type.shape[d])
      return NULL;
  return p;
}

/* add(x, scatter_add(u, idx)) -> scatter_add(u, idx, x) (see the file comment); NULL when it does not apply. */
static evtc_node *scatter_base(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  for (int k = 0; k < 2; k++) {
    evtc_node *s = in[k], *x = in[1 - k];
    if (s->op != EVTC_OP_SCATTER_ADD || s->n_inputs != 2 || !evtc_pat_single_use(rw, n, k) ||
        x->type.dtype != n->type.dtype || !evtc_pat_same_shape(&s->type, &n->type) ||
        !evtc_pat_same_shape(&x->type, &n->type))
      continue;
    const int ax = evtc_axis_norm(evtc_node_int(s, "axis"), s->type.rank);
    const int64_t size = evtc_node_int(s, "size");
    const evtc_attr at[2] = {evtc_attr_int("axis", ax), evtc_attr_int("size", size)};
    evtc_node *p = prefix_of(x, ax, size), *ins[3] = {s->inputs[0], s->inputs[1], p ? p : x};
    evtc_node *r = evtc_pat_op(rw, EVTC_OP_SCATTER_ADD, ins, 3, at, 2, n->name, p ? "rows" : NULL);
    return p ? evtc_pat_op(rw, EVTC_OP_SLICE, &r, 1, x->attrs, evtc_op_get(EVTC_OP_SLICE)->n_attrs, n->name, NULL) : r;
  }
  return NULL;
}

static evtc_node *simplify(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  evtc_node *r = NULL;
  switch (n->op) {
    case EVTC_OP_ADD:
      for (int k = 0; k < 2 && !r; k++)
        if (uval(in[k]) == 0) r = forward(rw, n, in[1 - k]);
      if (!r && in[1]->op == EVTC_OP_NEG) r = evtc_pat_bin(rw, EVTC_OP_SUB, in[0], in[1]->inputs[0], n->name, NULL);
      if (!r && in[0]->op == EVTC_OP_NEG) r = evtc_pat_bin(rw, EVTC_OP_SUB, in[1], in[0]->inputs[0], n->name, NULL);
      for (int k = 0; k < 2 && !r; k++) r = reassociate(rw, n, EVTC_OP_ADD, in[k], in[1 - k]);
      if (!r) r = scatter_base(rw, n, in);
      return r ? r : common_factor(rw, n, in);
    case EVTC_OP_SUB:
      if (uval(in[1]) == 0) r = forward(rw, n, in[0]);
      if (!r && in[1]->op == EVTC_OP_NEG) r = evtc_pat_bin(rw, EVTC_OP_ADD, in[0], in[1]->inputs[0], n->name, NULL);
      if (!r && !isnan(uval(in[1]))) {
        evtc_node *c = evtc_pat_const(rw, in[1]->type.dtype, in[1]->type.rank, in[1]->type.shape, -uval(in[1]),
                                      n->name, "neg");
        r = reassociate(rw, n, EVTC_OP_ADD, in[0], c);
        if (!r) r = evtc_pat_bin(rw, EVTC_OP_ADD, in[0], c, n->name, NULL);
      }
      return r ? r : common_factor(rw, n, in);
    case EVTC_OP_MUL:
      for (int k = 0; k < 2 && !r; k++) {
        if (uval(in[k]) == 1) r = forward(rw, n, in[1 - k]);
        else if (uval(in[k]) == 0 && evtc_dtype_is_int(n->type.dtype))
          r = evtc_pat_const(rw, n->type.dtype, n->type.rank, n->type.shape, 0.0, n->name, NULL);
      }
      for (int k = 0; k < 2 && !r; k++) r = reassociate(rw, n, EVTC_OP_MUL, in[k], in[1 - k]);
      return r;
    case EVTC_OP_DIV:
      if (uval(in[1]) == 1) r = forward(rw, n, in[0]);
      return r ? r : div_to_mul(rw, n, in);
    case EVTC_OP_NEG:
      return in[0]->op == EVTC_OP_NEG ? forward(rw, n, in[0]->inputs[0]) : NULL;
    case EVTC_OP_REDUCE_SUM:
    case EVTC_OP_REDUCE_MEAN:
    case EVTC_OP_REDUCE_MAX:
    case EVTC_OP_REDUCE_MIN:
      r = reduce_trivial(rw, n, in[0]);
      if (!r) r = reduce_expand(rw, n, in[0]);
      if (!r) r = reduce_reshape(rw, n, in[0]);
      return r ? r : reduce_reduce(rw, n, in[0]);
    default:
      return NULL;
  }
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, simplify, d); }

const evtc_pass evtc_pass_simplify = {
    .name = "simplify",
    .summary = "identities (x+0, x*1, neg neg), div by CONST -> mul, constant reassociation, common factors, "
               "reduction elimination, reductions through reshapes, scatters added into their base",
    .run = run,
};
