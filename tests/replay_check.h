/* replay_check.h -- runs replayed as a captured graph against the same runs launched kernel by kernel (tests only).
 *
 * replay_compare(g, be, steps, tol, between, int_hi, what) builds the program of g
 * twice on backend be -- with EVTC_CUDA_GRAPH=1 (graph replay: the first
 * run plain, the second captured, the rest replayed) and with
 * EVTC_CUDA_GRAPH=0 (every run kernel by kernel) -- feeds both and the
 * float64 interpreter the same random leaves (cpu_oracle.h) and runs
 * `steps` steps with distinct step numbers, so that dropout masks change
 * from step to step and a graph that kept its capture's step would differ.
 * Every step, every graph output must agree bit for bit between the two
 * programs (between = 0; else within `between`, for programs whose float
 * atomics -- scatter_add, attention's one-pass dq -- sum in a different
 * order on every run) and the loss (if g has one) with the interpreter's
 * within tol; updates are copied back as a training loop does.  After the
 * steps every PARAM and STATE must agree between the programs the same
 * way, and with the interpreter within tol.  The graph program must have replayed (stats.graph, one capture
 * unless recaptures are expected) and the plain one not.  Returns the
 * graph program (caller frees) for more runs, or NULL.  Include after
 * cpu_oracle.h.
 */
#ifndef EVTC_TEST_REPLAY_CHECK_H
#define EVTC_TEST_REPLAY_CHECK_H

#include <stdlib.h>
#include <string.h>

/* The step number of step s: far apart and not in order, so no two steps share dropout masks by accident. */
static inline uint64_t replay_step_of(int s) { return 1000003ull * (uint64_t)s + 17; }

/* The program of g on be with EVTC_CUDA_GRAPH=value (the environment restored after), or NULL (a failed check). */
static inline evtc_program *replay_program(const evtc_graph *g, const evtc_backend *be, const char *value,
                                           const char *what) {
  const char *was = getenv("EVTC_CUDA_GRAPH");
  char *saved = was ? strdup(was) : NULL;
  setenv("EVTC_CUDA_GRAPH", value, 1);
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, be, NULL, &d);
  CHECK(p != NULL, "%s: program (EVTC_CUDA_GRAPH=%s): %s", what, value, d.msg);
  if (saved) setenv("EVTC_CUDA_GRAPH", saved, 1);
  else unsetenv("EVTC_CUDA_GRAPH");
  free(saved);
  return p;
}

/* Whether value n agrees between programs a and b: bit for bit (between = 0) or within `between` (oracle_near); the
 * first differing element printed. */
static inline bool replay_same(const evtc_program *a, const evtc_program *b, const evtc_node *n, double between,
                               const char *what, int step) {
  int64_t numel = evtc_type_numel(&n->type);
  size_t bytes = sizeof(double) * (size_t)(numel > 0 ? numel : 1);
  double *x = malloc(bytes), *y = malloc(bytes);
  bool got = evtc_program_get(a, n, x) && evtc_program_get(b, n, y), same = got;
  for (int64_t e = 0; got && e < numel && same; e++)
    same = between > 0 ? oracle_near(x[e], y[e], between) : memcmp(&x[e], &y[e], sizeof x[e]) == 0;
  for (int64_t e = 0; got && !same && e < numel; e++)
    if (between > 0 ? !oracle_near(x[e], y[e], between) : memcmp(&x[e], &y[e], sizeof x[e]) != 0) {
      fprintf(stderr, "  %s: step %d: %%%s[%lld]: replayed %.17g, launched one by one %.17g\n", what, step, n->name,
              (long long)e, x[e], y[e]);
      break;
    }
  free(x);
  free(y);
  return same;
}

/* The same leaves o (oracle_fill) into programs a and b of g. */
static inline void replay_feed(const evtc_graph *g, const oracle_vals *o, evtc_program *a, evtc_program *b) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (o->v[i]) {
      evtc_program_set(a, g->nodes[i], o->v[i]);
      evtc_program_set(b, g->nodes[i], o->v[i]);
    }
}

static inline evtc_program *replay_compare(const evtc_graph *g, const evtc_backend *be, int steps, double tol,
                                           double between, int64_t int_hi, const char *what) {
  evtc_program *rp = replay_program(g, be, "1", what), *pp = replay_program(g, be, "0", what);
  oracle_vals o = oracle_fill(g, int_hi);
  evtc_interp *it = evtc_interp_new(g);
  if (!rp || !pp) goto out;
  replay_feed(g, &o, rp, pp);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (o.v[i]) evtc_interp_set(it, g->nodes[i], o.v[i]);
  int differ = 0;
  for (int s = 0; s < steps; s++) {
    evtc_diag di = {0}, dr = {0}, dp = {0};
    evtc_program_poison(rp);
    evtc_program_poison(pp);
    CHECK(evtc_interp_run(it, replay_step_of(s), &di) == EVTC_OK, "%s: interpreter: %s", what, di.msg);
    CHECK(evtc_program_run(rp, replay_step_of(s), &dr) == EVTC_OK, "%s: step %d replayed: %s", what, s, dr.msg);
    CHECK(evtc_program_run(pp, replay_step_of(s), &dp) == EVTC_OK, "%s: step %d one by one: %s", what, s, dp.msg);
    for (int k = 0; k < g->n_outputs; k++) differ += !replay_same(rp, pp, g->outputs[k].node, between, what, s);
    if (g->loss) oracle_check_loss(g, rp, it, tol, what, s);
    oracle_take_updates(g, it, &o);
    evtc_program_update(rp);
    evtc_program_update(pp);
  }
  CHECK(differ == 0, "%s: %d outputs differ between replayed and one-by-one runs over %d steps", what, differ, steps);
  int bad = 0, leaves_differ = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    leaves_differ += !replay_same(rp, pp, n, between, what, steps);
    int64_t numel = evtc_type_numel(&n->type);
    double *got = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    evtc_program_get(rp, n, got);
    bad += oracle_check_value(what, n, got, o.v[i], tol, NULL);
    free(got);
  }
  CHECK(leaves_differ == 0, "%s: %d parameters or states differ between replayed and one-by-one runs", what,
        leaves_differ);
  CHECK(bad == 0, "%s: %d parameters or states differ from the interpreter after %d steps", what, bad, steps);
  evtc_program_stats rs = evtc_program_get_stats(rp), ps = evtc_program_get_stats(pp);
  CHECK(rs.graph && rs.graph_captures == (steps >= 2), "%s: runs replay a graph (%s), %d captures", what,
        rs.graph ? "yes" : rs.no_graph, rs.graph_captures);
  CHECK(!ps.graph && strcmp(ps.no_graph, "EVTC_CUDA_GRAPH=0") == 0 && ps.graph_captures == 0,
        "%s: EVTC_CUDA_GRAPH=0 launches one by one (%s)", what, ps.no_graph);
out:
  evtc_program_free(pp);
  evtc_interp_free(it);
  oracle_free(g, &o);
  return rp;
}

#endif
