/* template.c -- which node sets the partitioners may make one kernel.
 *
 * A set is admissible when it fits one of the kernel templates and the
 * target's limits, and is convex (no path leaves the set and comes back):
 *   GEMM: exactly one main loop, the nucleus.  Its operands may come
 *     through layout ops folded into the loads (prologue: a layout node
 *     read only by the nucleus, with no input inside the kernel).  Every
 *     other node is epilogue work over the nucleus's output space D (its
 *     element count): nodes of D elements, side computations on smaller
 *     operands (bias vectors, scalars), and reductions of D-sized values
 *     that are stored at the end (no reader inside the kernel).
 *   STITCHED / ELEMENTWISE: no main loop; D is the largest iteration
 *     space.  Reductions read inside the kernel must be row reductions of
 *     D-sized values, all with the same row count R (reduce-then-apply:
 *     one pass over a row per phase).  Other reductions are final stores.
 *     How much of a row stays on chip between passes is a matter of cost,
 *     not of admission: inputs that do not fit are read again (cost.c).
 *   Everywhere: only a reduction may take a D-sized value inside the kernel
 *     to a smaller one; nothing exceeds D; at most max_nodes nodes,
 *     max_reductions reductions, max_io tensors read + written.
 * Members need not be linked by producer-consumer edges: siblings
 * (fusion_internal.h) share their common input's load.  feasible.c checks
 * the same rules with its own code.
 */
#include "fusion/fusion_internal.h"

/* Calls visit(c, v, arg) for every node v outside the marked set cur that
 * lies on a path between two of its members ((descendants of s) &
 * (ancestors of s) outside s); stops and returns false as soon as visit
 * does, true otherwise. */
static bool each_between(const evtc_fusion_ctx *c, const int32_t *s, int n, int32_t cur,
                         bool (*visit)(const evtc_fusion_ctx *c, int32_t v, void *arg), void *arg) {
  size_t w = (size_t)c->words;
  for (size_t i = 0; i < w; i++) {
    uint64_t d = 0, a = 0;
    for (int k = 0; k < n; k++) {
      d |= c->desc[(size_t)s[k] * w + i];
      a |= c->anc[(size_t)s[k] * w + i];
    }
    for (uint64_t x = d & a; x; x &= x - 1) {
      int32_t v = (int32_t)(i * 64 + (size_t)__builtin_ctzll(x));
      if (c->stamp[v] != cur && !visit(c, v, arg)) return false;
    }
  }
  return true;
}

static bool refuse_any(const evtc_fusion_ctx *c, int32_t v, void *arg) { return false; }

/* True when no node outside the marked set lies on a path between two of its nodes. */
static bool convex(const evtc_fusion_ctx *c, const int32_t *s, int n, int32_t cur) {
  return each_between(c, s, n, cur, refuse_any, NULL);
}

/* Nodes that would have to join a set to make it convex. */
typedef struct joiners {
  int extra, extra_nuclei;
} joiners;

/* Counts a node that must join; false (hopeless) when it cannot be fused. */
static bool count_joiner(const evtc_fusion_ctx *c, int32_t v, void *arg) {
  joiners *j = arg;
  if (c->cls[v] != EVTC_CLASS_FUSIBLE) return false;
  j->extra++;
  j->extra_nuclei += c->mainloop[v];
  return true;
}

static bool is_input_of(const evtc_node *user, int32_t p) {
  for (int32_t k = 0; k < user->n_inputs; k++)
    if (user->inputs[k]->id == p) return true;
  return false;
}

/* How member v relates to the rest of the marked set cur: *inside_user when
 * one of v's users is in the set, *in_max the largest element count among
 * v's inputs in the set (0 when none is). */
static void member_links(const evtc_fusion_ctx *c, int32_t v, int32_t cur, bool *inside_user, int64_t *in_max) {
  const evtc_node *nd = c->g->nodes[v];
  *inside_user = false;
  for (int32_t k = c->user_start[v]; k < c->user_start[v + 1]; k++) *inside_user |= c->stamp[c->users[k]] == cur;
  *in_max = 0;
  for (int32_t k = 0; k < nd->n_inputs; k++)
    if (c->stamp[nd->inputs[k]->id] == cur && c->numel[nd->inputs[k]->id] > *in_max)
      *in_max = c->numel[nd->inputs[k]->id];
}

/* True when v, an operand of the nucleus, can be its prologue: a layout op
 * with no input in the set (in_max 0), not a graph output, read only by the
 * nucleus. */
static bool prologue_ok(const evtc_fusion_ctx *c, int32_t v, int32_t nucleus, int64_t in_max) {
  if (evtc_op_get(c->g->nodes[v]->op)->fusion != EVTC_FUSE_LAYOUT || in_max > 0 || c->is_output[v]) return false;
  for (int32_t k = c->user_start[v]; k < c->user_start[v + 1]; k++)
    if (c->users[k] != nucleus) return false;
  return true;
}

bool evtc_fusion_hopeless(evtc_fusion_ctx *c, const int32_t *s, int n) {
  const evtc_device *dev = c->dev;
  if (n > dev->max_nodes) return true;
  int32_t nucleus = -1;
  int64_t big = 0;
  int nred = 0;
  for (int i = 0; i < n; i++) {
    if (c->mainloop[s[i]]) {
      if (nucleus >= 0) return true;
      nucleus = s[i];
    } else if (c->iter[s[i]] > big) {
      big = c->iter[s[i]];
    }
    nred += c->red[s[i]] != EVTC_RED_NONE;
  }
  if (nred > dev->max_reductions || (nucleus >= 0 && big > c->numel[nucleus])) return true;
  int32_t cur = evtc_fusion_mark(c, s, n);
  const evtc_node *nuc = nucleus >= 0 ? c->g->nodes[nucleus] : NULL;
  int64_t rows = -1;
  for (int i = 0; i < n; i++) {
    int32_t v = s[i];
    bool inside_user;
    int64_t in_max;
    member_links(c, v, cur, &inside_user, &in_max);
    if (v == nucleus) continue;
    if (nuc && is_input_of(nuc, v)) {
      if (!prologue_ok(c, v, nucleus, in_max)) return true;
      continue;
    }
    if (c->red[v] != EVTC_RED_NONE && inside_user) {
      if (nuc || c->red[v] != EVTC_RED_ROW || c->iter[v] < big) return true;
      if (rows >= 0 && rows != c->numel[v]) return true;
      rows = c->numel[v];
    }
    if (nuc && c->red[v] == EVTC_RED_NONE && c->numel[v] < c->numel[nucleus] && in_max == c->numel[nucleus])
      return true;
  }
  /* nodes on paths between members must join: they must be able to */
  joiners j = {0, 0};
  if (!each_between(c, s, n, cur, count_joiner, &j)) return true;
  return n + j.extra > dev->max_nodes || j.extra_nuclei + (nucleus >= 0) > 1;
}

bool evtc_fusion_admissible(evtc_fusion_ctx *c, const int32_t *s, int n, evtc_kernel_kind *kind, double *time_us) {
  const evtc_device *dev = c->dev;
  if (n > 1 && n > dev->max_nodes) return false;
  int32_t nucleus = -1;
  int64_t D = 0;
  for (int i = 0; i < n; i++) {
    if (c->cls[s[i]] != EVTC_CLASS_FUSIBLE) return false;
    if (c->mainloop[s[i]]) {
      if (nucleus >= 0) return false;
      nucleus = s[i];
    }
    if (c->iter[s[i]] > D) D = c->iter[s[i]];
  }
  if (nucleus >= 0) D = c->numel[nucleus];
  int32_t cur = evtc_fusion_mark(c, s, n);
  int nred = 0;
  int64_t rows = -1;
  const evtc_node *nuc = nucleus >= 0 ? c->g->nodes[nucleus] : NULL;
  for (int i = 0; i < n && n > 1; i++) {
    int32_t v = s[i];
    bool inside_user;
    int64_t in_max;
    member_links(c, v, cur, &inside_user, &in_max);
    if (v == nucleus) continue;
    if (nuc && is_input_of(nuc, v)) {          /* prologue: a layout folded into the operand load */
      if (!prologue_ok(c, v, nucleus, in_max)) return false;
      continue;
    }
    if (c->red[v] != EVTC_RED_NONE) {
      nred++;
      if (c->iter[v] > D) return false;
      if (inside_user) {
        if (nuc || c->red[v] != EVTC_RED_ROW || c->iter[v] != D) return false;
        if (rows >= 0 && rows != c->numel[v]) return false;
        rows = c->numel[v];
      }
    } else {
      if (c->numel[v] > D) return false;
      if (c->numel[v] < D && in_max == D) return false;
    }
  }
  if (n > 1) {
    if (nred > dev->max_reductions) return false;
    if (!convex(c, s, n, cur)) return false;
  }
  int io;
  double t = evtc_fusion_cost(c, s, n, NULL, NULL, &io);
  if (n > 1 && io > dev->max_io) return false;
  if (n > 1 && c->opt && c->opt->accept && !c->opt->accept(c->g, s, n, c->opt->accept_ctx)) return false;
  if (kind) *kind = nucleus >= 0 ? EVTC_KERNEL_GEMM : nred > 0 ? EVTC_KERNEL_STITCHED : EVTC_KERNEL_ELEMENTWISE;
  if (time_us) *time_us = t;
  return true;
}
