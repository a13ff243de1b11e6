/* interp_kernels.h -- what the interpreter's op kernels share (internal).
 *
 * A kernel computes one node: it reads its inputs' values (row-major
 * doubles, already rounded to their dtypes) and writes every element of
 * its output in float64; the core then rounds the output to the node's
 * dtype.  Kernels are grouped by op family, one file each:
 * interp_elementwise.c, interp_reduce.c, interp_layout.c, interp_linalg.c,
 * interp_pool.c, interp_composite.c, interp_attention.c; interp.c holds the leaves, the
 * dispatch table and the driver.
 */
#ifndef EVTC_INTERP_KERNELS_H
#define EVTC_INTERP_KERNELS_H

#include <stdint.h>

#include "ir/ir.h"

typedef struct evtc_kernel_args {
  const evtc_node *node;
  const double *const *in;  /* one value per input of node */
  double *out;              /* numel(node->type) doubles to fill */
  const double *given;      /* leaves: the caller's data (NULL when unset) */
  uint64_t step;            /* dropout offset */
  evtc_diag *diag;
} evtc_kernel_args;

typedef evtc_status (*evtc_interp_kernel)(const evtc_kernel_args *k);

/* Records "node %name (op): cause" as EVTC_ERR_RUNTIME; returns that status. */
evtc_status evtc_interp_fail(const evtc_kernel_args *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline const evtc_type *evtc_kernel_in_type(const evtc_kernel_args *k, int i) {
  return &k->node->inputs[i]->type;
}

/* Row-wise NumPy broadcasting of up to 3 inputs to an output shape.  The
 * output is walked as `rows` rows of `inner` elements (the last dim); for
 * row r, off[j] is the offset of input j and inner_stride[j] its step
 * along the row (0 when stretched). Usage:
 *   evtc_bcast it; evtc_bcast_init(&it, out_rank, out_shape, n, types);
 *   for (int64_t r = 0; r < it.rows; r++, evtc_bcast_next(&it)) ... */
typedef struct evtc_bcast {
  int rank, n_in;
  int64_t shape[EVTC_MAX_RANK];
  int64_t strides[3][EVTC_MAX_RANK];
  int64_t idx[EVTC_MAX_RANK];
  int64_t off[3];
  int64_t inner_stride[3];
  int64_t rows, inner;
} evtc_bcast;

void evtc_bcast_init(evtc_bcast *it, int rank, const int64_t *shape, int n_in, const evtc_type *const *ins);
void evtc_bcast_next(evtc_bcast *it);

/* Kernels, by family (each handles every op its dispatch entries name). */
evtc_status evtc_kernel_leaf(const evtc_kernel_args *k);          /* input, param, state */
evtc_status evtc_kernel_const(const evtc_kernel_args *k);
evtc_status evtc_kernel_unary(const evtc_kernel_args *k);         /* neg .. cos, cast */
evtc_status evtc_kernel_binary(const evtc_kernel_args *k);        /* add .. ge */
evtc_status evtc_kernel_where(const evtc_kernel_args *k);
evtc_status evtc_kernel_reduce(const evtc_kernel_args *k);        /* reduce_sum/mean/max/min */
evtc_status evtc_kernel_reshape(const evtc_kernel_args *k);
evtc_status evtc_kernel_permute(const evtc_kernel_args *k);
evtc_status evtc_kernel_expand(const evtc_kernel_args *k);
evtc_status evtc_kernel_slice(const evtc_kernel_args *k);
evtc_status evtc_kernel_concat(const evtc_kernel_args *k);
evtc_status evtc_kernel_pad(const evtc_kernel_args *k);
evtc_status evtc_kernel_gather(const evtc_kernel_args *k);
evtc_status evtc_kernel_one_hot(const evtc_kernel_args *k);
evtc_status evtc_kernel_scatter_add(const evtc_kernel_args *k);
evtc_status evtc_kernel_matmul(const evtc_kernel_args *k);        /* matmul, batch_matmul */
evtc_status evtc_kernel_conv2d(const evtc_kernel_args *k);
evtc_status evtc_kernel_conv2d_backward_input(const evtc_kernel_args *k);
evtc_status evtc_kernel_conv2d_backward_weight(const evtc_kernel_args *k);
evtc_status evtc_kernel_maxpool2d(const evtc_kernel_args *k);
evtc_status evtc_kernel_maxpool2d_backward(const evtc_kernel_args *k);
evtc_status evtc_kernel_avgpool2d(const evtc_kernel_args *k);
evtc_status evtc_kernel_avgpool2d_backward(const evtc_kernel_args *k);
evtc_status evtc_kernel_global_avgpool(const evtc_kernel_args *k);
evtc_status evtc_kernel_softmax(const evtc_kernel_args *k);       /* softmax, log_softmax */
evtc_status evtc_kernel_layernorm(const evtc_kernel_args *k);
evtc_status evtc_kernel_batchnorm(const evtc_kernel_args *k);
evtc_status evtc_kernel_batchnorm_running(const evtc_kernel_args *k); /* running mean, var */
evtc_status evtc_kernel_dropout(const evtc_kernel_args *k);
evtc_status evtc_kernel_cross_entropy(const evtc_kernel_args *k);
evtc_status evtc_kernel_mse(const evtc_kernel_args *k);
evtc_status evtc_kernel_embedding(const evtc_kernel_args *k);
evtc_status evtc_kernel_attention(const evtc_kernel_args *k);     /* attention, attention_lse */
evtc_status evtc_kernel_attention_backward(const evtc_kernel_args *k); /* attention_backward_q / _kv */

#endif
