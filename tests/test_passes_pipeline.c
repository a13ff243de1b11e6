/* test_passes_pipeline.c -- the default pipelines over every example and
 * test model: semantic preservation and idempotence.
 *
 * For each model in examples/ and tests/ir/, and for each model with a
 * loss also its joint graphs (evtc_autodiff with sgd, adamw and none; a
 * joint graph the verifier rejects is skipped, it is autodiff's case, not
 * the passes'), every named pipeline of pipelines.c is run and
 *   - idempotence: running the pipeline again on its result prints the same
 *     text;
 *   - semantics: over several seeds, the interpreter's outputs before and
 *     after agree on fresh random leaves (float INPUTs N(0,1), int INPUTs
 *     in {1,2} (no zero divisors, labels in range), bools in {0,1}, PARAM/STATE by their init attributes with the
 *     seed), at step 3 so that dropout masks are exercised; outputs are
 *     matched in order, skipping loss outputs that loss-elimination removed.
 * Tolerance per dtype (passes may reassociate): f64 1e-9, f32 1e-4,
 * f16 2e-2, bf16 6e-2 relative to 1 + |reference|; ints and bools exact.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "check.h"
#include "passes/manager.h"
#include "runtime/init.h"
#include "runtime/interp.h"

enum { N_SEEDS = 3 };

static double nrand(void) {
  return sqrt(-2 * log(check_urand() + 1e-300)) * cos(6.283185307179586 * check_urand());
}

static char *graph_text(const evtc_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  evtc_graph_print(g, f);
  fclose(f);
  return buf;
}

static double tolerance(evtc_dtype t) {
  switch (t) {
    case EVTC_F64: return 1e-9;
    case EVTC_F32: return 1e-4;
    case EVTC_F16: return 2e-2;
    case EVTC_BF16: return 6e-2;
    default: return 0;
  }
}

/* Random values for every INPUT/PARAM/STATE leaf of g (by node id). */
static double **make_leaves(const evtc_graph *g, uint64_t seed) {
  double **vals = calloc((size_t)g->n_nodes + 1, sizeof *vals);
  check_rng = 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (!evtc_op_is_leaf(n->op) || n->op == EVTC_OP_CONST) continue;
    int64_t numel = evtc_type_numel(&n->type);
    vals[i] = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    if (n->op != EVTC_OP_INPUT) evtc_init_leaf(n, vals[i], seed);
    else if (evtc_dtype_is_float(n->type.dtype))
      for (int64_t k = 0; k < numel; k++) vals[i][k] = nrand();
    else
      for (int64_t k = 0; k < numel; k++) vals[i][k] = (check_urand() < 0.5) + (n->type.dtype != EVTC_BOOL);
  }
  return vals;
}

/* Runs g with leaves bound by name from src's values; NULL on failure. */
static evtc_interp *run_graph(const evtc_graph *g, const evtc_graph *src, double **vals, const char *what) {
  evtc_interp *it = evtc_interp_new(g);
  for (int32_t i = 0; i < src->n_nodes; i++) {
    if (!vals[i]) continue;
    const evtc_node *leaf = evtc_graph_find(g, src->nodes[i]->name);
    CHECK(leaf != NULL, "%s: leaf %%%s missing after the pipeline", what, src->nodes[i]->name);
    if (leaf) evtc_interp_set(it, leaf, vals[i]);
  }
  evtc_diag d = {0};
  if (evtc_interp_run(it, 3, &d) != EVTC_OK) {
    CHECK(false, "%s: run failed: %s", what, d.msg);
    evtc_interp_free(it);
    return NULL;
  }
  return it;
}

static void compare_outputs(const evtc_graph *g, const evtc_graph *o, const char *what) {
  bool dropped_loss = o->n_outputs < g->n_outputs;
  int32_t k = 0;
  for (uint64_t seed = 1; seed <= N_SEEDS; seed++) {
    double **vals = make_leaves(g, seed);
    evtc_interp *a = run_graph(g, g, vals, what), *b = a ? run_graph(o, g, vals, what) : NULL;
    k = 0;
    for (int32_t i = 0; b && i < g->n_outputs; i++) {
      const evtc_output *go = &g->outputs[i];
      if (dropped_loss && go->node == g->loss && !go->updates) continue;
      if (!(k < o->n_outputs)) break;
      const evtc_node *gn = go->node, *on = o->outputs[k++].node;
      const double *x = evtc_interp_value(a, gn), *y = evtc_interp_value(b, on);
      double tol = tolerance(gn->type.dtype), worst = 0;
      int64_t numel = evtc_type_numel(&gn->type);
      for (int64_t e = 0; e < numel; e++) {
        if ((isnan(x[e]) && isnan(y[e])) || x[e] == y[e]) continue;
        double err = fabs(x[e] - y[e]) / (1 + fabs(x[e]));
        if (!(err <= worst)) worst = err;
      }
      CHECK(worst <= tol, "%s seed %llu: output %d (%%%s) differs by %g (tolerance %g)", what,
            (unsigned long long)seed, (int)i, gn->name, worst, tol);
    }
    CHECK(!b || k == o->n_outputs, "%s: output count %d vs %d", what, (int)k, (int)o->n_outputs);
    evtc_interp_free(a);
    evtc_interp_free(b);
    for (int32_t i = 0; i < g->n_nodes; i++) free(vals[i]);
    free(vals);
  }
}

static void check_graph(const evtc_graph *g, const char *label) {
  for (int p = 0; p < evtc_pipeline_count; p++) {
    const evtc_pipeline *pl = &evtc_pipelines[p];
    char what[2400];
    snprintf(what, sizeof what, "%s | %s", label, pl->name);
    evtc_diag d = {0};
    evtc_graph *once = evtc_pipeline_run(g, pl->passes, pl->n_passes, NULL, &d);
    CHECK(once != NULL, "%s: %s", what, d.msg);
    if (!once) continue;
    evtc_graph *twice = evtc_pipeline_run(once, pl->passes, pl->n_passes, NULL, &d);
    CHECK(twice != NULL, "%s (second run): %s", what, d.msg);
    if (twice) {
      char *t1 = graph_text(once), *t2 = graph_text(twice);
      CHECK(strcmp(t1, t2) == 0, "%s: not idempotent:\n--- once ---\n%s--- twice ---\n%s", what, t1, t2);
      free(t1);
      free(t2);
    }
    compare_outputs(g, once, what);
    evtc_graph_free(twice);
    evtc_graph_free(once);
  }
}

static void check_model(const char *path) {
  char err[2048];
  evtc_graph *g = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(g != NULL, "%s: %s", path, err);
  if (!g) return;
  char label[2200];
  snprintf(label, sizeof label, "%s (forward)", path);
  check_graph(g, label);
  int joints = 0;
  static const char *const opt_names[] = {"sgd", "adamw", "none"};
  static const evtc_optimizer kinds[] = {EVTC_OPTIM_SGD, EVTC_OPTIM_ADAMW, EVTC_OPTIM_NONE};
  for (int k = 0; g->loss && k < 3; k++) {
    evtc_optim_config cfg = evtc_optim_default(kinds[k]);
    evtc_diag d = {0};
    evtc_graph *joint = evtc_autodiff(g, NULL, 0, &cfg, &d);
    if (joint && evtc_graph_verify(joint) == EVTC_OK) {
      snprintf(label, sizeof label, "%s (joint, %s)", path, opt_names[k]);
      check_graph(joint, label);
      joints++;
    }
    evtc_graph_free(joint);
  }
  printf("%s: forward%s%d joint graph(s)\n", path, g->loss ? " + " : ", ", joints);
  evtc_graph_free(g);
}

static void check_dir(const char *src, const char *sub) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/%s", src, sub);
  DIR *dp = opendir(dir);
  CHECK(dp != NULL, "cannot open %s", dir);
  if (!dp) return;
  char *names[256];
  int n = 0;
  for (struct dirent *e; (e = readdir(dp)) && n < 256;) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".evt") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(dp);
  for (int i = 0; i < n; i++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    check_model(path);
    free(names[i]);
  }
}

int main(int argc, char **argv) {
  const char *src = argc > 1 ? argv[1] : ".";
  check_dir(src, "examples");
  check_dir(src, "tests/ir");
  return check_summary();
}
