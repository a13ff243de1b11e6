/* interp.c -- the reference interpreter's driver: buffers, the dispatch
 * table (one kernel per op, ORDER OP), leaves and shared helpers.
 *
 * evtc_interp_new allocates one output buffer per node up front, so a run
 * does no allocation beyond what a kernel needs for scratch.  A run walks
 * the nodes in topological order, calls each node's kernel with its inputs'
 * buffers and rounds the output to the node's dtype.
 */
#include "runtime/interp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/interp_kernels.h"
#include "runtime/precision.h"

/* ORDER OP: one entry per line of ops.def. */
static const evtc_interp_kernel kernels[] = {
    evtc_kernel_leaf,                       /* input */
    evtc_kernel_leaf,                       /* param */
    evtc_kernel_leaf,                       /* state */
    evtc_kernel_const,                      /* const */
    evtc_kernel_unary,                      /* neg */
    evtc_kernel_unary,                      /* abs */
    evtc_kernel_unary,                      /* sign */
    evtc_kernel_unary,                      /* exp */
    evtc_kernel_unary,                      /* log */
    evtc_kernel_unary,                      /* sqrt */
    evtc_kernel_unary,                      /* rsqrt */
    evtc_kernel_unary,                      /* reciprocal */
    evtc_kernel_unary,                      /* tanh */
    evtc_kernel_unary,                      /* sigmoid */
    evtc_kernel_unary,                      /* relu */
    evtc_kernel_unary,                      /* gelu */
    evtc_kernel_unary,                      /* gelu_tanh */
    evtc_kernel_unary,                      /* erf */
    evtc_kernel_unary,                      /* sin */
    evtc_kernel_unary,                      /* cos */
    evtc_kernel_unary,                      /* cast */
    evtc_kernel_binary,                     /* add */
    evtc_kernel_binary,                     /* sub */
    evtc_kernel_binary,                     /* mul */
    evtc_kernel_binary,                     /* div */
    evtc_kernel_binary,                     /* pow */
    evtc_kernel_binary,                     /* max */
    evtc_kernel_binary,                     /* min */
    evtc_kernel_binary,                     /* eq */
    evtc_kernel_binary,                     /* ne */
    evtc_kernel_binary,                     /* lt */
    evtc_kernel_binary,                     /* le */
    evtc_kernel_binary,                     /* gt */
    evtc_kernel_binary,                     /* ge */
    evtc_kernel_where,                      /* where */
    evtc_kernel_reduce,                     /* reduce_sum */
    evtc_kernel_reduce,                     /* reduce_mean */
    evtc_kernel_reduce,                     /* reduce_max */
    evtc_kernel_reduce,                     /* reduce_min */
    evtc_kernel_reshape,                    /* reshape */
    evtc_kernel_permute,                    /* permute */
    evtc_kernel_expand,                     /* expand */
    evtc_kernel_slice,                      /* slice */
    evtc_kernel_concat,                     /* concat */
    evtc_kernel_pad,                        /* pad */
    evtc_kernel_gather,                     /* gather */
    evtc_kernel_one_hot,                    /* one_hot */
    evtc_kernel_scatter_add,                /* scatter_add */
    evtc_kernel_matmul,                     /* matmul */
    evtc_kernel_matmul,                     /* batch_matmul */
    evtc_kernel_conv2d,                     /* conv2d */
    evtc_kernel_conv2d_backward_input,      /* conv2d_backward_input */
    evtc_kernel_conv2d_backward_weight,     /* conv2d_backward_weight */
    evtc_kernel_maxpool2d,                  /* maxpool2d */
    evtc_kernel_maxpool2d_backward,         /* maxpool2d_backward */
    evtc_kernel_avgpool2d,                  /* avgpool2d */
    evtc_kernel_avgpool2d_backward,         /* avgpool2d_backward */
    evtc_kernel_global_avgpool,             /* global_avgpool */
    evtc_kernel_softmax,                    /* softmax */
    evtc_kernel_softmax,                    /* log_softmax */
    evtc_kernel_layernorm,                  /* layernorm */
    evtc_kernel_batchnorm,                  /* batchnorm */
    evtc_kernel_batchnorm_running,          /* batchnorm_running_mean */
    evtc_kernel_batchnorm_running,          /* batchnorm_running_var */
    evtc_kernel_dropout,                    /* dropout */
    evtc_kernel_cross_entropy,              /* cross_entropy */
    evtc_kernel_mse,                        /* mse */
    evtc_kernel_embedding,                  /* embedding */
    evtc_kernel_attention,                  /* attention */
    evtc_kernel_attention,                  /* attention_lse */
    evtc_kernel_attention_backward,         /* attention_backward_q */
    evtc_kernel_attention_backward,         /* attention_backward_kv */
};
_Static_assert(sizeof(kernels) / sizeof(kernels[0]) == EVTC_OP_COUNT, "interpreter table out of step with ops.def");

struct evtc_interp {
  const evtc_graph *g;
  double **values;            /* per node: its output buffer (numel doubles, at least 1) */
  const double **given;       /* per node: caller data of INPUT/PARAM/STATE leaves */
  const double **in_scratch;  /* input pointers of the node being run */
};

evtc_interp *evtc_interp_new(const evtc_graph *g) {
  evtc_interp *it = calloc(1, sizeof *it);
  EVTC_ASSERT(it != NULL);
  it->g = g;
  size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
  it->values = calloc(n, sizeof(double *));
  it->given = calloc(n, sizeof(double *));
  int32_t max_in = 1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i]->n_inputs > max_in) max_in = g->nodes[i]->n_inputs;
  it->in_scratch = calloc((size_t)max_in, sizeof(double *));
  EVTC_ASSERT(it->values && it->given && it->in_scratch);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int64_t numel = evtc_type_numel(&g->nodes[i]->type);
    it->values[i] = calloc((size_t)(numel > 0 ? numel : 1), sizeof(double));
    EVTC_ASSERT(it->values[i] != NULL);
  }
  return it;
}

void evtc_interp_set(evtc_interp *it, const evtc_node *leaf, const double *data) {
  EVTC_ASSERT(leaf->op == EVTC_OP_INPUT || leaf->op == EVTC_OP_PARAM || leaf->op == EVTC_OP_STATE);
  EVTC_ASSERT(leaf->id >= 0 && leaf->id < it->g->n_nodes && it->g->nodes[leaf->id] == leaf);
  it->given[leaf->id] = data;
}

evtc_status evtc_interp_run(evtc_interp *it, uint64_t step, evtc_diag *d) {
  evtc_diag local = {0};
  if (!d) d = &local;
  const evtc_graph *g = it->g;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    for (int32_t j = 0; j < n->n_inputs; j++) it->in_scratch[j] = it->values[n->inputs[j]->id];
    evtc_kernel_args k = {.node = n, .in = it->in_scratch, .out = it->values[i], .given = it->given[i],
                          .step = step, .diag = d};
    evtc_status st = kernels[n->op](&k);
    if (st != EVTC_OK) return st;
    evtc_dtype dt = n->type.dtype;
    if (dt != EVTC_F64) {
      int64_t numel = evtc_type_numel(&n->type);
      double *out = it->values[i];
      for (int64_t e = 0; e < numel; e++) out[e] = evtc_round_to(dt, out[e]);
    }
  }
  return EVTC_OK;
}

const double *evtc_interp_value(const evtc_interp *it, const evtc_node *n) {
  EVTC_ASSERT(n->id >= 0 && n->id < it->g->n_nodes && it->g->nodes[n->id] == n);
  return it->values[n->id];
}

void evtc_interp_free(evtc_interp *it) {
  if (!it) return;
  for (int32_t i = 0; i < it->g->n_nodes; i++) free(it->values[i]);
  free(it->values);
  free(it->given);
  free(it->in_scratch);
  free(it);
}

/* ---- shared helpers ---- */

evtc_status evtc_interp_fail(const evtc_kernel_args *k, const char *fmt, ...) {
  char cause[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cause, sizeof cause, fmt, ap);
  va_end(ap);
  return evtc_diag_set(k->diag, EVTC_ERR_RUNTIME, "node %%%s (%s): %s", k->node->name,
                       evtc_op_get(k->node->op)->name, cause);
}

void evtc_bcast_init(evtc_bcast *it, int rank, const int64_t *shape, int n_in, const evtc_type *const *ins) {
  EVTC_ASSERT(n_in >= 1 && n_in <= 3 && rank <= EVTC_MAX_RANK);
  memset(it, 0, sizeof *it);
  it->rank = rank;
  it->n_in = n_in;
  for (int d = 0; d < rank; d++) it->shape[d] = shape[d];
  for (int j = 0; j < n_in; j++) {
    const evtc_type *t = ins[j];
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int td = d - (rank - t->rank);
      int64_t s = td >= 0 ? t->shape[td] : 1;
      it->strides[j][d] = (s == 1) ? 0 : stride;
      stride *= s;
    }
    it->inner_stride[j] = rank ? it->strides[j][rank - 1] : 0;
  }
  it->inner = rank ? shape[rank - 1] : 1;
  it->rows = 1;
  for (int d = 0; d < rank; d++)   /* an empty output has no rows: walking its rows of 0 columns each ran for */
    if (shape[d] == 0) it->rows = 0;   /* minutes on a fuzzed ONNX file's fold (tests/test_interp.c) */
  for (int d = 0; it->rows && d + 1 < rank; d++) it->rows *= shape[d];
}

void evtc_bcast_next(evtc_bcast *it) {
  for (int d = it->rank - 2; d >= 0; d--) {
    it->idx[d]++;
    for (int j = 0; j < it->n_in; j++) it->off[j] += it->strides[j][d];
    if (it->idx[d] < it->shape[d]) return;
    for (int j = 0; j < it->n_in; j++) it->off[j] -= it->strides[j][d] * it->shape[d];
    it->idx[d] = 0;
  }
}

/* ---- leaves ---- */

evtc_status evtc_kernel_leaf(const evtc_kernel_args *k) {
  if (!k->given) return evtc_interp_fail(k, "no value was given for this %s", evtc_op_get(k->node->op)->name);
  memcpy(k->out, k->given, sizeof(double) * (size_t)evtc_type_numel(&k->node->type));
  return EVTC_OK;
}

evtc_status evtc_kernel_const(const evtc_kernel_args *k) {
  int64_t numel = evtc_type_numel(&k->node->type);
  const evtc_attr *data = evtc_node_attr(k->node, "data");
  if (data->n > 0) {
    EVTC_ASSERT(data->n == numel);
    memcpy(k->out, data->v.floats, sizeof(double) * (size_t)numel);
  } else {
    double v = evtc_node_float(k->node, "value");
    for (int64_t i = 0; i < numel; i++) k->out[i] = v;
  }
  return EVTC_OK;
}
