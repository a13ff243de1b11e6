/* test_attention.c -- the attention op family in the IR, the interpreter and
 * autodiff.
 *
 * For several geometries (S < T, S == T, one query, Dv != D; causal and
 * not) the fused op is compared with the decomposed graph it stands for,
 * batch_matmul(q, k^T) * scale (+ a -1e30 causal mask) -> softmax ->
 * batch_matmul(., v), both in the float64 interpreter on random inputs:
 * the outputs, and the gradients of loss = sum(out * C) for q, k and v
 * (evtc_autodiff on each graph: attention's rule against the primitives'
 * rules), plus central finite differences on one case.  bf16 storage runs
 * and stays near the f64 result.  Bad operands are refused with a message
 * naming the node, the op and the cause.  The forward passes a training
 * run applies before autodiff (evtc_program_optimize_forward, target h200)
 * form the op from the decomposed graph and the training gradients stay
 * the same; they are dropped when the backend refuses what they formed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "check.h"
#include "runtime/interp.h"
#include "runtime/program_plan.h"

typedef struct geom {
  int64_t b, h, s, t, d, dv;
  int causal;
} geom;

static evtc_node *input(evtc_graph *g, const char *name, evtc_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t shape[4] = {a, b, c, d};
  return evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(dt, 4, shape), NULL, 0, name);
}

static evtc_node *data_const(evtc_graph *g, evtc_dtype dt, int rank, const int64_t *shape, const double *v) {
  evtc_type t = evtc_type_make(dt, rank, shape);
  evtc_attr at = evtc_attr_floats("data", (int)evtc_type_numel(&t), v);
  return evtc_leaf_add(g, EVTC_OP_CONST, t, &at, 1, NULL);
}

/* out = attention(q, k, v) fused or decomposed, and loss = sum(out * C) with C of seed `cseed`. */
static evtc_graph *build(const geom *m, evtc_dtype dt, bool fused, uint64_t cseed) {
  evtc_graph *g = evtc_graph_new(fused ? "fused" : "decomposed");
  evtc_node *q = input(g, "q", dt, m->b, m->h, m->s, m->d), *k = input(g, "k", dt, m->b, m->h, m->t, m->d);
  evtc_node *v = input(g, "v", dt, m->b, m->h, m->t, m->dv), *out;
  double scale = 1.0 / sqrt((double)m->d);
  if (fused) {
    evtc_attr at[2] = {evtc_attr_float("scale", scale), evtc_attr_int("causal", m->causal)};
    out = evtc_node_add(g, EVTC_OP_ATTENTION, (evtc_node *[]){q, k, v}, 3, at, 2, "out");
  } else {
    evtc_attr tb = evtc_attr_int("trans_b", 1), ax = evtc_attr_int("axis", -1);
    evtc_node *sc = evtc_node_add(g, EVTC_OP_BATCH_MATMUL, (evtc_node *[]){q, k}, 2, &tb, 1, NULL);
    sc = evtc_binary(g, EVTC_OP_MUL, sc, evtc_scalar(g, dt, scale));
    if (m->causal) {
      double *mask = malloc(sizeof(double) * (size_t)(m->s * m->t));
      for (int64_t s = 0; s < m->s; s++)
        for (int64_t t = 0; t < m->t; t++) mask[s * m->t + t] = t <= s + (m->t - m->s) ? 0.0 : -1e30;
      sc = evtc_binary(g, EVTC_OP_ADD, sc, data_const(g, dt, 2, (int64_t[]){m->s, m->t}, mask));
      free(mask);
    }
    evtc_node *p = evtc_node_add(g, EVTC_OP_SOFTMAX, &sc, 1, &ax, 1, NULL);
    out = evtc_node_add(g, EVTC_OP_BATCH_MATMUL, (evtc_node *[]){p, v}, 2, NULL, 0, "out");
  }
  int64_t n = evtc_type_numel(&out->type);
  double *c = malloc(sizeof(double) * (size_t)n);
  uint64_t keep = check_rng;
  check_rng = cseed;
  for (int64_t i = 0; i < n; i++) c[i] = 2 * check_urand() - 1;
  check_rng = keep;
  evtc_node *prod = evtc_binary(g, EVTC_OP_MUL, out, data_const(g, dt, 4, out->type.shape, c));
  free(c);
  g->loss = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &prod, 1, NULL, 0, "loss");
  evtc_graph_add_output(g, out, NULL);
  evtc_graph_add_output(g, g->loss, NULL);
  CHECK(g->diag.status == EVTC_OK, "build: %s", g->diag.msg);
  return g;
}

static double rel_err(const double *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct run {
  evtc_graph *fwd, *joint;
  evtc_interp *it;
} run;

static const char *const wrt[3] = {"q", "k", "v"};

/* Runs the joint graph of g (gradients of q, k, v) on inputs x[3]. */
static run run_joint(evtc_graph *g, double *const *x) {
  run r = {.fwd = g};
  evtc_diag d = {0};
  r.joint = evtc_autodiff(g, wrt, 3, NULL, &d);
  CHECK(r.joint != NULL, "autodiff of %s: %s", g->name, d.msg);
  if (!r.joint) return r;
  r.it = evtc_interp_new(r.joint);
  for (int i = 0; i < 3; i++) evtc_interp_set(r.it, evtc_graph_find(r.joint, wrt[i]), x[i]);
  CHECK(evtc_interp_run(r.it, 0, &d) == EVTC_OK, "run of %s: %s", g->name, d.msg);
  return r;
}

static void run_free(run *r) {
  if (r->it) evtc_interp_free(r->it);
  evtc_graph_free(r->joint);
  evtc_graph_free(r->fwd);
}

static double *random_values(int64_t n) {
  double *x = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) x[i] = 2 * check_urand() - 1;
  return x;
}

/* Fused against decomposed: output and the three gradients. */
static void check_geometry(const geom *m) {
  int64_t n[3] = {m->b * m->h * m->s * m->d, m->b * m->h * m->t * m->d, m->b * m->h * m->t * m->dv};
  double *x[3];
  for (int i = 0; i < 3; i++) x[i] = random_values(n[i]);
  uint64_t cseed = 0x1234567ull + (uint64_t)m->s * 31 + (uint64_t)m->t;
  run f = run_joint(build(m, EVTC_F64, true, cseed), x), u = run_joint(build(m, EVTC_F64, false, cseed), x);
  char what[96];
  snprintf(what, sizeof what, "[%lld,%lld,%lld/%lld,%lld/%lld]%s", (long long)m->b, (long long)m->h, (long long)m->s,
           (long long)m->t, (long long)m->d, (long long)m->dv, m->causal ? " causal" : "");
  if (f.it && u.it) {
    const evtc_node *fo = evtc_graph_find(f.joint, "out"), *uo = evtc_graph_find(u.joint, "out");
    double e = rel_err(evtc_interp_value(f.it, fo), evtc_interp_value(u.it, uo), evtc_type_numel(&fo->type));
    printf("%-28s out rel err %.1e", what, e);
    CHECK(e < 1e-13, "%s: output differs from the decomposed graph (rel err %.3e)", what, e);
    for (int i = 0; i < 3; i++) {
      char gname[16];
      snprintf(gname, sizeof gname, "grad.%s", wrt[i]);
      const evtc_node *fg = evtc_graph_find(f.joint, gname), *ug = evtc_graph_find(u.joint, gname);
      CHECK(fg && ug, "%s: no %s", what, gname);
      if (!fg || !ug) continue;
      e = rel_err(evtc_interp_value(f.it, fg), evtc_interp_value(u.it, ug), n[i]);
      printf("  d%s %.1e", wrt[i], e);
      CHECK(e < 1e-12, "%s: %s differs from the decomposed graph's (rel err %.3e)", what, gname, e);
    }
    printf("\n");
  }
  run_free(&f);
  run_free(&u);
  for (int i = 0; i < 3; i++) free(x[i]);
}

/* Central differences of the fused graph's loss against its gradients. */
static void check_finite_differences(const geom *m) {
  int64_t n[3] = {m->b * m->h * m->s * m->d, m->b * m->h * m->t * m->d, m->b * m->h * m->t * m->dv};
  double *x[3];
  for (int i = 0; i < 3; i++) x[i] = random_values(n[i]);
  run f = run_joint(build(m, EVTC_F64, true, 99), x);
  evtc_interp *it = evtc_interp_new(f.fwd);
  for (int i = 0; i < 3; i++) evtc_interp_set(it, evtc_graph_find(f.fwd, wrt[i]), x[i]);
  for (int i = 0; i < 3 && f.it; i++) {
    char gname[16];
    snprintf(gname, sizeof gname, "grad.%s", wrt[i]);
    const double *ga = evtc_interp_value(f.it, evtc_graph_find(f.joint, gname));
    double *fd = malloc(sizeof(double) * (size_t)n[i]);
    for (int64_t e = 0; e < n[i]; e++) {
      double x0 = x[i][e], h = 1e-6, l[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        x[i][e] = x0 + (sgn ? -h : h);
        evtc_diag d = {0};
        CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "fd run: %s", d.msg);
        l[sgn] = evtc_interp_value(it, f.fwd->loss)[0];
      }
      x[i][e] = x0;
      fd[e] = (l[0] - l[1]) / (2 * h);
    }
    double e = rel_err(ga, fd, n[i]);
    printf("finite differences d%s rel err %.1e\n", wrt[i], e);
    CHECK(e < 1e-7, "%s against finite differences: rel err %.3e", gname, e);
    free(fd);
  }
  evtc_interp_free(it);
  run_free(&f);
  for (int i = 0; i < 3; i++) free(x[i]);
}

/* bf16 q, k, v (values exact in bf16): the output is the f64 result rounded once. */
static void check_bf16(void) {
  geom m = {1, 2, 9, 13, 64, 64, 1};
  int64_t n[3] = {m.b * m.h * m.s * m.d, m.b * m.h * m.t * m.d, m.b * m.h * m.t * m.dv};
  double *x[3];
  for (int i = 0; i < 3; i++) {
    x[i] = random_values(n[i]);
    for (int64_t e = 0; e < n[i]; e++) x[i][e] = round(x[i][e] * 64) / 64;
  }
  double out[2][9 * 64 * 2];
  for (int pass = 0; pass < 2; pass++) {
    evtc_graph *g = build(&m, pass ? EVTC_BF16 : EVTC_F64, true, 5);
    evtc_interp *it = evtc_interp_new(g);
    for (int i = 0; i < 3; i++) evtc_interp_set(it, evtc_graph_find(g, wrt[i]), x[i]);
    evtc_diag d = {0};
    CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "bf16 run: %s", d.msg);
    memcpy(out[pass], evtc_interp_value(it, evtc_graph_find(g, "out")), sizeof out[pass]);
    evtc_interp_free(it);
    evtc_graph_free(g);
  }
  double e = rel_err(out[1], out[0], 9 * 64 * 2);
  printf("bf16 storage rel err %.1e\n", e);
  CHECK(e > 0 && e < 4e-3, "bf16 attention: rel err %.3e against f64", e);
  for (int i = 0; i < 3; i++) free(x[i]);
}

/* Builds op over inputs of the given types and attributes; expects an error containing `want`. */
static void check_refused(evtc_op op, int n_in, const evtc_type *types, double scale, int64_t causal, const char *want) {
  evtc_graph *g = evtc_graph_new("bad");
  evtc_node *ins[6];
  for (int i = 0; i < n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%d", i);
    ins[i] = evtc_leaf_add(g, EVTC_OP_INPUT, types[i], NULL, 0, name);
  }
  evtc_attr at[2] = {evtc_attr_float("scale", scale), evtc_attr_int("causal", causal)};
  evtc_node *n = evtc_node_add(g, op, ins, n_in, at, 2, "att");
  CHECK(n == NULL && strstr(g->diag.msg, "att") && strstr(g->diag.msg, evtc_op_get(op)->name) &&
            strstr(g->diag.msg, want),
        "want an error naming %%att, %s and \"%s\"; got \"%s\"", evtc_op_get(op)->name, want, g->diag.msg);
  evtc_graph_free(g);
}

#define T4(dt, a, b, c, d) evtc_type_make(dt, 4, (int64_t[]){a, b, c, d})

static void check_errors(void) {
  evtc_type q = T4(EVTC_F32, 2, 3, 5, 8), k = T4(EVTC_F32, 2, 3, 7, 8), v = T4(EVTC_F32, 2, 3, 7, 4);
  evtc_type o = T4(EVTC_F32, 2, 3, 5, 4), lse = evtc_type_make(EVTC_F32, 3, (int64_t[]){2, 3, 5});
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){evtc_type_make(EVTC_F32, 3, (int64_t[]){3, 5, 8}), k, v}, 1, 0,
                "must have rank 4");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, T4(EVTC_F32, 2, 3, 7, 6), v}, 1, 0, "different head dims");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, k, T4(EVTC_F32, 2, 3, 6, 4)}, 1, 0, "different key counts");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, T4(EVTC_F32, 2, 4, 7, 8), v}, 1, 0, "batch and head dims");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, T4(EVTC_F16, 2, 3, 7, 8), v}, 1, 0, "different dtypes");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){T4(EVTC_I32, 2, 3, 5, 8), k, v}, 1, 0, "must be a float");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, k, v}, 1, 2, "must be 0 or 1");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){q, k, v}, INFINITY, 0, "not finite");
  check_refused(EVTC_OP_ATTENTION, 3, (evtc_type[]){k, q, T4(EVTC_F32, 2, 3, 5, 4)}, 1, 1, "more queries");
  check_refused(EVTC_OP_ATTENTION_BACKWARD_Q, 6, (evtc_type[]){q, k, v, o, o, evtc_type_make(EVTC_F64, 3, (int64_t[]){2, 3, 5})},
                1, 0, "log-sum-exp");
  check_refused(EVTC_OP_ATTENTION_BACKWARD_KV, 6, (evtc_type[]){q, k, v, o, T4(EVTC_F32, 2, 3, 5, 5), lse}, 1, 0,
                "its gradient");
  check_refused(EVTC_OP_ATTENTION_BACKWARD_KV, 6, (evtc_type[]){q, k, v, o, o, evtc_type_make(EVTC_F32, 3, (int64_t[]){2, 3, 4})},
                1, 0, "one log-sum-exp per query row");
}

static int count_op(const evtc_graph *g, evtc_op op) {
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i]->op == op;
  return n;
}

/* evtc_program_optimize_forward: attention formed for h200 (here the CPU backend stands in and compiles f64
 * attention), gradients unchanged; nothing kept for a target without forward passes, for a bf16 graph the
 * backend refuses (saying why), or when nothing new is formed. */
static void check_forward_passes(void) {
  const geom m = {2, 3, 5, 7, 8, 8, 1};
  const evtc_backend *cpu = evtc_backend_cpu();
  evtc_diag d = {0};
  evtc_graph *plain = build(&m, EVTC_F64, false, 42), *src = build(&m, EVTC_F64, false, 42);   /* f64: no roundings */
  evtc_graph *fused = evtc_program_optimize_forward(src, "h200", cpu, NULL, &d);
  evtc_graph_free(src);
  CHECK(fused && d.status == EVTC_OK && count_op(fused, EVTC_OP_ATTENTION) == 1 && count_op(fused, EVTC_OP_SOFTMAX) == 0,
        "forward passes form one attention node: %s", d.msg);
  if (fused) {
    double *x[3] = {random_values(m.b * m.h * m.s * m.d), random_values(m.b * m.h * m.t * m.d),
                    random_values(m.b * m.h * m.t * m.dv)};
    run a = run_joint(plain, x), b = run_joint(fused, x);
    plain = NULL;
    for (int i = 0; i < 3 && a.it && b.it; i++) {
      char gname[16];
      snprintf(gname, sizeof gname, "grad.%s", wrt[i]);
      const evtc_node *ga = evtc_graph_find(a.joint, gname), *gb = evtc_graph_find(b.joint, gname);
      CHECK(ga && gb, "forward passes: %s in both joint graphs", gname);
      if (ga && gb) {
        double e = rel_err(evtc_interp_value(b.it, gb), evtc_interp_value(a.it, ga), evtc_type_numel(&ga->type));
        CHECK(e < 1e-12, "forward passes: %s differs by %.3g", gname, e);
      }
    }
    run_free(&a);
    run_free(&b);
    for (int i = 0; i < 3; i++) free(x[i]);
  }
  evtc_graph_free(plain);
  evtc_graph *half = build(&m, EVTC_BF16, false, 42), *orig = build(&m, EVTC_F32, true, 42);
  char *said = NULL;
  size_t said_len = 0;
  FILE *info = open_memstream(&said, &said_len);
  evtc_graph *r1 = evtc_program_optimize_forward(half, "h200", cpu, info, &d);
  fclose(info);
  CHECK(!r1 && d.status == EVTC_OK, "forward passes: bf16 attention the CPU refuses is not kept");
  CHECK(strstr(said, "forward passes (h200-forward): nothing changed; attention left decomposed: the backend refuses %"),
        "forward passes: the refusal is said: %s", said);
  free(said);
  evtc_graph *r2 = evtc_program_optimize_forward(half, "cpu", cpu, NULL, &d);
  CHECK(!r2 && d.status == EVTC_OK, "forward passes: none for target cpu");
  evtc_graph *r3 = evtc_program_optimize_forward(orig, "h200", cpu, NULL, &d);
  CHECK(!r3 && d.status == EVTC_OK, "forward passes: nothing new formed, nothing kept");
  evtc_graph_free(r1);
  evtc_graph_free(r2);
  evtc_graph_free(r3);
  evtc_graph_free(half);
  evtc_graph_free(orig);
}

int main(void) {
  check_rng = 0xA77E2710ull;
  static const geom cases[] = {{2, 3, 5, 7, 8, 4, 0}, {2, 3, 5, 7, 8, 4, 1}, {1, 2, 6, 6, 16, 16, 1},
                               {2, 1, 1, 9, 4, 4, 0}, {1, 1, 1, 9, 4, 4, 1}, {1, 2, 4, 4, 3, 5, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_geometry(&cases[i]);
  check_finite_differences(&(geom){1, 2, 3, 4, 5, 3, 0});
  check_bf16();
  check_errors();
  check_forward_passes();
  return check_summary();
}
