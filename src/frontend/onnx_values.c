/* onnx_values.c -- the ONNX value table and the helpers mappers use to read
 * the current node's inputs and to set its outputs.
 *
 * A value becomes an evtc node lazily (evtc_onnx_value_node): known data
 * turns into a CONST, a trainable initializer into a PARAM or STATE leaf
 * whose initial values go to the weights table.  In the model graph the
 * node is cached on the value; while folding, inputs are made afresh in the
 * scratch graph and cached per node only.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend/onnx_internal.h"
#include "runtime/precision.h"

void evtc_onnx_name_sanitize(const char *name, char *buf, size_t cap) {
  size_t k = 0;
  for (const char *p = name; *p && k + 1 < cap; p++) {
    char ch = *p;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '.';
    buf[k++] = ok ? ch : '_';
  }
  if (k == 0 && cap > 1) buf[k++] = 'v';
  buf[k] = 0;
}

bool evtc_onnx_fail(evtc_onnx_ctx *c, evtc_status st, const char *fmt, ...) {
  char cause[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cause, sizeof cause, fmt, ap);
  va_end(ap);
  const char *op = c->node && c->node->op_type ? c->node->op_type : "?";
  if (c->node && c->node->name && *c->node->name)
    evtc_diag_set(c->d, st, "ONNX node '%s' (%s): %s", c->node->name, op, cause);
  else if (c->node)                   /* unnamed nodes are numbered from 0 in file order */
    evtc_diag_set(c->d, st, "ONNX node #%d (%s): %s", c->node_index, op, cause);
  else
    evtc_diag_set(c->d, st, "%s", cause);
  return false;
}

bool evtc_onnx_unsupported(evtc_onnx_ctx *c, const char *fmt, ...) {
  char cause[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cause, sizeof cause, fmt, ap);
  va_end(ap);
  return evtc_onnx_fail(c, EVTC_ERR_UNSUPPORTED, "unsupported: %s", cause);
}

static uint32_t value_hash(const char *s) {
  uint32_t h = 2166136261u;                  /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* The slot of name in the table, or the empty slot where it would go. */
static int value_slot(const evtc_onnx_ctx *c, const char *name) {
  uint32_t mask = (uint32_t)c->table_cap - 1;
  for (uint32_t i = value_hash(name) & mask;; i = (i + 1) & mask)
    if (!c->table[i] || strcmp(c->table[i]->name, name) == 0) return (int)i;
}

evtc_onnx_value *evtc_onnx_value_find(const evtc_onnx_ctx *c, const char *name) {
  if (!c->table_cap) return NULL;
  return c->table[value_slot(c, name)];
}

evtc_onnx_value *evtc_onnx_value_add(evtc_onnx_ctx *c, const char *name) {
  if ((c->n_values + 1) * 2 > c->table_cap) {
    evtc_onnx_value **old = c->table;
    int old_cap = c->table_cap;
    c->table_cap = old_cap ? old_cap * 2 : 256;
    c->table = evtc_arena_alloc(c->arena, sizeof *c->table * (size_t)c->table_cap);
    for (int i = 0; i < old_cap; i++)
      if (old[i]) c->table[value_slot(c, old[i]->name)] = old[i];
  }
  int slot = value_slot(c, name);
  if (c->table[slot]) {
    evtc_onnx_fail(c, EVTC_ERR_INVALID, "value '%s' is defined more than once", name);
    return NULL;
  }
  evtc_onnx_value *v = evtc_arena_alloc(c->arena, sizeof *v);
  v->name = evtc_arena_strdup(c->arena, name);
  c->table[slot] = v;
  c->n_values++;
  return v;
}

static const char *evtc_name(evtc_onnx_ctx *c, const char *onnx_name) {
  char buf[256];
  evtc_onnx_name_sanitize(onnx_name, buf, sizeof buf);
  return evtc_arena_strdup(c->arena, buf);
}

/* A CONST leaf named name (NULL: automatic): `value` when every element is
 * the same (or data is NULL: fill), else the full `data` list. */
static evtc_node *const_leaf(evtc_onnx_ctx *c, evtc_type t, const double *data, double fill, const char *name) {
  int64_t numel = evtc_type_numel(&t);
  bool uniform = true;
  for (int64_t i = 1; data && i < numel && uniform; i++) uniform = data[i] == data[0];
  evtc_attr a;
  if (!data || uniform)
    a = evtc_attr_float("value", data && numel ? data[0] : fill);
  else
    a = evtc_attr_floats("data", (int)numel, data);
  return evtc_leaf_add(c->g, EVTC_OP_CONST, t, &a, 1, name);
}

evtc_node *evtc_onnx_const(evtc_onnx_ctx *c, evtc_type t, const double *data, double fill) {
  return const_leaf(c, t, data, fill, NULL);
}

evtc_node *evtc_onnx_value_node(evtc_onnx_ctx *c, evtc_onnx_value *v, bool as_state) {
  bool model = c->g == c->model;
  if (model && v->node) return v->node;
  if (!v->defined) {
    evtc_onnx_unsupported(c, "value '%s' is an optional output that evtc does not produce", v->name);
    return NULL;
  }
  evtc_node *n;
  if (v->data) {
    n = const_leaf(c, v->type, v->data, 0.0, model ? evtc_name(c, v->name) : NULL);
  } else {
    EVTC_ASSERT(v->initial && model);
    n = evtc_leaf_add(c->g, as_state ? EVTC_OP_STATE : EVTC_OP_PARAM, v->type, NULL, 0, evtc_name(c, v->name));
    if (n) evtc_weights_add(c->weights, n->name, v->initial, evtc_type_numel(&v->type));
  }
  if (n && model) v->node = n;
  return n;
}

bool evtc_onnx_has(const evtc_onnx_ctx *c, int i) { return i < c->n_in && c->in[i] != NULL; }

const evtc_type *evtc_onnx_type(evtc_onnx_ctx *c, int i) {
  static const evtc_type missing = {.dtype = EVTC_F32};
  if (evtc_onnx_has(c, i)) return &c->in[i]->type;
  evtc_onnx_fail(c, EVTC_ERR_INVALID, "input %d is missing", i);   /* import_node then fails the node */
  return &missing;
}

const double *evtc_onnx_data(const evtc_onnx_ctx *c, int i) { return evtc_onnx_has(c, i) ? c->in[i]->data : NULL; }

static evtc_node *input_node(evtc_onnx_ctx *c, int i, bool as_state) {
  if (!evtc_onnx_has(c, i)) {
    evtc_onnx_fail(c, EVTC_ERR_INVALID, "input %d is missing", i);
    return NULL;
  }
  if (!c->in_node[i]) c->in_node[i] = evtc_onnx_value_node(c, c->in[i], as_state);
  return c->in_node[i];
}

evtc_node *evtc_onnx_in(evtc_onnx_ctx *c, int i) { return input_node(c, i, false); }
evtc_node *evtc_onnx_in_state(evtc_onnx_ctx *c, int i) { return input_node(c, i, true); }

int64_t evtc_onnx_to_int(double v) {
  if (isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

bool evtc_onnx_ints(evtc_onnx_ctx *c, int i, int64_t *out, int cap, int *n) {
  if (!evtc_onnx_has(c, i)) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "input %d is missing", i);
  const evtc_onnx_value *v = c->in[i];
  if (!v->data)
    return evtc_onnx_unsupported(c, "input %d ('%s') must be known at import time (a constant or an "
                                 "initializer): evtc shapes are static", i, v->name);
  int64_t numel = evtc_type_numel(&v->type);
  if (numel > cap) return evtc_onnx_unsupported(c, "input %d ('%s') has %lld values; at most %d are supported", i,
                                                v->name, (long long)numel, cap);
  for (int64_t k = 0; k < numel; k++) out[k] = evtc_onnx_to_int(v->data[k]);
  *n = (int)numel;
  return true;
}

const char *evtc_onnx_out_name(evtc_onnx_ctx *c, int i) {
  if (c->folding || i >= c->n_out || !c->out[i]) return NULL;
  return evtc_name(c, c->out[i]->name);
}

bool evtc_onnx_out(evtc_onnx_ctx *c, int i, evtc_node *n) {
  if (!n) return false;
  if (i >= c->n_out || !c->out[i]) return true;    /* an unnamed output: nobody reads it */
  evtc_onnx_value *v = c->out[i];
  v->defined = true;
  v->type = n->type;
  if (c->folding) c->fold_out[i] = n;
  else v->node = n;
  return true;
}

bool evtc_onnx_output_used(const evtc_onnx_ctx *c, int i) {
  if (c->folding) return true;
  if (i >= c->n_out || !c->out[i]) return false;
  const char *name = c->out[i]->name;
  for (size_t k = 0; k < c->graph->n_output; k++)
    if (c->graph->output[k]->name && strcmp(c->graph->output[k]->name, name) == 0) return true;
  for (size_t n = (size_t)c->node_index + 1; n < c->graph->n_node; n++)
    for (size_t k = 0; k < c->graph->node[n]->n_input; k++)
      if (strcmp(c->graph->node[n]->input[k], name) == 0) return true;
  return false;
}

bool evtc_onnx_out_const(evtc_onnx_ctx *c, int i, evtc_type t, const double *data) {
  if (i >= c->n_out || !c->out[i]) return true;
  evtc_onnx_value *v = c->out[i];
  int64_t numel = evtc_type_numel(&t);
  v->defined = true;
  v->type = t;
  double *d = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(numel ? numel : 1));
  for (int64_t k = 0; k < numel; k++) d[k] = evtc_round_to(t.dtype, data[k]);
  v->data = d;
  return true;
}
