/* permute_propagate.c -- the `permute-propagate` pass: EVT's PermuteProp.
 *
 * Direction: permutes sink toward consumers, past elementwise ops and
 * reductions, where permute-fold can merge them with another permute or
 * absorb them into a matmul's operand layout:
 *   f(permute(a, p), permute(b, p), ...) -> permute(f(a, b, ...), p)
 *     f elementwise with broadcasting (unary math and cast, binary, where;
 *     not dropout, whose mask depends on the element index, nor one_hot);
 *     every operand is either a permute by the same p of a tensor of the
 *     result's rank, or permutation-invariant: one element of rank <= the
 *     result's, or a uniform CONST (rebuilt with the un-permuted shape).
 *   reduce(permute(x, p), A) -> reduce(x, p[A]) followed by the permute that
 *     orders the remaining dims as before (none when they keep their order).
 *   permute(permute(x)) -> one permute, or x when they cancel, as in
 *     permute-fold: a sunk permute meets the permute that undoes it in the
 *     same walk, before it is pushed any further.
 * Every permute moved has no other consumer, so the number of permutes
 * never grows: k >= 1 permutes feeding a node become one permute after it.
 * Termination: one walk in topological order visits each node once, and a
 * chain of elementwise ops is crossed in that walk (each node sees its
 * inputs already rewritten).  Run again, the pass only moves permutes
 * further toward consumers; a permute's distance to the outputs shrinks on
 * every move, so repetition reaches a fixed point.  Exact: data movement only.
 */
#include "passes/pass.h"
#include "passes/pattern.h"

static bool same_perm(const int64_t *a, const int64_t *b, int rank) {
  for (int i = 0; i < rank; i++)
    if (a[i] != b[i]) return false;
  return true;
}

/* f(P(a), ...) -> P(f(a, ...)); NULL when an operand does not fit. */
static evtc_node *sink_elementwise(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  int rank = n->type.rank, n_perm = 0;
  int64_t p[EVTC_MAX_RANK], q[EVTC_MAX_RANK];
  for (int k = 0; k < n->n_inputs; k++) {
    if (in[k]->op != EVTC_OP_PERMUTE || in[k]->type.rank != rank) continue;
    evtc_pat_perm(in[k], n_perm++ ? q : p);
    if (n_perm > 1 && !same_perm(p, q, rank)) return NULL;
    if (!evtc_pat_single_use(rw, n, k)) return NULL;
  }
  if (n_perm == 0) return NULL;
  evtc_node *ops[3];
  double v;
  for (int k = 0; k < n->n_inputs; k++) {
    const evtc_type *t = &in[k]->type;
    if (in[k]->op == EVTC_OP_PERMUTE && t->rank == rank) {
      ops[k] = in[k]->inputs[0];
    } else if (evtc_type_numel(t) == 1 && t->rank <= rank) {
      ops[k] = in[k];
    } else if (t->rank == rank && evtc_pat_uniform(in[k], &v)) {
      int64_t shape[EVTC_MAX_RANK];
      for (int i = 0; i < rank; i++) shape[p[i]] = t->shape[i];
      ops[k] = evtc_pat_const(rw, t->dtype, rank, shape, v, n->name, "c");
    } else {
      return NULL;
    }
  }
  const evtc_op_info *info = evtc_op_get(n->op);
  evtc_node *f = evtc_pat_op(rw, n->op, ops, n->n_inputs, n->attrs, info->n_attrs, n->name, "inner");
  return evtc_pat_permute(rw, f, p, n->name, NULL);
}

/* reduce(P(x), A, keep) -> Q(reduce(x, p[A], keep)). */
static evtc_node *sink_reduce(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (in[0]->op != EVTC_OP_PERMUTE || !evtc_pat_single_use(rw, n, 0)) return NULL;
  int rank = in[0]->type.rank, n_axes = 0;
  int64_t p[EVTC_MAX_RANK], axes[EVTC_MAX_RANK], q[EVTC_MAX_RANK], pos[EVTC_MAX_RANK];
  bool mask[EVTC_MAX_RANK], xmask[EVTC_MAX_RANK] = {false};
  evtc_pat_perm(in[0], p);
  evtc_pat_reduce_mask(n, rank, mask);
  for (int i = 0; i < rank; i++)
    if (mask[i]) xmask[p[i]] = true;
  for (int d = 0; d < rank; d++)
    if (xmask[d]) axes[n_axes++] = d;
  bool keep = evtc_node_int(n, "keepdims") != 0, id = true;
  /* q: the output dims of reduce(x) in the order reduce(P(x)) has them */
  int r = 0;
  for (int d = 0; d < rank; d++) pos[d] = keep || !xmask[d] ? r++ : -1;
  int j = 0;
  for (int i = 0; i < rank; i++)
    if (keep || !mask[i]) {
      q[j] = pos[p[i]];
      id = id && q[j] == j;
      j++;
    }
  evtc_node *red = evtc_pat_reduce(rw, n->op, in[0]->inputs[0], n_axes, axes, keep, n->name, id ? NULL : "inner");
  return evtc_pat_permute(rw, red, q, n->name, NULL);
}

static evtc_node *propagate(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (evtc_pat_is_unary(n->op) || evtc_pat_is_broadcasting(n->op)) return sink_elementwise(rw, n, in);
  if (n->op >= EVTC_OP_REDUCE_SUM && n->op <= EVTC_OP_REDUCE_MIN) return sink_reduce(rw, n, in);
  if (n->op == EVTC_OP_PERMUTE) return evtc_pat_permute_of_permute(rw, n, in[0]);
  return NULL;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, propagate, d); }

const evtc_pass evtc_pass_permute_propagate = {
    .name = "permute-propagate",
    .summary = "sink permutes toward consumers past elementwise ops and reductions",
    .run = run,
};
