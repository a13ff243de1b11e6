/* autodiff.c -- the reverse-mode driver and the helpers its rules share.
 *
 * The joint graph starts as a clone of the forward graph (node ids agree).
 * A node is active when it depends on a wrt node through differentiable ops
 * and the loss depends on it.  Walking the active nodes from the loss down
 * (reverse topological order), each node's gradient is complete when it is
 * reached -- all its consumers come later -- and the node's rule turns it
 * into contributions for its inputs; several contributions to one node are
 * summed with add.  The complete gradient of a node x is named "grad.<x>"
 * where that costs nothing (its last node was built for it alone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/rules.h"

/* ---- helpers shared by the rules ---- */

static bool same_shape(const evtc_type *a, const evtc_type *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

evtc_node *evtc_vjp_reduce(evtc_graph *g, evtc_op op, evtc_node *x, int n_axes, const int64_t *axes,
                           bool keepdims) {
  evtc_attr at[2] = {evtc_attr_ints("axes", n_axes, axes), evtc_attr_int("keepdims", keepdims)};
  return evtc_node_add(g, op, &x, 1, at, 2, NULL);
}

evtc_node *evtc_vjp_reshape(evtc_graph *g, evtc_node *x, int rank, const int64_t *shape) {
  evtc_attr at = evtc_attr_ints("shape", rank, shape);
  return evtc_node_add(g, EVTC_OP_RESHAPE, &x, 1, &at, 1, NULL);
}

evtc_node *evtc_sum_to_shape(evtc_graph *g, evtc_node *x, const evtc_type *to, const char *name) {
  if (!x || same_shape(&x->type, to)) return x;
  int lead = x->type.rank - to->rank;
  EVTC_ASSERT(lead >= 0);
  int64_t axes[EVTC_MAX_RANK];
  int n = 0;
  for (int d = 0; d < x->type.rank; d++)
    if (d < lead || (to->shape[d - lead] == 1 && x->type.shape[d] != 1)) axes[n++] = d;
  int rest = x->type.rank - n;         /* rank after reduce_sum without keepdims */
  bool reshape = rest != to->rank;
  evtc_node *r = x;
  if (n) {
    evtc_attr at[1] = {evtc_attr_ints("axes", n, axes)};
    r = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &x, 1, at, 1, reshape ? NULL : name);
  }
  if (!r || !reshape) return r;
  evtc_attr at = evtc_attr_ints("shape", to->rank, to->shape);
  return evtc_node_add(g, EVTC_OP_RESHAPE, &r, 1, &at, 1, name);
}

void evtc_vjp_set(evtc_vjp *v, int i, evtc_op op, evtc_node *const *ins, int n_ins, const evtc_attr *attrs,
                  int n_attrs) {
  v->dx[i] = evtc_node_add(v->g, op, ins, n_ins, attrs, n_attrs, v->name[i]);
}

void evtc_vjp_set_bcast(evtc_vjp *v, int i, evtc_op op, evtc_node *const *ins, int n_ins) {
  const evtc_type *t = &v->n->inputs[i]->type;
  bool direct = same_shape(t, &v->n->type);
  evtc_node *r = evtc_node_add(v->g, op, ins, n_ins, NULL, 0, direct ? v->name[i] : NULL);
  v->dx[i] = direct ? r : evtc_sum_to_shape(v->g, r, t, v->name[i]);
}

void evtc_vjp_pass(evtc_vjp *v, int i, evtc_node *x) {
  v->dx[i] = evtc_sum_to_shape(v->g, x, &v->n->inputs[i]->type, v->name[i]);
}

evtc_node *evtc_vjp_scalar(evtc_graph *g, int32_t from, evtc_dtype dt, double value) {
  for (int32_t i = g->n_nodes - 1; i >= from; i--) {
    const evtc_node *c = g->nodes[i];
    if (c->op == EVTC_OP_CONST && c->type.rank == 0 && c->type.dtype == dt && evtc_node_attr(c, "data")->n == 0 &&
        evtc_node_float(c, "value") == value)
      return g->nodes[i];
  }
  return evtc_scalar(g, dt, value);
}

evtc_node *evtc_vjp_const(evtc_vjp *v, double value) { return evtc_vjp_scalar(v->g, v->first, v->dy->type.dtype, value); }

/* ---- the driver ---- */

evtc_optim_config evtc_optim_default(evtc_optimizer kind) {
  evtc_optim_config c = {.kind = kind};
  if (kind == EVTC_OPTIM_SGD) {
    c.lr = 0.1;
    c.momentum = 0.9;
  } else if (kind == EVTC_OPTIM_ADAMW) {
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = 0.01;
  }
  return c;
}

/* Working arrays of one differentiation, indexed by node id of the joint graph. */
typedef struct ad_state {
  evtc_graph *g;
  int32_t n;                /* forward node count */
  bool *is_wrt, *active;
  int32_t *pending;         /* contributions still to come, per node */
  evtc_node **grad;         /* gradient so far */
  int32_t first;            /* id of the first node autodiff built after the seed */
} ad_state;

static bool differentiable(const evtc_node *x) {
  return evtc_dtype_is_float(x->type.dtype) && evtc_vjp_rules[x->op] != NULL;
}

/* Marks nodes that depend on a wrt node and that the loss depends on. */
static void mark_active(ad_state *s) {
  bool *from = calloc((size_t)s->n, sizeof *from), *to = calloc((size_t)s->n, sizeof *to);
  for (int32_t i = 0; i < s->n; i++) {
    evtc_node *x = s->g->nodes[i];
    from[i] = s->is_wrt[i];
    if (differentiable(x))
      for (int k = 0; k < x->n_inputs && !from[i]; k++) from[i] = from[x->inputs[k]->id];
  }
  to[s->g->loss->id] = true;
  for (int32_t i = s->n - 1; i >= 0; i--) {
    evtc_node *x = s->g->nodes[i];
    if (to[i] && differentiable(x))
      for (int k = 0; k < x->n_inputs; k++) to[x->inputs[k]->id] = true;
  }
  for (int32_t i = 0; i < s->n; i++) s->active[i] = from[i] && to[i];
  for (int32_t i = 0; i < s->n; i++) {
    evtc_node *x = s->g->nodes[i];
    if (!s->active[i] || evtc_op_is_leaf(x->op)) continue;
    for (int k = 0; k < x->n_inputs; k++)
      if (s->active[x->inputs[k]->id] && evtc_dtype_is_float(x->inputs[k]->type.dtype))
        s->pending[x->inputs[k]->id]++;
  }
  free(from);
  free(to);
}

static const char *grad_name(evtc_graph *g, const evtc_node *x) {
  char buf[300];
  snprintf(buf, sizeof buf, "grad.%.280s", x->name);
  return evtc_arena_strdup(g->arena, buf);
}

/* Adds contribution c to x's gradient; the last one names the sum. */
static void accumulate(ad_state *s, evtc_node *x, evtc_node *c) {
  int32_t id = x->id;
  s->pending[id]--;
  if (!c) return;
  EVTC_ASSERT(same_shape(&c->type, &x->type) && c->type.dtype == x->type.dtype);
  if (!s->grad[id]) {
    s->grad[id] = c;
    return;
  }
  evtc_node *in[2] = {s->grad[id], c};
  s->grad[id] = evtc_node_add(s->g, EVTC_OP_ADD, in, 2, NULL, 0, s->pending[id] == 0 ? grad_name(s->g, x) : NULL);
}

/* Runs the rule of every active node from the loss down. */
static bool backward(ad_state *s) {
  evtc_graph *g = s->g;
  int cap = 0;
  bool *need = NULL;
  const char **names = NULL;
  evtc_node **dx = NULL;
  for (int32_t i = g->loss->id; i >= 0 && g->diag.status == EVTC_OK; i--) {
    evtc_node *x = g->nodes[i];
    if (!s->active[i] || evtc_op_is_leaf(x->op) || !s->grad[i]) continue;
    if (x->n_inputs > cap) {
      cap = x->n_inputs;
      need = realloc(need, sizeof *need * (size_t)cap);
      names = realloc(names, sizeof *names * (size_t)cap);
      dx = realloc(dx, sizeof *dx * (size_t)cap);
    }
    for (int k = 0; k < x->n_inputs; k++) {
      evtc_node *in = x->inputs[k];
      need[k] = s->active[in->id] && evtc_dtype_is_float(in->type.dtype);
      names[k] = need[k] && s->pending[in->id] == 1 && !s->grad[in->id] ? grad_name(g, in) : NULL;
      dx[k] = NULL;
    }
    evtc_vjp v = {.g = g, .n = x, .dy = s->grad[i], .need = need, .name = names, .dx = dx, .first = s->first};
    evtc_vjp_rules[x->op](&v);
    if (g->diag.status != EVTC_OK) break;
    for (int k = 0; k < x->n_inputs; k++)
      if (need[k]) accumulate(s, x->inputs[k], dx[k]);
  }
  free(need);
  free(names);
  free(dx);
  return g->diag.status == EVTC_OK;
}

/* The final gradient of wrt node w, named "grad.<w>": a zero CONST when no
 * gradient reached w, a named copy (reshape to its own shape) when the
 * gradient is a node that also serves another purpose. */
static evtc_node *final_grad(ad_state *s, evtc_node *w) {
  const char *name = grad_name(s->g, w);
  evtc_node *gw = s->grad[w->id];
  if (!gw) return evtc_leaf_add(s->g, EVTC_OP_CONST, w->type, NULL, 0, name);
  if (strcmp(gw->name, name) == 0) return gw;
  evtc_attr at = evtc_attr_ints("shape", w->type.rank, w->type.shape);
  return evtc_node_add(s->g, EVTC_OP_RESHAPE, &gw, 1, &at, 1, name);
}

/* Resolves the wrt list into nodes of g; false with d set on a bad name. */
static int resolve_wrt(evtc_graph *g, const char *const *wrt, int n_wrt, bool params_only, evtc_node **out,
                       evtc_diag *d) {
  int n = 0;
  if (!wrt) {
    for (int32_t i = 0; i < g->n_nodes; i++)
      if (g->nodes[i]->op == EVTC_OP_PARAM && evtc_dtype_is_float(g->nodes[i]->type.dtype)) out[n++] = g->nodes[i];
    if (n == 0) evtc_diag_set(d, EVTC_ERR_INVALID, "graph '%s' has no float param to differentiate", g->name);
    return n;
  }
  for (int k = 0; k < n_wrt; k++) {
    evtc_node *x = evtc_graph_find(g, wrt[k]);
    if (!x) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "no node %%%s to differentiate with respect to", wrt[k]);
      return -1;
    }
    if ((x->op != EVTC_OP_PARAM && (params_only || x->op != EVTC_OP_INPUT)) ||
        !evtc_dtype_is_float(x->type.dtype)) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "node %%%s (%s, %s): can only differentiate with respect to a float %s",
                    x->name, evtc_op_get(x->op)->name, evtc_dtype_name(x->type.dtype),
                    params_only ? "param (an optimizer updates params)" : "param or input");
      return -1;
    }
    for (int j = 0; j < n; j++)
      if (out[j] == x) {
        evtc_diag_set(d, EVTC_ERR_INVALID, "node %%%s is listed twice to differentiate with respect to", x->name);
        return -1;
      }
    out[n++] = x;
  }
  return n;
}

/* The output that already updates p, or NULL. */
static const evtc_node *update_of(const evtc_graph *g, const evtc_node *p) {
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].updates == p) return g->outputs[i].node;
  return NULL;
}

static bool check_config(const evtc_optim_config *o, evtc_diag *d) {
  if (o->kind == EVTC_OPTIM_NONE) return true;
  bool ok = o->lr >= 0 && o->lr < 1e300 && o->weight_decay >= 0 && o->weight_decay < 1e300;
  if (o->kind == EVTC_OPTIM_SGD) ok = ok && o->momentum >= 0 && o->momentum < 1e300;
  else ok = ok && o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0;
  if (!ok)
    evtc_diag_set(d, EVTC_ERR_INVALID,
                  "optimizer settings out of range (lr %g, momentum %g, weight decay %g, betas %g %g, eps %g)",
                  o->lr, o->momentum, o->weight_decay, o->beta1, o->beta2, o->eps);
  return ok;
}

static bool check_loss(const evtc_graph *fwd, evtc_diag *d) {
  if (!fwd->loss) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "graph '%s' has no loss to differentiate (add a `loss %%name` line)",
                  fwd->name);
    return false;
  }
  if (fwd->loss->type.rank != 0 || !evtc_dtype_is_float(fwd->loss->type.dtype)) {
    char buf[96];
    evtc_diag_set(d, EVTC_ERR_INVALID, "loss %%%s must be a float scalar, not %s", fwd->loss->name,
                  evtc_type_str(&fwd->loss->type, buf, sizeof buf));
    return false;
  }
  return true;
}

evtc_graph *evtc_autodiff(const evtc_graph *fwd, const char *const *wrt, int n_wrt, const evtc_optim_config *opt,
                          evtc_diag *d) {
  evtc_optim_config none = {.kind = EVTC_OPTIM_NONE};
  if (!opt) opt = &none;
  if (!check_loss(fwd, d) || !check_config(opt, d)) return NULL;
  evtc_graph *g = evtc_graph_clone(fwd);
  ad_state s = {.g = g, .n = g->n_nodes};
  evtc_node **ws = calloc((size_t)g->n_nodes + 1, sizeof *ws), **grads = NULL;
  int nw = resolve_wrt(g, wrt, n_wrt, opt->kind != EVTC_OPTIM_NONE, ws, d);
  for (int k = 0; k < nw; k++)
    if (evtc_graph_find(g, grad_name(g, ws[k]))) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "node name %%%s is taken; autodiff gives that name to the gradient of %%%s",
                    grad_name(g, ws[k]), ws[k]->name);
      nw = -1;
    }
  for (int k = 0; k < nw && opt->kind != EVTC_OPTIM_NONE; k++) {
    const evtc_node *up = update_of(g, ws[k]);
    if (up) {
      evtc_diag_set(d, EVTC_ERR_INVALID,
                    "%%%s already has an update output (%%%s); an optimizer is added to a forward graph only",
                    ws[k]->name, up->name);
      nw = -1;
    }
  }
  if (nw <= 0) goto fail;
  s.is_wrt = calloc((size_t)s.n, sizeof *s.is_wrt);
  s.active = calloc((size_t)s.n, sizeof *s.active);
  s.pending = calloc((size_t)s.n, sizeof *s.pending);
  s.grad = calloc((size_t)s.n, sizeof *s.grad);
  for (int k = 0; k < nw; k++) s.is_wrt[ws[k]->id] = true;
  mark_active(&s);
  if (s.active[g->loss->id]) {
    evtc_attr one = evtc_attr_float("value", 1.0);
    s.grad[g->loss->id] = evtc_leaf_add(g, EVTC_OP_CONST, g->loss->type, &one, 1, grad_name(g, g->loss));
  }
  s.first = g->n_nodes;
  if (!backward(&s)) goto fail_diag;
  grads = calloc((size_t)nw, sizeof *grads);
  for (int k = 0; k < nw; k++) grads[k] = final_grad(&s, ws[k]);
  if (g->diag.status != EVTC_OK) goto fail_diag;
  if (opt->kind == EVTC_OPTIM_NONE) {
    for (int k = 0; k < nw; k++) evtc_graph_add_output(g, grads[k], NULL);
  } else {
    evtc_optim_build(g, s.first, opt, ws, grads, nw);
  }
  if (g->diag.status != EVTC_OK || evtc_graph_verify(g) != EVTC_OK) goto fail_diag;
  goto done;
fail_diag:
  evtc_diag_set(d, g->diag.status, "autodiff: %s", g->diag.msg);
fail:
  evtc_graph_free(g);
  g = NULL;
done:
  free(ws);
  free(grads);
  free(s.is_wrt);
  free(s.active);
  free(s.pending);
  free(s.grad);
  return g;
}
