/* kernel_values.h -- a kernel's values found by the names of the graph nodes they come from, for tests that check
 * what a kernel does with one of them. */
#ifndef EVTC_TEST_KERNEL_VALUES_H
#define EVTC_TEST_KERNEL_VALUES_H

#include <string.h>

#include "kernel/kernel.h"

/* The graph node value i of k comes from (a load: its argument's node), or NULL. */
static inline const evtc_node *node_of(const evtc_kernel *k, int i) {
  return k->v[i].kind == EVTC_V_LOAD ? k->args[k->v[i].arg].node : k->v[i].node;
}

/* The kernel value of graph node `name` (a FULL load of that input, or the node's computed value), or -1. */
static inline int value_of(const evtc_kernel *k, const char *name) {
  for (int i = 0; i < k->n_v; i++) {
    const evtc_node *n = node_of(k, i);
    if (k->v[i].kind != EVTC_V_STORE && k->v[i].kind != EVTC_V_REDUCE && n && strcmp(n->name, name) == 0) return i;
  }
  return -1;
}

#endif
