/* interp_layout.c -- data movement: reshape, permute, expand, slice, concat,
 * pad, gather, one_hot, scatter_add.
 *
 * Index errors are input errors, not crashes: gather and scatter_add accept
 * indices in [-n, n) (negative ones count from the end, as in ONNX Gather)
 * and report anything else naming the node and the offending index.
 */
#include <string.h>

#include "runtime/interp_kernels.h"

evtc_status evtc_kernel_reshape(const evtc_kernel_args *k) {
  memcpy(k->out, k->in[0], sizeof(double) * (size_t)evtc_type_numel(&k->node->type));
  return EVTC_OK;
}

/* Copies a strided view into out: out is row-major over shape; the element
 * at index (i_0..i_r-1) is src[sum i_d * stride[d]]. */
static void copy_strided(double *out, const double *src, int rank, const int64_t *shape, const int64_t *stride) {
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= shape[d];
  if (numel == 0) return;
  int64_t idx[EVTC_MAX_RANK] = {0}, off = 0;
  int last = rank - 1;
  int64_t inner = rank ? shape[last] : 1, step = rank ? stride[last] : 0;
  for (int64_t o = 0; o < numel; o += inner) {
    for (int64_t i = 0; i < inner; i++) out[o + i] = src[off + i * step];
    for (int d = last - 1; d >= 0; d--) {
      off += stride[d];
      if (++idx[d] < shape[d]) break;
      off -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/* Row-major strides of a type's shape. */
static void dense_strides(const evtc_type *t, int64_t *s) {
  int64_t stride = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    s[d] = stride;
    stride *= t->shape[d];
  }
}

evtc_status evtc_kernel_permute(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  const evtc_attr *perm = evtc_node_attr(k->node, "perm");
  int64_t in_s[EVTC_MAX_RANK], s[EVTC_MAX_RANK];
  dense_strides(t, in_s);
  for (int d = 0; d < t->rank; d++) s[d] = in_s[evtc_axis_norm(perm->v.ints[d], t->rank)];
  copy_strided(k->out, k->in[0], t->rank, k->node->type.shape, s);
  return EVTC_OK;
}

evtc_status evtc_kernel_expand(const evtc_kernel_args *k) {
  const evtc_type *ins[1] = {evtc_kernel_in_type(k, 0)};
  const evtc_type *o = &k->node->type;
  evtc_bcast it;
  evtc_bcast_init(&it, o->rank, o->shape, 1, ins);
  int64_t s[EVTC_MAX_RANK];
  memcpy(s, it.strides[0], sizeof s);
  copy_strided(k->out, k->in[0], o->rank, o->shape, s);
  return EVTC_OK;
}

/* Python's clamped start of start:...:step (step >= 1) on a dim of size n. */
static int64_t slice_start(int64_t start, int64_t n) {
  if (start < 0) start += n;
  return start < 0 ? 0 : start > n ? n : start;
}

evtc_status evtc_kernel_slice(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  const evtc_attr *axes = evtc_node_attr(n, "axes"), *starts = evtc_node_attr(n, "starts"),
                  *steps = evtc_node_attr(n, "steps");
  int64_t in_s[EVTC_MAX_RANK], s[EVTC_MAX_RANK], off = 0;
  dense_strides(t, in_s);
  memcpy(s, in_s, sizeof s);
  for (int i = 0; i < starts->n; i++) {
    int ax = axes->n ? evtc_axis_norm(axes->v.ints[i], t->rank) : i;
    int64_t step = steps->n ? steps->v.ints[i] : 1;
    off += slice_start(starts->v.ints[i], t->shape[ax]) * in_s[ax];
    s[ax] = in_s[ax] * step;
  }
  copy_strided(k->out, k->in[0] + off, t->rank, n->type.shape, s);
  return EVTC_OK;
}

evtc_status evtc_kernel_concat(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *o = &n->type;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), o->rank);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; d++) outer *= o->shape[d];
  for (int d = ax + 1; d < o->rank; d++) inner *= o->shape[d];
  int64_t out_row = o->shape[ax] * inner, at = 0;
  for (int j = 0; j < n->n_inputs; j++) {
    int64_t row = evtc_kernel_in_type(k, j)->shape[ax] * inner;
    for (int64_t r = 0; r < outer; r++)
      memcpy(k->out + r * out_row + at, k->in[j] + r * row, sizeof(double) * (size_t)row);
    at += row;
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_pad(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *t = evtc_kernel_in_type(k, 0), *o = &n->type;
  const evtc_attr *pads = evtc_node_attr(n, "pads"), *interior = evtc_node_attr(n, "interior");
  double value = evtc_node_float(n, "value");
  int64_t numel = evtc_type_numel(o);
  for (int64_t i = 0; i < numel; i++) k->out[i] = value;
  /* the input is a strided view of the output: start at the lo pads, step interior+1 */
  int64_t out_s[EVTC_MAX_RANK], s[EVTC_MAX_RANK], off = 0;
  dense_strides(o, out_s);
  for (int d = 0; d < t->rank; d++) {
    off += pads->v.ints[d] * out_s[d];
    s[d] = out_s[d] * (1 + (interior->n ? interior->v.ints[d] : 0));
  }
  int64_t n_in = evtc_type_numel(t);
  if (n_in == 0) return EVTC_OK;
  int64_t idx[EVTC_MAX_RANK] = {0}, pos = off;
  for (int64_t i = 0; i < n_in; i++) {
    k->out[pos] = k->in[0][i];
    for (int d = t->rank - 1; d >= 0; d--) {
      pos += s[d];
      if (++idx[d] < t->shape[d]) break;
      pos -= s[d] * t->shape[d];
      idx[d] = 0;
    }
  }
  return EVTC_OK;
}

/* Checks, before anything is written, that each of the m indices lies in
 * [-size, size); fails naming the node, the index and the axis. */
static evtc_status check_indices(const evtc_kernel_args *k, const double *idx, int64_t m, int64_t size, int ax) {
  for (int64_t j = 0; j < m; j++) {
    double v = idx[j];      /* compared as a double: no cast of a huge value */
    if (!(v >= (double)-size && v < (double)size))
      return evtc_interp_fail(k, "index %.0f (element %lld) is out of range for axis %d of size %lld", v,
                              (long long)j, ax, (long long)size);
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_gather(const evtc_kernel_args *k) {
  const evtc_type *x = evtc_kernel_in_type(k, 0), *it = evtc_kernel_in_type(k, 1);
  int ax = evtc_axis_norm(evtc_node_int(k->node, "axis"), x->rank);
  int64_t outer = 1, inner = 1, size = x->shape[ax], m = evtc_type_numel(it);
  for (int d = 0; d < ax; d++) outer *= x->shape[d];
  for (int d = ax + 1; d < x->rank; d++) inner *= x->shape[d];
  if (check_indices(k, k->in[1], m, size, ax) != EVTC_OK) return EVTC_ERR_RUNTIME;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < m; j++) {
      int64_t v = (int64_t)k->in[1][j];
      if (v < 0) v += size;
      memcpy(k->out + (o * m + j) * inner, k->in[0] + (o * size + v) * inner, sizeof(double) * (size_t)inner);
    }
  return EVTC_OK;
}

evtc_status evtc_kernel_one_hot(const evtc_kernel_args *k) {
  int64_t depth = evtc_node_int(k->node, "depth"), m = evtc_type_numel(evtc_kernel_in_type(k, 0));
  bool checked = evtc_node_int(k->node, "checked") != 0;
  for (int64_t j = 0; j < m; j++) {
    double v = k->in[0][j];
    if (checked && !(v >= 0 && v < (double)depth))
      return evtc_interp_fail(k, "label %.0f (element %lld) is out of range [0, %lld)", v, (long long)j,
                              (long long)depth);
    for (int64_t c = 0; c < depth; c++) k->out[j * depth + c] = (v == (double)c) ? 1.0 : 0.0;
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_scatter_add(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *o = &n->type, *it = evtc_kernel_in_type(k, 1);
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), o->rank);
  /* indices in [-size, size); rows of the output (the base's) may run beyond size */
  int64_t outer = 1, inner = 1, size = evtc_node_int(n, "size"), rows = o->shape[ax], m = evtc_type_numel(it);
  for (int d = 0; d < ax; d++) outer *= o->shape[d];
  for (int d = ax + 1; d < o->rank; d++) inner *= o->shape[d];
  if (check_indices(k, k->in[1], m, size, ax) != EVTC_OK) return EVTC_ERR_RUNTIME;
  int64_t numel = evtc_type_numel(o);
  for (int64_t i = 0; i < numel; i++) k->out[i] = n->n_inputs == 3 ? k->in[2][i] : 0.0;
  for (int64_t p = 0; p < outer; p++)
    for (int64_t j = 0; j < m; j++) {
      int64_t v = (int64_t)k->in[1][j];
      if (v < 0) v += size;
      double *dst = k->out + (p * rows + v) * inner;
      const double *src = k->in[0] + (p * m + j) * inner;
      for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
    }
  return EVTC_OK;
}
