/* gemm_pad.c -- the `gemm-pad` pass: a GEMM whose output width N breaks the
 * 16-byte row alignment of 2-byte storage (N % 8 != 0, e.g. a language
 * model's vocabulary of 50257 or 30522) computes N8 = N rounded up to 8
 * columns and slices the N it needs.
 *
 * Matches matmul / batch_matmul of f16 or bf16 with N >= MIN_WIDTH and
 * N % 8 != 0 whose B operand (the weight) holds the N axis -- its rows
 * with trans_b, its columns without -- and rewrites
 *   y = matmul(a, b)   into   y = slice(matmul(a, pad(b with N8 - N zero rows|columns)), last axis 0:N)
 * The extra columns are products with zeros, never read.  Why: each GEMM
 * of the backward reads y's gradient as an operand, a row stride of N
 * elements that TMA cannot describe (evtc's GEMM refuses it; cuBLASLt
 * falls back to slow unaligned kernels: 6 ms instead of about 1 ms for
 * GPT-2's LM-head dX on the H200); after the rewrite the gradient is
 * padded once (the slice's gradient) and both backward GEMMs read aligned
 * rows -- TorchInductor pads such GEMMs for the same reason.  Exact: the
 * same products and sums for every kept element.  Runs before autodiff
 * (h200-forward, docs/passes.md), so that the backward is built on the
 * padded GEMM.
 *
 * A cross-entropy whose logits are such a slice (or a row reshape of one:
 * loss attachment flattens [B, T, N] to [B*T, N]) reads the padded GEMM
 * instead, its N8 - N extra columns masked by adding MASK -- half the
 * dtype's largest finite value, so that every sum and product stays finite
 * (-inf would make log-softmax x one-hot 0 x -inf): exp(MASK - max) is 0,
 * so the loss is the same and the extra columns' gradient is exactly 0.
 * The logits' gradient is then born at width N8, and the pad that would
 * widen it (the slice's gradient: a 823 MB copy on GPT-2, held at the
 * step's peak next to the gradient it copies) is gone.  The mask is added
 * to the rows (after the reshape), so that the gradient's way back to the
 * GEMM's shape is a reshape alone, a buffer alias: with the mask before the
 * reshape, BERT's bias gradient joined that reshape into a kernel that
 * copied the whole gradient (1 GB, 0.96 ms on the H200).  Labels N..N8-1
 * would now pick a masked column instead of failing the one-hot's range
 * check: `train` checks every label against the model's N classes before
 * it starts (train.c), and only train and explain run this pass.  A bias
 * added to (or subtracted from) the slice -- BERT's MLM head -- is padded
 * with zeros and applied before the slice, so that the cross-entropy still
 * finds the slice right under it.
 */
#include <stdio.h>
#include <stdlib.h>

#include "passes/pass.h"
#include "passes/pattern.h"

enum { ALIGN = 8, MIN_WIDTH = 1024 };   /* 8 two-byte elements: 16 bytes; narrower outputs are not worth a pad */

/* The padded GEMM output (or a bias added to it) whose first N columns slice s takes, or NULL when s is not
 * such a slice. */
static evtc_node *padded_source(const evtc_node *s) {
  if (s->op != EVTC_OP_SLICE) return NULL;
  evtc_node *w = s->inputs[0], *g = w;
  if (g->op == EVTC_OP_ADD || g->op == EVTC_OP_SUB)
    g = g->inputs[0]->op == EVTC_OP_MATMUL || g->inputs[0]->op == EVTC_OP_BATCH_MATMUL ? g->inputs[0] : g->inputs[1];
  const evtc_attr *ax = evtc_node_attr(s, "axes"), *st = evtc_node_attr(s, "starts"), *sp = evtc_node_attr(s, "steps");
  int last = w->type.rank - 1;
  int64_t n = s->type.shape[last], n8 = w->type.shape[last];
  if ((g->op != EVTC_OP_MATMUL && g->op != EVTC_OP_BATCH_MATMUL) || n8 % ALIGN != 0 || n8 - n <= 0 ||
      n8 - n >= ALIGN || st->n != 1 || st->v.ints[0] != 0 || (sp->n && sp->v.ints[0] != 1) ||
      (ax->n ? evtc_axis_norm(ax->v.ints[0], w->type.rank) : 0) != last)
    return NULL;
  return w;
}

/* cross_entropy n over the padded GEMM its logits slice, the extra columns masked; NULL when they are not
 * (rows of) such a slice. */
static evtc_node *masked_cross_entropy(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const evtc_node *x = in[0], *s = x->op == EVTC_OP_RESHAPE ? x->inputs[0] : x;
  evtc_node *w = padded_source(s);
  if (!w || x->type.rank != 2 || x->type.shape[1] != s->type.shape[s->type.rank - 1]) return NULL;
  int64_t n8 = w->type.shape[w->type.rank - 1], n_cls = x->type.shape[1];
  double mask = (w->type.dtype == EVTC_BF16 ? 3.3895313892515355e38 : 65504.0) / -2.0;
  double *data = malloc(sizeof(double) * (size_t)n8);
  for (int64_t j = 0; j < n8; j++) data[j] = j < n_cls ? 0.0 : mask;
  evtc_attr at = evtc_attr_floats("data", (int)n8, data);
  char name[256];
  snprintf(name, sizeof name, "%.200s.mask", n->name);
  evtc_node *m = evtc_leaf_add(rw->dst, EVTC_OP_CONST, evtc_type_make(w->type.dtype, 1, &n8), &at, 1, name);
  free(data);
  if (!m) return NULL;
  int64_t rows[2] = {x->type.shape[0], n8};
  evtc_node *r = evtc_pat_reshape(rw, w, 2, rows, n->name, "rows");
  evtc_node *ins[2] = {r ? evtc_pat_bin(rw, EVTC_OP_ADD, r, m, n->name, "masked") : NULL, in[1]};
  return ins[0] ? evtc_pat_op(rw, EVTC_OP_CROSS_ENTROPY, ins, 2, NULL, 0, n->name, NULL) : NULL;
}

/* n = x + b or x - b with x a padded GEMM's slice and b a row vector over its N columns: the same op on the
 * padded GEMM with b padded by zeros, then the slice; NULL when n is not that. */
static evtc_node *bias_before_slice(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (n->op != EVTC_OP_ADD && n->op != EVTC_OP_SUB) return NULL;
  int xi = padded_source(in[0]) ? 0 : padded_source(in[1]) ? 1 : -1;
  if (xi < 0) return NULL;
  evtc_node *s = in[xi], *w = s->inputs[0], *b = in[1 - xi];
  if (w->op != EVTC_OP_MATMUL && w->op != EVTC_OP_BATCH_MATMUL) return NULL;   /* one bias */
  int r = w->type.rank;
  int64_t n_cls = s->type.shape[r - 1], n8 = w->type.shape[r - 1];
  if (b->type.rank > r || b->type.rank == 0 || b->type.shape[b->type.rank - 1] != n_cls) return NULL;
  for (int i = 0; i + 1 < b->type.rank; i++)
    if (b->type.shape[i] != 1) return NULL;
  int64_t pads[2 * EVTC_MAX_RANK] = {0};
  pads[2 * b->type.rank - 1] = n8 - n_cls;
  evtc_attr pad_at = evtc_attr_ints("pads", 2 * b->type.rank, pads);
  evtc_node *wb = evtc_pat_op(rw, EVTC_OP_PAD, &b, 1, &pad_at, 1, n->name, "padded_b");
  if (!wb) return NULL;
  evtc_node *ins[2] = {xi == 0 ? w : wb, xi == 0 ? wb : w};
  evtc_node *wide = evtc_pat_op(rw, n->op, ins, 2, NULL, 0, n->name, "padded");
  if (!wide) return NULL;
  int64_t ax = r - 1, start = 0;
  evtc_attr sl[4] = {evtc_attr_ints("axes", 1, &ax), evtc_attr_ints("starts", 1, &start),
                     evtc_attr_ints("ends", 1, &n_cls), evtc_attr_ints("steps", 1, (int64_t[]){1})};
  return evtc_pat_op(rw, EVTC_OP_SLICE, &wide, 1, sl, 4, n->name, NULL);
}

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (n->op == EVTC_OP_CROSS_ENTROPY) return masked_cross_entropy(rw, n, in);
  if (n->op == EVTC_OP_ADD || n->op == EVTC_OP_SUB) return bias_before_slice(rw, n, in);
  if (n->op != EVTC_OP_MATMUL && n->op != EVTC_OP_BATCH_MATMUL) return NULL;
  const evtc_type *y = &n->type, *b = &n->inputs[1]->type;
  int64_t N = y->shape[y->rank - 1];
  if ((y->dtype != EVTC_BF16 && y->dtype != EVTC_F16) || N % ALIGN == 0 || N < MIN_WIDTH) return NULL;
  int axis = b->rank - (evtc_node_int(n, "trans_b") ? 2 : 1);   /* b's N axis */
  int64_t pads[2 * EVTC_MAX_RANK] = {0};
  pads[b->rank + axis] = ALIGN - N % ALIGN;
  evtc_attr pad_at = evtc_attr_ints("pads", 2 * b->rank, pads);
  evtc_node *wide_b = evtc_pat_op(rw, EVTC_OP_PAD, &in[1], 1, &pad_at, 1, n->name, "padded_b");
  if (!wide_b) return NULL;
  evtc_node *ins[2] = {in[0], wide_b};
  evtc_attr mm_at[2] = {evtc_attr_int("trans_a", evtc_node_int(n, "trans_a")),
                        evtc_attr_int("trans_b", evtc_node_int(n, "trans_b"))};
  evtc_node *wide = evtc_pat_op(rw, n->op, ins, 2, mm_at, 2, n->name, "padded");
  if (!wide) return NULL;
  int64_t ax = y->rank - 1, start = 0;
  evtc_attr sl[4] = {evtc_attr_ints("axes", 1, &ax), evtc_attr_ints("starts", 1, &start),
                     evtc_attr_ints("ends", 1, &N), evtc_attr_ints("steps", 1, (int64_t[]){1})};
  return evtc_pat_op(rw, EVTC_OP_SLICE, &wide, 1, sl, 4, n->name, NULL);
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, rewrite, d); }

const evtc_pass evtc_pass_gemm_pad = {
    .name = "gemm-pad",
    .summary = "f16/bf16 GEMM with an output width N % 8 != 0 (a vocabulary) -> padded weight, GEMM of width N8, slice",
    .run = run,
};
