/* rules_attention.c -- the gradient of attention, FlashAttention-2 style.
 *
 * The rule adds one attention_lse node (the per-row log-sum-exp of the
 * forward's scores, recomputed from q and k), an attention_backward_q node
 * over (q, k, v, out, dout, lse) when q wants a gradient, and one
 * attention_backward_kv node when k or v does: it gives dk and dv side by
 * side along the last axis ([B,H,T,D+Dv], one pass over the scores for
 * both), and dk, dv are slices of it (read as views by the kernels that
 * consume them).  The backward ops recompute the softmax from q, k and lse,
 * so no S x T matrix is kept between the passes; they have no rule of their
 * own (no second derivatives).
 */
#include "autodiff/rules.h"

void evtc_vjp_attention(evtc_vjp *v) {
  evtc_node *n = v->n;
  evtc_attr attrs[2] = {evtc_attr_float("scale", evtc_node_float(n, "scale")),
                        evtc_attr_int("causal", evtc_node_int(n, "causal"))};
  evtc_node *lse = evtc_node_add(v->g, EVTC_OP_ATTENTION_LSE, n->inputs, 2, attrs, 2, NULL);
  evtc_node *ins[6] = {n->inputs[0], n->inputs[1], n->inputs[2], n, v->dy, lse};
  if (v->need[0]) evtc_vjp_set(v, 0, EVTC_OP_ATTENTION_BACKWARD_Q, ins, 6, attrs, 2);
  if (!v->need[1] && !v->need[2]) return;
  evtc_node *dkv = evtc_node_add(v->g, EVTC_OP_ATTENTION_BACKWARD_KV, ins, 6, attrs, 2, NULL);
  int64_t d = n->inputs[1]->type.shape[3], axis = 3;
  for (int i = 1; i < 3; i++) {
    if (!v->need[i]) continue;
    int64_t start = i == 1 ? 0 : d, end = i == 1 ? d : d + n->inputs[2]->type.shape[3];
    evtc_attr at[3] = {evtc_attr_ints("axes", 1, &axis), evtc_attr_ints("starts", 1, &start),
                       evtc_attr_ints("ends", 1, &end)};
    evtc_vjp_set(v, i, EVTC_OP_SLICE, &dkv, 1, at, 3);
  }
}
