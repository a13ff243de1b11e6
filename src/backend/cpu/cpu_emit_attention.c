/* cpu_emit_attention.c -- the CPU template of the attention family
 * (attention, attention_lse, attention_backward_q / _kv): C loops with the
 * geometry baked in, f32 / f64 values, accumulation in double.
 *
 * The forward is FlashAttention's online softmax, one query row per
 * iteration of an OpenMP loop over B*H*S rows: a running maximum m, a
 * running sum l and the output accumulator, rescaled by exp(m_old - m_new)
 * when the maximum grows, so no S x T matrix exists; causal rows stop at
 * key s + T - S.  attention_lse is the same loop without the values.  The
 * backward recomputes P = exp(scale q.k - lse) from the saved log-sum-exp:
 * dq per query row (dq = scale sum_t P (dP - D) k, D = dout.out), dk and
 * dv together per key row (dv = sum_s P dout, dk = scale sum_s P (dP - D) q,
 * written side by side: row t of the [.., D+Dv] output), so every thread
 * owns the rows it writes and needs no atomics.
 */
#include "backend/cpu/cpu_emit.h"

bool evtc_cpu_attention_op(evtc_op op) {
  return op == EVTC_OP_ATTENTION || op == EVTC_OP_ATTENTION_LSE || op == EVTC_OP_ATTENTION_BACKWARD_Q ||
         op == EVTC_OP_ATTENTION_BACKWARD_KV;
}

/* Declares BH, NS, NT, D, DV, OFF (= NT - NS), SCALE, CAUSAL. */
static void emit_dims(evtc_sb *b, const evtc_node *n) {
  const evtc_type *q = &n->inputs[0]->type, *k = &n->inputs[1]->type;
  int64_t dv = n->op == EVTC_OP_ATTENTION_LSE ? 1 : n->inputs[2]->type.shape[3];
  evtc_sb_printf(b, "  const int64_t BH = %lldLL, NS = %lldLL, NT = %lldLL, D = %lldLL, DV = %lldLL, OFF = NT - NS;\n"
                    "  const double SCALE = %.17g;\n  const int CAUSAL = %d;\n  (void)DV; (void)OFF;\n",
                 (long long)(q->shape[0] * q->shape[1]), (long long)q->shape[2], (long long)k->shape[2],
                 (long long)q->shape[3], (long long)dv, evtc_node_float(n, "scale"), (int)evtc_node_int(n, "causal"));
}

/* dot(a + ai*D, b + bi*D) over LEN into the double `var`. */
static const char dot_macro[] =
    "#define EVTC_DOT(var, a, b, len) do { double s_ = 0.0; for (int64_t j_ = 0; j_ < (len); j_++) "
    "s_ += (double)(a)[j_] * (double)(b)[j_]; var = s_; } while (0)\n";

static void emit_forward(evtc_sb *b, bool lse_only) {
  evtc_sb_printf(b, "%s  #pragma omp parallel for schedule(dynamic, 16) if (BH * NS * NT * D > 32768)\n"
                    "  for (int64_t r = 0; r < BH * NS; r++) {\n"
                    "    const int64_t h = r / NS, s = r %% NS, tend = CAUSAL ? s + OFF + 1 : NT;\n"
                    "    const T *q = x0 + r * D, *kh = x1 + h * NT * D;\n"
                    "    double m = -INFINITY, l = 0.0;\n",
                 dot_macro);
  if (!lse_only)
    evtc_sb_printf(b, "    const T *vh = x2 + h * NT * DV;\n    double acc[DV];\n"
                      "    for (int64_t j = 0; j < DV; j++) acc[j] = 0.0;\n");
  evtc_sb_printf(b, "    for (int64_t t = 0; t < tend; t++) {\n      double x;\n      EVTC_DOT(x, q, kh + t * D, D);\n"
                    "      x *= SCALE;\n      if (x > m) {\n        const double c = exp(m - x);\n"
                    "        l *= c;\n%s        m = x;\n      }\n      const double p = exp(x - m);\n      l += p;\n",
                 lse_only ? "" : "        for (int64_t j = 0; j < DV; j++) acc[j] *= c;\n");
  if (lse_only)
    evtc_sb_printf(b, "    }\n    y[r] = (T)(m + log(l));\n  }\n");
  else
    evtc_sb_printf(b, "      for (int64_t j = 0; j < DV; j++) acc[j] += p * (double)vh[t * DV + j];\n    }\n"
                      "    for (int64_t j = 0; j < DV; j++) y[r * DV + j] = (T)(acc[j] / l);\n  }\n");
}

/* Per query row: dq. */
static void emit_backward_q(evtc_sb *b) {
  evtc_sb_printf(b, "%s  #pragma omp parallel for schedule(dynamic, 16) if (BH * NS * NT * D > 32768)\n"
                    "  for (int64_t r = 0; r < BH * NS; r++) {\n"
                    "    const int64_t h = r / NS, s = r %% NS, tend = CAUSAL ? s + OFF + 1 : NT;\n"
                    "    const T *q = x0 + r * D, *kh = x1 + h * NT * D, *vh = x2 + h * NT * DV;\n"
                    "    const T *o = x3 + r * DV, *dout = x4 + r * DV;\n    const double lse = (double)x5[r];\n"
                    "    double dd, acc[D];\n    EVTC_DOT(dd, dout, o, DV);\n"
                    "    for (int64_t j = 0; j < D; j++) acc[j] = 0.0;\n"
                    "    for (int64_t t = 0; t < tend; t++) {\n      double x, dp;\n"
                    "      EVTC_DOT(x, q, kh + t * D, D);\n      EVTC_DOT(dp, dout, vh + t * DV, DV);\n"
                    "      const double ds = exp(SCALE * x - lse) * (dp - dd);\n"
                    "      for (int64_t j = 0; j < D; j++) acc[j] += ds * (double)kh[t * D + j];\n    }\n"
                    "    for (int64_t j = 0; j < D; j++) y[r * D + j] = (T)(SCALE * acc[j]);\n  }\n",
                 dot_macro);
}

/* Per key row: dk and dv, side by side in a row of D + DV. */
static void emit_backward_kv(evtc_sb *b) {
  evtc_sb_printf(b, "%s  #pragma omp parallel for schedule(dynamic, 16) if (BH * NS * NT * D > 32768)\n"
                    "  for (int64_t r = 0; r < BH * NT; r++) {\n"
                    "    const int64_t h = r / NT, t = r %% NT, s0 = CAUSAL && t - OFF > 0 ? t - OFF : 0;\n"
                    "    const T *k = x1 + r * D, *v = x2 + r * DV, *qh = x0 + h * NS * D;\n"
                    "    const T *oh = x3 + h * NS * DV, *douth = x4 + h * NS * DV, *lse = x5 + h * NS;\n"
                    "    double acc[D + DV];\n    for (int64_t j = 0; j < D + DV; j++) acc[j] = 0.0;\n"
                    "    for (int64_t s = s0; s < NS; s++) {\n      double x, dp, dd;\n"
                    "      EVTC_DOT(x, qh + s * D, k, D);\n      EVTC_DOT(dp, douth + s * DV, v, DV);\n"
                    "      EVTC_DOT(dd, douth + s * DV, oh + s * DV, DV);\n"
                    "      const double p = exp(SCALE * x - (double)lse[s]), ds = p * (dp - dd);\n"
                    "      for (int64_t j = 0; j < D; j++) acc[j] += ds * (double)qh[s * D + j];\n"
                    "      for (int64_t j = 0; j < DV; j++) acc[D + j] += p * (double)douth[s * DV + j];\n    }\n"
                    "    for (int64_t j = 0; j < D; j++) y[r * (D + DV) + j] = (T)(SCALE * acc[j]);\n"
                    "    for (int64_t j = 0; j < DV; j++) y[r * (D + DV) + D + j] = (T)acc[D + j];\n  }\n",
                 dot_macro);
}

void evtc_cpu_emit_attention(evtc_sb *b, const evtc_node *n) {
  emit_dims(b, n);
  switch (n->op) {
    case EVTC_OP_ATTENTION: emit_forward(b, false); break;
    case EVTC_OP_ATTENTION_LSE: emit_forward(b, true); break;
    case EVTC_OP_ATTENTION_BACKWARD_Q: emit_backward_q(b); break;
    default: emit_backward_kv(b); break;
  }
  evtc_sb_printf(b, "#undef EVTC_DOT\n");
}
