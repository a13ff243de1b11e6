/* cpu_oracle.h -- compare compiled programs with the float64 interpreter (tests only).
 *
 * cpu_compare(g, plan, n_kernels, tol, what) fills every INPUT/PARAM/STATE
 * of g with fresh random values (integer leaves in [0, int_hi)), runs the
 * interpreter and the compiled program (outputs poisoned with NaN first)
 * and checks every graph output element: |got - want| <= tol (1 + |want|).
 * cpu_train_compare runs `steps` training steps of a joint graph both ways,
 * copying updates back, and checks the loss of each step and every
 * parameter afterwards.  Kernel caches go to a temp dir set in main.
 * Programs run on oracle_be when a test sets it (the GPU tests set the
 * CUDA backend), else on the CPU backend.
 *
 * oracle_sum_walk (set by a test whose kernels keep values the interpreter
 * rounds, e.g. a bf16 matmul output carried in f32): an element of a
 * reduce_sum / reduce_mean output is a sum of terms that each may differ
 * by up to tol (1 + |term|), unbiased, so it gets the random-walk bound
 * tol sqrt(sum (1 + |term|)^2) (divided by the count for a mean), the
 * terms being the interpreter's values of the reduced operand.
 */
#ifndef EVTC_CPU_ORACLE_H
#define EVTC_CPU_ORACLE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "check.h"
#include "kernel/kernel.h"
#include "runtime/interp.h"
#include "runtime/program.h"

/* The backend under test (NULL: the CPU backend); the GPU tests set it. */
static const evtc_backend *oracle_be;
static inline const evtc_backend *oracle_backend(void) { return oracle_be ? oracle_be : evtc_backend_cpu(); }

/* Parses a test graph; a failure counts as a failed check (NULL). */
static inline evtc_graph *oracle_parse(const char *text, const char *name) {
  char err[512];
  evtc_graph *g = evtc_graph_parse_string(text, name, err, sizeof err);
  CHECK(g != NULL, "%s: %s", name, err);
  return g;
}

/* Parses test graph text t into *g and builds the one kernel of all its non-leaf nodes; a failure counts as a
 * failed check (NULL). */
static inline evtc_kernel *oracle_kernel(const char *t, const char *what, evtc_graph **g) {
  *g = oracle_parse(t, what);
  if (!*g) return NULL;
  int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*g)->n_nodes);
  int n = 0;
  for (int32_t i = 0; i < (*g)->n_nodes; i++)
    if (!evtc_op_is_leaf((*g)->nodes[i]->op)) ids[n++] = i;
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(*g, ids, n, &d);
  free(ids);
  CHECK(k != NULL, "%s: the kernel does not build: %s", what, d.msg);
  return k;
}

static uint64_t oracle_rng = 12345;
static double oracle_uniform(void) {
  oracle_rng = oracle_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(oracle_rng >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct oracle_vals {
  double **v;   /* by node id: leaf values */
} oracle_vals;

static oracle_vals oracle_fill(const evtc_graph *g, int64_t int_hi) {
  oracle_vals o = {calloc((size_t)g->n_nodes + 1, sizeof(double *))};
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    o.v[i] = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    for (int64_t e = 0; e < numel; e++) {
      double u = oracle_uniform();
      if (n->type.dtype == EVTC_BOOL) o.v[i][e] = u < 0.5;
      else if (evtc_dtype_is_int(n->type.dtype)) o.v[i][e] = floor(u * (double)int_hi);
      else if (strstr(n->name, ".v")) o.v[i][e] = u;            /* AdamW second moments are >= 0 */
      else o.v[i][e] = (float)(2 * u - 1);
    }
  }
  return o;
}

static void oracle_free(const evtc_graph *g, oracle_vals *o) {
  for (int32_t i = 0; i < g->n_nodes; i++) free(o->v[i]);
  free(o->v);
}

static bool oracle_near(double got, double want, double tol) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static bool oracle_sum_walk;

/* For a reduce_sum / reduce_mean n: per output element, tol sqrt(sum over its terms of (1 + |term|)^2) (/ count
 * for a mean), relative to (1 + |want|) as oracle_near measures; NULL for other ops (malloc'd). */
static double *oracle_walk_tol(const evtc_interp *it, const evtc_node *n, double tol) {
  if (n->op != EVTC_OP_REDUCE_SUM && n->op != EVTC_OP_REDUCE_MEAN) return NULL;
  const evtc_node *u = n->inputs[0];
  const double *x = evtc_interp_value(it, u);
  const evtc_attr *ax = evtc_node_attr(n, "axes");
  bool red[EVTC_MAX_RANK] = {false};
  for (int d = 0; d < u->type.rank; d++) red[d] = !ax || ax->n == 0;
  for (int j = 0; ax && j < ax->n; j++) red[(ax->v.ints[j] + u->type.rank) % u->type.rank] = true;
  const int64_t out_n = evtc_type_numel(&n->type), in_n = evtc_type_numel(&u->type);
  double *acc = calloc((size_t)(out_n > 0 ? out_n : 1), sizeof(double));
  for (int64_t e = 0; e < in_n; e++) {
    int64_t rest = e, o = 0, scale = 1;   /* the output index: the kept coordinates of e, row-major */
    for (int d = u->type.rank - 1; d >= 0; d--) {
      const int64_t dim = u->type.shape[d], coord = rest % dim;
      rest /= dim;
      if (!red[d]) {
        o += coord * scale;
        scale *= dim;
      }
    }
    acc[o] += (1 + fabs(x[e])) * (1 + fabs(x[e]));
  }
  const double count = out_n > 0 ? (double)in_n / (double)out_n : 1;
  const double *want = evtc_interp_value(it, n);
  for (int64_t o = 0; o < out_n; o++)
    acc[o] = tol * sqrt(acc[o]) / (n->op == EVTC_OP_REDUCE_MEAN ? count : 1) / (1 + fabs(want[o]));
  return acc;
}

/* Compares one value; prints the first bad element. */
static int oracle_check_value(const char *what, const evtc_node *n, const double *got, const double *want, double tol,
                              const evtc_interp *it) {
  int64_t numel = evtc_type_numel(&n->type);
  double *walk = oracle_sum_walk && it ? oracle_walk_tol(it, n, tol) : NULL;
  int bad = 0;
  for (int64_t e = 0; e < numel && !bad; e++) {
    const double t = walk && walk[e] > tol ? walk[e] : tol;
    if (!oracle_near(got[e], want[e], t)) {
      fprintf(stderr, "  %s: %%%s[%lld]: got %.9g, want %.9g (tolerance %.3g)\n", what, n->name, (long long)e, got[e],
              want[e], t * (1 + fabs(want[e])));
      bad = 1;
    }
  }
  free(walk);
  return bad;
}

/* Program p's loss after step s against the interpreter's. */
static inline void oracle_check_loss(const evtc_graph *g, evtc_program *p, const evtc_interp *it, double tol,
                                     const char *what, int s) {
  double loss = NAN;
  evtc_program_get(p, g->loss, &loss);
  double want = evtc_interp_value(it, g->loss)[0];
  CHECK(oracle_near(loss, want, tol), "%s: step %d loss %.9g, interpreter %.9g", what, s, loss, want);
}

/* The interpreter's updated parameters and states into o, the next step's values, as the training loop does. */
static inline void oracle_take_updates(const evtc_graph *g, const evtc_interp *it, oracle_vals *o) {
  for (int k = 0; k < g->n_outputs; k++) {
    const evtc_output *out = &g->outputs[k];
    if (out->updates)
      memcpy(o->v[out->updates->id], evtc_interp_value(it, out->node),
             sizeof(double) * (size_t)evtc_type_numel(&out->node->type));
  }
}

/* Runs g once both ways; returns the program (caller frees) for extra checks, or NULL. */
static inline evtc_program *cpu_compare(const evtc_graph *g, const int32_t *plan, int n_kernels, double tol, int64_t int_hi,
                                 const char *what) {
  evtc_diag d = {0};
  oracle_vals o = oracle_fill(g, int_hi);
  evtc_interp *it = evtc_interp_new(g);
  evtc_program *p = evtc_program_new(g, plan, n_kernels, oracle_backend(), NULL, &d);
  CHECK(p != NULL, "%s: program: %s", what, d.msg);
  if (!p) goto out;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (o.v[i]) {
      evtc_interp_set(it, g->nodes[i], o.v[i]);
      evtc_program_set(p, g->nodes[i], o.v[i]);
    }
  evtc_diag di = {0};
  evtc_status si = evtc_interp_run(it, 7, &di);
  evtc_program_poison(p);
  evtc_status sp = evtc_program_run(p, 7, &d);
  CHECK(si == sp, "%s: interpreter says %s, program %s", what, di.msg, d.msg);
  if (si != EVTC_OK || sp != EVTC_OK) goto out;
  int bad = 0;
  for (int k = 0; k < g->n_outputs; k++) {
    const evtc_node *n = g->outputs[k].node;
    int64_t numel = evtc_type_numel(&n->type);
    double *got = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    CHECK(evtc_program_get(p, n, got), "%s: output %%%s has a buffer", what, n->name);
    bad += oracle_check_value(what, n, got, evtc_interp_value(it, n), tol, it);
    free(got);
  }
  CHECK(bad == 0, "%s: %d of %d outputs differ from the interpreter", what, bad, g->n_outputs);
out:
  evtc_interp_free(it);
  oracle_free(g, &o);
  return p;
}

/* `steps` training steps of joint graph g both ways, the program on plan (n_kernels; NULL: the greedy plan);
 * checks losses and final leaves. */
static inline void cpu_train_compare_plan(const evtc_graph *g, const int32_t *plan, int n_kernels, int steps,
                                          double tol, int64_t int_hi, const char *what) {
  evtc_diag d = {0};
  oracle_vals o = oracle_fill(g, int_hi);
  evtc_interp *it = evtc_interp_new(g);
  evtc_program *p = evtc_program_new(g, plan, n_kernels, oracle_backend(), NULL, &d);
  CHECK(p != NULL, "%s: program: %s", what, d.msg);
  if (!p) goto out;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (o.v[i]) {
      evtc_interp_set(it, g->nodes[i], o.v[i]);
      evtc_program_set(p, g->nodes[i], o.v[i]);
    }
  int bad = 0;
  for (int s = 0; s < steps; s++) {
    evtc_diag di = {0};
    evtc_program_poison(p);
    CHECK(evtc_interp_run(it, (uint64_t)s, &di) == EVTC_OK, "%s: interpreter: %s", what, di.msg);
    CHECK(evtc_program_run(p, (uint64_t)s, &d) == EVTC_OK, "%s: program: %s", what, d.msg);
    oracle_check_loss(g, p, it, tol, what, s);
    oracle_take_updates(g, it, &o);
    evtc_program_update(p);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    double *got = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    evtc_program_get(p, n, got);
    bad += oracle_check_value(what, n, got, o.v[i], tol, NULL);
    free(got);
  }
  CHECK(bad == 0, "%s: %d parameters or states differ after %d steps", what, bad, steps);
out:
  evtc_program_free(p);
  evtc_interp_free(it);
  oracle_free(g, &o);
}

static inline void cpu_train_compare(const evtc_graph *g, int steps, double tol, int64_t int_hi, const char *what) {
  cpu_train_compare_plan(g, NULL, 0, steps, tol, int_hi, what);
}

#endif
