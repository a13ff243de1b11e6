/* plan.c -- built-in plans: which graph nodes form which kernel.
 *
 * Programs run the fusion partitioner's plans (runtime/program_plan.h) or
 * one of these: evtc_plan_greedy is the "builtin" plan.  evtc_plan_single puts every node in its own kernel
 * (the reference for fused plans).  evtc_plan_greedy walks the nodes in
 * topological order and lets each join the most recent kernel, or else the
 * latest kernel holding one of its inputs, when the grown kernel still
 * builds and the caller's `accept` (a backend's supports()) agrees; main
 * loops and ops without a template start kernels of their own.  Joining
 * the most recent kernel or the one of the latest input never makes the
 * kernel graph cyclic: every input of the node is then in that kernel or
 * an earlier one.
 */
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.h"

int32_t *evtc_plan_single(const evtc_graph *g, int *n_kernels) {
  int32_t *plan = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) plan[i] = evtc_op_is_leaf(g->nodes[i]->op) ? -1 : n++;
  *n_kernels = n;
  return plan;
}

typedef struct plan_list {
  int32_t *ids;
  int n;
  bool closed;          /* a main loop's operands or an opaque node: nothing joins through a prologue */
} plan_list;

/* Whether kernel `list` plus node v builds and is accepted. */
static bool try_join(const evtc_graph *g, plan_list *list, int32_t v, evtc_plan_accept accept, void *ctx) {
  if (list->closed) return false;
  list->ids[list->n] = v;
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, list->ids, list->n + 1, &d);
  bool ok = k && k->kind != EVTC_ML_OPAQUE && (!accept || accept(k, ctx));
  evtc_kernel_free(k);
  if (ok) list->n++;
  return ok;
}

int32_t *evtc_plan_greedy(const evtc_graph *g, evtc_plan_accept accept, void *ctx, int *n_kernels) {
  int32_t *plan = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  plan_list *lists = calloc((size_t)g->n_nodes + 1, sizeof *lists);
  int nk = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    plan[i] = -1;
    if (evtc_op_is_leaf(n->op)) continue;
    evtc_fusion_kind fk = evtc_op_get(n->op)->fusion;
    bool alone = fk == EVTC_FUSE_MAINLOOP || fk == EVTC_FUSE_OPAQUE;
    int latest_input = -1;
    bool touches_last = false;
    for (int j = 0; j < n->n_inputs; j++) {
      int kin = plan[n->inputs[j]->id];
      if (kin > latest_input) latest_input = kin;
      if (nk > 0 && kin == nk - 1) touches_last = true;
    }
    if (!alone && nk > 0 && !touches_last) {        /* a sibling reading the same values as the last kernel */
      const plan_list *last = &lists[nk - 1];
      for (int a = 0; a < last->n && !touches_last; a++) {
        const evtc_node *m = g->nodes[last->ids[a]];
        for (int j = 0; j < m->n_inputs && !touches_last; j++)
          for (int q = 0; q < n->n_inputs; q++)
            if (m->inputs[j] == n->inputs[q] && !evtc_op_is_leaf(n->inputs[q]->op)) touches_last = true;
      }
    }
    int joined = -1;
    if (!alone && touches_last && try_join(g, &lists[nk - 1], i, accept, ctx)) joined = nk - 1;
    else if (!alone && latest_input >= 0 && latest_input != nk - 1 &&
             try_join(g, &lists[latest_input], i, accept, ctx))
      joined = latest_input;
    if (joined < 0) {
      plan_list *l = &lists[nk];
      l->ids = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
      l->ids[0] = i;
      l->n = 1;
      l->closed = fk == EVTC_FUSE_OPAQUE;
      if (!l->closed) {                             /* a templated node that does not build alone runs opaque */
        evtc_diag d = {0};
        evtc_kernel *k = evtc_kernel_build(g, l->ids, 1, &d);
        l->closed = !k || k->kind == EVTC_ML_OPAQUE || (accept && !accept(k, ctx));
        evtc_kernel_free(k);
      }
      joined = nk++;
    }
    plan[i] = joined;
  }
  for (int k = 0; k < nk; k++) free(lists[k].ids);
  free(lists);
  *n_kernels = nk;
  return plan;
}
