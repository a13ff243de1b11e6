/* greedy.c -- the baseline partitioner: producer-consumer fusion.
 *
 * Nodes are visited in topological order.  A fusible node joins the kernel
 * of one of its producers when the grown kernel is admissible (template.c)
 * and the kernel graph stays acyclic; among several such producers it
 * picks the one whose merge saves the most modelled time, and it joins
 * only when that saving is positive.  Otherwise it starts a kernel of its
 * own.  This is roughly what XLA's and Inductor's fusers do; kernels are
 * never merged with each other afterwards, which is what the ILP adds.
 */
#include <stdlib.h>

#include "fusion/fusion_internal.h"

typedef struct member_list {
  int32_t n, cap;
  int32_t *ids;
  double time_us;
} member_list;

static void member_push(member_list *m, int32_t v) {
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 8;
    m->ids = realloc(m->ids, sizeof(int32_t) * (size_t)m->cap);
    EVTC_ASSERT(m->ids != NULL);
  }
  m->ids[m->n++] = v;
}

int32_t evtc_fusion_greedy(evtc_fusion_ctx *c, int32_t *kernel_of) {
  int32_t k = evtc_fusion_assign_fixed(c, kernel_of);
  member_list *mem = calloc((size_t)c->n + (size_t)k + 1, sizeof *mem);
  int32_t *cycle = malloc(sizeof(int32_t) * ((size_t)c->n + (size_t)k + 1));
  EVTC_ASSERT(mem && cycle);
  for (int32_t v = 0; v < c->n; v++) {
    if (kernel_of[v] != -2) continue;
    const evtc_node *nd = c->g->nodes[v];
    double alone = evtc_fusion_cost(c, &v, 1, NULL, NULL, NULL);
    int32_t best = -1;
    double best_gain = 0;
    for (int32_t i = 0; i < nd->n_inputs; i++) {
      int32_t p = nd->inputs[i]->id, q = kernel_of[p];
      if (c->cls[p] != EVTC_CLASS_FUSIBLE || q < 0 || q == best) continue;
      member_push(&mem[q], v);                   /* v is the largest id: the list stays sorted */
      double t;
      bool ok = evtc_fusion_admissible(c, mem[q].ids, mem[q].n, NULL, &t);
      mem[q].n--;
      if (!ok) continue;
      double gain = mem[q].time_us + alone - t;
      if (gain <= best_gain) continue;
      int32_t len;
      kernel_of[v] = q;
      bool cyclic = evtc_fusion_find_cycle(c, kernel_of, k, cycle, &len);
      kernel_of[v] = -2;
      if (cyclic) continue;
      best = q;
      best_gain = gain;
    }
    if (best < 0) best = k++;
    kernel_of[v] = best;
    member_push(&mem[best], v);
    mem[best].time_us = evtc_fusion_cost(c, mem[best].ids, mem[best].n, NULL, NULL, NULL);
  }
  for (int32_t i = 0; i < k; i++) free(mem[i].ids);
  free(mem);
  free(cycle);
  return k;
}
