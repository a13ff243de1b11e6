/* constant_fold.c -- the `constant-fold` pass: evaluate nodes whose inputs
 * are all CONSTs.
 *
 * Such a node is computed once, now, by the reference interpreter (so the
 * result is exactly what running the graph would give, rounding included)
 * and replaced by a CONST of the same name and type: `value=` when every
 * element is equal, else `data=` with every element.  Folding propagates,
 * since nodes are visited in topological order over already folded inputs.
 * Limits: a result over EVTC_FOLD_MAX_ELEMENTS elements, or one computed
 * from inputs of more than EVTC_FOLD_MAX_INPUT_ELEMENTS elements in all, is
 * folded only when it is uniform by construction -- an elementwise op
 * (evaluated once on scalars) or a reshape/permute/expand/slice/concat of
 * uniform CONSTs with one common value; otherwise it stays, so the graph
 * never holds large data and the pass never evaluates it (a small reduction
 * of a uniform 8192 x 3072 CONST, as a joint graph's bias gradient can be,
 * took the interpreter seconds).
 * Dropout is never folded (its mask depends on the step, known at run time);
 * a node whose evaluation fails (an index out of range, an integer division
 * by zero) is left for the run to report.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "passes/rewrite.h"
#include "runtime/interp.h"

enum { EVTC_FOLD_MAX_ELEMENTS = 4096, EVTC_FOLD_MAX_INPUT_ELEMENTS = 1 << 16 };

static bool const_uniform(const evtc_node *c) { return evtc_node_attr(c, "data")->n == 0; }

/* Evaluates op of n over CONST inputs `in` (nodes of another graph), each
 * turned into a scalar CONST of its value when `scalar`.  Returns the
 * malloc'd result (numel of the evaluated node) or NULL when evaluation
 * fails; *numel receives the count. */
static double *evaluate(const evtc_node *n, evtc_node *const *in, bool scalar, int64_t *numel) {
  evtc_graph *tmp = evtc_graph_new("fold");
  evtc_node *args[8];
  EVTC_ASSERT(n->n_inputs <= 8 || !scalar);
  evtc_node **ins = n->n_inputs <= 8 ? args : malloc(sizeof *ins * (size_t)n->n_inputs);
  for (int k = 0; k < n->n_inputs; k++) {
    if (scalar) {
      evtc_attr v = evtc_attr_float("value", evtc_node_float(in[k], "value"));
      ins[k] = evtc_leaf_add(tmp, EVTC_OP_CONST, evtc_type_make(in[k]->type.dtype, 0, NULL), &v, 1, NULL);
    } else {
      ins[k] = evtc_node_copy(tmp, in[k], NULL);
    }
  }
  evtc_node *r = evtc_node_copy(tmp, n, ins);
  if (ins != args) free(ins);
  double *out = NULL;
  if (r) {
    evtc_interp *it = evtc_interp_new(tmp);
    if (evtc_interp_run(it, 0, NULL) == EVTC_OK) {
      *numel = evtc_type_numel(&r->type);
      out = malloc(sizeof *out * (size_t)(*numel ? *numel : 1));
      memcpy(out, evtc_interp_value(it, r), sizeof *out * (size_t)*numel);
    }
    evtc_interp_free(it);
  }
  evtc_graph_free(tmp);
  return out;
}

/* For a large node over uniform CONSTs: whether its result is uniform, and
 * then its value in *v (evaluated on scalars for elementwise ops). */
static bool uniform_result(const evtc_node *n, evtc_node *const *in, double *v) {
  for (int k = 0; k < n->n_inputs; k++)
    if (!const_uniform(in[k])) return false;
  switch (n->op) {
    case EVTC_OP_RESHAPE:
    case EVTC_OP_PERMUTE:
    case EVTC_OP_EXPAND:
    case EVTC_OP_SLICE:
    case EVTC_OP_CONCAT:
      *v = evtc_node_float(in[0], "value");
      for (int k = 1; k < n->n_inputs; k++)
        if (evtc_node_float(in[k], "value") != *v) return false;
      return true;
    default:
      break;
  }
  if (evtc_op_get(n->op)->fusion != EVTC_FUSE_ELEMENTWISE || n->op == EVTC_OP_ONE_HOT) return false;
  int64_t one;
  double *r = evaluate(n, in, true, &one);
  if (!r) return false;
  *v = r[0];
  free(r);
  return true;
}

static evtc_node *fold_node(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (evtc_op_is_leaf(n->op) || n->op == EVTC_OP_DROPOUT) return NULL;
  for (int k = 0; k < n->n_inputs; k++)
    if (in[k]->op != EVTC_OP_CONST) return NULL;
  evtc_type t = evtc_type_make(n->type.dtype, n->type.rank, n->type.shape);
  int64_t numel = evtc_type_numel(&t), in_elements = 0;
  for (int k = 0; k < n->n_inputs; k++)
    if (__builtin_add_overflow(in_elements, evtc_type_numel(&in[k]->type), &in_elements)) in_elements = INT64_MAX;
  double v;
  if (numel > EVTC_FOLD_MAX_ELEMENTS || in_elements > EVTC_FOLD_MAX_INPUT_ELEMENTS) {
    if (!uniform_result(n, in, &v)) return NULL;
    evtc_attr a = evtc_attr_float("value", v);
    return evtc_leaf_add(rw->dst, EVTC_OP_CONST, t, &a, 1, n->name);
  }
  double *data = evaluate(n, in, false, &numel);
  if (!data) return NULL;
  bool uniform = true;
  for (int64_t i = 1; i < numel && uniform; i++) uniform = memcmp(&data[i], &data[0], sizeof v) == 0;
  evtc_attr a = uniform ? evtc_attr_float("value", numel ? data[0] : 0.0)
                        : evtc_attr_floats("data", (int)numel, data);
  evtc_node *c = evtc_leaf_add(rw->dst, EVTC_OP_CONST, t, &a, 1, n->name);
  free(data);
  return c;
}

static evtc_graph *constant_fold_run(const evtc_graph *g, evtc_diag *d) {
  return evtc_rewrite_graph(g, fold_node, NULL, d);
}

const evtc_pass evtc_pass_constant_fold = {
    .name = "constant-fold",
    .summary = "evaluate nodes whose inputs are all CONSTs into CONSTs (at most 4096 elements unless uniform)",
    .run = constant_fold_run,
};
