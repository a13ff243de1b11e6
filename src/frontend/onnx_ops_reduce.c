/* onnx_ops_reduce.c -- ONNX reductions (ReduceSum/Mean/Max/Min and the
 * norms built from them) and Softmax / LogSoftmax.
 *
 * Reduction axes are an attribute, except for ReduceSum from opset 13 where
 * they are an input that must be known at import.  Softmax before opset 13
 * flattens the input to 2-D at `axis` and normalises the trailing block.
 */
#include <string.h>

#include "frontend/onnx_internal.h"

static evtc_node *reduce(evtc_onnx_ctx *c, evtc_op op, evtc_node *x, int n_axes, const int64_t *axes, bool keep,
                         const char *name) {
  if (!x) return NULL;
  evtc_attr a[2] = {evtc_attr_ints("axes", n_axes, axes), evtc_attr_int("keepdims", keep)};
  return evtc_node_add(c->g, op, &x, 1, a, 2, name);
}

static bool map_reduce(evtc_onnx_ctx *c) {
  const char *t = c->node->op_type + strlen("Reduce");
  int64_t axes[EVTC_MAX_RANK];
  int n_axes = 0;
  if (strcmp(t, "Sum") == 0 && c->opset >= 13) {
    if (evtc_onnx_has(c, 1) && !evtc_onnx_ints(c, 1, axes, EVTC_MAX_RANK, &n_axes)) return false;
  } else {
    n_axes = evtc_onnx_attr_ints(c, "axes", axes, EVTC_MAX_RANK);
    if (n_axes == -2) return false;
    if (n_axes < 0) n_axes = 0;
  }
  bool keep = evtc_onnx_attr_int(c, "keepdims", 1) != 0;
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!x) return false;
  const char *name = evtc_onnx_out_name(c, 0);
  if (n_axes == 0 && evtc_onnx_attr_int(c, "noop_with_empty_axes", 0)) {
    evtc_attr s = evtc_attr_ints("shape", x->type.rank, x->type.shape);
    return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_RESHAPE, &x, 1, &s, 1, name));
  }
  evtc_node *y;
  if (strcmp(t, "Sum") == 0) y = reduce(c, EVTC_OP_REDUCE_SUM, x, n_axes, axes, keep, name);
  else if (strcmp(t, "Mean") == 0) y = reduce(c, EVTC_OP_REDUCE_MEAN, x, n_axes, axes, keep, name);
  else if (strcmp(t, "Max") == 0) y = reduce(c, EVTC_OP_REDUCE_MAX, x, n_axes, axes, keep, name);
  else if (strcmp(t, "Min") == 0) y = reduce(c, EVTC_OP_REDUCE_MIN, x, n_axes, axes, keep, name);
  else if (strcmp(t, "SumSquare") == 0)
    y = reduce(c, EVTC_OP_REDUCE_SUM, evtc_binary(c->g, EVTC_OP_MUL, x, x), n_axes, axes, keep, name);
  else if (strcmp(t, "L1") == 0)
    y = reduce(c, EVTC_OP_REDUCE_SUM, evtc_unary(c->g, EVTC_OP_ABS, x), n_axes, axes, keep, name);
  else if (strcmp(t, "L2") == 0) {
    evtc_node *s = reduce(c, EVTC_OP_REDUCE_SUM, evtc_binary(c->g, EVTC_OP_MUL, x, x), n_axes, axes, keep, NULL);
    y = s ? evtc_node_add(c->g, EVTC_OP_SQRT, &s, 1, NULL, 0, name) : NULL;
  } else {                                             /* LogSum, LogSumExp */
    bool exp = strcmp(t, "LogSumExp") == 0;
    evtc_node *s = reduce(c, EVTC_OP_REDUCE_SUM, exp ? evtc_unary(c->g, EVTC_OP_EXP, x) : x, n_axes, axes, keep, NULL);
    y = s ? evtc_node_add(c->g, EVTC_OP_LOG, &s, 1, NULL, 0, name) : NULL;
  }
  return evtc_onnx_out(c, 0, y);
}

static bool map_softmax(evtc_onnx_ctx *c) {
  evtc_op op = strcmp(c->node->op_type, "Softmax") == 0 ? EVTC_OP_SOFTMAX : EVTC_OP_LOG_SOFTMAX;
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!x) return false;
  const char *name = evtc_onnx_out_name(c, 0);
  int64_t axis = evtc_onnx_attr_int(c, "axis", c->opset >= 13 ? -1 : 1);
  int ax = evtc_axis_norm(axis, x->type.rank);
  if (ax < 0) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis %lld is out of range for rank %d", (long long)axis,
                                    x->type.rank);
  if (c->opset >= 13 || ax == x->type.rank - 1) {
    evtc_attr a = evtc_attr_int("axis", ax);
    return evtc_onnx_out(c, 0, evtc_node_add(c->g, op, &x, 1, &a, 1, name));
  }
  int64_t rows = 1, cols = 1;               /* coerce to 2-D [rows, cols] at axis */
  for (int d = 0; d < x->type.rank; d++) *(d < ax ? &rows : &cols) *= x->type.shape[d];
  evtc_attr flat = evtc_attr_ints("shape", 2, (int64_t[]){rows, cols}), last = evtc_attr_int("axis", 1),
            back = evtc_attr_ints("shape", x->type.rank, x->type.shape);
  evtc_node *y = evtc_node_add(c->g, EVTC_OP_RESHAPE, &x, 1, &flat, 1, NULL);
  if (y) y = evtc_node_add(c->g, op, &y, 1, &last, 1, NULL);
  if (y) y = evtc_node_add(c->g, EVTC_OP_RESHAPE, &y, 1, &back, 1, name);
  return evtc_onnx_out(c, 0, y);
}

const evtc_onnx_op evtc_onnx_ops_reduce[] = {
    {"ReduceSum", map_reduce},  {"ReduceMean", map_reduce},      {"ReduceMax", map_reduce},
    {"ReduceMin", map_reduce},  {"ReduceSumSquare", map_reduce}, {"ReduceL1", map_reduce},
    {"ReduceL2", map_reduce},   {"ReduceLogSum", map_reduce},    {"ReduceLogSumExp", map_reduce},
    {"Softmax", map_softmax},   {"LogSoftmax", map_softmax},
    {NULL, NULL},
};
