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
 *
 * Every [B, H, rows, cols] operand and the output are reached through
 * EVTC_ROW (row r of batch-head bh), from their views when the program
 * hands views over (kernel.h: strided arguments with contiguous columns;
 * dV from column C2 of dK with dV), else row-major; the log-sum-exp is
 * always row-major.
 */
#include "backend/cpu/cpu_emit.h"

bool evtc_cpu_attention_views_fit(const evtc_kernel *k) {
  for (int a = 0; a < k->n_args; a++) {
    const evtc_karg *g = &k->args[a];
    if (g->strided && (k->kind != EVTC_ML_OPAQUE || !evtc_op_is_attention(k->main->op) || g->node->type.rank != 4 ||
                       g->node->op == EVTC_OP_ATTENTION_LSE || g->strides[3] != 1 ||
                       (g->second_half && g->node->op != EVTC_OP_ATTENTION_BACKWARD_KV)))
      return false;
  }
  return true;
}

/* Declares, for each [B, H, rows, cols] input j (and Y for the output), the element offset Oj and the strides SBj, SHj, SRj of its
 * batches, heads and rows (row-major or its view), and HH, the heads per batch; EVTC_ROW(x, j, bh, r) is row r
 * of batch-head bh of operand j. */
static void emit_layouts(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  evtc_sb_printf(b, "  const int64_t HH = %lldLL;\n", (long long)n->inputs[0]->type.shape[1]);
  for (int j = 0; j <= n->n_inputs; j++) {
    int a = j < n->n_inputs ? evtc_kernel_input_arg(k, j) : evtc_kernel_output_arg(k);
    const evtc_karg *g = &k->args[a];
    if (g->node->type.rank != 4) continue;     /* a log-sum-exp: row-major */
    const int64_t *sh = g->node->type.shape;
    int64_t off = 0, st[3] = {sh[1] * sh[2] * sh[3], sh[2] * sh[3], sh[3]};
    if (g->strided) {
      off = g->offset;
      for (int d = 0; d < 3; d++) st[d] = g->strides[d];
    }
    char name[4];
    snprintf(name, sizeof name, j < n->n_inputs ? "%d" : "Y", j);
    evtc_sb_printf(b, "  const int64_t O%s = %lldLL, SB%s = %lldLL, SH%s = %lldLL, SR%s = %lldLL;\n"
                      "  (void)O%s; (void)SB%s; (void)SH%s; (void)SR%s;\n",
                   name, (long long)off, name, (long long)st[0], name, (long long)st[1], name, (long long)st[2],
                   name, name, name, name);
    if (g->node->op == EVTC_OP_ATTENTION_BACKWARD_KV)     /* where dV starts in a row of dK with dV */
      evtc_sb_printf(b, "  const int64_t C2 = %lldLL;\n",
                     (long long)(g->strided && g->second_half ? g->second_half : n->inputs[0]->type.shape[3]));
  }
  evtc_sb_printf(b, "#define EVTC_ROW(x, j, bh, r) ((x) + O##j + (bh) / HH * SB##j + (bh) %% HH * SH##j + (r) * SR##j)\n");
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
                    "    const T *q = EVTC_ROW(x0, 0, h, s);\n"
                    "    double m = -INFINITY, l = 0.0;\n",
                 dot_macro);
  if (!lse_only)
    evtc_sb_printf(b, "    double acc[DV];\n"
                      "    for (int64_t j = 0; j < DV; j++) acc[j] = 0.0;\n");
  evtc_sb_printf(b, "    for (int64_t t = 0; t < tend; t++) {\n      double x;\n      EVTC_DOT(x, q, EVTC_ROW(x1, 1, h, t), D);\n"
                    "      x *= SCALE;\n      if (x > m) {\n        const double c = exp(m - x);\n"
                    "        l *= c;\n%s        m = x;\n      }\n      const double p = exp(x - m);\n      l += p;\n",
                 lse_only ? "" : "        for (int64_t j = 0; j < DV; j++) acc[j] *= c;\n");
  if (lse_only)
    evtc_sb_printf(b, "    }\n    y[r] = (T)(m + log(l));\n  }\n");
  else
    evtc_sb_printf(b, "      for (int64_t j = 0; j < DV; j++) acc[j] += p * (double)EVTC_ROW(x2, 2, h, t)[j];\n    }\n"
                      "    for (int64_t j = 0; j < DV; j++) EVTC_ROW(y, Y, h, s)[j] = (T)(acc[j] / l);\n  }\n");
}

/* Per query row: dq. */
static void emit_backward_q(evtc_sb *b) {
  evtc_sb_printf(b, "%s  #pragma omp parallel for schedule(dynamic, 16) if (BH * NS * NT * D > 32768)\n"
                    "  for (int64_t r = 0; r < BH * NS; r++) {\n"
                    "    const int64_t h = r / NS, s = r %% NS, tend = CAUSAL ? s + OFF + 1 : NT;\n"
                    "    const T *q = EVTC_ROW(x0, 0, h, s), *o = EVTC_ROW(x3, 3, h, s), *dout = EVTC_ROW(x4, 4, h, s);\n"
                    "    const double lse = (double)x5[r];\n"
                    "    double dd, acc[D];\n    EVTC_DOT(dd, dout, o, DV);\n"
                    "    for (int64_t j = 0; j < D; j++) acc[j] = 0.0;\n"
                    "    for (int64_t t = 0; t < tend; t++) {\n      double x, dp;\n"
                    "      const T *kt = EVTC_ROW(x1, 1, h, t);\n"
                    "      EVTC_DOT(x, q, kt, D);\n      EVTC_DOT(dp, dout, EVTC_ROW(x2, 2, h, t), DV);\n"
                    "      const double ds = exp(SCALE * x - lse) * (dp - dd);\n"
                    "      for (int64_t j = 0; j < D; j++) acc[j] += ds * (double)kt[j];\n    }\n"
                    "    for (int64_t j = 0; j < D; j++) EVTC_ROW(y, Y, h, s)[j] = (T)(SCALE * acc[j]);\n  }\n",
                 dot_macro);
}

/* Per key row: dk and dv, side by side in a row of D + DV. */
static void emit_backward_kv(evtc_sb *b) {
  evtc_sb_printf(b, "%s  #pragma omp parallel for schedule(dynamic, 16) if (BH * NS * NT * D > 32768)\n"
                    "  for (int64_t r = 0; r < BH * NT; r++) {\n"
                    "    const int64_t h = r / NT, t = r %% NT, s0 = CAUSAL && t - OFF > 0 ? t - OFF : 0;\n"
                    "    const T *k = EVTC_ROW(x1, 1, h, t), *v = EVTC_ROW(x2, 2, h, t), *lse = x5 + h * NS;\n"
                    "    double acc[D + DV];\n    for (int64_t j = 0; j < D + DV; j++) acc[j] = 0.0;\n"
                    "    for (int64_t s = s0; s < NS; s++) {\n      double x, dp, dd;\n"
                    "      const T *qs = EVTC_ROW(x0, 0, h, s), *douts = EVTC_ROW(x4, 4, h, s);\n"
                    "      EVTC_DOT(x, qs, k, D);\n      EVTC_DOT(dp, douts, v, DV);\n"
                    "      EVTC_DOT(dd, douts, EVTC_ROW(x3, 3, h, s), DV);\n"
                    "      const double p = exp(SCALE * x - (double)lse[s]), ds = p * (dp - dd);\n"
                    "      for (int64_t j = 0; j < D; j++) acc[j] += ds * (double)qs[j];\n"
                    "      for (int64_t j = 0; j < DV; j++) acc[D + j] += p * (double)douts[j];\n    }\n"
                    "    T *yt = EVTC_ROW(y, Y, h, t);\n"
                    "    for (int64_t j = 0; j < D; j++) yt[j] = (T)(SCALE * acc[j]);\n"
                    "    for (int64_t j = 0; j < DV; j++) yt[C2 + j] = (T)acc[D + j];\n  }\n",
                 dot_macro);
}

void evtc_cpu_emit_attention(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  emit_dims(b, n);
  emit_layouts(b, k);
  switch (n->op) {
    case EVTC_OP_ATTENTION: emit_forward(b, false); break;
    case EVTC_OP_ATTENTION_LSE: emit_forward(b, true); break;
    case EVTC_OP_ATTENTION_BACKWARD_Q: emit_backward_q(b); break;
    default: emit_backward_kv(b); break;
  }
  evtc_sb_printf(b, "#undef EVTC_DOT\n#undef EVTC_ROW\n");
}
