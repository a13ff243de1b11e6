/* ctx.c -- per-graph facts the partitioners share.
 *
 * evtc_fusion_ctx_init classifies every node (leaf, scalar chain, opaque,
 * fusible), records its element counts and reduction kind, builds the
 * consumer and sibling lists and the strict ancestor / descendant bitsets
 * used by the convexity test.  evtc_fusion_assign_fixed places the nodes
 * no partitioner chooses anything about: opaque ops alone, scalar-chain
 * outputs together.
 */
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion_internal.h"

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  EVTC_ASSERT(p != NULL);
  return p;
}

/* The reduction kind of reduce node n (axes normalised; empty = all). */
static evtc_reduce_kind reduce_kind(const evtc_node *n) {
  const evtc_type *in = &n->inputs[0]->type;
  int rank = in->rank;
  bool on[EVTC_MAX_RANK] = {false};
  int count = 0;
  if (n->op == EVTC_OP_GLOBAL_AVGPOOL) {
    on[2] = on[3] = true;
    count = 2;
  } else {
    const evtc_attr *a = evtc_node_attr(n, "axes");
    if (a->n == 0) return EVTC_RED_ALL;
    for (int i = 0; i < a->n; i++) {
      int ax = evtc_axis_norm(a->v.ints[i], rank);
      if (ax >= 0 && !on[ax]) on[ax] = true, count++;
    }
  }
  if (count == rank) return EVTC_RED_ALL;
  bool suffix = true, prefix = true;
  for (int i = 0; i < rank; i++) {
    if (on[i] != (i >= rank - count)) suffix = false;
    if (on[i] != (i < count)) prefix = false;
  }
  return suffix ? EVTC_RED_ROW : prefix ? EVTC_RED_COL : EVTC_RED_OTHER;
}

/* True when node r reads tensor t whole as an elementwise or reduction
 * step over t's own element count, and t is a leaf, an opaque op's output
 * or a main loop's: r may share t's load with a sibling.  Readers of a
 * value that elementwise, reduction or layout nodes compute are linked
 * through that node already (it can join their kernel); linking them
 * directly too multiplies the candidate sets (ResNet-18's batch-norm
 * backward regions) for little gain. */
static bool full_reader(const evtc_fusion_ctx *c, int32_t r, int32_t t) {
  bool shared = c->cls[t] != EVTC_CLASS_FUSIBLE || c->mainloop[t];
  return shared && c->cls[r] == EVTC_CLASS_FUSIBLE && !c->mainloop[r] && c->numel[t] > 1 && c->iter[r] == c->numel[t];
}

/* The sibling lists (fusion_internal.h): for every node v, the nodes other
 * than v that read one of v's inputs as full readers, as v does. */
static void build_siblings(evtc_fusion_ctx *c) {
  int32_t n = c->n;
  int32_t *mark = xcalloc((size_t)n, sizeof(int32_t));
  c->sib_start = xcalloc((size_t)n + 1, sizeof(int32_t));
  for (int pass = 0; pass < 2; pass++) {       /* 0: count, 1: fill */
    for (int32_t v = 0; v < n; v++) mark[v] = -1;
    for (int32_t v = 0; v < n; v++) {
      int32_t at = pass ? c->sib_start[v] : 0;
      const evtc_node *nd = c->g->nodes[v];
      for (int32_t k = 0; k < nd->n_inputs; k++) {
        int32_t t = nd->inputs[k]->id;
        if (!full_reader(c, v, t)) continue;
        for (int32_t j = c->user_start[t]; j < c->user_start[t + 1]; j++) {
          int32_t r = c->users[j];
          if (r == v || mark[r] == v || !full_reader(c, r, t)) continue;
          mark[r] = v;
          if (pass) c->sibs[at++] = r;
          else c->sib_start[v + 1]++;
        }
      }
    }
    if (pass == 0) {
      for (int32_t v = 0; v < n; v++) c->sib_start[v + 1] += c->sib_start[v];
      c->sibs = xcalloc((size_t)c->sib_start[n], sizeof(int32_t));
    }
  }
  free(mark);
}

bool evtc_fusion_ctx_init(evtc_fusion_ctx *c, const evtc_graph *g, const evtc_device *dev) {
  memset(c, 0, sizeof *c);
  c->g = g;
  c->dev = dev;
  int32_t n = c->n = g->n_nodes;
  c->cls = xcalloc((size_t)n, 1);
  c->red = xcalloc((size_t)n, 1);
  c->is_output = xcalloc((size_t)n, sizeof(bool));
  c->mainloop = xcalloc((size_t)n, sizeof(bool));
  c->numel = xcalloc((size_t)n, sizeof(int64_t));
  c->iter = xcalloc((size_t)n, sizeof(int64_t));
  c->stamp = xcalloc((size_t)n, sizeof(int32_t));
  c->phase = xcalloc((size_t)n, 1);
  c->passes = xcalloc((size_t)n, sizeof(uint64_t));
  for (int32_t i = 0; i < g->n_outputs; i++) c->is_output[g->outputs[i].node->id] = true;
  int32_t *count = xcalloc((size_t)n + 1, sizeof(int32_t));
  for (int32_t v = 0; v < n; v++) {
    const evtc_node *nd = g->nodes[v];
    evtc_fusion_kind fk = evtc_op_get(nd->op)->fusion;
    c->numel[v] = evtc_type_numel(&nd->type);
    c->iter[v] = c->numel[v];
    c->mainloop[v] = fk == EVTC_FUSE_MAINLOOP;
    if (fk == EVTC_FUSE_REDUCE) {
      c->red[v] = (uint8_t)reduce_kind(nd);
      c->iter[v] = evtc_type_numel(&nd->inputs[0]->type);
    }
    if (fk == EVTC_FUSE_LEAF) {
      c->cls[v] = EVTC_CLASS_LEAF;
    } else if (fk == EVTC_FUSE_OPAQUE) {
      c->cls[v] = EVTC_CLASS_OPAQUE;
    } else {
      bool scalar = c->numel[v] == 1 && fk != EVTC_FUSE_MAINLOOP;
      for (int32_t k = 0; k < nd->n_inputs && scalar; k++) {
        int32_t p = nd->inputs[k]->id;
        scalar = c->cls[p] == EVTC_CLASS_LEAF || c->cls[p] == EVTC_CLASS_SCALAR;
      }
      c->cls[v] = scalar ? EVTC_CLASS_SCALAR : EVTC_CLASS_FUSIBLE;
    }
    /* distinct inputs: count each producer once */
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      bool dup = false;
      for (int32_t j = 0; j < k; j++) dup |= nd->inputs[j] == nd->inputs[k];
      if (!dup) count[nd->inputs[k]->id + 1]++;
    }
  }
  for (int32_t v = 0; v < n; v++) count[v + 1] += count[v];
  c->user_start = count;
  c->users = xcalloc((size_t)count[n], sizeof(int32_t));
  int32_t *fill = xcalloc((size_t)n, sizeof(int32_t));
  for (int32_t v = 0; v < n; v++) {
    const evtc_node *nd = g->nodes[v];
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      bool dup = false;
      for (int32_t j = 0; j < k; j++) dup |= nd->inputs[j] == nd->inputs[k];
      int32_t p = nd->inputs[k]->id;
      if (!dup) c->users[count[p] + fill[p]++] = v;
    }
  }
  free(fill);
  build_siblings(c);
  c->words = (n + 63) / 64;
  size_t w = (size_t)c->words;
  c->anc = xcalloc((size_t)n * w, sizeof(uint64_t));
  c->desc = xcalloc((size_t)n * w, sizeof(uint64_t));
  for (int32_t v = 0; v < n; v++) {
    uint64_t *a = c->anc + (size_t)v * w;
    const evtc_node *nd = g->nodes[v];
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t p = nd->inputs[k]->id;
      const uint64_t *ap = c->anc + (size_t)p * w;
      for (size_t i = 0; i < w; i++) a[i] |= ap[i];
      a[p >> 6] |= 1ull << (p & 63);
    }
  }
  for (int32_t v = n - 1; v >= 0; v--) {
    uint64_t *dv = c->desc + (size_t)v * w;
    for (int32_t k = c->user_start[v]; k < c->user_start[v + 1]; k++) {
      int32_t u = c->users[k];
      const uint64_t *du = c->desc + (size_t)u * w;
      for (size_t i = 0; i < w; i++) dv[i] |= du[i];
      dv[u >> 6] |= 1ull << (u & 63);
    }
  }
  return true;
}

void evtc_fusion_ctx_free(evtc_fusion_ctx *c) {
  free(c->cls);
  free(c->red);
  free(c->is_output);
  free(c->mainloop);
  free(c->numel);
  free(c->iter);
  free(c->user_start);
  free(c->users);
  free(c->sib_start);
  free(c->sibs);
  free(c->phase);
  free(c->passes);
  free(c->anc);
  free(c->desc);
  free(c->stamp);
  memset(c, 0, sizeof *c);
}

int32_t evtc_fusion_mark(evtc_fusion_ctx *c, const int32_t *s, int n) {
  if (++c->cur == INT32_MAX) {
    memset(c->stamp, 0, sizeof *c->stamp * (size_t)c->n);
    c->cur = 1;
  }
  for (int i = 0; i < n; i++) c->stamp[s[i]] = c->cur;
  return c->cur;
}

int32_t evtc_fusion_assign_fixed(const evtc_fusion_ctx *c, int32_t *kernel_of) {
  int32_t k = 0, scalar_kernel = -1;
  for (int32_t v = 0; v < c->n; v++) {
    switch ((evtc_fusion_class)c->cls[v]) {
    case EVTC_CLASS_LEAF: kernel_of[v] = -1; break;
    case EVTC_CLASS_OPAQUE: kernel_of[v] = k++; break;
    case EVTC_CLASS_SCALAR:
      if (!c->is_output[v]) {
        kernel_of[v] = -1;
      } else {
        if (scalar_kernel < 0) scalar_kernel = k++;
        kernel_of[v] = scalar_kernel;
      }
      break;
    case EVTC_CLASS_FUSIBLE: kernel_of[v] = -2; break;
    }
  }
  return k;
}
