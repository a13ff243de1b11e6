/* feasible.c -- the independent feasibility checker of fusion plans.
 *
 * Written separately from the partitioners (it includes none of their
 * code) so that a bug in the ILP or in candidate admission cannot hide
 * itself: every plan a test or `evtc explain` produces goes through here.
 * It checks, from the graph and the plan alone:
 *   - every node is placed as it must be: leaves in no kernel; a node in no
 *     kernel must be a rank-0 value computed from leaves and such values
 *     only (its readers recompute it) and not a graph output; kernel ids in
 *     range and each kernel's node list consistent with kernel_of;
 *   - at most one main loop per kernel; an opaque op alone; a fused kernel
 *     connected through its own producer-consumer edges and sibling links
 *     (two members other than main loops that read one common tensor, of
 *     more than one element, over that tensor's own element count: they
 *     share its load), unless it holds only stored rank-0 values; packing
 *     ops that share nothing is not a template;
 *   - each fused kernel fits its template (see template.c for the rules:
 *     prologue layouts feeding the nucleus, epilogue over the output space,
 *     reductions read inside only as equal-row row reductions of a kernel
 *     without a nucleus, nothing shrinks a full-size value except a
 *     reduction) and the target's limits (nodes, reductions, tensors read
 *     and written; how much of a row stays on chip is a cost, not a
 *     limit), and carries the right kind;
 *   - the kernel graph is acyclic (which also makes every kernel convex).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/partition.h"

typedef struct chk {
  const evtc_graph *g;
  const int32_t *of;        /* kernel_of */
  bool *recompute;          /* rank-0 values computed from leaves only */
  char *why;
  size_t cap;
} chk;

static bool fail(chk *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(chk *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->why, k->cap, fmt, ap);
  va_end(ap);
  return false;
}

static int64_t elems(const evtc_node *n) { return evtc_type_numel(&n->type); }
static evtc_fusion_kind fkind(const evtc_node *n) { return evtc_op_get(n->op)->fusion; }
static bool in_kernel(const chk *k, const evtc_node *n, int32_t kid) { return k->of[n->id] == kid; }

/* True when reduction r folds trailing axes and keeps at least one. */
static bool trailing_reduction(const evtc_node *r) {
  int rank = r->inputs[0]->type.rank;
  if (r->op == EVTC_OP_GLOBAL_AVGPOOL) return rank == 4;
  const evtc_attr *a = evtc_node_attr(r, "axes");
  if (a->n == 0) return false;
  int lowest = rank;
  unsigned mask = 0;
  for (int i = 0; i < a->n; i++) {
    int64_t ax = a->v.ints[i] < 0 ? a->v.ints[i] + rank : a->v.ints[i];
    mask |= 1u << ax;
    if (ax < lowest) lowest = (int)ax;
  }
  return lowest > 0 && mask == ((1u << rank) - 1) - ((1u << lowest) - 1);
}

/* The readers of n inside kernel kid, counted. */
static int readers_inside(const chk *k, const evtc_node *n, int32_t kid, bool *only_nucleus, int32_t nucleus) {
  int count = 0;
  *only_nucleus = true;
  for (int32_t u = n->id + 1; u < k->g->n_nodes; u++) {
    const evtc_node *un = k->g->nodes[u];
    for (int32_t i = 0; i < un->n_inputs; i++)
      if (un->inputs[i] == n) {
        if (in_kernel(k, un, kid)) count++;
        if (u != nucleus) *only_nucleus = false;
        break;
      }
  }
  return count;
}

static bool is_output(const evtc_graph *g, const evtc_node *n) {
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].node == n) return true;
  return false;
}

/* The elements node n works over: its input's for a reduction, else its own. */
static int64_t work_of(const evtc_node *n) {
  return fkind(n) == EVTC_FUSE_REDUCE ? elems(n->inputs[0]) : elems(n);
}

/* True when a and b (kernel members) are siblings: neither a main loop,
 * both reading some tensor of more than one element over its own element
 * count. */
static bool siblings(const evtc_node *a, const evtc_node *b) {
  if (fkind(a) == EVTC_FUSE_MAINLOOP || fkind(b) == EVTC_FUSE_MAINLOOP) return false;
  for (int32_t i = 0; i < a->n_inputs; i++) {
    const evtc_node *t = a->inputs[i];
    if (elems(t) <= 1 || work_of(a) != elems(t) || work_of(b) != elems(t)) continue;
    for (int32_t j = 0; j < b->n_inputs; j++)
      if (b->inputs[j] == t) return true;
  }
  return false;
}

/* True when kernel K's nodes are connected through edges and sibling links between them. */
static bool connected(const chk *k, const evtc_fusion_kernel *K) {
  bool *reached = calloc((size_t)K->n_nodes, sizeof(bool));
  EVTC_ASSERT(reached != NULL);
  reached[0] = true;
  int32_t count = 1;
  for (bool grew = true; grew;) {             /* relax until nothing changes: kernels are small */
    grew = false;
    for (int32_t i = 0; i < K->n_nodes; i++)
      for (int32_t j = 0; j < K->n_nodes; j++) {
        if (reached[i] == reached[j]) continue;
        const evtc_node *a = k->g->nodes[K->nodes[i]], *b = k->g->nodes[K->nodes[j]];
        bool edge = false;
        for (int32_t q = 0; q < a->n_inputs && !edge; q++) edge = a->inputs[q] == b;
        for (int32_t q = 0; q < b->n_inputs && !edge; q++) edge = b->inputs[q] == a;
        if (edge || siblings(a, b)) reached[i] = reached[j] = true, count++, grew = true;
      }
  }
  free(reached);
  return count == K->n_nodes;
}

/* Template, limits and kind of kernel kid; a single node is always a
 * kernel of its own, so only its kind is checked. */
static bool check_fused(chk *k, const evtc_fusion_kernel *K, int32_t kid, const evtc_device *dev) {
  const evtc_graph *g = k->g;
  int32_t nucleus = -1;
  int64_t space = 0;
  for (int32_t i = 0; i < K->n_nodes; i++) {
    const evtc_node *n = g->nodes[K->nodes[i]];
    if (fkind(n) == EVTC_FUSE_MAINLOOP) nucleus = n->id;
    if (work_of(n) > space) space = work_of(n);
  }
  if (nucleus >= 0) space = elems(g->nodes[nucleus]);
  bool single = K->n_nodes == 1, scalars = true;
  for (int32_t i = 0; i < K->n_nodes; i++) scalars &= k->recompute[K->nodes[i]];
  if (!single && !scalars && !connected(k, K)) return fail(k, "kernel %d is not connected", kid);
  if (!single && K->n_nodes > dev->max_nodes) return fail(k, "kernel %d: %d nodes, more than %d", kid, K->n_nodes, dev->max_nodes);
  int reductions = 0;
  int64_t rows = 0;
  for (int32_t i = 0; i < K->n_nodes; i++) {
    const evtc_node *n = g->nodes[K->nodes[i]];
    if (n->id == nucleus) continue;
    bool only_nucleus;
    int inside = readers_inside(k, n, kid, &only_nucleus, nucleus);
    bool feeds_nucleus = false;
    if (nucleus >= 0)
      for (int32_t j = 0; j < g->nodes[nucleus]->n_inputs; j++) feeds_nucleus |= g->nodes[nucleus]->inputs[j] == n;
    int64_t biggest_input_inside = 0;
    for (int32_t j = 0; j < n->n_inputs; j++)
      if (in_kernel(k, n->inputs[j], kid) && elems(n->inputs[j]) > biggest_input_inside)
        biggest_input_inside = elems(n->inputs[j]);
    if (feeds_nucleus) {
      if (fkind(n) != EVTC_FUSE_LAYOUT || biggest_input_inside > 0 || !only_nucleus || is_output(g, n))
        return fail(k, "kernel %d: %%%s feeds the main loop but is not a layout op folded into its load", kid,
                    n->name);
      continue;
    }
    if (fkind(n) == EVTC_FUSE_REDUCE) {
      reductions++;
      if (elems(n->inputs[0]) > space) return fail(k, "kernel %d: reduction %%%s is larger than the kernel", kid, n->name);
      if (inside > 0) {
        if (nucleus >= 0) return fail(k, "kernel %d: epilogue reduction %%%s is read inside the kernel", kid, n->name);
        if (!trailing_reduction(n) || elems(n->inputs[0]) != space)
          return fail(k, "kernel %d: %%%s is read inside the kernel but is not a row reduction of it", kid, n->name);
        if (rows && rows != elems(n)) return fail(k, "kernel %d: row reductions of different row counts", kid);
        rows = elems(n);
      }
    } else {
      if (elems(n) > space) return fail(k, "kernel %d: %%%s is larger than the kernel's space", kid, n->name);
      if (elems(n) < space && biggest_input_inside == space)
        return fail(k, "kernel %d: %%%s shrinks a full-size value without reducing it", kid, n->name);
    }
  }
  if (single) reductions = fkind(g->nodes[K->nodes[0]]) == EVTC_FUSE_REDUCE;
  if (!single && reductions > dev->max_reductions)
    return fail(k, "kernel %d: %d reductions, more than %d", kid, reductions, dev->max_reductions);
  /* tensors read from and written to memory */
  int io = 0;
  for (int32_t i = 0; i < K->n_nodes; i++) {
    const evtc_node *n = g->nodes[K->nodes[i]];
    for (int32_t j = 0; j < n->n_inputs; j++) {
      const evtc_node *p = n->inputs[j];
      bool seen = in_kernel(k, p, kid);
      for (int32_t a = 0; a < i && !seen; a++)
        for (int32_t b = 0; b < g->nodes[K->nodes[a]]->n_inputs && !seen; b++) seen = g->nodes[K->nodes[a]]->inputs[b] == p;
      for (int32_t b = 0; b < j && !seen; b++) seen = n->inputs[b] == p;
      io += !seen;
    }
    bool escapes = is_output(g, n);
    for (int32_t u = n->id + 1; u < g->n_nodes && !escapes; u++)
      for (int32_t j = 0; j < g->nodes[u]->n_inputs; j++)
        if (g->nodes[u]->inputs[j] == n && !in_kernel(k, g->nodes[u], kid)) escapes = true;
    io += escapes;
  }
  if (!single && io > dev->max_io) return fail(k, "kernel %d: %d tensors read and written, more than %d", kid, io, dev->max_io);
  evtc_kernel_kind want = nucleus >= 0 ? EVTC_KERNEL_GEMM : reductions ? EVTC_KERNEL_STITCHED : EVTC_KERNEL_ELEMENTWISE;
  if (K->kind != want)
    return fail(k, "kernel %d: recorded as %s but is %s", kid, evtc_kernel_kind_name(K->kind), evtc_kernel_kind_name(want));
  return true;
}

/* Kahn's algorithm over kernel edges; false when some kernel is never freed. */
static bool acyclic(chk *k, int32_t n_kernels) {
  const evtc_graph *g = k->g;
  int32_t *indeg = calloc((size_t)n_kernels + 1, sizeof(int32_t));
  int32_t *queue = malloc(sizeof(int32_t) * ((size_t)n_kernels + 1));
  EVTC_ASSERT(indeg && queue);
  /* one edge per (reading node, input) pair; repeats count on both sides */
  for (int32_t v = 0; v < g->n_nodes; v++) {
    const evtc_node *n = g->nodes[v];
    for (int32_t i = 0; i < n->n_inputs; i++) {
      const evtc_node *p = n->inputs[i];
      if (k->of[v] < 0 || k->of[p->id] < 0 || k->recompute[p->id] || k->of[p->id] == k->of[v]) continue;
      indeg[k->of[v]]++;
    }
  }
  int32_t head = 0, tail = 0, done = 0;
  for (int32_t q = 0; q < n_kernels; q++)
    if (indeg[q] == 0) queue[tail++] = q;
  while (head < tail) {
    int32_t q = queue[head++];
    done++;
    for (int32_t v = 0; v < g->n_nodes; v++) {
      if (k->of[v] == q || k->of[v] < 0) continue;
      const evtc_node *n = g->nodes[v];
      for (int32_t i = 0; i < n->n_inputs; i++) {
        const evtc_node *p = n->inputs[i];
        if (k->of[p->id] != q || k->recompute[p->id]) continue;
        if (--indeg[k->of[v]] == 0) queue[tail++] = k->of[v];
      }
    }
  }
  free(indeg);
  free(queue);
  return done == n_kernels;
}

bool evtc_fusion_check(const evtc_partition *p, const evtc_device *dev, char *why, size_t cap) {
  const evtc_graph *g = p->g;
  chk k = {g, p->kernel_of, calloc((size_t)g->n_nodes + 1, sizeof(bool)), why, cap};
  EVTC_ASSERT(k.recompute != NULL);
  bool ok = true;
  for (int32_t v = 0; v < g->n_nodes && ok; v++) {
    const evtc_node *n = g->nodes[v];
    evtc_fusion_kind fk = fkind(n);
    bool scalar = fk != EVTC_FUSE_LEAF && fk != EVTC_FUSE_MAINLOOP && fk != EVTC_FUSE_OPAQUE && elems(n) == 1;
    for (int32_t i = 0; i < n->n_inputs && scalar; i++)
      scalar = fkind(n->inputs[i]) == EVTC_FUSE_LEAF || k.recompute[n->inputs[i]->id];
    k.recompute[v] = scalar;
    int32_t kid = p->kernel_of[v];
    if (fk == EVTC_FUSE_LEAF && kid != -1) ok = fail(&k, "leaf %%%s is placed in kernel %d", n->name, kid);
    else if (fk != EVTC_FUSE_LEAF && kid == -1 && (!scalar || is_output(g, n)))
      ok = fail(&k, "node %%%s (%s) is in no kernel", n->name, evtc_op_get(n->op)->name);
    else if (kid < -1 || kid >= p->n_kernels) ok = fail(&k, "node %%%s has kernel id %d of %d", n->name, kid, p->n_kernels);
  }
  int32_t placed = 0;
  for (int32_t q = 0; q < p->n_kernels && ok; q++) {
    const evtc_fusion_kernel *K = &p->kernels[q];
    int mainloops = 0, opaque = 0;
    if (K->n_nodes < 1) ok = fail(&k, "kernel %d is empty", q);
    for (int32_t i = 0; i < K->n_nodes && ok; i++) {
      const evtc_node *n = g->nodes[K->nodes[i]];
      if (p->kernel_of[n->id] != q) ok = fail(&k, "kernel %d lists %%%s, which is placed elsewhere", q, n->name);
      mainloops += fkind(n) == EVTC_FUSE_MAINLOOP;
      opaque += fkind(n) == EVTC_FUSE_OPAQUE;
    }
    placed += K->n_nodes;
    if (!ok) break;
    if (mainloops > 1) ok = fail(&k, "kernel %d has %d main loops", q, mainloops);
    else if (opaque && K->n_nodes > 1) ok = fail(&k, "kernel %d fuses an opaque op with other nodes", q);
    else if (opaque && K->kind != EVTC_KERNEL_OPAQUE) ok = fail(&k, "kernel %d is an opaque op not marked opaque", q);
    else if (!opaque) ok = check_fused(&k, K, q, dev);
  }
  if (ok) {
    int32_t assigned = 0;
    for (int32_t v = 0; v < g->n_nodes; v++) assigned += p->kernel_of[v] >= 0;
    if (assigned != placed) ok = fail(&k, "kernel lists hold %d nodes but %d are placed", placed, assigned);
  }
  if (ok && !acyclic(&k, p->n_kernels)) ok = fail(&k, "the kernel graph has a cycle");
  free(k.recompute);
  return ok;
}
