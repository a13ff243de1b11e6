/* pass.h -- graph passes: the pass record, the registry and pipelines.
 *
 * A pass is a pure function from one graph to a new graph (the input is
 * never modified); most passes are written with the rewriter (rewrite.h).
 * Each pass lives in its own file src/passes/<name>.c and exports one
 * `const evtc_pass evtc_pass_<name>`; registry.c lists them all.  A
 * pipeline is an ordered array of pass names -- data, not code -- so that
 * `evtc opt --passes=a,b,c` and a pass-order search can choose any order.
 */
#ifndef EVTC_PASS_H
#define EVTC_PASS_H

#include "ir/ir.h"

typedef struct evtc_pass {
  const char *name;     /* as used in pipelines and --passes */
  const char *summary;  /* one line: what it rewrites */
  /* Returns a new graph computing the same outputs (same count and order,
   * same types, same `updates` targets, same loss), or NULL with the cause in
   * d.  The result must pass evtc_graph_verify. */
  evtc_graph *(*run)(const evtc_graph *g, evtc_diag *d);
} evtc_pass;

/* The registry (registry.c): every pass, in a fixed order. */
extern const evtc_pass *const evtc_pass_registry[];
extern const int evtc_pass_registry_count;
const evtc_pass *evtc_pass_find(const char *name);

#endif
