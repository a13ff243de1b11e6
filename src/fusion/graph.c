/* graph.c -- the kernel graph of an assignment and its cycles.
 *
 * Kernel K depends on kernel Q when a node of K reads a value a node of Q
 * computes.  Values of leaves and scalar-chain nodes are not edges: leaves
 * are in memory before anything runs and scalar chains are recomputed by
 * their readers.  A plan is executable only when this graph is acyclic;
 * the ILP adds a cut for every cycle it meets (ilp.c) and greedy refuses a
 * merge that would close one.
 */
#include <stdlib.h>

#include "fusion/fusion_internal.h"

/* Calls visit(q, k, arg) for every kernel edge q -> k (with repeats). */
static void for_each_edge(const evtc_fusion_ctx *c, const int32_t *kernel_of,
                          void (*visit)(int32_t q, int32_t k, void *arg), void *arg) {
  for (int32_t v = 0; v < c->n; v++) {
    int32_t k = kernel_of[v];
    if (k < 0) continue;
    const evtc_node *nd = c->g->nodes[v];
    for (int32_t i = 0; i < nd->n_inputs; i++) {
      int32_t p = nd->inputs[i]->id, q = kernel_of[p];
      if (c->cls[p] == EVTC_CLASS_LEAF || c->cls[p] == EVTC_CLASS_SCALAR || q < 0 || q == k) continue;
      visit(q, k, arg);
    }
  }
}

typedef struct edge_csr {
  int32_t *start, *fill, *adj;
} edge_csr;

static void count_edge(int32_t q, int32_t k, void *arg) {
  (void)k;
  ((edge_csr *)arg)->start[q + 1]++;
}

static void put_edge(int32_t q, int32_t k, void *arg) {
  edge_csr *e = arg;
  e->adj[e->start[q] + e->fill[q]++] = k;
}

bool evtc_fusion_find_cycle(const evtc_fusion_ctx *c, const int32_t *kernel_of, int32_t n_kernels,
                            int32_t *cycle, int32_t *len) {
  size_t nk = (size_t)n_kernels + 1;
  edge_csr e = {calloc(nk, sizeof(int32_t)), calloc(nk, sizeof(int32_t)), NULL};
  EVTC_ASSERT(e.start && e.fill);
  for_each_edge(c, kernel_of, count_edge, &e);
  for (int32_t k = 0; k < n_kernels; k++) e.start[k + 1] += e.start[k];
  e.adj = malloc(sizeof(int32_t) * ((size_t)e.start[n_kernels] + 1));
  EVTC_ASSERT(e.adj != NULL);
  for_each_edge(c, kernel_of, put_edge, &e);

  /* iterative DFS: color 0 new, 1 on the stack, 2 done */
  uint8_t *color = calloc(nk, 1);
  int32_t *stack = malloc(sizeof(int32_t) * nk), *next = malloc(sizeof(int32_t) * nk);
  EVTC_ASSERT(color && stack && next);
  bool found = false;
  for (int32_t root = 0; root < n_kernels && !found; root++) {
    if (color[root]) continue;
    int32_t sp = 0;
    stack[sp++] = root;
    next[root] = e.start[root];
    color[root] = 1;
    while (sp > 0 && !found) {
      int32_t k = stack[sp - 1];
      if (next[k] == e.start[k + 1]) {
        color[k] = 2;
        sp--;
        continue;
      }
      int32_t u = e.adj[next[k]++];
      if (color[u] == 1) {
        int32_t from = sp - 1;
        while (stack[from] != u) from--;
        *len = 0;
        for (int32_t i = from; i < sp; i++) cycle[(*len)++] = stack[i];
        found = true;
      } else if (color[u] == 0) {
        color[u] = 1;
        next[u] = e.start[u];
        stack[sp++] = u;
      }
    }
  }
  free(color);
  free(stack);
  free(next);
  free(e.start);
  free(e.fill);
  free(e.adj);
  return found;
}
