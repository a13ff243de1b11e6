/* pad_concat.c -- the `pad-concat` pass: a sum of zero pads that tile one
 * axis is a concat.
 *
 * Autodiff's gradient of a split -- several slices of one value along an
 * axis, as attention's packed q/k/v projection is cut into q, k and v --
 * is the sum of each slice's gradient padded back to the whole width:
 *   dqkv = pad(dq, 0 | 2W) + pad(dk, W | W) + pad(dv, 2W | 0)
 * three zero-filled writes of the whole tensor and two adds over it (about
 * 1 GB of memory traffic per BERT-Large layer) where one concat writes it
 * once.  Matches an ADD tree (inner adds read by the tree alone, no
 * broadcasting) whose leaves are PADs with fill 0, no interior padding and
 * padding on one axis only, the same axis for all, whose unpadded ranges
 * tile that axis exactly; rewrites it into
 *   concat(the leaves' inputs in axis order) {axis}
 * Exact: every output element is one leaf's element plus zeros.  The
 * inner adds are left dead for dce.
 */
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/pattern.h"

enum { MAX_LEAVES = 16 };

typedef struct leaf {
  const evtc_node *pad;
  int64_t lo;               /* where its unpadded range starts on the axis */
} leaf;

/* Collects the PAD leaves of the ADD tree under src node n into l[*n_l]; false when another node is a leaf,
 * an add broadcasts, or there are too many. */
static bool collect(const evtc_rewrite *rw, const evtc_node *n, const evtc_type *t, leaf *l, int *n_l) {
  const evtc_pat_ctx *c = rw->ctx;
  for (int k = 0; k < 2; k++) {
    const evtc_node *m = n->inputs[k];
    if (!evtc_pat_same_shape(&m->type, t) || m->type.dtype != t->dtype) return false;
    if (m->op == EVTC_OP_ADD && c->uses[m->id] == 1) {
      if (!collect(rw, m, t, l, n_l)) return false;
    } else if (m->op == EVTC_OP_PAD && *n_l < MAX_LEAVES) {
      l[(*n_l)++] = (leaf){.pad = m};
    } else {
      return false;
    }
  }
  return true;
}

/* The one axis pad p pads (its range's start into *lo), or -1 when it pads none or several, fills with
 * anything but 0 or pads between elements. */
static int pad_axis(const evtc_node *p, int64_t *lo) {
  const evtc_attr *pads = evtc_node_attr(p, "pads"), *interior = evtc_node_attr(p, "interior");
  int rank = p->type.rank, axis = -1;
  if (evtc_node_float(p, "value") != 0 || !pads || pads->n != 2 * rank) return -1;
  for (int i = 0; interior && i < interior->n; i++)
    if (interior->v.ints[i] != 0) return -1;
  for (int i = 0; i < rank; i++)
    if (pads->v.ints[i] != 0 || pads->v.ints[rank + i] != 0) {
      if (axis >= 0 || pads->v.ints[i] < 0 || pads->v.ints[rank + i] < 0) return -1;
      axis = i;
    }
  if (axis >= 0) *lo = pads->v.ints[axis];
  return axis;
}

static int by_lo(const void *a, const void *b) {
  int64_t x = ((const leaf *)a)->lo, y = ((const leaf *)b)->lo;
  return (x > y) - (x < y);
}

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  (void)in;
  if (n->op != EVTC_OP_ADD) return NULL;
  leaf l[MAX_LEAVES];
  int n_l = 0, axis = -1;
  if (!collect(rw, n, &n->type, l, &n_l)) return NULL;
  for (int i = 0; i < n_l; i++) {
    int a = pad_axis(l[i].pad, &l[i].lo);
    if (a < 0 || (axis >= 0 && a != axis)) return NULL;
    axis = a;
  }
  qsort(l, (size_t)n_l, sizeof *l, by_lo);
  int64_t at = 0;
  evtc_node *ins[MAX_LEAVES];
  for (int i = 0; i < n_l; i++) {
    if (l[i].lo != at) return NULL;      /* a gap or an overlap */
    at += l[i].pad->inputs[0]->type.shape[axis];
    ins[i] = rw->map[l[i].pad->inputs[0]->id];
  }
  if (at != n->type.shape[axis]) return NULL;
  evtc_attr ax = evtc_attr_int("axis", axis);
  return evtc_pat_op(rw, EVTC_OP_CONCAT, ins, n_l, &ax, 1, n->name, NULL);
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, rewrite, d); }

const evtc_pass evtc_pass_pad_concat = {
    .name = "pad-concat",
    .summary = "a sum of zero pads that tile one axis (the gradient of a split) -> one concat",
    .run = run,
};
