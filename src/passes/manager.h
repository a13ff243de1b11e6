/* manager.h -- running pipelines of passes, default pipelines, statistics.
 *
 * A pipeline is an ordered array of pass names (pass.h).  The manager looks
 * every name up first, verifies the input graph, runs the passes one after
 * the other -- each on the previous one's result -- and verifies the final
 * graph; in debug builds (NDEBUG not defined) it verifies after every pass
 * too.  A pass whose result fails the verifier is an internal error that
 * names the pass.  Optional instrumentation prints the IR after a pass and a
 * statistics line per pass.
 */
#ifndef EVTC_PASS_MANAGER_H
#define EVTC_PASS_MANAGER_H

#include <stdio.h>

#include "passes/pass.h"

typedef struct evtc_pass_options {
  const char *dump_after;  /* print the IR after this pass ("all": after each), or NULL */
  FILE *dump;              /* where dumps go: "# after NAME" then the graph text */
  bool print_stats;        /* first "input: nodes=N kernels_lower_bound=K", per pass
                              "pass NAME: nodes=N kernels_lower_bound=K", at the end
                              "total: nodes BEFORE -> AFTER" */
  FILE *stats;             /* where statistics go */
} evtc_pass_options;

/* Runs passes names[0..n) on g (not modified); opt may be NULL.  Returns the
 * resulting graph (a new one even when n is 0; the caller frees it), or NULL
 * with the cause in d: an unknown pass name, an invalid input graph, a pass
 * failure ("pass NAME: cause") or an invalid pass result ("internal error:
 * pass NAME produced an invalid graph: cause"). */
evtc_graph *evtc_pipeline_run(const evtc_graph *g, const char *const *names, int n, const evtc_pass_options *opt,
                              evtc_diag *d);

/* A named pipeline (pipelines.c). */
typedef struct evtc_pipeline {
  const char *name;        /* "cpu", "h200", ... */
  const char *summary;
  const char *const *passes;
  int n_passes;
} evtc_pipeline;

extern const evtc_pipeline evtc_pipelines[];
extern const int evtc_pipeline_count;
/* The pipeline called name, or NULL.  The default pipeline of a target is the
 * one named after it ("cpu", "h200"). */
const evtc_pipeline *evtc_pipeline_find(const char *name);

/* A lower bound on the number of kernels of any partition of g in the
 * kernel model of docs/passes.md ("kernels_lower_bound"): the live MAINLOOP
 * nodes plus the longest chain of stranded reductions. */
int64_t evtc_graph_kernels_lower_bound(const evtc_graph *g);

#endif
