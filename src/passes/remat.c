/* remat.c -- the `remat` pass: cheap elementwise values of the forward that
 * the backward reads are recomputed there instead of kept.
 *
 * A joint graph keeps every forward value that a backward node reads alive
 * from the forward until that read: activation memory.  CSE makes it worse:
 * the backward's own elementwise expressions (GELU's 1 + erf(x / sqrt 2),
 * or tanh-GELU's 1 + tanh(u) and x^2 terms) merge with the forward's, so
 * the backward reads them from memory -- per BERT-Large layer one more
 * [16384, 4096] tensor than PyTorch keeps.  Recomputing them from what the
 * backward reads anyway costs a few operations in the backward kernel
 * (where the GEMM epilogue already loads x) and saves both the memory and
 * the forward's store of them.  TorchInductor's min-cut partitioner
 * recomputes pointwise ops for the same reason.
 *
 * The forward is what the loss depends on; the backward is every other
 * node.  Backward nodes that are elementwise ops of forward values and
 * leaves only (gradient-free: grad-factor's coefficients, as GELU's J(h))
 * read the forward's own values -- a forward kernel can compute them where
 * those values are made -- and do not count as readers below.  A forward
 * node v is recomputed when
 *   - its op is elementwise (unary, broadcasting binary, where; not
 *     dropout), it is no graph output, and some other backward node reads it;
 *   - none of its readers is a main loop, an opaque op or a layout op
 *     (they would need it in memory anyway: a GEMM reads its operands
 *     there);
 *   - each input is a leaf, a forward value the backward reads anyway
 *     (kept), or an elementwise forward value recomputable the same way,
 *     at most MAX_DEPTH such steps deep (8: tanh-GELU's 1 + tanh(u) is
 *     7 steps from x: x^2, x^3, 0.044715 x^3, x + .., u, tanh, + 1).
 * The backward's reads of v then read a clone "<v>.re" built (once, before
 * its first reader) from the clones of the inputs it recomputes and the
 * kept values themselves.  Runs after the pipeline's last cse, which would
 * merge the clones back.  Exact: the same operations on the same values.
 */
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/pattern.h"

enum { MAX_DEPTH = 8 };

typedef struct remat_ctx {
  unsigned char *fwd;     /* by src node id: the loss depends on it */
  unsigned char *grad_free; /* by src node id: a backward elementwise op of forward values and leaves only */
  unsigned char *redo;    /* by src node id: recomputable in the backward (read there: recomputed) */
  evtc_node **clone;      /* by src node id: its clone in dst, once built */
} remat_ctx;

static bool cheap(evtc_op op) { return evtc_pat_is_unary(op) || evtc_pat_is_broadcasting(op); }

/* Whether every reader of v may read a recomputed value: no main loop, opaque or layout op. */
static bool readers_fusible(const evtc_graph *g, const evtc_node *v) {
  for (int32_t i = v->id + 1; i < g->n_nodes; i++) {
    const evtc_node *c = g->nodes[i];
    for (int k = 0; k < c->n_inputs; k++)
      if (c->inputs[k] == v) {
        evtc_fusion_kind f = evtc_op_get(c->op)->fusion;
        if (f == EVTC_FUSE_MAINLOOP || f == EVTC_FUSE_OPAQUE || f == EVTC_FUSE_LAYOUT) return false;
      }
  }
  return true;
}

/* Fills c->fwd, c->grad_free and c->redo for g; false when nothing is recomputed. */
static bool decide(const evtc_graph *g, remat_ctx *c) {
  int32_t n = g->n_nodes;
  unsigned char *read_back = calloc((size_t)n + 1, 1), *depth = calloc((size_t)n + 1, 1);
  evtc_pat_forward_split(g, c->fwd, c->grad_free);
  for (int32_t i = 0; i < n; i++) {
    const evtc_node *v = g->nodes[i];
    if (!c->fwd[i] && !c->grad_free[i] && !evtc_op_is_leaf(v->op))
      for (int k = 0; k < v->n_inputs; k++) read_back[v->inputs[k]->id] = 1;
  }
  bool any = false;
  for (int32_t i = 0; i < n; i++) {       /* topological: every input is decided before its reader */
    const evtc_node *v = g->nodes[i];
    if (!c->fwd[i] || evtc_op_is_leaf(v->op) || !cheap(v->op) || evtc_graph_is_output(g, v)) continue;
    int d = 0;
    bool ok = true;
    for (int k = 0; k < v->n_inputs && ok; k++) {
      const evtc_node *u = v->inputs[k];
      if (evtc_op_is_leaf(u->op) || (read_back[u->id] && !c->redo[u->id])) continue;   /* in memory anyway */
      ok = c->redo[u->id] && depth[u->id] < MAX_DEPTH;
      if (ok && depth[u->id] > d) d = depth[u->id];
    }
    if (!ok || !readers_fusible(g, v)) continue;
    c->redo[i] = 1;
    depth[i] = (unsigned char)(d + 1);
    any |= read_back[i];
  }
  free(read_back);
  free(depth);
  return any;
}

/* The clone of recomputable src node v in dst (built once). */
static evtc_node *clone_of(evtc_rewrite *rw, const evtc_node *v) {
  remat_ctx *c = rw->ctx;
  if (c->clone[v->id]) return c->clone[v->id];
  evtc_node *ins[3];
  for (int k = 0; k < v->n_inputs; k++) {
    const evtc_node *u = v->inputs[k];
    ins[k] = c->redo[u->id] && !evtc_op_is_leaf(u->op) ? clone_of(rw, u) : rw->map[u->id];
    if (!ins[k]) return NULL;
  }
  return c->clone[v->id] = evtc_pat_op(rw, v->op, ins, v->n_inputs, v->attrs, evtc_op_get(v->op)->n_attrs, v->name, "re");
}

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  remat_ctx *c = rw->ctx;
  if (c->fwd[n->id] || c->grad_free[n->id] || evtc_op_is_leaf(n->op)) return NULL;
  bool reads = false;
  for (int k = 0; k < n->n_inputs; k++) reads |= c->redo[n->inputs[k]->id];
  if (!reads) return NULL;
  evtc_node **ins = malloc(sizeof *ins * ((size_t)n->n_inputs + 1));
  for (int k = 0; k < n->n_inputs; k++) {
    ins[k] = c->redo[n->inputs[k]->id] ? clone_of(rw, n->inputs[k]) : in[k];
    if (!ins[k]) {
      free(ins);
      return NULL;
    }
  }
  evtc_node *r = evtc_pat_op(rw, n->op, ins, n->n_inputs, n->attrs, evtc_op_get(n->op)->n_attrs, n->name, NULL);
  free(ins);
  return r;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) {
  remat_ctx c = {.fwd = calloc((size_t)g->n_nodes + 1, 1), .grad_free = calloc((size_t)g->n_nodes + 1, 1),
                 .redo = calloc((size_t)g->n_nodes + 1, 1), .clone = calloc((size_t)g->n_nodes + 1, sizeof *c.clone)};
  evtc_graph *r = decide(g, &c) ? evtc_rewrite_graph(g, rewrite, &c, d)
                                : evtc_rewrite_graph(g, NULL, NULL, d);
  free(c.fwd);
  free(c.grad_free);
  free(c.redo);
  free(c.clone);
  return r;
}

const evtc_pass evtc_pass_remat = {
    .name = "remat",
    .summary = "elementwise forward values the backward reads are recomputed there from values it keeps anyway",
    .run = run,
};
