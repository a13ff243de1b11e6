/* optim.c -- optimizer updates as graph ops (PyTorch semantics).
 *
 * SGD:   g' = g + wd p;  buf' = momentum buf + g';  p' = p - lr buf'
 *        (buf starts at zero, so the first step has buf' = g' exactly as
 *        PyTorch's, which sets buf = g' on the first step; no dampening, no
 *        Nesterov; without momentum there is no buffer and p' = p - lr g').
 * AdamW: t' = t + 1 (STATE "adamw.step", shared by all params);
 *        p1 = p (1 - lr wd);  m' = b1 m + (1-b1) g;  v' = b2 v + (1-b2) g^2;
 *        p' = p1 - lr (m' / (1 - b1^t')) / (sqrt(v' / (1 - b2^t')) + eps).
 * Every state is a STATE leaf with init="zeros" whose next value is an
 * output "<s>.next -> %<s>", like the params' "<p>.next -> %<p>".
 */
#include <stdio.h>

#include "autodiff/rules.h"

/* The graph being extended; constants are shared with nodes from id `from` on. */
typedef struct optim_ctx {
  evtc_graph *g;
  int32_t from;
} optim_ctx;

static evtc_node *K(const optim_ctx *c, evtc_dtype dt, double v) { return evtc_vjp_scalar(c->g, c->from, dt, v); }

static evtc_node *bin(evtc_graph *g, evtc_op op, evtc_node *a, evtc_node *b) { return evtc_binary(g, op, a, b); }

static const char *suffixed(evtc_graph *g, const evtc_node *p, const char *suffix) {
  char buf[300];
  snprintf(buf, sizeof buf, "%.250s%s", p->name, suffix);
  return evtc_arena_strdup(g->arena, buf);
}

/* A zero-initialised STATE of p's type named "<p><suffix>". */
static evtc_node *zero_state(evtc_graph *g, const evtc_type *t, const char *name) {
  evtc_attr init = evtc_attr_str("init", "zeros");
  return evtc_leaf_add(g, EVTC_OP_STATE, *t, &init, 1, name);
}

/* next = a * ka + b * kb (b itself when kb is 1), named. */
static evtc_node *lerp(const optim_ctx *c, evtc_node *a, double ka, evtc_node *b, double kb, const char *name) {
  evtc_graph *g = c->g;
  evtc_dtype dt = a->type.dtype;
  evtc_node *in[2] = {bin(g, EVTC_OP_MUL, a, K(c, dt, ka)),
                      kb == 1.0 ? b : bin(g, EVTC_OP_MUL, b, K(c, dt, kb))};
  return evtc_node_add(g, EVTC_OP_ADD, in, 2, NULL, 0, name);
}

static void sgd(const optim_ctx *c, const evtc_optim_config *o, evtc_node *p, evtc_node *grad) {
  evtc_graph *g = c->g;
  evtc_dtype dt = p->type.dtype;
  evtc_node *step = grad;
  if (o->weight_decay != 0) step = bin(g, EVTC_OP_ADD, step, bin(g, EVTC_OP_MUL, p, K(c, dt, o->weight_decay)));
  evtc_node *buf = NULL;
  if (o->momentum != 0) {
    buf = zero_state(g, &p->type, suffixed(g, p, ".momentum"));
    step = lerp(c, buf, o->momentum, step, 1.0, suffixed(g, p, ".momentum.next"));
  }
  evtc_node *in[2] = {p, bin(g, EVTC_OP_MUL, step, K(c, dt, o->lr))};
  evtc_node *next = evtc_node_add(g, EVTC_OP_SUB, in, 2, NULL, 0, suffixed(g, p, ".next"));
  if (g->diag.status != EVTC_OK) return;
  evtc_graph_add_output(g, next, p);
  if (buf) evtc_graph_add_output(g, step, buf);
}

/* Bias-correction scalars of one dtype: lr / (1 - b1^t), 1 / (1 - b2^t). */
typedef struct adam_scalars {
  evtc_node *lr_bc1[EVTC_DTYPE_COUNT], *inv_bc2[EVTC_DTYPE_COUNT];
} adam_scalars;

static evtc_node *as_dtype(evtc_graph *g, evtc_node *x, evtc_dtype dt) {
  if (!x || x->type.dtype == dt) return x;
  evtc_attr at = evtc_attr_dtype("dtype", dt);
  return evtc_node_add(g, EVTC_OP_CAST, &x, 1, &at, 1, NULL);
}

static void adamw(const optim_ctx *c, const evtc_optim_config *o, evtc_node *p, evtc_node *grad, const adam_scalars *s) {
  evtc_graph *g = c->g;
  evtc_dtype dt = p->type.dtype;
  evtc_node *p1 = p;
  if (o->weight_decay != 0) p1 = bin(g, EVTC_OP_MUL, p, K(c, dt, 1.0 - o->lr * o->weight_decay));
  evtc_node *m = zero_state(g, &p->type, suffixed(g, p, ".m"));
  evtc_node *v = zero_state(g, &p->type, suffixed(g, p, ".v"));
  evtc_node *m1 = lerp(c, m, o->beta1, grad, 1.0 - o->beta1, suffixed(g, p, ".m.next"));
  evtc_node *v1 = lerp(c, v, o->beta2, bin(g, EVTC_OP_MUL, grad, grad), 1.0 - o->beta2, suffixed(g, p, ".v.next"));
  evtc_node *denom = bin(g, EVTC_OP_ADD, evtc_unary(g, EVTC_OP_SQRT, bin(g, EVTC_OP_MUL, v1, s->inv_bc2[dt])),
                         K(c, dt, o->eps));
  evtc_node *in[2] = {p1, bin(g, EVTC_OP_DIV, bin(g, EVTC_OP_MUL, m1, s->lr_bc1[dt]), denom)};
  evtc_node *next = evtc_node_add(g, EVTC_OP_SUB, in, 2, NULL, 0, suffixed(g, p, ".next"));
  if (g->diag.status != EVTC_OK) return;
  evtc_graph_add_output(g, next, p);
  evtc_graph_add_output(g, m1, m);
  evtc_graph_add_output(g, v1, v);
}

bool evtc_optim_build(evtc_graph *g, int32_t from, const evtc_optim_config *opt, evtc_node *const *params,
                      evtc_node *const *grads, int n) {
  optim_ctx c = {g, from};
  if (opt->kind == EVTC_OPTIM_SGD) {
    for (int k = 0; k < n; k++) sgd(&c, opt, params[k], grads[k]);
    return g->diag.status == EVTC_OK;
  }
  EVTC_ASSERT(opt->kind == EVTC_OPTIM_ADAMW);
  /* The step counter is f64 when any param is (exact for f64 tests), else
   * f32 (exact up to 2^24 steps). */
  evtc_dtype sdt = EVTC_F32;
  for (int k = 0; k < n; k++)
    if (params[k]->type.dtype == EVTC_F64) sdt = EVTC_F64;
  evtc_node *step = zero_state(g, &(evtc_type){.dtype = sdt}, "adamw.step");
  evtc_node *t = evtc_node_add(g, EVTC_OP_ADD, (evtc_node *[]){step, K(&c, sdt, 1.0)}, 2, NULL, 0,
                               "adamw.step.next");
  evtc_node *one = K(&c, sdt, 1.0);
  evtc_node *bc1 = bin(g, EVTC_OP_SUB, one, bin(g, EVTC_OP_POW, K(&c, sdt, opt->beta1), t));
  evtc_node *bc2 = bin(g, EVTC_OP_SUB, one, bin(g, EVTC_OP_POW, K(&c, sdt, opt->beta2), t));
  evtc_node *lr_bc1 = bin(g, EVTC_OP_DIV, K(&c, sdt, opt->lr), bc1), *inv_bc2 = bin(g, EVTC_OP_DIV, one, bc2);
  adam_scalars s = {{NULL}, {NULL}};
  for (int k = 0; k < n; k++) {
    evtc_dtype dt = params[k]->type.dtype;
    if (!s.lr_bc1[dt]) {
      s.lr_bc1[dt] = as_dtype(g, lr_bc1, dt);
      s.inv_bc2[dt] = as_dtype(g, inv_bc2, dt);
    }
    adamw(&c, opt, params[k], grads[k], &s);
  }
  if (g->diag.status != EVTC_OK) return false;
  evtc_graph_add_output(g, t, step);
  return true;
}
