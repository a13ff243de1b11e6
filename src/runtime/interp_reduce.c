/* interp_reduce.c -- reduce_sum, reduce_mean, reduce_max, reduce_min.
 *
 * The input is walked once in row-major order; each element is folded into
 * the output element it reduces to, found through strides that are zero on
 * the reduced axes.  This needs no transposition and touches the input
 * sequentially whatever the axes.
 */
#include <math.h>

#include "runtime/interp_kernels.h"

evtc_status evtc_kernel_reduce(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  const evtc_attr *axes = evtc_node_attr(n, "axes");
  bool reduced[EVTC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) reduced[d] = axes->n == 0;
  for (int i = 0; i < axes->n; i++) reduced[evtc_axis_norm(axes->v.ints[i], t->rank)] = true;

  /* out_stride[d]: step in the output for a step along input axis d */
  int64_t out_stride[EVTC_MAX_RANK], stride = 1, count = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    out_stride[d] = reduced[d] ? 0 : stride;
    if (!reduced[d]) stride *= t->shape[d];
    else count *= t->shape[d];
  }
  int64_t n_out = evtc_type_numel(&n->type), n_in = evtc_type_numel(t);
  double init = n->op == EVTC_OP_REDUCE_MAX ? -INFINITY : n->op == EVTC_OP_REDUCE_MIN ? INFINITY : 0.0;
  for (int64_t i = 0; i < n_out; i++) k->out[i] = init;

  const double *x = k->in[0];
  int64_t idx[EVTC_MAX_RANK] = {0}, o = 0;
  int last = t->rank - 1;
  int64_t inner = t->rank ? t->shape[last] : 1, inner_step = t->rank ? out_stride[last] : 0;
  for (int64_t base = 0; base < n_in; base += inner) {
    const double *row = x + base;
    switch (n->op) {
      case EVTC_OP_REDUCE_SUM:
      case EVTC_OP_REDUCE_MEAN:
        for (int64_t i = 0; i < inner; i++) k->out[o + i * inner_step] += row[i];
        break;
      case EVTC_OP_REDUCE_MAX:
        for (int64_t i = 0; i < inner; i++) {
          double *dst = &k->out[o + i * inner_step];
          if (row[i] > *dst || row[i] != row[i]) *dst = row[i];
        }
        break;
      default:
        for (int64_t i = 0; i < inner; i++) {
          double *dst = &k->out[o + i * inner_step];
          if (row[i] < *dst || row[i] != row[i]) *dst = row[i];
        }
        break;
    }
    for (int d = last - 1; d >= 0; d--) {   /* odometer over all but the last axis */
      o += out_stride[d];
      if (++idx[d] < t->shape[d]) break;
      o -= out_stride[d] * t->shape[d];
      idx[d] = 0;
    }
  }
  if (n->op == EVTC_OP_REDUCE_MEAN)
    for (int64_t i = 0; i < n_out; i++) k->out[i] /= (double)count;
  return EVTC_OK;
}
