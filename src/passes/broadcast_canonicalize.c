/* broadcast_canonicalize.c -- the `broadcast-canonicalize` pass.
 *
 * Canonical form: broadcasting is implicit wherever NumPy broadcasting of an
 * elementwise op already does it.  After the pass
 *   - no operand of a broadcasting op (add .. ge, where) is an expand, or a
 *     reshape that only prepends 1s, unless dropping it would change the
 *     op's output shape (operands are tried in order, each stripped as far
 *     as the others allow);
 *   - no unary elementwise op (neg .. cast) reads an expand it alone uses:
 *     f(expand(x, S)) -> expand(f(x), S), so f runs on the small tensor;
 *   - no expand reads an expand or a prepend-1s reshape: expand(expand(x)),
 *     expand(reshape(x, [1,..,1] + shape(x))) -> expand(x, S), and an expand
 *     to its input's own shape is dropped.
 * Explicit expands stay where they decide a shape: feeding a reduction, a
 * layout or main-loop op, or an output.  Dropout is not moved past an
 * expand (its mask depends on the element index).  Exact: no arithmetic
 * changes, only where values are replicated.
 */
#include "passes/pass.h"
#include "passes/pattern.h"

/* The input of x when x is an expand, or a reshape that only prepends 1s. */
static evtc_node *unbroadcast(evtc_node *x) {
  if (x->op == EVTC_OP_EXPAND) return x->inputs[0];
  if (x->op != EVTC_OP_RESHAPE) return NULL;
  const evtc_type *t = &x->inputs[0]->type;
  int lead = x->type.rank - t->rank;
  if (lead <= 0) return NULL;
  for (int d = 0; d < x->type.rank; d++)
    if (x->type.shape[d] != (d < lead ? 1 : t->shape[d - lead])) return NULL;
  return x->inputs[0];
}

/* Strips operands of a broadcasting op while its output shape stays. */
static evtc_node *strip_operands(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  evtc_node *ops[3];
  const evtc_type *t[3];
  bool changed = false;
  for (int k = 0; k < n->n_inputs; k++) {
    ops[k] = in[k];
    t[k] = &in[k]->type;
  }
  for (int k = 0; k < n->n_inputs; k++)
    for (evtc_node *x = unbroadcast(ops[k]); x; x = unbroadcast(ops[k])) {
      const evtc_type *keep = t[k];
      t[k] = &x->type;
      int rank;
      int64_t shape[EVTC_MAX_RANK];
      evtc_type bt;
      if (evtc_pat_broadcast(n->n_inputs, t, &rank, shape) &&
          (bt = evtc_type_make(n->type.dtype, rank, shape), evtc_pat_same_shape(&bt, &n->type))) {
        ops[k] = x;
        changed = true;
      } else {
        t[k] = keep;
        break;
      }
    }
  if (!changed) return NULL;
  return evtc_pat_op(rw, n->op, ops, n->n_inputs, NULL, 0, n->name, NULL);
}

static evtc_node *canonicalize(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (evtc_pat_is_broadcasting(n->op)) return strip_operands(rw, n, in);
  if (evtc_pat_is_unary(n->op) && in[0]->op == EVTC_OP_EXPAND && evtc_pat_single_use(rw, n, 0)) {
    const evtc_op_info *info = evtc_op_get(n->op);
    evtc_node *f = evtc_pat_op(rw, n->op, in[0]->inputs, 1, n->attrs, info->n_attrs, n->name, "inner");
    return evtc_pat_expand(rw, f, n->type.rank, n->type.shape, n->name, NULL);
  }
  if (n->op == EVTC_OP_EXPAND) {
    evtc_node *x = in[0], *y;
    while ((y = unbroadcast(x))) x = y;
    if (evtc_pat_same_shape(&x->type, &n->type)) return evtc_pat_may_forward(rw, n) ? x : NULL;
    return x == in[0] ? NULL : evtc_pat_expand(rw, x, n->type.rank, n->type.shape, n->name, NULL);
  }
  return NULL;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, canonicalize, d); }

const evtc_pass evtc_pass_broadcast_canonicalize = {
    .name = "broadcast-canonicalize",
    .summary = "drop expands and prepend-1 reshapes that implicit broadcasting makes redundant; "
               "sink expands past unary ops",
    .run = run,
};
