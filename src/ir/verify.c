/* verify.c -- the graph verifier: is this graph well formed?
 *
 * Checks what every later stage assumes and the builder alone cannot
 * guarantee once passes edit graphs in place: nodes in topological order
 * with id == index, valid ops and arities, attributes of the spec's kinds
 * (and printable strings, known init schemes, CONST data of the right
 * length), sane types equal to the ones shape inference gives again, valid
 * and unique names, outputs and update targets that belong to the graph,
 * and a scalar float loss.  The first violation goes into g->diag as
 * "node %x (op): cause" (or "output N ..." / "loss ..."); the graph itself
 * is never changed.
 */
#include <string.h>

#include "ir/text.h"

static const char *const init_schemes[] = {"zeros", "ones", "normal", "uniform", "glorot", "kaiming"};

static bool belongs(const evtc_graph *g, const evtc_node *n) {
  return n && n->id >= 0 && n->id < g->n_nodes && g->nodes[n->id] == n;
}

#define NODE_FAIL(...) (evtc_graph_fail(g, EVTC_ERR_INVALID, n->name, n->op, __VA_ARGS__), false)

static bool type_sane(evtc_graph *g, const evtc_node *n) {
  const evtc_type *t = &n->type;
  if ((unsigned)t->dtype >= EVTC_DTYPE_COUNT) return NODE_FAIL("invalid dtype %d", (int)t->dtype);
  if (t->rank < 0 || t->rank > EVTC_MAX_RANK) return NODE_FAIL("rank %d is outside 0..%d", t->rank, EVTC_MAX_RANK);
  for (int d = 0; d < t->rank; d++)
    if (t->shape[d] < 0 || t->strides[d] < 0)
      return NODE_FAIL("dimension %d has a negative size or stride", d);
  return true;
}

static bool attrs_ok(evtc_graph *g, const evtc_node *n) {
  const evtc_op_info *info = evtc_op_get(n->op);
  if (info->n_attrs && !n->attrs) return NODE_FAIL("has no attribute values");
  for (int k = 0; k < info->n_attrs; k++) {
    const evtc_attr_spec *s = &info->attrs[k];
    const evtc_attr *a = &n->attrs[k];
    if (a->kind != s->kind) return NODE_FAIL("attribute '%s' has the wrong kind", s->name);
    switch (a->kind) {
      case EVTC_ATTR_INTS:
      case EVTC_ATTR_FLOATS:
        if (a->n < 0 || (a->n > 0 && !a->v.ints)) return NODE_FAIL("attribute '%s' has no values", s->name);
        break;
      case EVTC_ATTR_STR:
        if (!a->v.s) return NODE_FAIL("attribute '%s' has no string", s->name);
        if (strpbrk(a->v.s, "\"\n")) return NODE_FAIL("attribute '%s' contains a '\"' or a newline", s->name);
        break;
      case EVTC_ATTR_DTYPE:
        if (a->v.i < 0 || a->v.i >= EVTC_DTYPE_COUNT) return NODE_FAIL("attribute '%s' is not a dtype", s->name);
        break;
      default: break;
    }
  }
  return true;
}

/* Leaf rules: init schemes of PARAM/STATE, the data length of CONST. */
static bool leaf_ok(evtc_graph *g, const evtc_node *n) {
  if (n->op == EVTC_OP_PARAM || n->op == EVTC_OP_STATE) {
    const char *init = evtc_node_str(n, "init");
    for (size_t i = 0; i < sizeof init_schemes / sizeof init_schemes[0]; i++)
      if (strcmp(init, init_schemes[i]) == 0) return true;
    return NODE_FAIL("init \"%s\" is not one of zeros, ones, normal, uniform, glorot, kaiming", init);
  }
  if (n->op == EVTC_OP_CONST) {
    const evtc_attr *data = evtc_node_attr(n, "data");
    if (data->n != 0 && data->n != evtc_type_numel(&n->type))
      return NODE_FAIL("data has %d values but the type holds %lld", data->n, (long long)evtc_type_numel(&n->type));
  }
  return true;
}

/* Everything about node i on its own and against the nodes before it. */
static bool node_ok(evtc_graph *g, int32_t i) {
  const evtc_node *n = g->nodes[i];
  if (!n) return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "node slot %d is empty", (int)i), false;
  if ((unsigned)n->op >= EVTC_OP_COUNT)
    return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "node %d has an invalid op %d", (int)i, (int)n->op), false;
  if (!evtc_name_is_valid(n->name))
    return NODE_FAIL("name \"%s\" is not one or more of [A-Za-z0-9_.]", n->name ? n->name : "");
  if (n->id != i) return NODE_FAIL("id %d but index %d in the graph", (int)n->id, (int)i);
  if (evtc_graph_find(g, n->name) != n) return NODE_FAIL("name is not unique (or not in the name table)");
  const evtc_op_info *info = evtc_op_get(n->op);
  if (n->n_inputs < info->min_inputs || (info->max_inputs >= 0 && n->n_inputs > info->max_inputs))
    return NODE_FAIL("has %d inputs, the op takes %d..%d", (int)n->n_inputs, info->min_inputs, info->max_inputs);
  for (int k = 0; k < n->n_inputs; k++) {
    const evtc_node *in = n->inputs[k];
    if (!in) return NODE_FAIL("input %d is missing", k);
    if (!belongs(g, in) || in->id >= i)
      return NODE_FAIL("input %d (%%%s) is not a node defined before it", k, in->name ? in->name : "?");
  }
  if (!attrs_ok(g, n) || !type_sane(g, n)) return false;
  if (evtc_op_is_leaf(n->op)) return leaf_ok(g, n);
  evtc_node scratch = *n;           /* infer on a copy: the graph stays as it is */
  if (!evtc_infer_type(g, &scratch)) return false;
  if (!evtc_type_equal(&scratch.type, &n->type)) {
    char a[320], b[320];
    return NODE_FAIL("type %s differs from the inferred %s", evtc_type_str(&n->type, a, sizeof a),
                     evtc_type_str(&scratch.type, b, sizeof b));
  }
  return true;
}

static bool outputs_ok(evtc_graph *g) {
  for (int32_t i = 0; i < g->n_outputs; i++) {
    const evtc_output *o = &g->outputs[i];
    if (!belongs(g, o->node))
      return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "output %d is not a node of the graph", (int)i), false;
    const evtc_node *u = o->updates;
    if (!u) continue;
    if (!belongs(g, u))
      return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "output %d (%%%s) updates a node not in the graph", (int)i,
                           o->node->name), false;
    if (u->op != EVTC_OP_PARAM && u->op != EVTC_OP_STATE)
      return evtc_diag_set(&g->diag, EVTC_ERR_INVALID,
                           "output %d (%%%s) updates %%%s (%s), which is not a param or state", (int)i,
                           o->node->name, u->name, evtc_op_get(u->op)->name), false;
    if (!evtc_type_equal(&o->node->type, &u->type)) {
      char a[320], b[320];
      return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "output %d (%%%s) has type %s but updates %%%s of type %s",
                           (int)i, o->node->name, evtc_type_str(&o->node->type, a, sizeof a), u->name,
                           evtc_type_str(&u->type, b, sizeof b)), false;
    }
    for (int32_t j = 0; j < i; j++)
      if (g->outputs[j].updates == u)
        return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "outputs %d and %d both update %%%s", (int)j, (int)i,
                             u->name), false;
  }
  return true;
}

evtc_status evtc_graph_verify_at(evtc_graph *g, const evtc_node **where) {
  if (where) *where = NULL;
  if (g->diag.status != EVTC_OK) return g->diag.status;
  if (!g->name || !*g->name || strpbrk(g->name, "\"\n"))
    return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "the graph name is empty or holds a '\"' or a newline");
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (!node_ok(g, i)) {
      if (where) *where = g->nodes[i];
      return g->diag.status;
    }
  }
  if (!outputs_ok(g)) return g->diag.status;
  const evtc_node *l = g->loss;
  if (l && !belongs(g, l)) return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "the loss is not a node of the graph");
  if (l && (l->type.rank != 0 || !evtc_dtype_is_float(l->type.dtype))) {
    char t[320];
    return evtc_diag_set(&g->diag, EVTC_ERR_INVALID, "loss %%%s must be a scalar float, not %s", l->name,
                         evtc_type_str(&l->type, t, sizeof t));
  }
  return EVTC_OK;
}

evtc_status evtc_graph_verify(evtc_graph *g) { return evtc_graph_verify_at(g, NULL); }
