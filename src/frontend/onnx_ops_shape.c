/* onnx_ops_shape.c -- ONNX layout ops: Reshape, Flatten, Transpose,
 * Squeeze, Unsqueeze, Slice, Split, Concat, Pad, Gather, Expand, Tile and
 * Identity.
 *
 * Shape-like operands (Reshape's shape, Slice's starts, ...) were inputs
 * from some opset on and attributes before; either way they must be known
 * at import, since evtc shapes are static.
 */
#include <string.h>

#include "frontend/onnx_internal.h"

#define MAXV (2 * EVTC_MAX_RANK)

static evtc_node *reshape(evtc_onnx_ctx *c, evtc_node *x, int rank, const int64_t *shape, const char *name) {
  if (!x) return NULL;
  evtc_attr a = evtc_attr_ints("shape", rank, shape);
  return evtc_node_add(c->g, EVTC_OP_RESHAPE, &x, 1, &a, 1, name);
}

/* Reads an operand that is input `i` from opset `since` on, attribute
 * `attr` before: *n values, -1 when absent.  False after an error. */
static bool ints_operand(evtc_onnx_ctx *c, int i, int since, const char *attr, int64_t *out, int cap, int *n) {
  if (c->opset >= since) {
    *n = -1;
    return !evtc_onnx_has(c, i) || evtc_onnx_ints(c, i, out, cap, n);
  }
  *n = evtc_onnx_attr_ints(c, attr, out, cap);
  return *n != -2;
}

static bool map_reshape(evtc_onnx_ctx *c) {
  int64_t shape[MAXV];
  int n;
  if (!ints_operand(c, 1, 5, "shape", shape, MAXV, &n)) return false;
  if (n < 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "Reshape needs a shape");
  const evtc_type *t = evtc_onnx_type(c, 0);
  bool allowzero = evtc_onnx_attr_int(c, "allowzero", 0) != 0;
  for (int i = 0; i < n; i++)
    if (shape[i] == 0 && !allowzero) {
      if (i >= t->rank) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "shape[%d] = 0 copies a dim the input lacks", i);
      shape[i] = t->shape[i];
    }
  return evtc_onnx_out(c, 0, reshape(c, evtc_onnx_in(c, 0), n, shape, evtc_onnx_out_name(c, 0)));
}

static bool map_flatten(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t axis = evtc_onnx_attr_int(c, "axis", 1);
  if (axis < 0) axis += t->rank;
  if (axis < 0 || axis > t->rank) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis is out of range for rank %d", t->rank);
  int64_t sh[2] = {1, 1};
  for (int d = 0; d < t->rank; d++) sh[d >= axis] *= t->shape[d];
  return evtc_onnx_out(c, 0, reshape(c, evtc_onnx_in(c, 0), 2, sh, evtc_onnx_out_name(c, 0)));
}

static bool map_transpose(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t perm[EVTC_MAX_RANK];
  int n = evtc_onnx_attr_ints(c, "perm", perm, EVTC_MAX_RANK);
  if (n == -2) return false;
  if (n < 0) {
    n = t->rank;
    for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
  }
  evtc_node *x = evtc_onnx_in(c, 0);
  evtc_attr a = evtc_attr_ints("perm", n, perm);
  return evtc_onnx_out(c, 0, x ? evtc_node_add(c->g, EVTC_OP_PERMUTE, &x, 1, &a, 1, evtc_onnx_out_name(c, 0)) : NULL);
}

/* Squeeze and Unsqueeze: reshapes computed from the axes. */
static bool map_squeeze(evtc_onnx_ctx *c) {
  bool un = c->node->op_type[0] == 'U';
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t axes[MAXV], shape[MAXV];
  int n;
  if (!ints_operand(c, 1, 13, "axes", axes, MAXV, &n)) return false;
  int out_rank = un ? t->rank + (n > 0 ? n : 0) : t->rank;
  if (un && n < 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "Unsqueeze needs axes");
  if (out_rank > EVTC_MAX_RANK) return evtc_onnx_unsupported(c, "result rank %d exceeds %d", out_rank, EVTC_MAX_RANK);
  bool mark[MAXV] = {false};
  for (int i = 0; i < n; i++) {
    int ax = evtc_axis_norm(axes[i], out_rank);
    if (ax < 0 || mark[ax]) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis %lld is out of range or repeated",
                                                  (long long)axes[i]);
    if (!un && t->shape[ax] != 1)
      return evtc_onnx_fail(c, EVTC_ERR_TYPE, "cannot squeeze dim %d of size %lld", ax, (long long)t->shape[ax]);
    mark[ax] = true;
  }
  int r = 0;
  for (int d = 0, k = 0; d < out_rank; d++) {
    if (un) shape[r++] = mark[d] ? 1 : t->shape[k++];
    else if (!(n > 0 ? mark[d] : t->shape[d] == 1)) shape[r++] = t->shape[d];
  }
  return evtc_onnx_out(c, 0, reshape(c, evtc_onnx_in(c, 0), r, shape, evtc_onnx_out_name(c, 0)));
}

static evtc_node *slice(evtc_onnx_ctx *c, evtc_node *x, int k, const int64_t *axes, const int64_t *starts,
                        const int64_t *ends, const int64_t *steps, const char *name) {
  if (!x) return NULL;
  evtc_attr a[4] = {evtc_attr_ints("axes", k, axes), evtc_attr_ints("starts", k, starts),
                    evtc_attr_ints("ends", k, ends), evtc_attr_ints("steps", k, steps)};
  return evtc_node_add(c->g, EVTC_OP_SLICE, &x, 1, a, 4, name);
}

static bool map_slice(evtc_onnx_ctx *c) {
  int64_t starts[MAXV], ends[MAXV], axes[MAXV], steps[MAXV];
  int ns, ne, na, nt = -1;
  if (c->opset >= 10) {
    if (!evtc_onnx_ints(c, 1, starts, MAXV, &ns) || !evtc_onnx_ints(c, 2, ends, MAXV, &ne)) return false;
    na = -1;
    if (evtc_onnx_has(c, 3) && !evtc_onnx_ints(c, 3, axes, MAXV, &na)) return false;
    if (evtc_onnx_has(c, 4) && !evtc_onnx_ints(c, 4, steps, MAXV, &nt)) return false;
  } else {
    ns = evtc_onnx_attr_ints(c, "starts", starts, MAXV);
    ne = evtc_onnx_attr_ints(c, "ends", ends, MAXV);
    na = evtc_onnx_attr_ints(c, "axes", axes, MAXV);
    if (ns == -2 || ne == -2 || na == -2) return false;
  }
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return evtc_onnx_fail(c, EVTC_ERR_INVALID, "starts, ends, axes and steps must have the same length");
  for (int i = 0; i < ns; i++) {
    if (na < 0) axes[i] = i;
    if (nt < 0) steps[i] = 1;
    if (steps[i] < 1) return evtc_onnx_unsupported(c, "Slice step %lld: evtc slices with steps >= 1 only",
                                                   (long long)steps[i]);
  }
  return evtc_onnx_out(c, 0, slice(c, evtc_onnx_in(c, 0), ns, axes, starts, ends, steps, evtc_onnx_out_name(c, 0)));
}

static bool map_split(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t axis = evtc_onnx_attr_int(c, "axis", 0), split[64];
  int ax = evtc_axis_norm(axis, t->rank), n;
  if (ax < 0) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis %lld is out of range", (long long)axis);
  if (!ints_operand(c, 1, 13, "split", split, 64, &n)) return false;
  if (n < 0) {                                   /* equal parts, the last one smaller */
    n = c->n_out;
    if (n > 64) return evtc_onnx_unsupported(c, "more than 64 outputs");
    int64_t part = (t->shape[ax] + n - 1) / n;
    for (int i = 0; i < n; i++) split[i] = i < n - 1 ? part : t->shape[ax] - part * (n - 1);
  }
  if (n != c->n_out) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "split has %d sizes for %d outputs", n, c->n_out);
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    int64_t a = ax, s = at, e = at + split[i], one = 1;
    if (split[i] < 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "negative split size");
    if (!evtc_onnx_out(c, i, slice(c, evtc_onnx_in(c, 0), 1, &a, &s, &e, &one, evtc_onnx_out_name(c, i))))
      return false;
    at = e;
  }
  if (at != t->shape[ax])
    return evtc_onnx_fail(c, EVTC_ERR_INVALID, "split sizes add up to %lld, the axis has %lld", (long long)at,
                          (long long)t->shape[ax]);
  return true;
}

static bool map_concat(evtc_onnx_ctx *c) {
  evtc_node **in = evtc_arena_alloc(c->arena, sizeof *in * (size_t)(c->n_in + 1));
  int k = 0;
  for (int i = 0; i < c->n_in; i++) {
    if (!evtc_onnx_has(c, i)) continue;
    if (!(in[k++] = evtc_onnx_in(c, i))) return false;
  }
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, "axis");
  if (!a && c->opset >= 4) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "Concat needs an axis");
  evtc_attr axis = evtc_attr_int("axis", a ? a->i : 1);
  return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_CONCAT, in, k, &axis, 1, evtc_onnx_out_name(c, 0)));
}

static bool map_pad(evtc_onnx_ctx *c) {
  const char *mode = evtc_onnx_attr_str(c, "mode", "constant");
  if (strcmp(mode, "constant") != 0) return evtc_onnx_unsupported(c, "Pad mode '%s': evtc pads with a constant", mode);
  int64_t pads[MAXV];
  int n;
  double value = 0;
  if (c->opset >= 11) {
    if (!evtc_onnx_ints(c, 1, pads, MAXV, &n)) return false;
    if (evtc_onnx_has(c, 3)) return evtc_onnx_unsupported(c, "Pad with an axes input");
    if (evtc_onnx_has(c, 2)) {
      const double *v = evtc_onnx_data(c, 2);
      if (!v) return evtc_onnx_unsupported(c, "the pad value must be known at import");
      value = v[0];
    }
  } else {
    n = evtc_onnx_attr_ints(c, c->opset >= 2 ? "pads" : "paddings", pads, MAXV);
    value = evtc_onnx_attr_float(c, "value", 0.0);
    if (n < 0) return n == -2 ? false : evtc_onnx_fail(c, EVTC_ERR_INVALID, "Pad needs pads");
  }
  for (int i = 0; i < n; i++)
    if (pads[i] < 0) return evtc_onnx_unsupported(c, "negative pads (cropping)");
  evtc_node *x = evtc_onnx_in(c, 0);
  evtc_attr a[2] = {evtc_attr_ints("pads", n, pads), evtc_attr_float("value", value)};
  return evtc_onnx_out(c, 0, x ? evtc_node_add(c->g, EVTC_OP_PAD, &x, 1, a, 2, evtc_onnx_out_name(c, 0)) : NULL);
}

/* Gather along axis; known negative indices are made positive here. */
static bool map_gather(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t axis = evtc_onnx_attr_int(c, "axis", 0);
  int ax = evtc_axis_norm(axis, t->rank);
  if (ax < 0) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis %lld is out of range for rank %d", (long long)axis,
                                    t->rank);
  evtc_node *idx;
  const double *known = evtc_onnx_data(c, 1);
  if (known) {
    const evtc_type *it = evtc_onnx_type(c, 1);
    int64_t n = evtc_type_numel(it);
    double *fixed = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) fixed[i] = known[i] < 0 ? known[i] + (double)t->shape[ax] : known[i];
    idx = evtc_onnx_const(c, *it, fixed, 0);
  } else {
    idx = evtc_onnx_in(c, 1);
  }
  evtc_node *in[2] = {evtc_onnx_in(c, 0), idx};
  evtc_attr a = evtc_attr_int("axis", ax);
  return evtc_onnx_out(c, 0, in[0] && in[1] ? evtc_node_add(c->g, EVTC_OP_GATHER, in, 2, &a, 1, evtc_onnx_out_name(c, 0))
                                            : NULL);
}

/* Expand: bidirectional broadcast of the input with the given shape. */
static bool map_expand(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t want[MAXV], out[MAXV];
  int n;
  if (!evtc_onnx_ints(c, 1, want, MAXV, &n)) return false;
  int r = n > t->rank ? n : t->rank;
  if (r > EVTC_MAX_RANK) return evtc_onnx_unsupported(c, "result rank %d exceeds %d", r, EVTC_MAX_RANK);
  for (int d = 0; d < r; d++) {
    int dt = d - (r - t->rank), dw = d - (r - n);
    int64_t a = dt >= 0 ? t->shape[dt] : 1, b = dw >= 0 ? want[dw] : 1;
    if (a != b && a != 1 && b != 1)
      return evtc_onnx_fail(c, EVTC_ERR_TYPE, "cannot broadcast dim %lld to %lld", (long long)a, (long long)b);
    out[d] = a == 1 ? b : a;
  }
  evtc_node *x = evtc_onnx_in(c, 0);
  evtc_attr a = evtc_attr_ints("shape", r, out);
  return evtc_onnx_out(c, 0, x ? evtc_node_add(c->g, EVTC_OP_EXPAND, &x, 1, &a, 1, evtc_onnx_out_name(c, 0)) : NULL);
}

/* Tile: interleave size-1 dims, expand them to the repeats, merge pairs. */
static bool map_tile(evtc_onnx_ctx *c) {
  const evtc_type *t = evtc_onnx_type(c, 0);
  int64_t rep[MAXV], inter[MAXV], big[MAXV], out[MAXV];
  int n;
  if (!evtc_onnx_ints(c, 1, rep, MAXV, &n)) return false;
  if (n != t->rank) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "repeats has %d values for rank %d", n, t->rank);
  if (2 * n > EVTC_MAX_RANK) return evtc_onnx_unsupported(c, "Tile of rank %d (at most %d)", n, EVTC_MAX_RANK / 2);
  for (int d = 0; d < n; d++) {
    if (rep[d] < 0) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "negative repeat");
    inter[2 * d] = 1;
    inter[2 * d + 1] = t->shape[d];
    big[2 * d] = rep[d];
    big[2 * d + 1] = t->shape[d];
    out[d] = rep[d] * t->shape[d];
  }
  evtc_node *x = reshape(c, evtc_onnx_in(c, 0), 2 * n, inter, NULL);
  evtc_attr a = evtc_attr_ints("shape", 2 * n, big);
  if (x) x = evtc_node_add(c->g, EVTC_OP_EXPAND, &x, 1, &a, 1, NULL);
  return evtc_onnx_out(c, 0, reshape(c, x, n, out, evtc_onnx_out_name(c, 0)));
}

static bool map_identity(evtc_onnx_ctx *c) { return evtc_onnx_out(c, 0, evtc_onnx_in(c, 0)); }

const evtc_onnx_op evtc_onnx_ops_shape[] = {
    {"Reshape", map_reshape}, {"Flatten", map_flatten}, {"Transpose", map_transpose}, {"Squeeze", map_squeeze},
    {"Unsqueeze", map_squeeze}, {"Slice", map_slice},   {"Split", map_split},         {"Concat", map_concat},
    {"Pad", map_pad},         {"Gather", map_gather},   {"Expand", map_expand},       {"Tile", map_tile},
    {"Identity", map_identity},
    {NULL, NULL},
};
