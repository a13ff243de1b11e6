/* onnx_import.c -- evtc_onnx_import: from a ModelProto to an evtc graph.
 *
 * Order of work: opset check; graph inputs (INPUT leaves, symbolic dims
 * bound from the options); initializers (decoded now, made into leaves when
 * first used); nodes in file order, each mapped by the op table of its
 * family or folded when its inputs are all known; graph outputs, checked
 * against their declared types.  The ONNX graph must be topologically
 * sorted, as the ONNX spec requires; a value used before it is produced
 * (a cycle, or a missing initializer) is an error naming the node.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_internal.h"

#define ONNX_MAX_OPSET 17

static const evtc_onnx_op *const op_families[] = {evtc_onnx_ops_math, evtc_onnx_ops_reduce, evtc_onnx_ops_nn,
                                                  evtc_onnx_ops_shape, evtc_onnx_ops_const};

static const evtc_onnx_op *op_find(const char *op_type) {
  for (size_t f = 0; f < sizeof op_families / sizeof op_families[0]; f++)
    for (const evtc_onnx_op *o = op_families[f]; o->op_type; o++)
      if (strcmp(o->op_type, op_type) == 0) return o;
  return NULL;
}

static bool is_default_domain(const char *domain) {
  return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

static bool read_opset(evtc_onnx_ctx *c, const Onnx__ModelProto *m) {
  c->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++)
    if (is_default_domain(m->opset_import[i]->domain) && m->opset_import[i]->has_version)
      c->opset = m->opset_import[i]->version;
  if (c->opset < 0) {
    if (m->n_opset_import == 0) c->opset = 1;   /* IR version 2 models have no opset_import */
    else return evtc_onnx_unsupported(c, "the model imports no opset of the default ONNX domain");
  }
  if (c->opset > ONNX_MAX_OPSET)
    return evtc_onnx_unsupported(c, "opset %lld is newer than the newest evtc supports (%d)", (long long)c->opset,
                                 ONNX_MAX_OPSET);
  return true;
}

/* The static type of a value info; symbolic dims come from the options. */
static bool value_info_type(evtc_onnx_ctx *c, const Onnx__ValueInfoProto *vi, evtc_type *t) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return evtc_onnx_unsupported(c, "graph value '%s' is not a tensor", vi->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  evtc_dtype dt;
  if (!evtc_onnx_dtype(tt->elem_type, &dt))
    return evtc_onnx_unsupported(c, "graph value '%s' has ONNX data type %d, which evtc does not support", vi->name,
                                 (int)tt->elem_type);
  if (!tt->shape) return evtc_onnx_unsupported(c, "graph value '%s' has no shape: evtc shapes are static", vi->name);
  if (tt->shape->n_dim > EVTC_MAX_RANK)
    return evtc_onnx_unsupported(c, "graph value '%s' has rank %zu; evtc supports up to %d", vi->name,
                                 tt->shape->n_dim, EVTC_MAX_RANK);
  int64_t shape[EVTC_MAX_RANK];
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
    if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0) {
      shape[i] = dim->dim_value;
      continue;
    }
    const char *sym = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dim->dim_param : "";
    int k = 0;
    while (c->opt && k < c->opt->n_dims && strcmp(c->opt->dim_names[k], sym) != 0) k++;
    if (!c->opt || k == c->opt->n_dims)
      return evtc_onnx_unsupported(c, "graph value '%s' has a symbolic dim '%s' (dim %zu): bind it to a size "
                                   "(evtc shapes are static)", vi->name, sym, i);
    shape[i] = c->opt->dim_values[k];
  }
  *t = evtc_type_make(dt, (int)tt->shape->n_dim, shape);
  return true;
}

static bool is_frozen(const evtc_onnx_ctx *c, const char *name) {
  for (int i = 0; c->opt && i < c->opt->n_frozen; i++)
    if (strcmp(c->opt->frozen[i], name) == 0) return true;
  return false;
}

static bool add_initializers(evtc_onnx_ctx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *name = t->name ? t->name : "";
    evtc_onnx_value *v = evtc_onnx_value_add(c, name);
    double *data;
    if (!v || !evtc_onnx_tensor_decode(c, t, name, &v->type, &data)) return false;
    v->defined = true;
    if (evtc_dtype_is_float(v->type.dtype) && !is_frozen(c, name)) v->initial = data;
    else v->data = data;
  }
  for (int i = 0; c->opt && i < c->opt->n_frozen; i++)
    if (!evtc_onnx_value_find(c, c->opt->frozen[i]))
      return evtc_onnx_fail(c, EVTC_ERR_INVALID, "--freeze %s: the model has no initializer of that name",
                            c->opt->frozen[i]);
  return true;
}

static bool add_inputs(evtc_onnx_ctx *c, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = vi->name ? vi->name : "";
    if (evtc_onnx_value_find(c, name)) continue;       /* an initializer also listed as input (IR < 4) */
    evtc_onnx_value *v = evtc_onnx_value_add(c, name);
    if (!v || !value_info_type(c, vi, &v->type)) return false;
    char buf[256];
    evtc_onnx_name_sanitize(name, buf, sizeof buf);
    v->defined = true;
    v->node = evtc_leaf_add(c->model, EVTC_OP_INPUT, v->type, NULL, 0, buf);
    if (!v->node) return evtc_onnx_fail(c, c->model->diag.status, "%s", c->model->diag.msg);
  }
  return true;
}

/* Resolves the current node's inputs and creates its output values. */
static bool node_bind(evtc_onnx_ctx *c, const Onnx__NodeProto *np) {
  c->n_in = (int)np->n_input;
  c->n_out = (int)np->n_output;
  c->in = evtc_arena_alloc(c->arena, sizeof *c->in * (np->n_input + 1));
  c->in_node = evtc_arena_alloc(c->arena, sizeof *c->in_node * (np->n_input + 1));
  c->out = evtc_arena_alloc(c->arena, sizeof *c->out * (np->n_output + 1));
  c->fold_out = evtc_arena_alloc(c->arena, sizeof *c->fold_out * (np->n_output + 1));
  for (size_t i = 0; i < np->n_input; i++) {
    if (!np->input[i][0]) continue;                    /* an omitted optional input */
    evtc_onnx_value *v = evtc_onnx_value_find(c, np->input[i]);
    if (!v)
      return evtc_onnx_fail(c, EVTC_ERR_INVALID, "input '%s' is not a graph input, an initializer or the output "
                            "of an earlier node (missing initializer, or a cycle)", np->input[i]);
    if (!v->defined)
      return evtc_onnx_unsupported(c, "input '%s' is an optional output that evtc does not produce", v->name);
    c->in[i] = v;
  }
  for (size_t i = 0; i < np->n_output; i++) {
    if (!np->output[i][0]) continue;
    if (!(c->out[i] = evtc_onnx_value_add(c, np->output[i]))) return false;
  }
  return true;
}

static bool import_node(evtc_onnx_ctx *c, const Onnx__NodeProto *np) {
  c->node = np;
  if (!np->op_type) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "node has no op_type");
  const evtc_onnx_op *op = is_default_domain(np->domain) ? op_find(np->op_type) : NULL;
  if (!op) {
    if (!is_default_domain(np->domain))
      evtc_diag_set(c->d, EVTC_ERR_UNSUPPORTED, "unsupported ONNX op '%s' of domain '%s' (node '%s')", np->op_type,
                    np->domain, np->name ? np->name : "");
    else
      evtc_diag_set(c->d, EVTC_ERR_UNSUPPORTED, "unsupported ONNX op '%s' (node '%s' #%d, opset %lld)", np->op_type,
                    np->name ? np->name : "", c->node_index, (long long)c->opset);
    return false;
  }
  if (!node_bind(c, np)) return false;
  bool known = true;
  for (int i = 0; i < c->n_in; i++) known = known && (!c->in[i] || c->in[i]->data);
  bool ok = known && c->n_in > 0 ? evtc_onnx_fold(c, op) : op->map(c);
  if (c->model->diag.status != EVTC_OK) ok = evtc_onnx_fail(c, c->model->diag.status, "%s", c->model->diag.msg);
  if (!ok && c->d->status == EVTC_OK) evtc_onnx_fail(c, EVTC_ERR_INVALID, "cannot be imported");
  return ok && c->d->status == EVTC_OK;
}

/* Makes graph output vi: its value's node, renamed through an identity
 * reshape when the node carries another name or is already an output. */
static bool add_output(evtc_onnx_ctx *c, const Onnx__ValueInfoProto *vi) {
  const char *name = vi->name ? vi->name : "";
  evtc_onnx_value *v = evtc_onnx_value_find(c, name);
  if (!v) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "graph output '%s' is not produced by any node", name);
  evtc_node *n = evtc_onnx_value_node(c, v, false);
  if (!n) return false;
  evtc_type want;
  if (vi->type && value_info_type(c, vi, &want) && !evtc_type_equal(&want, &n->type)) {
    char a[96], b[96];
    return evtc_onnx_fail(c, EVTC_ERR_TYPE, "graph output '%s' is declared %s but computes to %s", name,
                          evtc_type_str(&want, a, sizeof a), evtc_type_str(&n->type, b, sizeof b));
  }
  evtc_diag_clear(c->d);              /* a symbolic or missing declared shape is not checked */
  char buf[256];
  evtc_onnx_name_sanitize(name, buf, sizeof buf);
  bool taken = strcmp(n->name, buf) != 0;
  for (int i = 0; i < c->model->n_outputs && !taken; i++) taken = c->model->outputs[i].node == n;
  if (taken) {
    evtc_attr shape = evtc_attr_ints("shape", n->type.rank, n->type.shape);
    n = evtc_node_add(c->model, EVTC_OP_RESHAPE, &n, 1, &shape, 1, buf);
    if (!n) return evtc_onnx_fail(c, c->model->diag.status, "%s", c->model->diag.msg);
  }
  evtc_graph_add_output(c->model, n, NULL);
  return true;
}

static bool import_graph(evtc_onnx_ctx *c, const Onnx__ModelProto *m) {
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "the model has no graph");
  c->graph = gp;
  if (!read_opset(c, m) || !add_initializers(c, gp) || !add_inputs(c, gp)) return false;
  for (size_t i = 0; i < gp->n_node; i++) {
    c->node_index = (int)i;
    if (!import_node(c, gp->node[i])) return false;
  }
  c->node = NULL;
  if (gp->n_output == 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++)
    if (!add_output(c, gp->output[i])) return false;
  if (evtc_graph_verify(c->model) != EVTC_OK) return evtc_onnx_fail(c, c->model->diag.status, "%s",
                                                                    c->model->diag.msg);
  return true;
}

evtc_graph *evtc_onnx_import_buffer(const void *bytes, size_t len, const char *name, const char *dir,
                                    const evtc_onnx_options *opt, evtc_weights **weights, evtc_diag *d) {
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
  if (!m) {
    evtc_diag_set(d, EVTC_ERR_PARSE, "%s: not an ONNX model (the protobuf does not parse)", name);
    return NULL;
  }
  evtc_onnx_ctx c = {.d = d, .opt = opt, .arena = evtc_arena_new(), .weights = evtc_weights_new(), .dir = dir};
  const char *graph_name = m->graph && m->graph->name && *m->graph->name ? m->graph->name : "onnx";
  char buf[256];
  evtc_onnx_name_sanitize(graph_name, buf, sizeof buf);
  c.model = c.g = evtc_graph_new(buf);
  c.model->file = evtc_arena_strdup(c.model->arena, name);
  bool ok = import_graph(&c, m);
  if (!ok) {                          /* messages name the file first, as the parser's do */
    evtc_diag why = *d;
    evtc_diag_clear(d);
    evtc_diag_set(d, why.status != EVTC_OK ? why.status : EVTC_ERR_INVALID, "%s: %s", name,
                  why.status != EVTC_OK ? why.msg : "import failed");
  }
  if (ok) {
    if (weights) *weights = c.weights;
    else evtc_weights_free(c.weights);
  } else {
    evtc_weights_free(c.weights);
    evtc_graph_free(c.model);
    c.model = NULL;
  }
  evtc_arena_free(c.arena);
  onnx__model_proto__free_unpacked(m, NULL);
  return c.model;
}

evtc_graph *evtc_onnx_import(const char *path, const evtc_onnx_options *opt, evtc_weights **weights,
                             evtc_diag *d) {
  size_t len;
  uint8_t *bytes = evtc_onnx_file_read(path, &len, d);
  if (!bytes) return NULL;
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : NULL;
  evtc_graph *g = evtc_onnx_import_buffer(bytes, len, path, dir ? dir : ".", opt, weights, d);
  free(dir);
  free(bytes);
  return g;
}
