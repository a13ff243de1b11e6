/* grad_factor.c -- the `grad-factor` pass: an elementwise gradient chain that
 * is linear in one incoming gradient becomes that gradient times one
 * coefficient computed from forward values.
 *
 * Autodiff differentiates a decomposed activation op by op.  GELU as ONNX
 * spells it, g = (h (1 + erf(h / sqrt 2))) / 2, gives
 *   dh = dm (1 + erf(a)) + ((dm h) 2/sqrt(pi) exp(-a^2)) / sqrt 2,  dm = dg / 2,
 * which the backward GEMM's epilogue evaluates per element from h, with an
 * erf and an exp, and which needs h itself in memory.  The same value is
 *   dh = dg J,  J = (1 + erf(a)) / 2 + (h / 2) 2/sqrt(pi) exp(-a^2) / sqrt 2,
 * where J depends on forward values only: the forward GEMM that makes h and
 * its erf can compute J beside the GELU and store it instead of h, and the
 * backward epilogue is one multiply (evtc's GEMM pays for every epilogue
 * instruction, src/fusion/cost.c).  The partitioner decides where J runs.
 *
 * Definitions (the joint graph; forward: what the loss depends on):
 *   - a node is gradient-free when it is a leaf, a forward node, or an
 *     elementwise op of gradient-free inputs (a forward kernel could make
 *     it); the others carry a gradient (a backward GEMM's output does);
 *   - a gradient-carrying node v is linear in seed u with coefficient C(v):
 *     u itself (C = 1) unless one of the rules applies --
 *       mul(a, f) or mul(f, a), div(a, f): C(a) * f, C(a) / f
 *       neg(a): -C(a)
 *       add(a, b), sub(a, b) with one seed: C(a) +- C(b)
 *     where a, b carry a gradient with v's shape and dtype and f is
 *     gradient-free (it may broadcast);
 *   - a node v linear in u != v, with three or more gradient-carrying nodes
 *     between u and v, and read by something that is not linear in u (or an
 *     output), becomes mul(u, C(v)) under v's name; the chain it replaces
 *     dies (dce).
 * Up to rounding: a sum of products regrouped.  h200 only, before the last
 * cse (which merges C's constants) and remat (which leaves gradient-free
 * readers alone, so J reads the forward's own values).
 */
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/pattern.h"

enum { MIN_CHAIN = 3 };

typedef struct factor_ctx {
  unsigned char *carries;     /* by src id: depends on the gradient */
  int32_t *seed;              /* by src id: the node it is linear in (itself when none) */
  int32_t *chain;             /* by src id: gradient-carrying nodes between its seed and it, itself included */
  unsigned char *root;        /* by src id: rewritten as mul(seed, coefficient) */
  evtc_node **coef;           /* by src id: its coefficient in dst, once built (NULL: 1) */
  unsigned char *built;
} factor_ctx;

/* Marks the nodes that carry a gradient (c->carries): the non-leaf nodes that are neither forward nor
 * gradient-free (evtc_pat_forward_split).  A backward GEMM's output carries one even when (a loss's
 * gradient of forward values, as cross-entropy's) it depends on forward values only. */
static void classify(const evtc_graph *g, factor_ctx *c) {
  const size_t n = (size_t)g->n_nodes + 1;
  unsigned char *fwd = calloc(n, 1), *grad_free = calloc(n, 1);
  evtc_pat_forward_split(g, fwd, grad_free);
  for (int32_t i = 0; i < g->n_nodes; i++)
    c->carries[i] = !fwd[i] && !grad_free[i] && !evtc_op_is_leaf(g->nodes[i]->op);
  free(fwd);
  free(grad_free);
}

static bool same_type(const evtc_node *a, const evtc_node *v) {
  return a->type.dtype == v->type.dtype && evtc_pat_same_shape(&a->type, &v->type);
}

/* The seed of gradient-carrying node v and its chain length (c->seed, c->chain). */
static void linearize(const evtc_graph *g, factor_ctx *c, int32_t i) {
  const evtc_node *v = g->nodes[i];
  c->seed[i] = i;
  c->chain[i] = 1;
  const evtc_node *a = v->n_inputs > 0 ? v->inputs[0] : NULL, *b = v->n_inputs > 1 ? v->inputs[1] : NULL;
  bool ca = a && c->carries[a->id], cb = b && c->carries[b->id];
  int32_t s = -1, len = 0;
  switch (v->op) {
  case EVTC_OP_MUL:
    if (ca != cb) {
      const evtc_node *x = ca ? a : b;
      if (same_type(x, v)) s = c->seed[x->id], len = c->chain[x->id];
    }
    break;
  case EVTC_OP_DIV:
    if (ca && !cb && same_type(a, v)) s = c->seed[a->id], len = c->chain[a->id];
    break;
  case EVTC_OP_NEG:
    if (ca && same_type(a, v)) s = c->seed[a->id], len = c->chain[a->id];
    break;
  case EVTC_OP_ADD:
  case EVTC_OP_SUB:
    if (ca && cb && same_type(a, v) && same_type(b, v) && c->seed[a->id] == c->seed[b->id])
      s = c->seed[a->id], len = c->chain[a->id] + c->chain[b->id];
    break;
  default: break;
  }
  if (s >= 0) c->seed[i] = s, c->chain[i] = len + 1;
}

/* Fills the context; false when nothing is rewritten. */
static bool decide(const evtc_graph *g, factor_ctx *c) {
  if (!g->loss) return false;
  classify(g, c);
  int32_t n = g->n_nodes;
  for (int32_t i = 0; i < n; i++)
    if (c->carries[i]) linearize(g, c, i);
  /* ends[i]: something reads node i without carrying its chain on (or it is an output) */
  unsigned char *ends = calloc((size_t)n + 1, 1);
  for (int32_t j = 0; j < n; j++) {
    const evtc_node *w = g->nodes[j];
    for (int k = 0; k < w->n_inputs; k++) {
      const int32_t i = w->inputs[k]->id;
      if (!c->carries[j] || c->seed[j] != c->seed[i]) ends[i] = 1;
    }
  }
  bool any = false;
  for (int32_t i = 0; i < n; i++)
    if (c->carries[i] && c->seed[i] != i && c->chain[i] >= MIN_CHAIN &&
        (ends[i] || evtc_graph_is_output(g, g->nodes[i])))
      c->root[i] = 1, any = true;
  free(ends);
  return any;
}

/* The coefficient of chain node v (src) in dst: NULL stands for 1. */
static evtc_node *coef_of(evtc_rewrite *rw, const evtc_node *v) {
  factor_ctx *c = rw->ctx;
  int32_t i = v->id;
  if (c->built[i]) return c->coef[i];
  evtc_node *r = NULL;
  if (c->seed[i] != i) {
    const evtc_node *a = v->inputs[0], *b = v->n_inputs > 1 ? v->inputs[1] : NULL;
    switch (v->op) {
    case EVTC_OP_MUL: {
      const bool ca = c->carries[a->id];
      evtc_node *x = coef_of(rw, ca ? a : b), *f = rw->map[(ca ? b : a)->id];
      r = x ? evtc_pat_bin(rw, EVTC_OP_MUL, x, f, v->name, "coef") : f;
      break;
    }
    case EVTC_OP_DIV: {
      evtc_node *x = coef_of(rw, a), *f = rw->map[b->id];
      if (!x) x = evtc_pat_const(rw, v->type.dtype, 0, NULL, 1.0, v->name, "one");
      r = evtc_pat_bin(rw, EVTC_OP_DIV, x, f, v->name, "coef");
      break;
    }
    case EVTC_OP_NEG: {
      evtc_node *x = coef_of(rw, a);
      r = x ? evtc_pat_un(rw, EVTC_OP_NEG, x, v->name, "coef")
            : evtc_pat_const(rw, v->type.dtype, 0, NULL, -1.0, v->name, "coef");
      break;
    }
    default: {   /* ADD, SUB */
      evtc_node *x = coef_of(rw, a), *y = coef_of(rw, b);
      if (!x) x = evtc_pat_const(rw, v->type.dtype, 0, NULL, 1.0, v->name, "one");
      if (!y) y = evtc_pat_const(rw, v->type.dtype, 0, NULL, 1.0, v->name, "one");
      r = evtc_pat_bin(rw, v->op, x, y, v->name, "coef");
      break;
    }
    }
  }
  c->built[i] = 1;
  return c->coef[i] = r;
}

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  factor_ctx *c = rw->ctx;
  (void)in;
  if (!c->root[n->id]) return NULL;
  evtc_node *k = coef_of(rw, n);
  if (!k) return NULL;
  evtc_node *r = evtc_pat_bin(rw, EVTC_OP_MUL, rw->map[c->seed[n->id]], k, n->name, NULL);
  return r && same_type(r, n) ? r : NULL;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) {
  size_t n = (size_t)g->n_nodes + 1;
  factor_ctx c = {.carries = calloc(n, 1), .seed = calloc(n, sizeof(int32_t)), .chain = calloc(n, sizeof(int32_t)),
                  .root = calloc(n, 1), .coef = calloc(n, sizeof(evtc_node *)), .built = calloc(n, 1)};
  evtc_graph *r = decide(g, &c) ? evtc_rewrite_graph(g, rewrite, &c, d) : evtc_rewrite_graph(g, NULL, NULL, d);
  free(c.carries);
  free(c.seed);
  free(c.chain);
  free(c.root);
  free(c.coef);
  free(c.built);
  return r;
}

const evtc_pass evtc_pass_grad_factor = {
    .name = "grad-factor",
    .summary = "an elementwise gradient chain linear in one incoming gradient becomes it times one coefficient "
               "computed from forward values",
    .run = run,
};
