/* test_passes_numeric.c -- the rewriting passes (decompose, simplify, attention-fuse,
 * permute-fold, permute-propagate, broadcast-canonicalize) preserve what a
 * graph computes.
 *
 * Each case is a small f64 graph in text IR that uses every pattern of one
 * pass, a pass list, and the ops that must be gone afterwards (so the
 * patterns really fired).  The pipeline manager runs the list (verifying
 * the result); then, over several seeds, the interpreter runs the graph
 * before and after on the same fresh random leaves (float leaves uniform
 * in [-1, 1), int leaves in {0, 1, 2}) and every output must agree:
 * max |after - before| / max(max |before|, 1e-300) < 1e-12.  Cases with a
 * loss are also differentiated first (evtc_autodiff, optimizer none), so
 * the backward patterns autodiff emits are covered too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "check.h"
#include "graph_outputs.h"
#include "passes/manager.h"
#include "runtime/interp.h"

enum { N_SEEDS = 4 };

typedef struct pcase {
  const char *name, *passes, *gone;   /* gone: comma-separated op names absent afterwards */
  bool joint;                         /* also test the joint graph */
  const char *text;
} pcase;

/* The case's passes on g, then the checks; `what` names the graph. */
static void check_graph(const pcase *c, const evtc_graph *g, const char *what) {
  const char *names[16];
  char buf[256];
  int n = 0;
  snprintf(buf, sizeof buf, "%s", c->passes);
  for (char *s = strtok(buf, ","); s && n < 16; s = strtok(NULL, ",")) names[n++] = s;
  evtc_diag d = {0};
  evtc_graph *h = evtc_pipeline_run(g, names, n, NULL, &d);
  CHECK(h != NULL, "%s (%s): %s", c->name, what, d.msg);
  if (!h) return;
  char gone[256];
  snprintf(gone, sizeof gone, "%s", c->gone);
  for (char *s = strtok(gone, ","); s; s = strtok(NULL, ","))
    for (int32_t i = 0; i < h->n_nodes; i++)
      CHECK(strcmp(evtc_op_get(h->nodes[i]->op)->name, s) != 0, "%s (%s): %%%s is still a %s", c->name, what,
            h->nodes[i]->name, s);
  CHECK(h->n_outputs == g->n_outputs, "%s (%s): output count %d -> %d", c->name, what, g->n_outputs, h->n_outputs);
  double worst = 0;
  for (uint64_t seed = 1; seed <= N_SEEDS && h->n_outputs == g->n_outputs; seed++) {
    double **a = graph_outputs(g, seed), **b = graph_outputs(h, seed);
    for (int32_t o = 0; a && b && o < g->n_outputs; o++) {
      int64_t k = evtc_type_numel(&g->outputs[o].node->type);
      double diff = 0, scale = 1e-300;
      for (int64_t j = 0; j < k; j++) {
        diff = fmax(diff, fabs(a[o][j] - b[o][j]));
        scale = fmax(scale, fabs(a[o][j]));
        if (isnan(a[o][j]) != isnan(b[o][j])) diff = INFINITY;
      }
      worst = fmax(worst, diff / scale);
      CHECK(diff / scale < 1e-12, "%s (%s) seed %llu output %%%s: relative error %.3g", c->name, what,
            (unsigned long long)seed, g->outputs[o].node->name, diff / scale);
    }
    graph_outputs_free(a, g->n_outputs);
    graph_outputs_free(b, h->n_outputs);
  }
  printf("%-28s %-6s nodes %3d -> %3d  max rel err %.2g\n", c->name, what, g->n_nodes, h->n_nodes, worst);
  evtc_graph_free(h);
}

#include "passes_numeric_cases.h"

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const pcase *c = &cases[i];
    char err[512];
    evtc_graph *g = evtc_graph_parse_string(c->text, c->name, err, sizeof err);
    CHECK(g != NULL, "%s: %s", c->name, err);
    if (!g) continue;
    check_graph(c, g, "fwd");
    if (c->joint) {
      evtc_optim_config opt = evtc_optim_default(EVTC_OPTIM_NONE);
      evtc_diag d = {0};
      evtc_graph *j = evtc_autodiff(g, NULL, 0, &opt, &d);
      CHECK(j != NULL, "%s: autodiff: %s", c->name, d.msg);
      if (j) check_graph(c, j, "joint");
      evtc_graph_free(j);
    }
    evtc_graph_free(g);
  }
  return check_summary();
}
