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
 */
#include "passes/pass.h"
#include "passes/pattern.h"

enum { ALIGN = 8, MIN_WIDTH = 1024 };   /* 8 two-byte elements: 16 bytes; narrower outputs are not worth a pad */

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
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
