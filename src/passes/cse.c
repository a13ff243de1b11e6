/* cse.c -- the `cse` pass: common-subexpression elimination by hash-consing.
 *
 * Walks the graph in topological order keeping a hash table of the nodes
 * built so far; a node equal to one already built is replaced by it.  Two
 * nodes are equal when they have the same op, the same attribute values
 * (floats compared bit for bit), the same output type and the same inputs
 * (already merged, so equality is by identity); for the commutative binary
 * ops (add, mul, max, min, eq, ne) the inputs may come in either order.
 * INPUT, PARAM and STATE leaves are never merged (each is a distinct value
 * fed from outside); CONSTs merge when type, value and data are equal.
 * Dropout nodes merge too: equal seed, p and input give an equal mask.
 * The first node of a class keeps its name; outputs of the others follow it.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "passes/rewrite.h"

typedef struct cse_table {
  evtc_node **slots;
  size_t cap, count;
} cse_table;

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t bits_of(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static bool commutative(evtc_op op) {
  return op == EVTC_OP_ADD || op == EVTC_OP_MUL || op == EVTC_OP_MAX || op == EVTC_OP_MIN ||
         op == EVTC_OP_EQ || op == EVTC_OP_NE;
}

static uint64_t attr_hash(uint64_t h, const evtc_attr *a) {
  switch (a->kind) {
    case EVTC_ATTR_INT:
    case EVTC_ATTR_DTYPE: return mix(h, (uint64_t)a->v.i);
    case EVTC_ATTR_FLOAT: return mix(h, bits_of(a->v.f));
    case EVTC_ATTR_INTS:
      h = mix(h, (uint64_t)a->n);
      for (int i = 0; i < a->n; i++) h = mix(h, (uint64_t)a->v.ints[i]);
      return h;
    case EVTC_ATTR_FLOATS:
      h = mix(h, (uint64_t)a->n);
      for (int i = 0; i < a->n; i++) h = mix(h, bits_of(a->v.floats[i]));
      return h;
    case EVTC_ATTR_STR:
      for (const char *s = a->v.s; *s; s++) h = mix(h, (unsigned char)*s);
      return h;
  }
  return h;
}

static bool attr_equal(const evtc_attr *a, const evtc_attr *b) {
  switch (a->kind) {
    case EVTC_ATTR_INT:
    case EVTC_ATTR_DTYPE: return a->v.i == b->v.i;
    case EVTC_ATTR_FLOAT: return bits_of(a->v.f) == bits_of(b->v.f);
    case EVTC_ATTR_INTS: return a->n == b->n && (a->n == 0 || !memcmp(a->v.ints, b->v.ints, sizeof(int64_t) * (size_t)a->n));
    case EVTC_ATTR_FLOATS:
      return a->n == b->n && (a->n == 0 || !memcmp(a->v.floats, b->v.floats, sizeof(double) * (size_t)a->n));
    case EVTC_ATTR_STR: return strcmp(a->v.s, b->v.s) == 0;
  }
  return false;
}

/* Hash of a node-to-be: op, type, attributes of n, inputs `in` (dst nodes;
 * order-free for commutative ops). */
static uint64_t node_hash(const evtc_node *n, evtc_node *const *in) {
  uint64_t h = mix(0, (uint64_t)n->op);
  h = mix(h, (uint64_t)n->type.dtype);
  for (int i = 0; i < n->type.rank; i++) h = mix(h, (uint64_t)n->type.shape[i]);
  for (int i = 0; i < evtc_op_get(n->op)->n_attrs; i++) h = attr_hash(h, &n->attrs[i]);
  if (commutative(n->op)) return mix(h, (uint64_t)in[0]->id * (uint64_t)in[1]->id + (uint64_t)(in[0]->id + in[1]->id));
  for (int k = 0; k < n->n_inputs; k++) h = mix(h, (uint64_t)in[k]->id);
  return h;
}

/* Whether dst node c computes what src node n over inputs `in` would. */
static bool node_equal(const evtc_node *c, const evtc_node *n, evtc_node *const *in) {
  if (c->op != n->op || c->n_inputs != n->n_inputs || c->type.dtype != n->type.dtype || c->type.rank != n->type.rank)
    return false;
  for (int i = 0; i < n->type.rank; i++)
    if (c->type.shape[i] != n->type.shape[i]) return false;
  for (int i = 0; i < evtc_op_get(n->op)->n_attrs; i++)
    if (!attr_equal(&c->attrs[i], &n->attrs[i])) return false;
  bool same = true;
  for (int k = 0; k < n->n_inputs && same; k++) same = c->inputs[k] == in[k];
  if (!same && commutative(n->op)) same = c->inputs[0] == in[1] && c->inputs[1] == in[0];
  return same;
}

static void table_insert(cse_table *t, evtc_node *node, uint64_t h) {
  if (2 * (t->count + 1) > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    evtc_node **slots = calloc(cap, sizeof *slots);
    for (size_t i = 0; i < t->cap; i++) {
      evtc_node *m = t->slots[i];
      if (!m) continue;
      size_t j = node_hash(m, m->inputs) & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = m;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
  }
  size_t j = h & (t->cap - 1);
  while (t->slots[j]) j = (j + 1) & (t->cap - 1);
  t->slots[j] = node;
  t->count++;
}

static evtc_node *cse_node(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  cse_table *t = rw->ctx;
  if (evtc_op_is_leaf(n->op) && n->op != EVTC_OP_CONST) return NULL;
  uint64_t h = node_hash(n, in);
  if (t->cap)
    for (size_t j = h & (t->cap - 1); t->slots[j]; j = (j + 1) & (t->cap - 1))
      if (node_equal(t->slots[j], n, in)) return t->slots[j];
  evtc_node *c = evtc_node_copy(rw->dst, n, in);
  if (c) table_insert(t, c, h);
  return c;
}

static evtc_graph *cse_run(const evtc_graph *g, evtc_diag *d) {
  cse_table t = {0};
  evtc_graph *out = evtc_rewrite_graph(g, cse_node, &t, d);
  free(t.slots);
  return out;
}

const evtc_pass evtc_pass_cse = {
    .name = "cse",
    .summary = "merge nodes with equal op, attributes, type and inputs (never INPUT/PARAM/STATE; CONSTs by value)",
    .run = cse_run,
};
