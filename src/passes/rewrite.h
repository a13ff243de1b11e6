/* rewrite.h -- the rewriter most passes are built on.
 *
 * evtc_rewrite_graph walks the source graph in topological order and builds
 * a new graph.  For each source node the callback sees the node and its
 * inputs already mapped into the new graph, and returns the new graph's
 * node that stands for it: either something it built (with the builder, in
 * rw->dst), an existing node of rw->dst (to forward, e.g. x*1 -> x), or NULL
 * for "copy unchanged".  A replacement must have the same dtype and shape as
 * the node it stands for (the rewriter checks: a pass that breaks it is a
 * bug).  Build the final replacement node with the source node's name
 * (n->name) so that names, and with them output file names, stay stable.
 * Outputs, their `updates` targets and the loss are mapped at the end.
 * Nothing is deleted: dead nodes stay until the dce pass drops them.
 */
#ifndef EVTC_REWRITE_H
#define EVTC_REWRITE_H

#include "ir/ir.h"

typedef struct evtc_rewrite {
  const evtc_graph *src;
  evtc_graph *dst;
  evtc_node **map;      /* src node id -> node of dst standing for it */
  void *ctx;            /* the caller's */
} evtc_rewrite;

/* Returns the replacement of src node n (inputs: n's inputs mapped), or NULL
 * to copy n. On a builder failure return NULL after rw->dst->diag is set. */
typedef evtc_node *(*evtc_rewrite_fn)(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *inputs);

/* Rewrites g node by node; NULL with the cause in d on failure. */
evtc_graph *evtc_rewrite_graph(const evtc_graph *g, evtc_rewrite_fn fn, void *ctx, evtc_diag *d);

/* The live set of g: nodes that an output or the loss depends on
 * (live[id]); caller frees. */
bool *evtc_graph_live(const evtc_graph *g);

#endif
