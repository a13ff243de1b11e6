/* pattern.c -- the shared driver, matchers and builders of the rewriting
 * passes (see pattern.h).
 */
#include "passes/pattern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

evtc_graph *evtc_pat_run(const evtc_graph *g, evtc_rewrite_fn fn, evtc_diag *d) {
  evtc_pat_ctx c = {.uses = calloc((size_t)g->n_nodes + 1, sizeof *c.uses),
                    .pinned = calloc((size_t)g->n_nodes + 1, sizeof *c.pinned)};
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_inputs; k++) c.uses[g->nodes[i]->inputs[k]->id]++;
  for (int32_t i = 0; i < g->n_outputs; i++) {
    c.uses[g->outputs[i].node->id]++;
    c.pinned[g->outputs[i].node->id] = true;
  }
  if (g->loss) {
    c.uses[g->loss->id]++;
    c.pinned[g->loss->id] = true;
  }
  evtc_graph *r = evtc_rewrite_graph(g, fn, &c, d);
  free(c.uses);
  free(c.pinned);
  return r;
}

bool evtc_pat_may_forward(const evtc_rewrite *rw, const evtc_node *n) {
  return !((const evtc_pat_ctx *)rw->ctx)->pinned[n->id];
}

bool evtc_pat_single_use(const evtc_rewrite *rw, const evtc_node *n, int k) {
  return ((const evtc_pat_ctx *)rw->ctx)->uses[n->inputs[k]->id] == 1;
}

bool evtc_pat_uniform(const evtc_node *n, double *v) {
  if (!n || n->op != EVTC_OP_CONST) return false;
  const evtc_attr *data = evtc_node_attr(n, "data");
  double x = data->n ? data->v.floats[0] : evtc_node_float(n, "value");
  if (isnan(x)) return false;
  for (int i = 1; i < data->n; i++)
    if (data->v.floats[i] != x || signbit(data->v.floats[i]) != signbit(x)) return false;
  *v = x;
  return true;
}

bool evtc_pat_same_shape(const evtc_type *a, const evtc_type *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

bool evtc_pat_broadcast(int n, const evtc_type *const *t, int *rank, int64_t *shape) {
  int r = 0;
  for (int i = 0; i < n; i++) r = t[i]->rank > r ? t[i]->rank : r;
  for (int d = 0; d < r; d++) {
    int64_t s = 1;
    for (int i = 0; i < n; i++) {
      int di = d - (r - t[i]->rank);
      int64_t si = di >= 0 ? t[i]->shape[di] : 1;
      if (si == 1) continue;
      if (s != 1 && s != si) return false;
      s = si;
    }
    shape[d] = s;
  }
  *rank = r;
  return true;
}

void evtc_pat_reduce_mask(const evtc_node *n, int rank, bool *mask) {
  const evtc_attr *a = evtc_node_attr(n, "axes");
  for (int d = 0; d < rank; d++) mask[d] = a->n == 0;
  for (int i = 0; i < a->n; i++) mask[evtc_axis_norm(a->v.ints[i], rank)] = true;
}

bool evtc_pat_is_broadcasting(evtc_op op) { return (op >= EVTC_OP_ADD && op <= EVTC_OP_GE) || op == EVTC_OP_WHERE; }

bool evtc_pat_is_unary(evtc_op op) { return op >= EVTC_OP_NEG && op <= EVTC_OP_CAST; }

void evtc_pat_forward_split(const evtc_graph *g, unsigned char *fwd, unsigned char *grad_free) {
  const int32_t n = g->n_nodes;
  if (g->loss) fwd[g->loss->id] = 1;
  for (int32_t i = n - 1; i >= 0; i--)
    if (fwd[i])
      for (int k = 0; k < g->nodes[i]->n_inputs; k++) fwd[g->nodes[i]->inputs[k]->id] = 1;
  for (int32_t i = 0; i < n; i++) {
    const evtc_node *v = g->nodes[i];
    if (fwd[i] || evtc_op_is_leaf(v->op)) continue;
    bool free_of_grad = evtc_pat_is_unary(v->op) || evtc_pat_is_broadcasting(v->op) || v->op == EVTC_OP_EXPAND;
    for (int k = 0; k < v->n_inputs && free_of_grad; k++) {
      const evtc_node *u = v->inputs[k];
      free_of_grad = fwd[u->id] || evtc_op_is_leaf(u->op) || grad_free[u->id];
    }
    grad_free[i] = free_of_grad;
  }
}

/* "<base>.<tag>" in a stack buffer, or base itself. */
static const char *name_of(char *buf, size_t cap, const char *base, const char *tag) {
  if (!tag) return base;
  snprintf(buf, cap, "%.200s.%s", base, tag);
  return buf;
}

evtc_node *evtc_pat_op(evtc_rewrite *rw, evtc_op op, evtc_node *const *ins, int n_ins, const evtc_attr *at,
                       int n_at, const char *base, const char *tag) {
  char buf[256];
  return evtc_node_add(rw->dst, op, ins, n_ins, at, n_at, name_of(buf, sizeof buf, base, tag));
}

evtc_node *evtc_pat_bin(evtc_rewrite *rw, evtc_op op, evtc_node *a, evtc_node *b, const char *base,
                        const char *tag) {
  evtc_node *in[2] = {a, b};
  return evtc_pat_op(rw, op, in, 2, NULL, 0, base, tag);
}

evtc_node *evtc_pat_un(evtc_rewrite *rw, evtc_op op, evtc_node *a, const char *base, const char *tag) {
  return evtc_pat_op(rw, op, &a, 1, NULL, 0, base, tag);
}

evtc_node *evtc_pat_reduce(evtc_rewrite *rw, evtc_op op, evtc_node *x, int n_axes, const int64_t *axes,
                           bool keepdims, const char *base, const char *tag) {
  evtc_attr at[2] = {evtc_attr_ints("axes", n_axes, axes), evtc_attr_int("keepdims", keepdims)};
  return evtc_pat_op(rw, op, &x, 1, at, 2, base, tag);
}

/* op (RESHAPE or EXPAND) taking x to shape, or x itself when it has that shape. */
static evtc_node *to_shape(evtc_rewrite *rw, evtc_op op, evtc_node *x, int rank, const int64_t *shape,
                           const char *base, const char *tag) {
  evtc_type t = evtc_type_make(EVTC_F64, rank, shape);
  if (!x || evtc_pat_same_shape(&x->type, &t)) return x;
  evtc_attr at = evtc_attr_ints("shape", rank, shape);
  return evtc_pat_op(rw, op, &x, 1, &at, 1, base, tag);
}

evtc_node *evtc_pat_reshape(evtc_rewrite *rw, evtc_node *x, int rank, const int64_t *shape, const char *base,
                            const char *tag) {
  return to_shape(rw, EVTC_OP_RESHAPE, x, rank, shape, base, tag);
}

evtc_node *evtc_pat_expand(evtc_rewrite *rw, evtc_node *x, int rank, const int64_t *shape, const char *base,
                           const char *tag) {
  return to_shape(rw, EVTC_OP_EXPAND, x, rank, shape, base, tag);
}

evtc_node *evtc_pat_permute(evtc_rewrite *rw, evtc_node *x, const int64_t *perm, const char *base,
                            const char *tag) {
  if (!x) return NULL;
  bool id = true;
  for (int d = 0; d < x->type.rank; d++) id = id && perm[d] == d;
  if (id) return x;
  evtc_attr at = evtc_attr_ints("perm", x->type.rank, perm);
  return evtc_pat_op(rw, EVTC_OP_PERMUTE, &x, 1, &at, 1, base, tag);
}

evtc_node *evtc_pat_const(evtc_rewrite *rw, evtc_dtype dt, int rank, const int64_t *shape, double v,
                          const char *base, const char *tag) {
  evtc_type t = evtc_type_make(dt, rank, shape);
  for (int32_t i = rw->dst->n_nodes - 1; i >= 0; i--) {
    evtc_node *c = rw->dst->nodes[i];
    double cv;
    if (c->op == EVTC_OP_CONST && c->type.dtype == dt && evtc_pat_same_shape(&c->type, &t) &&
        evtc_node_attr(c, "data")->n == 0 && evtc_pat_uniform(c, &cv) && cv == v && signbit(cv) == signbit(v))
      return c;
  }
  char buf[256];
  evtc_attr at = evtc_attr_float("value", v);
  return evtc_leaf_add(rw->dst, EVTC_OP_CONST, t, &at, 1, name_of(buf, sizeof buf, base, tag));
}

void evtc_pat_perm(const evtc_node *n, int64_t *p) {
  const evtc_attr *a = evtc_node_attr(n, "perm");
  for (int i = 0; i < a->n; i++) p[i] = evtc_axis_norm(a->v.ints[i], a->n);
}

evtc_node *evtc_pat_permute_of_permute(evtc_rewrite *rw, const evtc_node *n, evtc_node *x) {
  if (x->op != EVTC_OP_PERMUTE) return NULL;
  int64_t p1[EVTC_MAX_RANK], p2[EVTC_MAX_RANK], q[EVTC_MAX_RANK];
  evtc_pat_perm(x, p1);
  evtc_pat_perm(n, p2);
  bool id = true;
  for (int i = 0; i < n->type.rank; i++) {
    q[i] = p1[p2[i]];
    id = id && q[i] == i;
  }
  if (id) return evtc_pat_may_forward(rw, n) ? x->inputs[0] : NULL;
  return evtc_pat_permute(rw, x->inputs[0], q, n->name, NULL);
}
