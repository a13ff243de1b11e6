/* permute_fold.c -- the `permute-fold` pass: EVT's PermutationFolding.
 *
 * Rewrites:
 *   permute(permute(x, p1), p2)   -> permute(x, q), q[i] = p1[p2[i]]; nothing when q is
 *                                    the identity
 *   reshape(reshape(x))           -> reshape(x); nothing when x already has the shape
 *   matmul(permute(a, T), b)      -> matmul(a, b) with trans_a flipped, T swapping the
 *                                    last two dims and keeping the others (same for b,
 *                                    and for batch_matmul)
 *   permute(matmul(a, b), T)      -> matmul(b, a) with trans_a = !trans_b,
 *                                    trans_b = !trans_a ((AB)^T = B^T A^T), when the
 *                                    product has no other consumer
 * All exact: only data movement changes.  Outputs and the loss keep their
 * node (no forwarding to an existing node of another name).
 */
#include "passes/pass.h"
#include "passes/pattern.h"

/* True when n is a PERMUTE that swaps its last two dims and keeps the rest. */
static bool is_transpose(const evtc_node *n) {
  if (n->op != EVTC_OP_PERMUTE || n->type.rank < 2) return false;
  int64_t p[EVTC_MAX_RANK];
  int r = n->type.rank;
  evtc_pat_perm(n, p);
  for (int i = 0; i < r - 2; i++)
    if (p[i] != i) return false;
  return p[r - 2] == r - 1 && p[r - 1] == r - 2;
}

static bool is_matmul(evtc_op op) { return op == EVTC_OP_MATMUL || op == EVTC_OP_BATCH_MATMUL; }

static evtc_node *matmul(evtc_rewrite *rw, evtc_op op, evtc_node *a, evtc_node *b, int64_t ta, int64_t tb,
                         const char *name) {
  evtc_node *in[2] = {a, b};
  evtc_attr at[2] = {evtc_attr_int("trans_a", ta), evtc_attr_int("trans_b", tb)};
  return evtc_pat_op(rw, op, in, 2, at, 2, name, NULL);
}

static evtc_node *fold(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (n->op == EVTC_OP_PERMUTE && in[0]->op == EVTC_OP_PERMUTE) return evtc_pat_permute_of_permute(rw, n, in[0]);
  if (n->op == EVTC_OP_PERMUTE && is_matmul(in[0]->op) && is_transpose(n) && evtc_pat_single_use(rw, n, 0)) {
    evtc_node *m = in[0];
    int64_t ta = evtc_node_int(m, "trans_a") != 0, tb = evtc_node_int(m, "trans_b") != 0;
    return matmul(rw, m->op, m->inputs[1], m->inputs[0], !tb, !ta, n->name);
  }
  if (n->op == EVTC_OP_RESHAPE && in[0]->op == EVTC_OP_RESHAPE) {
    evtc_node *x = in[0]->inputs[0];
    if (evtc_pat_same_shape(&x->type, &n->type)) return evtc_pat_may_forward(rw, n) ? x : NULL;
    return evtc_pat_reshape(rw, x, n->type.rank, n->type.shape, n->name, NULL);
  }
  if (is_matmul(n->op) && (is_transpose(in[0]) || is_transpose(in[1]))) {
    int64_t t[2] = {evtc_node_int(n, "trans_a") != 0, evtc_node_int(n, "trans_b") != 0};
    evtc_node *op[2];
    for (int k = 0; k < 2; k++) {
      op[k] = is_transpose(in[k]) ? in[k]->inputs[0] : in[k];
      if (op[k] != in[k]) t[k] = !t[k];
    }
    return matmul(rw, n->op, op[0], op[1], t[0], t[1], n->name);
  }
  return NULL;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, fold, d); }

const evtc_pass evtc_pass_permute_fold = {
    .name = "permute-fold",
    .summary = "permute of permute -> one permute, reshape of reshape -> one reshape, transposes into "
               "matmul trans_a/trans_b",
    .run = run,
};
