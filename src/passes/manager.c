/* manager.c -- the pass manager: run a pipeline with verification and
 * instrumentation (see manager.h). */
#include "passes/manager.h"

#include <string.h>

/* Verifies g; false after recording in d that `what` is invalid. */
static bool verified(evtc_graph *g, evtc_diag *d, const char *what) {
  if (evtc_graph_verify(g) == EVTC_OK) return true;
  evtc_diag_set(d, EVTC_ERR_INVALID, "%s: %s", what, g->diag.msg);
  return false;
}

/* Verifies the result of pass `pass`; an invalid one is an internal error. */
static bool pass_verified(evtc_graph *g, evtc_diag *d, const char *pass) {
  char what[160];
  snprintf(what, sizeof what, "internal error: pass %s produced an invalid graph", pass);
  return verified(g, d, what);
}

static void instrument(const evtc_graph *g, const char *pass, const evtc_pass_options *opt) {
  if (!opt) return;
  if (opt->dump_after && opt->dump && (strcmp(opt->dump_after, "all") == 0 || strcmp(opt->dump_after, pass) == 0)) {
    fprintf(opt->dump, "# after %s\n", pass);
    evtc_graph_print(g, opt->dump);
  }
  if (opt->print_stats && opt->stats)
    fprintf(opt->stats, "pass %s: nodes=%d kernels_lower_bound=%lld\n", pass, (int)g->n_nodes,
            (long long)evtc_graph_kernels_lower_bound(g));
}

evtc_graph *evtc_pipeline_run(const evtc_graph *g, const char *const *names, int n, const evtc_pass_options *opt,
                              evtc_diag *d) {
  for (int i = 0; i < n; i++)
    if (!evtc_pass_find(names[i])) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "unknown pass '%s' (evtc opt --list shows them)", names[i]);
      return NULL;
    }
  evtc_graph *cur = evtc_graph_clone(g);
  if (!verified(cur, d, "input graph")) {
    evtc_graph_free(cur);
    return NULL;
  }
  int32_t before = cur->n_nodes;
  if (opt && opt->print_stats && opt->stats)
    fprintf(opt->stats, "input: nodes=%d kernels_lower_bound=%lld\n", (int)before,
            (long long)evtc_graph_kernels_lower_bound(cur));
  for (int i = 0; i < n; i++) {
    const evtc_pass *p = evtc_pass_find(names[i]);
    evtc_diag pd = {0};
    evtc_graph *next = p->run(cur, &pd);
    evtc_graph_free(cur);
    if (!next) {
      evtc_diag_set(d, pd.status ? pd.status : EVTC_ERR_INVALID, "pass %s: %s", p->name, pd.msg);
      return NULL;
    }
    cur = next;
#ifndef NDEBUG
    if (!pass_verified(cur, d, p->name)) {
      evtc_graph_free(cur);
      return NULL;
    }
#endif
    instrument(cur, p->name, opt);
  }
  if (!pass_verified(cur, d, n > 0 ? names[n - 1] : "(none)")) {
    evtc_graph_free(cur);
    return NULL;
  }
  if (opt && opt->print_stats && opt->stats)
    fprintf(opt->stats, "total: nodes %d -> %d\n", (int)before, (int)cur->n_nodes);
  return cur;
}
