/* graph.c -- graphs and the node builder.
 *
 * evtc_node_add is the one way nodes come into being (the parser, autodiff
 * and every pass use it): it checks arity, normalises the attributes into
 * the op's spec order with defaults filled in and list data copied into the
 * arena, gives the node a unique name, and infers its type.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ---- tensor types ---- */

evtc_type evtc_type_make(evtc_dtype dt, int rank, const int64_t *shape) {
  EVTC_ASSERT(rank >= 0 && rank <= EVTC_MAX_RANK);
  evtc_type t = {.dtype = dt, .rank = rank};
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    if (__builtin_mul_overflow(stride, shape[i], &stride)) stride = INT64_MAX; /* rejected by inference */
  }
  return t;
}

int64_t evtc_type_numel(const evtc_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    if (__builtin_mul_overflow(n, t->shape[i], &n)) return INT64_MAX;  /* saturates: callers reject it */
  return n;
}

bool evtc_type_is_contiguous(const evtc_type *t) {
  int64_t stride = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != stride) return false;
    if (__builtin_mul_overflow(stride, t->shape[i], &stride)) stride = INT64_MAX;   /* saturates as evtc_type_make */
  }
  return true;
}

bool evtc_type_equal(const evtc_type *a, const evtc_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i]) return false;
  return true;
}

static size_t append_dims(char *buf, size_t cap, size_t at, const int64_t *d, int n) {
  at += (size_t)snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0, "[");
  for (int i = 0; i < n; i++)
    at += (size_t)snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0, i ? ",%lld" : "%lld",
                           (long long)d[i]);
  at += (size_t)snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0, "]");
  return at;
}

char *evtc_type_str(const evtc_type *t, char *buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "%s", evtc_dtype_name(t->dtype));
  at = append_dims(buf, cap, at, t->shape, t->rank);
  if (!evtc_type_is_contiguous(t)) {
    at += (size_t)snprintf(buf + (at < cap ? at : cap), at < cap ? cap - at : 0, "@");
    append_dims(buf, cap, at, t->strides, t->rank);
  }
  return buf;
}

int evtc_axis_norm(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis >= 0 && axis < rank) ? (int)axis : -1;
}

/* ---- attribute values ---- */

evtc_attr evtc_attr_int(const char *name, int64_t v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_INT, .v.i = v};
}
evtc_attr evtc_attr_float(const char *name, double v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_FLOAT, .v.f = v};
}
evtc_attr evtc_attr_ints(const char *name, int n, const int64_t *v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_INTS, .n = n, .v.ints = v};
}
evtc_attr evtc_attr_floats(const char *name, int n, const double *v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_FLOATS, .n = n, .v.floats = v};
}
evtc_attr evtc_attr_str(const char *name, const char *v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_STR, .v.s = v};
}
evtc_attr evtc_attr_dtype(const char *name, evtc_dtype v) {
  return (evtc_attr){.name = name, .kind = EVTC_ATTR_DTYPE, .v.i = v};
}

static evtc_attr attr_default(const evtc_attr_spec *s) {
  evtc_attr a = {.name = s->name, .kind = s->kind};
  switch (s->kind) {
    case EVTC_ATTR_INT:
    case EVTC_ATTR_DTYPE: a.v.i = s->def_i; break;
    case EVTC_ATTR_FLOAT: a.v.f = s->def_f; break;
    case EVTC_ATTR_STR: a.v.s = s->def_s ? s->def_s : ""; break;
    case EVTC_ATTR_INTS:
    case EVTC_ATTR_FLOATS: a.n = 0; a.v.ints = NULL; break;
  }
  return a;
}

static const char *attr_kind_name(evtc_attr_kind k) {
  static const char *names[] = {"int", "float", "int list", "float list", "string", "dtype"};
  return names[k];
}

/* ---- graphs ---- */

evtc_graph *evtc_graph_new(const char *name) {
  evtc_arena *a = evtc_arena_new();
  evtc_graph *g = evtc_arena_alloc(a, sizeof *g);
  g->arena = a;
  g->name = evtc_arena_strdup(a, name ? name : "main");
  g->cap_nodes = 64;
  g->nodes = evtc_arena_alloc(a, sizeof(evtc_node *) * (size_t)g->cap_nodes);
  g->cap_outputs = 8;
  g->outputs = evtc_arena_alloc(a, sizeof(evtc_output) * (size_t)g->cap_outputs);
  g->name_cap = 128;
  g->name_table = evtc_arena_alloc(a, sizeof(evtc_node *) * (size_t)g->name_cap);
  return g;
}

void evtc_graph_free(evtc_graph *g) {
  if (g) evtc_arena_free(g->arena);
}

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;                  /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

evtc_node *evtc_graph_find(const evtc_graph *g, const char *name) {
  uint32_t mask = (uint32_t)g->name_cap - 1;
  for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    evtc_node *n = g->name_table[i];
    if (!n) return NULL;
    if (strcmp(n->name, name) == 0) return n;
  }
}

static void name_insert(evtc_graph *g, evtc_node *n) {
  if ((g->n_nodes + 1) * 2 > g->name_cap) {  /* keep load under one half */
    int32_t cap = g->name_cap * 2;
    evtc_node **t = evtc_arena_alloc(g->arena, sizeof(evtc_node *) * (size_t)cap);
    for (int32_t i = 0; i < g->name_cap; i++) {
      evtc_node *m = g->name_table[i];
      if (!m) continue;
      uint32_t j = name_hash(m->name) & (uint32_t)(cap - 1);
      while (t[j]) j = (j + 1) & (uint32_t)(cap - 1);
      t[j] = m;
    }
    g->name_table = t;
    g->name_cap = cap;
  }
  uint32_t mask = (uint32_t)g->name_cap - 1;
  uint32_t i = name_hash(n->name) & mask;
  while (g->name_table[i]) i = (i + 1) & mask;
  g->name_table[i] = n;
}

/* A name not yet in g: `want` itself, or want.1, want.2, ...; "tN" for NULL. */
static const char *unique_name(evtc_graph *g, const char *want) {
  char buf[256];
  if (!want) {
    do snprintf(buf, sizeof buf, "t%d", g->auto_name_counter++);
    while (evtc_graph_find(g, buf));
    return evtc_arena_strdup(g->arena, buf);
  }
  if (!evtc_graph_find(g, want)) return evtc_arena_strdup(g->arena, want);
  for (int k = 1;; k++) {
    snprintf(buf, sizeof buf, "%.200s.%d", want, k);
    if (!evtc_graph_find(g, buf)) return evtc_arena_strdup(g->arena, buf);
  }
}

evtc_node *evtc_graph_fail(evtc_graph *g, evtc_status st, const char *node_name, evtc_op op,
                           const char *fmt, ...) {
  char cause[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cause, sizeof cause, fmt, ap);
  va_end(ap);
  evtc_diag_set(&g->diag, st, "node %%%s (%s): %s", node_name ? node_name : "?", evtc_op_get(op)->name,
                cause);
  return NULL;
}

static void append_node(evtc_graph *g, evtc_node *n) {
  if (g->n_nodes == g->cap_nodes) {
    int32_t cap = g->cap_nodes * 2;
    evtc_node **nodes = evtc_arena_alloc(g->arena, sizeof(evtc_node *) * (size_t)cap);
    memcpy(nodes, g->nodes, sizeof(evtc_node *) * (size_t)g->n_nodes);
    g->nodes = nodes;
    g->cap_nodes = cap;
  }
  n->id = g->n_nodes;
  name_insert(g, n);
  g->nodes[g->n_nodes++] = n;
}

/* Fills n->attrs from the caller's list; false (diag set) on a bad list. */
static bool set_attrs(evtc_graph *g, evtc_node *n, const char *name, const evtc_attr *attrs, int n_attrs) {
  const evtc_op_info *info = evtc_op_get(n->op);
  n->attrs = evtc_arena_alloc(g->arena, sizeof(evtc_attr) * (size_t)(info->n_attrs ? info->n_attrs : 1));
  bool given[64] = {false};
  EVTC_ASSERT(info->n_attrs <= 64);
  for (int k = 0; k < info->n_attrs; k++) n->attrs[k] = attr_default(&info->attrs[k]);
  for (int j = 0; j < n_attrs; j++) {
    const evtc_attr *a = &attrs[j];
    int k = 0;
    while (k < info->n_attrs && strcmp(info->attrs[k].name, a->name) != 0) k++;
    if (k == info->n_attrs) {
      evtc_graph_fail(g, EVTC_ERR_TYPE, name, n->op, "unknown attribute '%s'", a->name);
      return false;
    }
    const evtc_attr_spec *s = &info->attrs[k];
    evtc_attr v = *a;
    if (v.kind == EVTC_ATTR_INT && s->kind == EVTC_ATTR_FLOAT) {      /* 1 where 1.0 is meant */
      v.kind = EVTC_ATTR_FLOAT;
      v.v.f = (double)a->v.i;
    } else if (v.kind == EVTC_ATTR_INTS && v.n == 0 && s->kind == EVTC_ATTR_FLOATS) {
      v.kind = EVTC_ATTR_FLOATS;                                      /* [] is either list kind */
    } else if (v.kind == EVTC_ATTR_INTS && s->kind == EVTC_ATTR_FLOATS) {
      double *f = evtc_arena_alloc(g->arena, sizeof(double) * (size_t)v.n);
      for (int i = 0; i < v.n; i++) f[i] = (double)a->v.ints[i];
      v.kind = EVTC_ATTR_FLOATS;
      v.v.floats = f;
    }
    if (v.kind != s->kind) {
      evtc_graph_fail(g, EVTC_ERR_TYPE, name, n->op, "attribute '%s' must be a %s, not a %s", s->name,
                      attr_kind_name(s->kind), attr_kind_name(a->kind));
      return false;
    }
    if (given[k]) {
      evtc_graph_fail(g, EVTC_ERR_TYPE, name, n->op, "attribute '%s' given twice", s->name);
      return false;
    }
    given[k] = true;
    v.name = s->name;
    if (v.kind == EVTC_ATTR_INTS) {
      v.v.ints = evtc_arena_memdup(g->arena, v.v.ints, sizeof(int64_t) * (size_t)v.n);
    } else if (v.kind == EVTC_ATTR_FLOATS && a->kind == EVTC_ATTR_FLOATS) {
      v.v.floats = evtc_arena_memdup(g->arena, v.v.floats, sizeof(double) * (size_t)v.n);
    } else if (v.kind == EVTC_ATTR_STR) {
      v.v.s = evtc_arena_strdup(g->arena, v.v.s ? v.v.s : "");
    } else if (v.kind == EVTC_ATTR_DTYPE && (v.v.i < 0 || v.v.i >= EVTC_DTYPE_COUNT)) {
      evtc_graph_fail(g, EVTC_ERR_TYPE, name, n->op, "attribute '%s' is not a dtype", s->name);
      return false;
    }
    n->attrs[k] = v;
  }
  for (int k = 0; k < info->n_attrs; k++) {
    if (info->attrs[k].required && !given[k]) {
      evtc_graph_fail(g, EVTC_ERR_TYPE, name, n->op, "missing required attribute '%s'", info->attrs[k].name);
      return false;
    }
  }
  return true;
}

static evtc_node *node_new(evtc_graph *g, evtc_op op, evtc_node *const *inputs, int n_inputs,
                           const evtc_attr *attrs, int n_attrs, const char *name) {
  if (g->diag.status != EVTC_OK) return NULL;
  const evtc_op_info *info = evtc_op_get(op);
  for (int i = 0; i < n_inputs; i++)
    if (!inputs[i]) return NULL;   /* an earlier builder call failed and said why */
  if (n_inputs < info->min_inputs || (info->max_inputs >= 0 && n_inputs > info->max_inputs)) {
    if (info->min_inputs == info->max_inputs)
      return evtc_graph_fail(g, EVTC_ERR_TYPE, name, op, "takes %d input%s, got %d", info->min_inputs,
                             info->min_inputs == 1 ? "" : "s", n_inputs);
    return evtc_graph_fail(g, EVTC_ERR_TYPE, name, op, "takes at least %d input%s, got %d", info->min_inputs,
                           info->min_inputs == 1 ? "" : "s", n_inputs);
  }
  evtc_node *n = evtc_arena_alloc(g->arena, sizeof *n);
  n->op = op;
  n->n_inputs = n_inputs;
  n->inputs = evtc_arena_memdup(g->arena, inputs, sizeof(evtc_node *) * (size_t)n_inputs);
  for (int i = 0; i < n_inputs; i++) EVTC_ASSERT(inputs[i]->id < g->n_nodes && g->nodes[inputs[i]->id] == inputs[i]);
  if (!set_attrs(g, n, name, attrs, n_attrs)) return NULL;
  return n;
}

evtc_node *evtc_node_add(evtc_graph *g, evtc_op op, evtc_node *const *inputs, int n_inputs,
                         const evtc_attr *attrs, int n_attrs, const char *name) {
  if (evtc_op_is_leaf(op))
    return evtc_graph_fail(g, EVTC_ERR_INVALID, name, op, "a leaf needs a given type (evtc_leaf_add)");
  evtc_node *n = node_new(g, op, inputs, n_inputs, attrs, n_attrs, name);
  if (!n) return NULL;
  n->name = name ? name : "?";
  if (!evtc_infer_type(g, n)) return NULL;
  n->name = unique_name(g, name);
  append_node(g, n);
  return n;
}

evtc_node *evtc_leaf_add(evtc_graph *g, evtc_op op, evtc_type type, const evtc_attr *attrs, int n_attrs,
                         const char *name) {
  EVTC_ASSERT(evtc_op_is_leaf(op));
  evtc_node *n = node_new(g, op, NULL, 0, attrs, n_attrs, name);
  if (!n) return NULL;
  if (type.rank < 0 || type.rank > EVTC_MAX_RANK)
    return evtc_graph_fail(g, EVTC_ERR_TYPE, name, op, "rank %d is outside 0..%d", type.rank, EVTC_MAX_RANK);
  for (int i = 0; i < type.rank; i++)
    if (type.shape[i] < 0)
      return evtc_graph_fail(g, EVTC_ERR_TYPE, name, op, "dimension %d is negative (%lld)", i,
                             (long long)type.shape[i]);
  n->type = type;
  if (op == EVTC_OP_CONST) {
    const evtc_attr *data = evtc_node_attr(n, "data");
    if (data->n != 0 && data->n != evtc_type_numel(&type))
      return evtc_graph_fail(g, EVTC_ERR_TYPE, name, op, "data has %d values but the type holds %lld", data->n,
                             (long long)evtc_type_numel(&type));
  }
  n->name = unique_name(g, name);
  append_node(g, n);
  return n;
}

evtc_node *evtc_unary(evtc_graph *g, evtc_op op, evtc_node *a) { return evtc_node_add(g, op, &a, 1, NULL, 0, NULL); }

evtc_node *evtc_binary(evtc_graph *g, evtc_op op, evtc_node *a, evtc_node *b) {
  evtc_node *in[2] = {a, b};
  return evtc_node_add(g, op, in, 2, NULL, 0, NULL);
}

evtc_node *evtc_scalar(evtc_graph *g, evtc_dtype dt, double value) {
  evtc_attr v = evtc_attr_float("value", value);
  return evtc_leaf_add(g, EVTC_OP_CONST, evtc_type_make(dt, 0, NULL), &v, 1, NULL);
}

bool evtc_graph_is_output(const evtc_graph *g, const evtc_node *n) {
  if (g->loss == n) return true;
  for (int32_t i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].node == n) return true;
  return false;
}

void evtc_graph_add_output(evtc_graph *g, evtc_node *n, evtc_node *updates) {
  EVTC_ASSERT(n != NULL);
  if (g->n_outputs == g->cap_outputs) {
    int32_t cap = g->cap_outputs * 2;
    evtc_output *o = evtc_arena_alloc(g->arena, sizeof(evtc_output) * (size_t)cap);
    memcpy(o, g->outputs, sizeof(evtc_output) * (size_t)g->n_outputs);
    g->outputs = o;
    g->cap_outputs = cap;
  }
  g->outputs[g->n_outputs++] = (evtc_output){.node = n, .updates = updates};
}

/* ---- attribute access ---- */

const evtc_attr *evtc_node_attr(const evtc_node *n, const char *name) {
  const evtc_op_info *info = evtc_op_get(n->op);
  for (int k = 0; k < info->n_attrs; k++)
    if (strcmp(info->attrs[k].name, name) == 0) return &n->attrs[k];
  fprintf(stderr, "evtc: op %s has no attribute '%s'\n", info->name, name);
  EVTC_ASSERT(!"attribute not in the op's spec");
  return NULL;
}

int64_t evtc_node_int(const evtc_node *n, const char *name) {
  const evtc_attr *a = evtc_node_attr(n, name);
  EVTC_ASSERT(a->kind == EVTC_ATTR_INT || a->kind == EVTC_ATTR_DTYPE);
  return a->v.i;
}

double evtc_node_float(const evtc_node *n, const char *name) {
  const evtc_attr *a = evtc_node_attr(n, name);
  EVTC_ASSERT(a->kind == EVTC_ATTR_FLOAT);
  return a->v.f;
}

const char *evtc_node_str(const evtc_node *n, const char *name) {
  const evtc_attr *a = evtc_node_attr(n, name);
  EVTC_ASSERT(a->kind == EVTC_ATTR_STR);
  return a->v.s;
}
