/* rules_attention.c -- the gradient of attention, FlashAttention-2 style.
 *
 * The rule adds one attention_lse node (the per-row log-sum-exp of the
 * forward's scores, recomputed from q and k) and, for each input that wants
 * a gradient, one attention_backward_{q,k,v} node over (q, k, v, out, dout,
 * lse): they recompute the softmax from q, k and lse, so no S x T matrix
 * is kept between the passes.  The backward ops have no rule of their own
 * (no second derivatives).
 */
#include "autodiff/rules.h"

void evtc_vjp_attention(evtc_vjp *v) {
  evtc_node *n = v->n;
  evtc_attr attrs[2] = {evtc_attr_float("scale", evtc_node_float(n, "scale")),
                        evtc_attr_int("causal", evtc_node_int(n, "causal"))};
  evtc_node *lse = evtc_node_add(v->g, EVTC_OP_ATTENTION_LSE, n->inputs, 2, attrs, 2, NULL);
  evtc_node *ins[6] = {n->inputs[0], n->inputs[1], n->inputs[2], n, v->dy, lse};
  static const evtc_op ops[3] = {EVTC_OP_ATTENTION_BACKWARD_Q, EVTC_OP_ATTENTION_BACKWARD_K,
                                 EVTC_OP_ATTENTION_BACKWARD_V};
  for (int i = 0; i < 3; i++)
    if (v->need[i]) evtc_vjp_set(v, i, ops[i], ins, 6, attrs, 2);
}
