/* test_optim.c -- optimizer updates built by evtc_autodiff against the
 * formulas computed directly in C.
 *
 * A tiny f64 model (loss = mse(x w + b, target)) is differentiated with
 * SGD (momentum, weight decay, a nonzero starting buffer) for one step and
 * with AdamW for two steps, copying every "<s>.next -> %<s>" output back
 * into its leaf between the steps as the training loop does, so the second
 * step sees the step counter at 1 and the bias corrections of t = 2.  The
 * gradients come from the joint graph's own "grad.<p>" nodes, checked first
 * against a NONE joint graph.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "check.h"
#include "runtime/interp.h"

static double urand(void) {
  static uint64_t s = 88172645463325252ull;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return (double)(s >> 11) * 0x1.0p-53;
}

/* Values of the leaves of one joint graph, bound to an interpreter. */
typedef struct bound {
  evtc_graph *g;
  evtc_interp *it;
  double **data;         /* by node id; NULL for non-leaves */
} bound;

static evtc_graph *model(void) {
  evtc_graph *g = evtc_graph_new("tiny");
  evtc_node *x = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_F64, 2, (int64_t[]){4, 3}), NULL, 0, "x");
  evtc_node *t = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_F64, 2, (int64_t[]){4, 2}), NULL, 0, "t");
  evtc_node *w = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F64, 2, (int64_t[]){3, 2}), NULL, 0, "w");
  evtc_node *b = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F64, 1, (int64_t[]){2}), NULL, 0, "b");
  evtc_node *y = evtc_binary(g, EVTC_OP_ADD, evtc_binary(g, EVTC_OP_MATMUL, x, w), b);
  evtc_node *in[2] = {y, t};
  g->loss = evtc_node_add(g, EVTC_OP_MSE, in, 2, NULL, 0, "loss");
  evtc_graph_add_output(g, g->loss, NULL);
  return g;
}

/* Binds every leaf of g: values from `init` (by name) when given there,
 * else random (INPUT/PARAM) or zero (STATE). */
static void bind(bound *b, evtc_graph *g, const bound *init) {
  b->g = g;
  b->it = evtc_interp_new(g);
  b->data = calloc((size_t)g->n_nodes, sizeof *b->data);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t k = evtc_type_numel(&n->type);
    b->data[i] = calloc((size_t)k, sizeof(double));
    evtc_node *src = init ? evtc_graph_find(init->g, n->name) : NULL;
    if (src) memcpy(b->data[i], init->data[src->id], sizeof(double) * (size_t)k);
    else if (n->op != EVTC_OP_STATE)
      for (int64_t e = 0; e < k; e++) b->data[i][e] = 2 * urand() - 1;
    evtc_interp_set(b->it, n, b->data[i]);
  }
}

static void unbind(bound *b) {
  for (int32_t i = 0; i < b->g->n_nodes; i++) free(b->data[i]);
  free(b->data);
  evtc_interp_free(b->it);
}

static void run(bound *b) {
  evtc_diag d = {0};
  CHECK(evtc_interp_run(b->it, 0, &d) == EVTC_OK, "run: %s", d.msg);
}

static const double *val(const bound *b, const char *name) {
  evtc_node *n = evtc_graph_find(b->g, name);
  EVTC_ASSERT(n != NULL);
  return evtc_interp_value(b->it, n);
}

static double *leaf(const bound *b, const char *name) {
  evtc_node *n = evtc_graph_find(b->g, name);
  EVTC_ASSERT(n != NULL && b->data[n->id] != NULL);
  return b->data[n->id];
}

/* Copies each update output into its leaf, as one training step ends. */
static void step_done(bound *b) {
  for (int32_t k = 0; k < b->g->n_outputs; k++) {
    evtc_output o = b->g->outputs[k];
    if (!o.updates) continue;
    memcpy(b->data[o.updates->id], evtc_interp_value(b->it, o.node),
           sizeof(double) * (size_t)evtc_type_numel(&o.updates->type));
  }
}

static double max_rel(const double *a, const double *b, int n) {
  double e = 0;
  for (int i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]) / fmax(1e-30, fabs(b[i])));
  return e;
}

static const char *params[2] = {"w", "b"};
static const int sizes[2] = {6, 2};

static void check_sgd(const evtc_graph *fwd, const bound *ref) {
  evtc_optim_config o = evtc_optim_default(EVTC_OPTIM_SGD);
  o.lr = 0.05;
  o.momentum = 0.8;
  o.weight_decay = 0.01;
  evtc_diag d = {0};
  evtc_graph *j = evtc_autodiff(fwd, NULL, 0, &o, &d);
  CHECK(j != NULL, "sgd: %s", d.msg);
  if (!j) return;
  bound b;
  bind(&b, j, ref);
  for (int p = 0; p < 2; p++) {           /* a nonzero buffer, as after earlier steps */
    char name[32];
    snprintf(name, sizeof name, "%s.momentum", params[p]);
    for (int e = 0; e < sizes[p]; e++) leaf(&b, name)[e] = urand() - 0.5;
  }
  run(&b);
  for (int p = 0; p < 2; p++) {
    char name[32], buf[32], next[32], bufnext[32];
    snprintf(name, sizeof name, "grad.%s", params[p]);
    snprintf(buf, sizeof buf, "%s.momentum", params[p]);
    snprintf(next, sizeof next, "%s.next", params[p]);
    snprintf(bufnext, sizeof bufnext, "%s.momentum.next", params[p]);
    const double *g = val(ref, name), *w = leaf(&b, params[p]), *m = leaf(&b, buf);
    double want_buf[6], want_p[6];
    for (int e = 0; e < sizes[p]; e++) {
      want_buf[e] = o.momentum * m[e] + g[e] + o.weight_decay * w[e];
      want_p[e] = w[e] - o.lr * want_buf[e];
    }
    double e1 = max_rel(val(&b, bufnext), want_buf, sizes[p]), e2 = max_rel(val(&b, next), want_p, sizes[p]);
    printf("sgd %s: buffer err %.1e, param err %.1e\n", params[p], e1, e2);
    CHECK(e1 < 1e-13 && e2 < 1e-13, "sgd %s: errors %.3e %.3e", params[p], e1, e2);
  }
  CHECK(j->n_outputs == 1 + 4, "sgd outputs: loss + 2 params + 2 buffers, got %d", (int)j->n_outputs);
  unbind(&b);
  evtc_graph_free(j);
}

static void check_adamw(const evtc_graph *fwd, const bound *ref) {
  evtc_optim_config o = evtc_optim_default(EVTC_OPTIM_ADAMW);
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.beta1 = 0.8;
  o.beta2 = 0.95;
  evtc_diag d = {0};
  evtc_graph *j = evtc_autodiff(fwd, NULL, 0, &o, &d);
  CHECK(j != NULL, "adamw: %s", d.msg);
  if (!j) return;
  bound b;
  bind(&b, j, ref);
  double m[2][6] = {{0}}, v[2][6] = {{0}};   /* the C reference state */
  for (int t = 1; t <= 2; t++) {
    double p0[2][6];
    for (int p = 0; p < 2; p++) memcpy(p0[p], leaf(&b, params[p]), sizeof(double) * (size_t)sizes[p]);
    run(&b);
    CHECK(val(&b, "adamw.step.next")[0] == t, "step counter %g at step %d", val(&b, "adamw.step.next")[0], t);
    if (t == 1) CHECK(max_rel(val(&b, "grad.w"), val(ref, "grad.w"), 6) < 1e-14, "adamw grad.w = plain grad.w");
    for (int p = 0; p < 2; p++) {
      char name[32];
      snprintf(name, sizeof name, "grad.%s", params[p]);
      const double *g = val(&b, name);
      double want[6];
      for (int e = 0; e < sizes[p]; e++) {
        m[p][e] = o.beta1 * m[p][e] + (1 - o.beta1) * g[e];
        v[p][e] = o.beta2 * v[p][e] + (1 - o.beta2) * g[e] * g[e];
        double mhat = m[p][e] / (1 - pow(o.beta1, t)), vhat = v[p][e] / (1 - pow(o.beta2, t));
        want[e] = p0[p][e] * (1 - o.lr * o.weight_decay) - o.lr * mhat / (sqrt(vhat) + o.eps);
      }
      snprintf(name, sizeof name, "%s.next", params[p]);
      double ep = max_rel(val(&b, name), want, sizes[p]);
      snprintf(name, sizeof name, "%s.m.next", params[p]);
      double em = max_rel(val(&b, name), m[p], sizes[p]);
      snprintf(name, sizeof name, "%s.v.next", params[p]);
      double ev = max_rel(val(&b, name), v[p], sizes[p]);
      printf("adamw step %d %s: param err %.1e, m err %.1e, v err %.1e\n", t, params[p], ep, em, ev);
      CHECK(ep < 1e-12 && em < 1e-13 && ev < 1e-13, "adamw step %d %s: %.3e %.3e %.3e", t, params[p], ep, em, ev);
    }
    step_done(&b);
  }
  CHECK(leaf(&b, "adamw.step")[0] == 2, "step state after two steps");
  CHECK(j->n_outputs == 1 + 6 + 1, "adamw outputs: loss + 3 per param + step, got %d", (int)j->n_outputs);
  unbind(&b);
  evtc_graph_free(j);
}

int main(void) {
  evtc_graph *g = model();
  evtc_diag d = {0};
  evtc_graph *j = evtc_autodiff(g, NULL, 0, NULL, &d);   /* plain gradients at the starting point */
  CHECK(j != NULL, "none: %s", d.msg);
  if (!j) return check_summary();
  bound ref;
  bind(&ref, j, NULL);
  run(&ref);
  check_sgd(g, &ref);
  check_adamw(g, &ref);
  unbind(&ref);
  evtc_graph_free(j);
  evtc_graph_free(g);
  return check_summary();
}
