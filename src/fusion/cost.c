/* cost.c -- the cost model: modelled time of a node set run as one kernel.
 *
 * Bytes moved: every distinct tensor the kernel reads from memory (values
 * computed outside it, leaves; a scalar-chain value counts its own few
 * bytes) plus every value it computes that someone outside the kernel
 * reads or that is a graph output.  Values passed between nodes of the
 * kernel cost nothing.  Flops: 2*M*N*K for main loops, one per element
 * for everything else (a reduction: per input element).  Time in
 * microseconds: launch + max(bytes / copy_bw, gemm_flops / gemm_peak +
 * other_flops / vector_peak) -- a roofline per kernel, kernels in sequence.
 */
#include "fusion/fusion_internal.h"

static double tensor_bytes(const evtc_node *n) {
  return (double)evtc_type_numel(&n->type) * (double)evtc_dtype_size(n->type.dtype);
}

/* Floating-point operations of node n; *gemm tells whether they run on
 * the main-loop units. */
static double node_flops(const evtc_node *n, bool *gemm) {
  *gemm = true;
  double out = (double)evtc_type_numel(&n->type);
  const evtc_type *a = n->n_inputs > 0 ? &n->inputs[0]->type : NULL;
  switch (n->op) {
  case EVTC_OP_MATMUL:
  case EVTC_OP_BATCH_MATMUL: {
    bool ta = evtc_node_int(n, "trans_a") != 0;
    int64_t k = a->rank >= 2 ? a->shape[a->rank - (ta ? 2 : 1)] : a->shape[0];
    return 2.0 * out * (double)k;
  }
  case EVTC_OP_CONV2D:
  case EVTC_OP_CONV2D_BACKWARD_INPUT: {
    const evtc_type *w = &n->inputs[1]->type;      /* [O, C/groups, KH, KW] */
    double per = (double)(w->shape[1] * w->shape[2] * w->shape[3]);
    double big = n->op == EVTC_OP_CONV2D ? out : (double)evtc_type_numel(&n->inputs[0]->type);
    return 2.0 * big * per;
  }
  case EVTC_OP_CONV2D_BACKWARD_WEIGHT: {
    const evtc_type *dw = &n->type, *dy = &n->inputs[1]->type;
    return 2.0 * (double)evtc_type_numel(dy) * (double)(dw->shape[1] * dw->shape[2] * dw->shape[3]);
  }
  default: break;
  }
  *gemm = false;
  double in = a ? (double)evtc_type_numel(a) : 0;
  switch (evtc_op_get(n->op)->fusion) {
  case EVTC_FUSE_REDUCE: return in;
  case EVTC_FUSE_OPAQUE: return 4.0 * (in > out ? in : out);
  case EVTC_FUSE_LEAF: return 0;
  default: return out;
  }
}

double evtc_fusion_cost(evtc_fusion_ctx *c, const int32_t *s, int n, double *bytes, double *flops, int *io) {
  int32_t cur = evtc_fusion_mark(c, s, n);
  double rd = 0, wr = 0, gemm = 0, vec = 0;
  int count = 0;
  for (int i = 0; i < n; i++) {
    const evtc_node *nd = c->g->nodes[s[i]];
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t p = nd->inputs[k]->id;
      if (c->stamp[p] == cur || c->stamp[p] == -cur) continue;
      c->stamp[p] = -cur;                 /* counted once */
      rd += tensor_bytes(nd->inputs[k]);
      count++;
    }
    bool escapes = c->is_output[s[i]];
    for (int32_t k = c->user_start[s[i]]; k < c->user_start[s[i] + 1] && !escapes; k++)
      escapes = c->stamp[c->users[k]] != cur;
    if (escapes) {
      wr += tensor_bytes(nd);
      count++;
    }
    bool on_gemm;
    double f = node_flops(nd, &on_gemm);
    if (on_gemm) gemm += f;
    else vec += f;
  }
  const evtc_device *dev = c->dev;
  double mem_s = (rd + wr) / dev->copy_bw, cmp_s = gemm / dev->gemm_flops + vec / dev->vector_flops;
  if (bytes) *bytes = rd + wr;
  if (flops) *flops = gemm + vec;
  if (io) *io = count;
  return dev->launch_us + 1e6 * (mem_s > cmp_s ? mem_s : cmp_s);
}
