/* kernel_bound.c -- kernels_lower_bound: how many kernels any partition of
 * a graph needs at least, in the kernel model of docs/passes.md.
 *
 * The model: a kernel is a convex node set (no path leaves it and comes
 * back); it holds at most one MAINLOOP node, and when it does, every other
 * non-leaf, non-layout node in it lies downstream of that main loop (an
 * epilogue: no prologue fusion); and two reductions of which one feeds the
 * other (through any path) may share a kernel only when they have the same
 * signature -- the same input shape and the same reduced axis set -- since a
 * reduction over a different axis set needs every block's partial result,
 * i.e. a grid-wide barrier, which this model does not put inside a kernel.
 *
 * The bound is M + L over live nodes.  M: MAINLOOP nodes (pairwise in
 * distinct kernels).  A reduction r is "stranded" when no main loop m
 * upstream of it can hold it: for every such m, some node strictly between
 * m and r is a main loop or a reduction of another signature (convexity
 * would pull it into the kernel too).  Stranded reductions sit in kernels
 * without a main loop.  L: the longest chain r1 < r2 < ... of stranded
 * reductions, each reaching the next, consecutive ones of different
 * signatures; by convexity no two of a chain can share a kernel (sharing
 * ri, rj would pull ri+1 in with ri).  OPAQUE ops (composites before
 * decomposition, pooling, gather) are not counted, so the bound is low for
 * graphs whose reductions hide inside composites.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/manager.h"
#include "passes/rewrite.h"

typedef struct barrier {
  const evtc_node *n;
  bool mainloop;
  int rank;
  int64_t shape[EVTC_MAX_RANK];
  bool axes[EVTC_MAX_RANK];
} barrier;

static void signature(barrier *b) {
  const evtc_node *in = b->n->inputs[0];
  b->rank = in->type.rank;
  memcpy(b->shape, in->type.shape, sizeof b->shape);
  memset(b->axes, 0, sizeof b->axes);
  if (b->n->op == EVTC_OP_GLOBAL_AVGPOOL) {
    b->axes[2] = b->axes[3] = true;
    return;
  }
  const evtc_attr *axes = evtc_node_attr(b->n, "axes");
  for (int i = 0; i < axes->n; i++) {
    int a = evtc_axis_norm(axes->v.ints[i], b->rank);
    if (a >= 0) b->axes[a] = true;
  }
  if (axes->n == 0)
    for (int a = 0; a < b->rank; a++) b->axes[a] = true;
}

static bool same_signature(const barrier *a, const barrier *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || a->axes[i] != b->axes[i]) return false;
  return true;
}

#define BIT(set, k) (((set)[(k) >> 6] >> ((k) & 63)) & 1u)

int64_t evtc_graph_kernels_lower_bound(const evtc_graph *g) {
  bool *live = evtc_graph_live(g);
  int32_t *index = malloc(sizeof *index * ((size_t)g->n_nodes + 1));
  barrier *bs = malloc(sizeof *bs * ((size_t)g->n_nodes + 1));
  int nb = 0, m = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    evtc_fusion_kind k = evtc_op_get(g->nodes[i]->op)->fusion;
    index[i] = -1;
    if (!live[i] || (k != EVTC_FUSE_MAINLOOP && k != EVTC_FUSE_REDUCE)) continue;
    bs[nb] = (barrier){.n = g->nodes[i], .mainloop = k == EVTC_FUSE_MAINLOOP};
    if (!bs[nb].mainloop) signature(&bs[nb]);
    m += bs[nb].mainloop;
    index[i] = nb++;
  }
  /* up[i]: the barriers with a path to node i (node i itself excluded). */
  size_t words = ((size_t)nb + 63) / 64 + 1;
  uint64_t *up = calloc((size_t)g->n_nodes * words + 1, sizeof *up);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    uint64_t *ui = up + (size_t)i * words;
    const evtc_node *n = g->nodes[i];
    for (int k = 0; k < n->n_inputs; k++) {
      int32_t j = n->inputs[k]->id;
      const uint64_t *uj = up + (size_t)j * words;
      for (size_t w = 0; w < words; w++) ui[w] |= uj[w];
      if (index[j] >= 0) ui[index[j] >> 6] |= 1ull << (index[j] & 63);
    }
  }
  int *chain = calloc((size_t)nb + 1, sizeof *chain);
  int longest = 0;
  for (int r = 0; r < nb; r++) {
    if (bs[r].mainloop) continue;
    const uint64_t *ur = up + (size_t)bs[r].n->id * words;
    bool stranded = true;
    for (int c = 0; c < nb && stranded; c++) {
      if (!bs[c].mainloop || !BIT(ur, c)) continue;
      bool blocked = false;
      for (int b = 0; b < nb && !blocked; b++) {
        if (b == c || b == r || !BIT(ur, b)) continue;
        if (!BIT(up + (size_t)bs[b].n->id * words, c)) continue;
        blocked = bs[b].mainloop || !same_signature(&bs[b], &bs[r]);
      }
      stranded = blocked;
    }
    if (!stranded) continue;
    chain[r] = 1;
    for (int q = 0; q < r; q++)
      if (chain[q] > 0 && BIT(ur, q) && !same_signature(&bs[q], &bs[r]) && chain[q] + 1 > chain[r])
        chain[r] = chain[q] + 1;
    if (chain[r] > longest) longest = chain[r];
  }
  free(chain);
  free(up);
  free(bs);
  free(index);
  free(live);
  return (int64_t)m + longest;
}
