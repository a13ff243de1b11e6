/* attention_fuse.c -- the `attention-fuse` pass: the decomposed scaled
 * dot-product attention becomes one attention node (ops.def).
 *
 * Matches, from the last matmul back:
 *   s = batch_matmul(q, k) {trans_b=1}        q [B,H,S,D], k [B,H,T,D]
 *     | batch_matmul(q, kt)                   kt [B,H,D,T], as ONNX exports give
 *                                             it (k = permute(kt) then, folded
 *                                             into kt's own permute if it is one)
 *                                             or all of rank 3 [B*H,..], as
 *                                             nn.MultiheadAttention gives them
 *                                             (attention on [1,B*H,..] reshapes)
 *   s = mul(s, c) | mul(c, s) | div(s, c)     c a uniform CONST (optional: scale 1;
 *                                             else q may be scaled so instead)
 *   s = add(s, m) | add(m, s)                 m a CONST [..,S,T]: 0 where key t <= s + T - S,
 *       | where(keep, s, f) | where(drop, f, s)   <= -1e9 (or -inf) elsewhere; or a bool
 *                                             CONST keep / drop with f a uniform <= -1e9
 *                                             (optional: no mask; an all-zero m is no mask)
 *   p = softmax(s) {axis=-1}
 *   out = batch_matmul(p, v)                  v [B,H,T,Dv]
 * and rewrites it to attention(q, k, v) {scale, causal} named like out.
 * Every intermediate must have the next one as its only consumer (no
 * output, no other use), so nothing is computed twice: in a joint training
 * graph the softmax feeds its own gradient, so the pass is meant for the
 * forward graph (before autodiff) or inference.  A mask of any other
 * pattern, broadcast batch dims or a causal mask with S > T leave the
 * graph as it is.
 */
#include <math.h>

#include "passes/pass.h"
#include "passes/pattern.h"

#define MASKED_AT_MOST (-1e9)

typedef struct attn_match {
  const evtc_node *q, *k, *v;
  bool k_transposed;               /* k is k^T [B,H,D,T] */
  double scale;
  int causal;
} attn_match;

/* Input k of src node n, when n is its only consumer. */
static const evtc_node *sole(const evtc_rewrite *rw, const evtc_node *n, int k) {
  return evtc_pat_single_use(rw, n, k) ? n->inputs[k] : NULL;
}

/* Element i of CONST c (uniform or data). */
static double const_at(const evtc_node *c, int64_t i) {
  const evtc_attr *data = evtc_node_attr(c, "data");
  return data->n ? data->v.floats[i] : evtc_node_float(c, "value");
}

/* Whether CONST m of shape [..,S,T] (leading dims broadcast against `into`)
 * is a mask: *causal = 1 for the causal pattern, 0 when nothing is masked.
 * `keep(value)` says whether an element marks a visible key. */
static bool mask_pattern(const evtc_node *m, const evtc_type *into, bool bool_mask, bool keep_true, int *causal) {
  const evtc_type *t = &m->type;
  if (m->op != EVTC_OP_CONST || t->rank < 2 || t->rank > into->rank) return false;
  int64_t S = into->shape[into->rank - 2], T = into->shape[into->rank - 1];
  if (t->shape[t->rank - 2] != S || t->shape[t->rank - 1] != T) return false;
  for (int d = 0; d < t->rank - 2; d++)
    if (t->shape[d] != 1 && t->shape[d] != into->shape[into->rank - t->rank + d]) return false;
  bool all_visible = true, is_causal = true;
  for (int64_t i = 0, n = evtc_type_numel(t); i < n; i++) {
    int64_t s = i / T % S, tt = i % T;
    double x = const_at(m, i);
    bool visible, masked;
    if (bool_mask) {
      visible = (x != 0) == keep_true;
      masked = !visible;
    } else {
      visible = x == 0;
      masked = x <= MASKED_AT_MOST;
    }
    if (!visible && !masked) return false;
    all_visible &= visible;
    is_causal &= visible == (tt <= s + (T - S));
  }
  if (all_visible) *causal = 0;
  else if (is_causal && S <= T) *causal = 1;
  else return false;
  return true;
}

/* The masking step at src node x (whose only consumer is the softmax);
 * on a match returns the scores node under it and sets *causal. */
static const evtc_node *unmask(const evtc_rewrite *rw, const evtc_node *x, int *causal) {
  *causal = 0;
  double f;
  if (x->op == EVTC_OP_ADD) {
    for (int j = 0; j < 2; j++) {
      const evtc_node *m = x->inputs[1 - j];
      if (evtc_pat_same_shape(&x->inputs[j]->type, &x->type) && mask_pattern(m, &x->type, false, false, causal))
        return sole(rw, x, j);
    }
  } else if (x->op == EVTC_OP_WHERE && x->inputs[0]->op == EVTC_OP_CONST) {
    for (int j = 1; j < 3; j++) {
      const evtc_node *fill = x->inputs[3 - j];
      if (evtc_pat_same_shape(&x->inputs[j]->type, &x->type) && evtc_pat_uniform(fill, &f) && f <= MASKED_AT_MOST &&
          mask_pattern(x->inputs[0], &x->type, true, j == 1, causal))
        return sole(rw, x, j);
    }
  }
  return x;       /* no mask */
}

/* The scaling step at src node x; returns the node under it and sets *scale. */
static const evtc_node *unscale(const evtc_rewrite *rw, const evtc_node *x, double *scale) {
  double c;
  *scale = 1.0;
  if (x->op == EVTC_OP_MUL || x->op == EVTC_OP_DIV) {
    for (int j = 0; j < 2; j++) {
      if (x->op == EVTC_OP_DIV && j == 1) break;
      const evtc_node *cn = x->inputs[1 - j];
      if (!evtc_pat_uniform(cn, &c) || !isfinite(c) || c == 0 || !evtc_pat_same_shape(&x->inputs[j]->type, &x->type))
        continue;
      *scale = x->op == EVTC_OP_DIV ? 1.0 / c : c;
      return sole(rw, x, j);
    }
  }
  return x;
}

/* batch_matmul with these flags, both operands of rank 4 [B,H,..] or both of rank 3 [B*H,..]. */
static bool is_bmm(const evtc_node *n, int trans_b) {
  if (!n || n->op != EVTC_OP_BATCH_MATMUL || evtc_node_int(n, "trans_a") != 0 ||
      evtc_node_int(n, "trans_b") != trans_b)
    return false;
  int r = n->inputs[0]->type.rank;
  return (r == 3 || r == 4) && n->inputs[1]->type.rank == r;
}

/* Matches the chain ending in src node n (out = batch_matmul(p, v)). */
static bool match(const evtc_rewrite *rw, const evtc_node *n, attn_match *m) {
  if (!is_bmm(n, 0)) return false;
  const evtc_node *p = sole(rw, n, 0);
  if (!p || p->op != EVTC_OP_SOFTMAX || evtc_axis_norm(evtc_node_int(p, "axis"), p->type.rank) != p->type.rank - 1)
    return false;
  const evtc_node *x = sole(rw, p, 0);
  if (!x) return false;
  x = unmask(rw, x, &m->causal);
  if (x) x = unscale(rw, x, &m->scale);
  if (!is_bmm(x, 1) && !is_bmm(x, 0)) return false;
  m->q = x->inputs[0];
  m->k = x->inputs[1];
  m->k_transposed = evtc_node_int(x, "trans_b") == 0;
  m->v = n->inputs[1];
  if (m->scale == 1.0) {                /* nn.MultiheadAttention scales q instead */
    const evtc_node *q = sole(rw, x, 0);
    if (q) m->q = unscale(rw, q, &m->scale);
    if (!m->q) return false;
  }
  for (int d = 0; d < n->type.rank - 2; d++)   /* no broadcast batch or head dims */
    if (m->k->type.shape[d] != m->q->type.shape[d] || m->v->type.shape[d] != m->q->type.shape[d]) return false;
  return m->q->type.dtype == n->type.dtype;
}

/* k from k^T (src node kt of rank r): kt with its last two axes swapped, in one permute -- kt's own when
 * it is a permute. */
static evtc_node *untranspose(evtc_rewrite *rw, const evtc_node *kt, const char *name) {
  int r = kt->type.rank;
  int64_t perm[EVTC_MAX_RANK];
  const evtc_attr *own = kt->op == EVTC_OP_PERMUTE ? evtc_node_attr(kt, "perm") : NULL;
  for (int d = 0; d < r; d++) {
    int from = d < r - 2 ? d : 2 * r - 3 - d;
    perm[d] = own ? own->v.ints[from] : from;
  }
  return evtc_pat_permute(rw, rw->map[(own ? kt->inputs[0] : kt)->id], perm, name, "k");
}

static evtc_node *fuse(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  (void)in;
  attn_match m;
  if (!match(rw, n, &m)) return NULL;
  evtc_node *ins[3] = {rw->map[m.q->id], m.k_transposed ? untranspose(rw, m.k, n->name) : rw->map[m.k->id],
                       rw->map[m.v->id]};
  evtc_attr at[2] = {evtc_attr_float("scale", m.scale), evtc_attr_int("causal", m.causal)};
  if (n->type.rank == 4) return evtc_pat_op(rw, EVTC_OP_ATTENTION, ins, 3, at, 2, n->name, NULL);
  static const char *const tag[3] = {"q4", "k4", "v4"};   /* [B*H,S,D] as [1,B*H,S,D] */
  for (int i = 0; i < 3; i++) {
    const int64_t *sh = ins[i]->type.shape;
    ins[i] = evtc_pat_reshape(rw, ins[i], 4, (int64_t[]){1, sh[0], sh[1], sh[2]}, n->name, tag[i]);
  }
  evtc_node *o = evtc_pat_op(rw, EVTC_OP_ATTENTION, ins, 3, at, 2, n->name, "4d");
  return evtc_pat_reshape(rw, o, 3, n->type.shape, n->name, NULL);
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, fuse, d); }

const evtc_pass evtc_pass_attention_fuse = {
    .name = "attention-fuse",
    .summary = "batch_matmul(q, k^T) -> scale -> causal mask -> softmax -> batch_matmul(., v) into attention",
    .run = run,
};
