/* onnx_ops_const.c -- ONNX ops whose result is known at import whatever the
 * input values: Constant, Shape, Size, ConstantOfShape, Range.  They give
 * known data, never nodes, so the shape subgraphs exporters emit fold away.
 */
#include <math.h>
#include <string.h>

#include "frontend/onnx_internal.h"

static bool map_constant(evtc_onnx_ctx *c) {
  const Onnx__AttributeProto *a;
  if ((a = evtc_onnx_attr(c, "value")) && a->t) {
    evtc_type t;
    double *data;
    return evtc_onnx_tensor_decode(c, a->t, c->out[0] ? c->out[0]->name : "value", &t, &data) &&
           evtc_onnx_out_const(c, 0, t, data);
  }
  if ((a = evtc_onnx_attr(c, "value_float")))
    return evtc_onnx_out_const(c, 0, evtc_type_make(EVTC_F32, 0, NULL), (double[]){a->f});
  if ((a = evtc_onnx_attr(c, "value_int")))
    return evtc_onnx_out_const(c, 0, evtc_type_make(EVTC_I64, 0, NULL), (double[]){(double)a->i});
  bool floats = (a = evtc_onnx_attr(c, "value_floats")) != NULL;
  if (floats || (a = evtc_onnx_attr(c, "value_ints"))) {
    int64_t n = (int64_t)(floats ? a->n_floats : a->n_ints);
    double *data = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) data[i] = floats ? a->floats[i] : (double)a->ints[i];
    return evtc_onnx_out_const(c, 0, evtc_type_make(floats ? EVTC_F32 : EVTC_I64, 1, &n), data);
  }
  return evtc_onnx_unsupported(c, "Constant without a tensor, float(s) or int(s) value (sparse and string "
                               "constants are not supported)");
}

static bool map_shape(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t start = evtc_onnx_attr_int(c, "start", 0), end = evtc_onnx_attr_int(c, "end", t->rank);
  if (start < 0) start += t->rank;
  if (end < 0) end += t->rank;
  start = start < 0 ? 0 : start > t->rank ? t->rank : start;
  end = end < start ? start : end > t->rank ? t->rank : end;
  double dims[EVTC_MAX_RANK];
  int64_t n = end - start;
  for (int64_t i = 0; i < n; i++) dims[i] = (double)t->shape[start + i];
  return evtc_onnx_out_const(c, 0, evtc_type_make(EVTC_I64, 1, &n), dims);
}

static bool map_size(evtc_onnx_ctx *c) {
  double n = (double)evtc_type_numel(evtc_onnx_type(c, 0));
  return evtc_onnx_out_const(c, 0, evtc_type_make(EVTC_I64, 0, NULL), &n);
}

static bool map_constant_of_shape(evtc_onnx_ctx *c) {
  int64_t shape[EVTC_MAX_RANK];
  int n;
  if (!evtc_onnx_ints(c, 0, shape, EVTC_MAX_RANK, &n)) return false;
  evtc_type vt = evtc_type_make(EVTC_F32, 0, NULL);
  double *v = NULL, zero = 0;
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, "value");
  if (a && a->t) {
    if (!evtc_onnx_tensor_decode(c, a->t, "value", &vt, &v)) return false;
    if (evtc_type_numel(&vt) != 1) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "value must hold one element");
  }
  evtc_type t = evtc_type_make(vt.dtype, n, shape);
  int64_t numel = evtc_type_numel(&t);
  for (int i = 0; i < n; i++)
    if (shape[i] < 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "negative dim in the shape");
  if (numel < 0 || numel > evtc_onnx_max_known(c))
    return evtc_onnx_unsupported(c, "a constant of more than %lld elements", (long long)evtc_onnx_max_known(c));
  double *data = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(numel ? numel : 1));
  for (int64_t i = 0; i < numel; i++) data[i] = v ? v[0] : zero;
  return evtc_onnx_out_const(c, 0, t, data);
}

static bool map_range(evtc_onnx_ctx *c) {
  const double *s = evtc_onnx_data(c, 0), *l = evtc_onnx_data(c, 1), *d = evtc_onnx_data(c, 2);
  if (!s || !l || !d) return evtc_onnx_unsupported(c, "Range bounds must be known at import");
  if (*d == 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "delta is 0");
  double count = ceil((*l - *s) / *d);
  if (!(count <= (double)evtc_onnx_max_known(c)))          /* NaN too */
    return evtc_onnx_unsupported(c, "a Range of more than %lld elements", (long long)evtc_onnx_max_known(c));
  int64_t n = count > 0 ? (int64_t)count : 0;
  double *data = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) data[i] = *s + (double)i * *d;
  return evtc_onnx_out_const(c, 0, evtc_type_make(evtc_onnx_type(c, 0)->dtype, 1, &n), data);
}

const evtc_onnx_op evtc_onnx_ops_const[] = {
    {"Constant", map_constant}, {"Shape", map_shape}, {"Size", map_size},
    {"ConstantOfShape", map_constant_of_shape}, {"Range", map_range},
    {NULL, NULL},
};
