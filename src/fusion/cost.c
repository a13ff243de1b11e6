/* cost.c -- the cost model: modelled time of a node set run as one kernel.
 *
 * Bytes moved: every distinct tensor the kernel reads from memory (values
 * computed outside it, leaves; a scalar-chain value counts its own few
 * bytes) plus every value it computes that someone outside the kernel
 * reads or that is a graph output.  Values passed between nodes of the
 * kernel cost nothing.  Flops: 2*M*N*K for main loops, one per element
 * for everything else (a reduction: per input element), times the op's
 * rough instruction count where that is more than one (op_weight: erf
 * about 20, exp 10, ...).  Time in microseconds: launch + max(bytes /
 * copy_bw, gemm_flops / gemm_peak + other_flops / vector_peak) -- a
 * roofline per kernel, kernels in sequence -- except that a kernel with a
 * main loop overlaps only the loop's operands and one output of the loop's
 * size with the loop: every other byte its epilogue loads or stores is
 * added (on the H200, evtc's GEMM 16384x4096x1024 took 0.195 ms alone,
 * 0.201 ms with a bias and one output, 0.227 ms with a second output of
 * 134 MB: 32 us at copy bandwidth).  So a plan that recomputes a value in
 * a GEMM's epilogue from what it loads anyway beats one that stores the
 * value in another GEMM's epilogue and loads it here, which the plain
 * roofline priced alike.
 * The attention family's matrix products (the forward's two, the log-sum-exp's
 * one, dq's three and dk / dv's four, each 2 S T D per batch-head, half of
 * it when causal) run at ATTENTION_MMA_SHARE of gemm_flops, beside one
 * exp per score on the vector units: evtc's flash-attention kernels
 * interleave their softmax with the tensor cores and do not reach a plain
 * GEMM's rate (on the H200, BERT-Large's shape: forward 0.14 ms, dq 0.19,
 * dk with dv 0.28 in the model's step, against 0.05 / 0.07 / 0.09 at the
 * GEMM peak).
 * A reshape alone (not an output) costs nothing: the program gives it its
 * input's buffer instead of running it, so a plan that keeps a gradient's
 * reshape apart from the kernel around it is not charged a copy.
 *
 * Multi-pass kernels.  A kernel whose row reductions are read inside it
 * runs in phases, one pass over each row per phase (kernel/kernel.h: a
 * value's phase is the number of such reductions on its longest path from
 * the loads).  The emitters keep every full-size kernel input that more
 * than one pass reads on chip for the row's lifetime -- registers or
 * shared memory, (row length x element size) bytes each, rounded up to 16
 * -- and read it from memory once.  When those rows together exceed the
 * target's smem_bytes they are read again in every later pass that needs
 * them (cuda_emit_rows.c without a row cache; the CPU template re-reads
 * from its caches in any case), and the model charges those re-reads.
 */
#include "fusion/fusion_internal.h"

static double tensor_bytes(const evtc_node *n) {
  return (double)evtc_type_numel(&n->type) * (double)evtc_dtype_size(n->type.dtype);
}

/* Instructions per element of an elementwise op, roughly, as the CUDA
 * backend emits them in f32 (its erf, CUDA's expf, tanhf, logf, an IEEE
 * division; Philox dropout shares one evaluation among four elements);
 * 1 for an add, a multiply, a compare, a select. */
static double op_weight(evtc_op op) {
  switch (op) {
  case EVTC_OP_ERF: case EVTC_OP_TANH: case EVTC_OP_SIN: case EVTC_OP_COS: return 20;
  case EVTC_OP_GELU: return 26;
  case EVTC_OP_GELU_TANH: case EVTC_OP_DROPOUT: return 16;
  case EVTC_OP_POW: return 24;
  case EVTC_OP_EXP: case EVTC_OP_LOG: case EVTC_OP_SIGMOID: return 10;
  case EVTC_OP_DIV: case EVTC_OP_RECIPROCAL: case EVTC_OP_SQRT: return 8;
  case EVTC_OP_RSQRT: return 4;
  default: return 1;
  }
}

enum { ATTENTION_MMA_PERCENT = 50 };
#define ATTENTION_MMA_SHARE (ATTENTION_MMA_PERCENT / 100.0)

/* The tensor-core flops of attention-family node n (see the top); *scores: the scores it exponentiates. */
static double attention_flops(const evtc_node *n, double *scores) {
  const evtc_type *q = &n->inputs[0]->type, *k = &n->inputs[1]->type;
  double per = (double)(q->shape[0] * q->shape[1]) * (double)q->shape[2] * (double)k->shape[2];
  if (evtc_node_int(n, "causal")) per *= 0.5;
  *scores = per;
  int products = n->op == EVTC_OP_ATTENTION_LSE ? 1 : n->op == EVTC_OP_ATTENTION ? 2
               : n->op == EVTC_OP_ATTENTION_BACKWARD_Q ? 3 : 4;
  return 2.0 * products * per * (double)q->shape[3];
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
  default: return out * op_weight(n->op);
  }
}

/* True when member v of the marked set cur is read outside it or is a graph output. */
static bool escapes(const evtc_fusion_ctx *c, int32_t v, int32_t cur) {
  if (c->is_output[v]) return true;
  for (int32_t k = c->user_start[v]; k < c->user_start[v + 1]; k++)
    if (c->stamp[c->users[k]] != cur) return true;
  return false;
}

enum { COUNTED = 63 };    /* a bit of c->passes: the input's rows were counted */

/* Bytes that kernel s (ascending ids, members marked cur) reads again
 * because the full-size inputs several passes read do not fit on chip
 * (see the top of this file); 0 for single-pass kernels. */
static double reread_bytes(evtc_fusion_ctx *c, const int32_t *s, int n, int32_t cur) {
  int64_t D = 0, rows = 0;
  int last = 0;
  for (int i = 0; i < n; i++) {                 /* phases, in topological order */
    int32_t v = s[i];
    const evtc_node *nd = c->g->nodes[v];
    int ph = 0;
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t u = nd->inputs[k]->id;
      if (c->stamp[u] != cur) {
        c->passes[u] = 0;
        continue;
      }
      int after = c->phase[u] + (c->red[u] != EVTC_RED_NONE);
      if (after > ph) ph = after;
      if (c->red[u] != EVTC_RED_NONE && rows == 0) rows = c->numel[u];
    }
    c->phase[v] = (uint8_t)(ph < COUNTED - 1 ? ph : COUNTED - 1);
    c->passes[v] = 0;
    if (ph > last) last = ph;
    int64_t work = c->mainloop[v] ? c->numel[v] : c->iter[v];
    if (work > D) D = work;
  }
  if (last == 0 || rows <= 0) return 0;
  for (int i = n - 1; i >= 0; i--) {            /* passes that need each full-size value */
    int32_t v = s[i];
    uint64_t need;
    if (c->red[v] != EVTC_RED_NONE) need = 1ull << c->phase[v];
    else if (c->numel[v] == D) need = c->passes[v] | (escapes(c, v, cur) ? 1ull << c->phase[v] : 0);
    else continue;
    const evtc_node *nd = c->g->nodes[v];
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t u = nd->inputs[k]->id;
      bool member = c->stamp[u] == cur;
      if (c->numel[u] == D && (!member || c->red[u] == EVTC_RED_NONE)) c->passes[u] |= need;
    }
  }
  double on_chip = 0, again = 0;
  int64_t cols = D / rows;
  for (int i = 0; i < n; i++) {
    const evtc_node *nd = c->g->nodes[s[i]];
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t u = nd->inputs[k]->id;
      if (c->stamp[u] == cur || c->numel[u] != D || (c->passes[u] >> COUNTED & 1)) continue;
      int reads = __builtin_popcountll(c->passes[u]);
      c->passes[u] |= 1ull << COUNTED;
      if (reads < 2) continue;
      on_chip += (double)((cols * (int64_t)evtc_dtype_size(nd->inputs[k]->type.dtype) + 15) / 16 * 16);
      again += (reads - 1) * tensor_bytes(nd->inputs[k]);
    }
  }
  return on_chip > c->dev->smem_bytes ? again : 0;
}

double evtc_fusion_cost(evtc_fusion_ctx *c, const int32_t *s, int n, double *bytes, double *flops, int *io) {
  if (n == 1 && c->g->nodes[s[0]]->op == EVTC_OP_RESHAPE && !evtc_graph_is_output(c->g, c->g->nodes[s[0]])) {
    if (bytes) *bytes = 0;     /* a lone reshape runs as a buffer alias (runtime/program.c): nothing moves */
    if (flops) *flops = 0;
    if (io) *io = 0;
    return 0;
  }
  int32_t cur = evtc_fusion_mark(c, s, n);
  double rd = 0, wr = 0, gemm = 0, vec = 0, att = 0, loop_bytes = 0, loop_out = 0;
  int count = 0;
  for (int i = 0; i < n; i++) {
    const evtc_node *nd = c->g->nodes[s[i]];
    if (c->mainloop[s[i]])                /* its operands come from outside: the epilogue does not make them */
      for (int32_t k = 0; k < nd->n_inputs; k++) loop_bytes += tensor_bytes(nd->inputs[k]);
    for (int32_t k = 0; k < nd->n_inputs; k++) {
      int32_t p = nd->inputs[k]->id;
      if (c->stamp[p] == cur || c->stamp[p] == -cur) continue;
      c->stamp[p] = -cur;                 /* counted once */
      rd += tensor_bytes(nd->inputs[k]);
      count++;
    }
    if (escapes(c, s[i], cur)) {
      wr += tensor_bytes(nd);
      count++;
      if (tensor_bytes(nd) > loop_out) loop_out = tensor_bytes(nd);
    }
    bool on_gemm;
    if (evtc_op_is_attention(nd->op)) {
      double scores = 0;
      att += attention_flops(nd, &scores);
      vec += scores * op_weight(EVTC_OP_EXP);
      continue;
    }
    double f = node_flops(nd, &on_gemm);
    if (on_gemm) gemm += f;
    else vec += f;
  }
  rd += reread_bytes(c, s, n, cur);
  const evtc_device *dev = c->dev;
  double mem_s = (rd + wr) / dev->copy_bw;
  double cmp_s = gemm / dev->gemm_flops + att / (ATTENTION_MMA_SHARE * dev->gemm_flops) + vec / dev->vector_flops;
  if (bytes) *bytes = rd + wr;
  if (flops) *flops = gemm + att + vec;
  if (io) *io = count;
  if (loop_bytes > 0) {                   /* a main loop: its operands and one output overlap it, the rest adds */
    const double overlapped = loop_bytes + loop_out, epilogue = rd + wr - overlapped;
    const double base_s = overlapped / dev->copy_bw;
    return dev->launch_us + 1e6 * ((base_s > cmp_s ? base_s : cmp_s) + (epilogue > 0 ? epilogue : 0) / dev->copy_bw);
  }
  return dev->launch_us + 1e6 * (mem_s > cmp_s ? mem_s : cmp_s);
}
