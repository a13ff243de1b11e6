/* kernel_build.c -- a list of graph nodes -> one kernel (kernel.h).
 *
 * The builder chooses the kernel's domain D and its row/column split, then
 * walks the nodes in order, giving each value an embedding (which dim of
 * D each of its dims runs along, -1 for size-1 dims) and a visitor node.
 * Inputs from outside become loads through a view whose strides are laid
 * over D; layout ops (reshape, permute, expand, slice) applied to outside
 * values fold into those views.  Composite row ops -- softmax,
 * log_softmax, layernorm, cross_entropy, mse, global_avgpool -- expand
 * into reductions and computes here, so every backend sees only EVT node
 * kinds.  Values used after the kernel get aux stores.
 *
 * Everything a group cannot express is refused with EVTC_ERR_UNSUPPORTED
 * naming the node: the partitioner and the greedy plan ask before they grow
 * a kernel.  A node alone that has no template -- or a lone reduction over
 * axes the row/column split cannot take (the middle axes of NCHW) --
 * becomes an OPAQUE kernel, which a backend runs whole or refuses.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel_internal.h"

evtc_status evtc_kb_fail(evtc_kb *b, const evtc_node *n, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  evtc_diag_set(b->d, EVTC_ERR_UNSUPPORTED, "node %%%s (%s): %s", n->name, evtc_op_get(n->op)->name, msg);
  return EVTC_ERR_UNSUPPORTED;
}

int evtc_kb_arg(evtc_kb *b, const evtc_node *n, bool output) {
  evtc_kernel *k = b->k;
  for (int i = 0; i < k->n_args; i++)
    if (k->args[i].node == n && k->args[i].output == output) return i;
  if (k->n_args == k->cap_args) {
    k->cap_args = k->cap_args ? 2 * k->cap_args : 8;
    k->args = realloc(k->args, sizeof *k->args * (size_t)k->cap_args);
  }
  k->args[k->n_args] = (evtc_karg){.node = n, .output = output};
  return k->n_args++;
}

int evtc_kb_add(evtc_kb *b, evtc_vnode v) {
  evtc_kernel *k = b->k;
  int phase = 0;
  for (int i = 0; i < v.n_args; i++) {
    const evtc_vnode *a = &k->v[v.args[i]];
    if (a->phase > phase) phase = a->phase;
  }
  v.phase = v.kind == EVTC_V_REDUCE ? phase + 1 : phase;
  /* identical loads, immediates, steps and computes are shared (CSE inside the kernel) */
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *o = &k->v[i];
    if (o->kind != v.kind || v.kind == EVTC_V_STORE || v.kind == EVTC_V_REDUCE || o->dtype != v.dtype) continue;
    if (v.kind == EVTC_V_LOAD && o->arg == v.arg && o->offset == v.offset &&
        memcmp(o->strides, v.strides, sizeof v.strides) == 0)
      return i;
    if (v.kind == EVTC_V_IMM && o->value == v.value) return i;
    if (v.kind == EVTC_V_STEP && o->dim == v.dim && o->depth == v.depth && o->below == v.below && o->value == v.value)
      return i;
  }
  if (k->n_v == k->cap_v) {
    k->cap_v = k->cap_v ? 2 * k->cap_v : 32;
    k->v = realloc(k->v, sizeof *k->v * (size_t)k->cap_v);
  }
  k->v[k->n_v] = v;
  return k->n_v++;
}

/* Class of a set of covered domain dims (bit d set: the value varies along d). */
evtc_vclass evtc_kb_class(const evtc_kb *b, unsigned covered) {
  const evtc_kernel *k = b->k;
  unsigned rowdims = 0, coldims = 0;
  for (int d = 0; d < k->rank; d++)
    if (k->dom[d] > 1) {
      if (d < k->split) coldims |= 1u << d;
      else rowdims |= 1u << d;
    }
  covered &= rowdims | coldims;
  if (!covered) return EVTC_VC_SCALAR;
  if (!(covered & rowdims)) return EVTC_VC_COL;
  if (!(covered & coldims)) return EVTC_VC_ROW;
  return EVTC_VC_FULL;
}

evtc_vclass evtc_kb_join(evtc_vclass a, evtc_vclass b) {
  if (a == b || b == EVTC_VC_SCALAR) return a;
  if (a == EVTC_VC_SCALAR) return b;
  return EVTC_VC_FULL;
}

/* Embedding of a shape by right alignment with D (false if a non-1 dim differs). */
static bool emb_right(const evtc_kb *b, const evtc_type *t, int *emb) {
  const evtc_kernel *k = b->k;
  if (t->rank > k->rank) {
    for (int i = 0; i < t->rank - k->rank; i++)
      if (t->shape[i] != 1) return false;
  }
  for (int i = 0; i < t->rank; i++) {
    int d = i + k->rank - t->rank;
    emb[i] = -1;
    if (t->shape[i] == 1) continue;
    if (d < 0 || k->dom[d] != t->shape[i]) return false;
    emb[i] = d;
  }
  return true;
}

/* Embedding by left alignment (a column vector written without keepdims). */
static bool emb_left(const evtc_kb *b, const evtc_type *t, int *emb) {
  const evtc_kernel *k = b->k;
  for (int i = 0; i < t->rank; i++) {
    emb[i] = -1;
    if (t->shape[i] == 1) continue;
    if (i >= k->rank || k->dom[i] != t->shape[i]) return false;
    emb[i] = i;
  }
  return true;
}

bool evtc_kb_emb_of_shape(const evtc_kb *b, const evtc_type *t, int *emb) {
  return emb_right(b, t, emb) || emb_left(b, t, emb);
}

/* A view load of outside node u whose dims run along the domain dims
 * `emb`; views of layout nodes compose.  Returns the vnode index. */
static int load_outside(evtc_kb *b, const evtc_node *u, const int *emb) {
  const evtc_kbval *uv = &b->val[u->id];
  evtc_vnode v = {.kind = EVTC_V_LOAD, .dtype = u->type.dtype, .node = u};
  int64_t ustr[EVTC_MAX_RANK];
  if (uv->is_view) {
    v.arg = uv->view_arg;
    v.offset = uv->view_off;
    memcpy(ustr, uv->view_strides, sizeof ustr);
  } else {
    v.arg = evtc_kb_arg(b, u, false);
    int64_t s = 1;
    for (int i = u->type.rank - 1; i >= 0; i--) {
      ustr[i] = s;
      s *= u->type.shape[i];
    }
  }
  unsigned covered = 0;
  for (int i = 0; i < u->type.rank; i++)
    if (u->type.shape[i] > 1 && emb[i] >= 0) {
      v.strides[emb[i]] += ustr[i];
      covered |= 1u << emb[i];
    }
  v.cls = evtc_kb_class(b, covered);
  return evtc_kb_add(b, v);
}

/* Constant u as a STEP vnode (kernel.h) when its data are two values, the first `depth` elements one and the rest
 * the other, along its one axis longer than 1, which runs along domain dim want[axis]: gemm-pad's mask, computed
 * from the column instead of loaded.  Loaded, that 100 KB vector is read again for each of GPT-2's 8192 logit rows:
 * its cross-entropy took 695 us on the H200, 581 with the step, 507 without the mask (2026-12-01).  -1 when u is no
 * such constant. */
static int step_operand(evtc_kb *b, const evtc_node *u, const int *want) {
  const evtc_attr *data = u->op == EVTC_OP_CONST ? evtc_node_attr(u, "data") : NULL;
  if (!data || data->n < 2 || data->n != evtc_type_numel(&u->type)) return -1;
  int axis = -1;
  for (int i = 0; i < u->type.rank; i++)
    if (u->type.shape[i] > 1) {
      if (axis >= 0 || want[i] < 0 || b->k->dom[want[i]] != u->type.shape[i]) return -1;
      axis = i;
    }
  const double *x = data->v.floats;
  int64_t depth = 1;
  while (depth < data->n && x[depth] == x[0]) depth++;
  if (depth == data->n) return -1;
  for (int64_t j = depth + 1; j < data->n; j++)
    if (x[j] != x[depth]) return -1;
  return evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_STEP, .cls = evtc_kb_class(b, 1u << want[axis]),
                                     .dtype = u->type.dtype, .dim = want[axis], .depth = depth, .below = x[0],
                                     .value = x[depth], .node = u});
}

int evtc_kb_operand(evtc_kb *b, const evtc_node *n, const evtc_node *u, const int *want) {
  const evtc_kbval *uv = &b->val[u->id];
  const int step = step_operand(b, u, want);
  if (step >= 0) return step;
  if (u->op == EVTC_OP_CONST && evtc_type_numel(&u->type) == 1) {
    const evtc_attr *data = evtc_node_attr(u, "data");
    return evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_IMM, .cls = EVTC_VC_SCALAR, .dtype = u->type.dtype,
                                       .value = data->n ? data->v.floats[0] : evtc_node_float(u, "value"), .node = u});
  }
  if (!uv->in_kernel || uv->is_view) {
    for (int i = 0; i < u->type.rank; i++)
      if (u->type.shape[i] > 1 && want[i] < 0) {
        evtc_kb_fail(b, n, "operand %%%s does not fit the kernel's domain", u->name);
        return -1;
      }
    return load_outside(b, u, want);
  }
  for (int i = 0; i < u->type.rank; i++)
    if (u->type.shape[i] > 1 && want[i] != uv->emb[i]) {
      evtc_kb_fail(b, n, "in-kernel operand %%%s runs along other axes than this node needs", u->name);
      return -1;
    }
  return uv->vn;
}

/* Operand j of elementwise node n, NumPy-broadcast against n's output. */
int evtc_kb_bcast_operand(evtc_kb *b, const evtc_node *n, int j) {
  const evtc_node *u = n->inputs[j];
  const int *oemb = b->val[n->id].emb;
  int want[EVTC_MAX_RANK];
  for (int i = 0; i < u->type.rank; i++) want[i] = u->type.shape[i] > 1 ? oemb[i + n->type.rank - u->type.rank] : -1;
  return evtc_kb_operand(b, n, u, want);
}

/* The embedding of input u of n read as a whole (reductions, composites). */
bool evtc_kb_input_emb(evtc_kb *b, const evtc_node *n, const evtc_node *u, int *emb) {
  const evtc_kbval *uv = &b->val[u->id];
  if (uv->in_kernel && !uv->is_view) {
    memcpy(emb, uv->emb, sizeof uv->emb);
    return true;
  }
  if (evtc_kb_emb_of_shape(b, &u->type, emb)) return true;
  evtc_kb_fail(b, n, "input %%%s does not fit the kernel's domain", u->name);
  return false;
}

/* True when node n is read outside the kernel (or is an output or the loss). */
static bool used_outside(const evtc_kb *b, const evtc_node *n) {
  const evtc_graph *g = b->g;
  if (evtc_graph_is_output(g, n)) return true;
  for (int32_t i = n->id + 1; i < g->n_nodes; i++) {
    const evtc_node *c = g->nodes[i];
    if (b->val[i].in_kernel) continue;
    for (int j = 0; j < c->n_inputs; j++)
      if (c->inputs[j] == n) return true;
  }
  return false;
}

/* The domain: the main loop's output, else the largest value the nodes touch.  A layout node read only
 * inside the kernel is a view that its readers iterate in their own shape, so it does not vote: in
 * slice -> reshape -> permute (a head split) the domain is the stored permute's shape, which the copy
 * walks, not the slice's, which the permuted store could not be embedded in. */
static void choose_domain(evtc_kb *b, const int32_t *nodes, int n_nodes) {
  evtc_kernel *k = b->k;
  const evtc_type *best = NULL;
  for (int i = 0; i < n_nodes; i++) {
    const evtc_node *n = b->g->nodes[nodes[i]];
    if (n->op == EVTC_OP_MATMUL || n->op == EVTC_OP_BATCH_MATMUL || n->op == EVTC_OP_CONV2D) {
      best = &n->type;
      break;
    }
    bool inner_view = (evtc_op_get(n->op)->fusion == EVTC_FUSE_LAYOUT || n->op == EVTC_OP_EXPAND) &&
                      !used_outside(b, n);
    if (!inner_view && (!best || evtc_type_numel(&n->type) > evtc_type_numel(best))) best = &n->type;
    bool reads_whole = n->op != EVTC_OP_ONE_HOT && evtc_op_get(n->op)->fusion != EVTC_FUSE_LAYOUT &&
                       n->op != EVTC_OP_EXPAND;      /* views and one-hot indices are not iterated */
    for (int j = 0; j < n->n_inputs && reads_whole; j++)
      if (evtc_type_numel(&n->inputs[j]->type) > evtc_type_numel(best))
        best = &n->inputs[j]->type;
  }
  if (!best) best = &b->g->nodes[nodes[n_nodes - 1]]->type;
  k->rank = best->rank;
  memcpy(k->dom, best->shape, sizeof k->dom);
}

/* The split demanded by node n (reduction axes), or -1 for none; -2 when
 * its axes are neither a prefix nor a suffix of the domain. */
static int split_of(const evtc_kb *b, const evtc_node *n) {
  const evtc_kernel *k = b->k;
  unsigned axes = 0;
  const evtc_type *t = n->n_inputs ? &n->inputs[0]->type : &n->type;
  int shift = k->rank - t->rank;
  if (shift < 0) return -1;
  int64_t dn = 1;
  for (int d = 0; d < k->rank; d++) dn *= k->dom[d];
  if (evtc_type_numel(t) != dn) return -1;        /* not a reduction of the full domain */
  switch (n->op) {
    case EVTC_OP_REDUCE_SUM: case EVTC_OP_REDUCE_MEAN: case EVTC_OP_REDUCE_MAX: case EVTC_OP_REDUCE_MIN: {
      const evtc_attr *a = evtc_node_attr(n, "axes");
      if (a->n == 0) return -1;
      for (int i = 0; i < a->n; i++) axes |= 1u << (evtc_axis_norm(a->v.ints[i], t->rank) + shift);
      break;
    }
    case EVTC_OP_SOFTMAX: case EVTC_OP_LOG_SOFTMAX:
      axes = 1u << (evtc_axis_norm(evtc_node_int(n, "axis"), t->rank) + shift);
      break;
    case EVTC_OP_LAYERNORM:
      for (int d = evtc_axis_norm(evtc_node_int(n, "axis"), t->rank); d < t->rank; d++) axes |= 1u << (d + shift);
      break;
    case EVTC_OP_CROSS_ENTROPY: axes = 1u << (1 + shift); break;
    case EVTC_OP_GLOBAL_AVGPOOL: axes = 3u << (2 + shift); break;
    default: return -1;
  }
  int lo = k->rank, hi = -1;
  for (int d = 0; d < k->rank; d++)
    if ((axes >> d) & 1) {
      if (d < lo) lo = d;
      hi = d;
    }
  bool suffix = true, prefix = true;
  for (int d = 0; d < k->rank; d++) {
    bool in = (axes >> d) & 1 || k->dom[d] == 1;
    if (d >= lo && !in) suffix = false;
    if (d <= hi && !in) prefix = false;
  }
  if (suffix && prefix) return -1;
  if (suffix) return lo;
  if (prefix) return hi + 1;
  return -2;
}

static evtc_status choose_split(evtc_kb *b, const int32_t *nodes, int n_nodes) {
  evtc_kernel *k = b->k;
  int split = -1;
  for (int i = 0; i < n_nodes; i++) {
    const evtc_node *n = b->g->nodes[nodes[i]];
    if (n->op == EVTC_OP_CONV2D) split = 2;        /* rows (image, channel), columns (pixel) */
    int s = split_of(b, n);
    if (s == -2) return evtc_kb_fail(b, n, "reduces axes that are neither leading nor trailing");
    if (s >= 0 && split >= 0 && s != split) return evtc_kb_fail(b, n, "reduces other axes than the rest of the kernel");
    if (s >= 0) split = s;
  }
  k->split = split >= 0 ? split : (k->rank > 0 ? k->rank - 1 : 0);
  k->rows = k->cols = 1;
  for (int d = 0; d < k->rank; d++) {
    if (d < k->split) k->rows *= k->dom[d];
    else k->cols *= k->dom[d];
  }
  return EVTC_OK;
}

/* Whether op has a template in the kernel IR (others make OPAQUE kernels). */
static bool op_templated(evtc_op op) {
  const evtc_op_info *info = evtc_op_get(op);
  if (info->fusion == EVTC_FUSE_ELEMENTWISE) return true;
  switch (op) {
    case EVTC_OP_REDUCE_SUM: case EVTC_OP_REDUCE_MEAN: case EVTC_OP_REDUCE_MAX: case EVTC_OP_REDUCE_MIN:
    case EVTC_OP_RESHAPE: case EVTC_OP_PERMUTE: case EVTC_OP_EXPAND: case EVTC_OP_SLICE:
    case EVTC_OP_MATMUL: case EVTC_OP_BATCH_MATMUL: case EVTC_OP_CONV2D:
    case EVTC_OP_SOFTMAX: case EVTC_OP_LOG_SOFTMAX: case EVTC_OP_LAYERNORM: case EVTC_OP_CROSS_ENTROPY:
    case EVTC_OP_MSE: case EVTC_OP_GLOBAL_AVGPOOL:
      return true;
    default: return false;
  }
}

/* The aux store of node n's value (its own row-major order). */
static evtc_status add_store(evtc_kb *b, const evtc_node *n) {
  evtc_kernel *k = b->k;
  evtc_kbval *nv = &b->val[n->id];
  if (nv->is_view) {
    if (!evtc_kb_emb_of_shape(b, &n->type, nv->emb)) return evtc_kb_fail(b, n, "does not fit the kernel's domain");
    nv->vn = load_outside(b, n, nv->emb);
  }
  const evtc_vnode *v = &k->v[nv->vn];
  int64_t numel = evtc_type_numel(&n->type);
  int64_t want = v->cls == EVTC_VC_FULL ? k->rows * k->cols : v->cls == EVTC_VC_COL ? k->rows
               : v->cls == EVTC_VC_ROW ? k->cols : 1;
  int last = -1;
  for (int i = 0; i < n->type.rank; i++)
    if (nv->emb[i] >= 0) {
      if (nv->emb[i] <= last) return evtc_kb_fail(b, n, "its axes run in another order than the kernel's");
      last = nv->emb[i];
    }
  if (numel != want) return evtc_kb_fail(b, n, "its value does not cover the kernel's domain");
  evtc_vnode s = {.kind = EVTC_V_STORE, .cls = v->cls, .dtype = n->type.dtype, .n_args = 1, .args = {nv->vn},
                  .arg = evtc_kb_arg(b, n, true), .node = n};
  evtc_kb_add(b, s);
  return EVTC_OK;
}

static void set_name(evtc_kernel *k, const evtc_graph *g) {
  const evtc_node *first = k->main ? k->main : g->nodes[k->nodes[0]];
  snprintf(k->name, sizeof k->name, "k_%s", evtc_op_get(first->op)->name);
}

/* Turns k (one node, nodes[] set) into an OPAQUE kernel: its inputs, then its output. */
static evtc_kernel *make_opaque(const evtc_graph *g, evtc_kernel *k) {
  const evtc_node *n = g->nodes[k->nodes[0]];
  evtc_kb b = {.g = g, .k = k};
  k->kind = EVTC_ML_OPAQUE;
  k->main = n;
  for (int j = 0; j < n->n_inputs; j++) evtc_kb_arg(&b, n->inputs[j], false);
  evtc_kb_arg(&b, n, true);
  memcpy(k->dom, n->type.shape, sizeof k->dom);
  k->rank = n->type.rank;
  k->n_phases = 1;
  set_name(k, g);
  return k;
}

evtc_kernel *evtc_kernel_build(const evtc_graph *g, const int32_t *nodes, int n_nodes, evtc_diag *d) {
  if (n_nodes <= 0) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "a kernel needs at least one node");
    return NULL;
  }
  evtc_kernel *k = calloc(1, sizeof *k);
  evtc_kb b = {.g = g, .k = k, .d = d, .val = calloc((size_t)g->n_nodes + 1, sizeof(evtc_kbval))};
  k->nodes = memcpy(malloc(sizeof(int32_t) * (size_t)n_nodes), nodes, sizeof(int32_t) * (size_t)n_nodes);
  k->n_nodes = n_nodes;
  /* GEMM blocks: a 384-deep B micro-panel (16 columns: 24 KiB) stays in L1, the 192 x 384 A block in L2 */
  k->sched = (evtc_schedule){.mc = 192, .nc = 512, .kc = 384, .rows_per_task = 16};
  int n_main = 0;
  bool untemplated = false;
  for (int i = 0; i < n_nodes; i++) {
    if (nodes[i] < 0 || nodes[i] >= g->n_nodes || (i > 0 && nodes[i] <= nodes[i - 1])) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "kernel node list is not increasing node ids");
      goto fail;
    }
    const evtc_node *n = g->nodes[nodes[i]];
    if (evtc_op_is_leaf(n->op)) {
      evtc_diag_set(d, EVTC_ERR_INVALID, "node %%%s (%s) is a leaf, not kernel work", n->name,
                    evtc_op_get(n->op)->name);
      goto fail;
    }
    b.val[n->id].in_kernel = true;
    if (evtc_op_get(n->op)->fusion == EVTC_FUSE_MAINLOOP) n_main++;
    if (!op_templated(n->op)) untemplated = true;
  }
  if (untemplated || n_main > 1) {
    const evtc_node *n = g->nodes[nodes[n_nodes > 1 ? 1 : 0]];
    if (n_nodes > 1) {
      evtc_kb_fail(&b, n, n_main > 1 ? "a kernel holds at most one main loop" : "an op without a template runs alone");
      goto fail;
    }
    free(b.val);
    return make_opaque(g, k);
  }
  /* a lone reduction over axes the row/column templates cannot take runs whole */
  const evtc_node *n0 = g->nodes[nodes[0]];
  if (n_nodes == 1 && evtc_op_get(n0->op)->fusion == EVTC_FUSE_REDUCE && n0->op != EVTC_OP_GLOBAL_AVGPOOL) {
    evtc_diag probe = {0};
    b.d = &probe;
    choose_domain(&b, nodes, n_nodes);
    bool fits = choose_split(&b, nodes, n_nodes) == EVTC_OK && evtc_kb_node(&b, n0) == EVTC_OK;
    b.d = d;
    memset(b.val, 0, sizeof(evtc_kbval) * ((size_t)g->n_nodes + 1));
    b.val[n0->id].in_kernel = true;
    k->n_v = k->n_args = 0;
    k->main = NULL;
    if (!fits) {
      free(b.val);
      return make_opaque(g, k);
    }
  }
  choose_domain(&b, nodes, n_nodes);
  if (choose_split(&b, nodes, n_nodes) != EVTC_OK) goto fail;
  for (int i = 0; i < n_nodes; i++)
    if (evtc_kb_node(&b, g->nodes[nodes[i]]) != EVTC_OK) goto fail;
  for (int i = 0; i < n_nodes; i++) {
    const evtc_node *n = g->nodes[nodes[i]];
    if (used_outside(&b, n) && add_store(&b, n) != EVTC_OK) goto fail;
  }
  /* reductions other than COL ones may only be kernel results */
  int max_phase = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    for (int j = 0; j < v->n_args; j++) {
      const evtc_vnode *a = &k->v[v->args[j]];
      if (a->kind == EVTC_V_REDUCE && a->cls != EVTC_VC_COL && v->kind != EVTC_V_STORE) {
        evtc_kb_fail(&b, v->node ? v->node : a->node, "uses a reduction over rows inside the kernel that computes it");
        goto fail;
      }
    }
    int p = v->kind == EVTC_V_REDUCE ? v->phase - 1 : (v->cls == EVTC_VC_FULL ? v->phase : 0);
    if (p > max_phase) max_phase = p;
  }
  k->n_phases = max_phase + 1;
  if (!k->main) k->kind = k->n_phases > 1 ? EVTC_ML_ROWS : EVTC_ML_ELEMENTWISE;
  set_name(k, g);
  free(b.val);
  return k;
fail:
  free(b.val);
  evtc_kernel_free(k);
  return NULL;
}

void evtc_kernel_free(evtc_kernel *k) {
  if (!k) return;
  free(k->v);
  free(k->args);
  free((void *)k->nodes);
  free(k);
}

bool evtc_kernel_visitor_fits(const evtc_kernel *k, char *why, size_t cap) {
  bool gemm = k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (gemm && (v->kind == EVTC_V_REDUCE ||
                 (v->kind == EVTC_V_STORE && evtc_type_numel(&v->node->type) != k->rows * k->cols))) {
      snprintf(why, cap, "a GEMM epilogue with reductions or vector stores");
      return false;
    }
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_ROW && k->rows > 1 && k->v[v->args[0]].kind != EVTC_V_REDUCE) {
      snprintf(why, cap, "a row vector stored by every row");
      return false;
    }
  }
  return true;
}

bool evtc_kernel_flat_fits(const evtc_kernel *k) {
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_REDUCE) return false;
    if (v->kind == EVTC_V_STORE && !(v->cls == EVTC_VC_FULL || v->cls == EVTC_VC_SCALAR ||
                                     (v->cls == EVTC_VC_ROW && k->rows == 1) || (v->cls == EVTC_VC_COL && k->cols == 1)))
      return false;
  }
  return true;
}

const evtc_kernel *evtc_kernel_at_line(const char *src, const evtc_kernel *const *kernels, int n, long line) {
  const evtc_kernel *best = NULL;
  long best_line = 0;
  for (int i = 0; i < n; i++) {
    char marker[96];
    snprintf(marker, sizeof marker, "/* kernel %s:", kernels[i]->name);
    const char *at = strstr(src, marker);
    if (!at) continue;
    long l = 1;
    for (const char *p = src; p < at; p++) l += *p == '\n';
    if (l <= line && l >= best_line) {
      best = kernels[i];
      best_line = l;
    }
  }
  return best;
}

bool evtc_kernel_has_reduce(const evtc_kernel *k, evtc_vclass c) {
  for (int i = 0; i < k->n_v; i++)
    if (k->v[i].kind == EVTC_V_REDUCE && k->v[i].cls == c) return true;
  return false;
}

bool evtc_kernel_dim_is_whole(const evtc_kernel *k, int d) { return k->dom[d] == (d < k->split ? k->rows : k->cols); }

int evtc_kernel_input_arg(const evtc_kernel *k, int j) {
  for (int i = 0; i < k->n_args; i++)
    if (!k->args[i].output && k->args[i].node == k->main->inputs[j]) return i;
  return -1;
}

bool evtc_kernel_lse_of(const evtc_node *att, const evtc_node *lse) {
  return att->op == EVTC_OP_ATTENTION && lse->op == EVTC_OP_ATTENTION_LSE && att->inputs[0] == lse->inputs[0] &&
         att->inputs[1] == lse->inputs[1] && evtc_node_float(att, "scale") == evtc_node_float(lse, "scale") &&
         evtc_node_int(att, "causal") == evtc_node_int(lse, "causal");
}

bool evtc_kernel_dq_of(const evtc_node *kv, const evtc_node *dq) {
  if (kv->op != EVTC_OP_ATTENTION_BACKWARD_KV || dq->op != EVTC_OP_ATTENTION_BACKWARD_Q ||
      evtc_node_float(kv, "scale") != evtc_node_float(dq, "scale") ||
      evtc_node_int(kv, "causal") != evtc_node_int(dq, "causal"))
    return false;
  for (int j = 0; j < 6; j++)
    if (kv->inputs[j] != dq->inputs[j]) return false;
  return true;
}

int evtc_kernel_output_arg(const evtc_kernel *k) {
  for (int i = 0; i < k->n_args; i++)
    if (k->args[i].output) return i;
  return -1;
}
