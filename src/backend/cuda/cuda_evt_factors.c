/* cuda_evt_factors.c -- constant factors carried through a GEMM epilogue's
 * float arithmetic instead of multiplied in (for cuda_emit_evt.c).
 *
 * An epilogue's float instructions cost the GEMM beside it: they slow the
 * other warpgroup's main loop, and on a power-capped H200 every instruction
 * costs clock (RESULTS, tenth and eleventh sessions).  Graphs carry many
 * constant products: GELU as ONNX spells it, h (1 + erf(h / sqrt 2)) 0.5,
 * and its gradient's coefficient (1 + erf + h e^(-a^2) 2 / sqrt(2 pi)) 0.5.
 * Here each float value v<i> of the epilogue may be emitted as w<i> with
 *   v<i> = F[i] w<i>,  F[i] a constant known here,
 * so that a product by a constant (or by its reciprocal: a division) or a
 * negation is no instruction (w aliases its operand's), a product of two values is
 * one (the factors multiply here), a sum of values with different factors
 * is one FFMA (w_p + (F_o / F_p) w_o, F_p the factor of one operand), a
 * value plus a constant one FFMA with factor 1 (F w + c: a polynomial's
 * Horner step stays one instruction, as nvcc contracts it), e^x
 * takes F into the product that feeds its exp2 anyway, and 1 + erf(x)
 * takes x's factor into its constants (evtc_erf1p_scaledf) and returns
 * K (1 + erf), factor 1 / K, with K chosen below.  Only where a value
 * leaves this arithmetic -- a store, a reduction, any other op -- is
 * v<i> = w<i> F[i] one product (emitted always; nvcc drops it where unread).
 *
 * K of each 1 + erf: of 1 and the factors that the values leaving the
 * arithmetic have with K = 1, the one that leaves the fewest products to
 * emit (for BERT-Large's fc epilogue K = 0.5: GELU and its coefficient come
 * out with factor 1, and the exp2 of e^(-a^2) is the same expression in
 * 1 + erf and in the coefficient, so nvcc computes it once).
 *
 * Up to rounding (constants multiplied here in double, rounded to float
 * once), like the products folded before this; factors stay within
 * [2^-12, 2^12] (else the value is multiplied out), so w overflows or
 * underflows only where the value is within that much of float's ends.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "runtime/precision.h"

#define LOG2E 1.4426950408889634

enum { MAX_ERF = 16 };

/* Float values this arithmetic may carry (F64 values are doubles in the epilogue: never). */
static bool float_value(const evtc_vnode *v) {
  return v->kind == EVTC_V_COMPUTE && (v->dtype == EVTC_F32 || v->dtype == EVTC_BF16 || v->dtype == EVTC_F16);
}

/* The value of immediate a as the epilogue writes it (cpu_visitor.c: a graph constant has its dtype's value, then
 * float), or of the float reciprocal of one (the kernel IR writes x / c as x * reciprocal(c): kernel_nodes.c);
 * NAN when a is neither, or not finite. */
static double imm_value(const evtc_kernel *k, int a) {
  const evtc_vnode *v = &k->v[a];
  if (float_value(v) && v->op == EVTC_OP_RECIPROCAL && v->n_args == 1) {
    const double c = imm_value(k, v->args[0]);
    const float r = 1.0f / (float)c;
    return isnan(c) || !isfinite(r) ? NAN : r;
  }
  if (v->kind != EVTC_V_IMM) return NAN;
  const float f = (float)(v->node ? evtc_round_to(v->dtype, v->value) : v->value);
  return isfinite(f) ? f : NAN;
}

static bool in_range(double f) {
  return isfinite(f) && fabs(f) >= 0x1p-12 && fabs(f) <= 0x1p12;
}

/* One pass over k's values with the K of every 1 + erf in erf_k (by node, 0: not one): fills fx->how, fx->f and
 * fx->pivot, returns the instructions it leaves beyond the ones any emission needs (products of a value by its
 * factor where it leaves, products that out-of-range factors force). */
static int plan_pass(evtc_cuda_factors *fx, const evtc_kernel *k) {
  int cost = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    fx->how[i] = EVTC_FX_NONE;
    fx->f[i] = 1;
    if (!float_value(v)) continue;
    const int a = v->args[0], b = v->n_args > 1 ? v->args[1] : -1;
    const double fa = fx->f[a], fb = b >= 0 ? fx->f[b] : 1, ia = imm_value(k, a), ib = b >= 0 ? imm_value(k, b) : NAN;
    const int x = evtc_cpu_erf_plus_one(k, v);
    if (i == fx->held) {     /* the accumulators hold the add's bias: the add is its other operand */
      const bool acc_a = k->v[a].kind == EVTC_V_ACC || (k->v[a].kind == EVTC_V_COMPUTE && k->v[a].op == EVTC_OP_CAST);
      fx->how[i] = acc_a ? EVTC_FX_ALIAS : EVTC_FX_ALIAS_B;
      fx->f[i] = acc_a ? fa : fb;
    } else if (x >= 0 && fx->erf_k[i] != 0 && in_range(fx->f[x])) {
      fx->how[i] = EVTC_FX_ERF1P;
      fx->f[i] = 1 / fx->erf_k[i];
    } else if (v->op == EVTC_OP_EXP && v->n_args == 1) {
      fx->how[i] = EVTC_FX_EXP;
    } else if (v->op == EVTC_OP_NEG && v->n_args == 1) {
      fx->how[i] = EVTC_FX_ALIAS;
      fx->f[i] = -fa;
    } else if (v->op == EVTC_OP_MUL && v->n_args == 2 && !isnan(ib) && isnan(ia) && ib != 0) {
      fx->how[i] = EVTC_FX_ALIAS;
      fx->f[i] = fa * ib;
    } else if (v->op == EVTC_OP_MUL && v->n_args == 2 && !isnan(ia) && isnan(ib) && ia != 0) {
      fx->how[i] = EVTC_FX_ALIAS_B;
      fx->f[i] = fb * ia;
    } else if (v->op == EVTC_OP_MUL && v->n_args == 2 && isnan(ia) && isnan(ib)) {
      fx->how[i] = EVTC_FX_MUL;
      fx->f[i] = fa * fb;
    } else if ((v->op == EVTC_OP_ADD || v->op == EVTC_OP_SUB) && v->n_args == 2 && isnan(ia) != isnan(ib)) {
      fx->how[i] = EVTC_FX_ADD_IMM;     /* w = fma(w_val, +-F_val, +-imm): one instruction, factor 1 */
    } else if ((v->op == EVTC_OP_ADD || v->op == EVTC_OP_SUB) && v->n_args == 2 && isnan(ia) && isnan(ib)) {
      const double gb = v->op == EVTC_OP_SUB ? -fb : fb;     /* v = fa w_a + gb w_b */
      fx->how[i] = EVTC_FX_ADD;
      fx->pivot[i] = gb == 1 && fa != 1 ? 1 : 0;     /* the factor kept: 1 where an operand has it */
      fx->f[i] = fx->pivot[i] ? gb : fa;
    }
    if (fx->how[i] != EVTC_FX_NONE && !in_range(fx->f[i])) {     /* multiplied out: the value itself, factor 1 */
      fx->how[i] = EVTC_FX_NONE;
      fx->f[i] = 1;
    }
  }
  /* a value leaves this arithmetic where something else reads it: one product there unless its factor is 1 (the
     erf node beside 1 + erf reads it too, but nvcc drops that erf when nothing else reads it) */
  for (int i = 0; i < k->n_v; i++) {
    if (fx->how[i] == EVTC_FX_NONE || fx->f[i] == 1) continue;
    bool leaves = false;
    for (int j = i + 1; j < k->n_v && !leaves; j++) {
      const evtc_vnode *u = &k->v[j];
      bool reads = false;
      for (int q = 0; q < u->n_args; q++) reads |= u->args[q] == i;
      if (!reads || fx->how[j] != EVTC_FX_NONE) continue;
      bool dead_erf = u->kind == EVTC_V_COMPUTE && u->op == EVTC_OP_ERF;
      for (int m = j + 1; m < k->n_v && dead_erf; m++)
        for (int q = 0; q < k->v[m].n_args; q++)
          if (k->v[m].args[q] == j && fx->how[m] != EVTC_FX_ERF1P) dead_erf = false;
      leaves = !dead_erf;
    }
    cost += leaves;
  }
  return cost;
}

void evtc_cuda_factors_plan(evtc_cuda_factors *fx, const evtc_kernel *k, int held) {
  const size_t n = (size_t)k->n_v;
  fx->held = held;
  fx->how = calloc(n, sizeof *fx->how);
  fx->pivot = calloc(n, sizeof *fx->pivot);
  fx->f = calloc(n, sizeof *fx->f);
  fx->erf_k = calloc(n, sizeof *fx->erf_k);
  EVTC_ASSERT(fx->how && fx->pivot && fx->f && fx->erf_k);
  int erfs[MAX_ERF], n_erf = 0;
  for (int i = 0; i < k->n_v; i++)
    if (float_value(&k->v[i]) && evtc_cpu_erf_plus_one(k, &k->v[i]) >= 0 && n_erf < MAX_ERF) {
      erfs[n_erf++] = i;
      fx->erf_k[i] = 1;
    }
  int best = plan_pass(fx, k);
  double *cand = malloc(sizeof *cand * (n + 1));
  EVTC_ASSERT(cand);
  for (int e = 0; e < n_erf; e++) {     /* each K in turn: 1, or a factor a leaving value has with the others fixed */
    int n_cand = 0;
    plan_pass(fx, k);
    for (int i = 0; i < k->n_v; i++)
      if (fx->how[i] != EVTC_FX_NONE && fx->f[i] != 1) cand[n_cand++] = fx->f[i] * fx->erf_k[erfs[e]];
    double keep = fx->erf_k[erfs[e]];
    for (int c = 0; c < n_cand; c++) {
      if (!in_range(cand[c]) || cand[c] < 0) continue;
      fx->erf_k[erfs[e]] = (float)cand[c];
      const int cost = plan_pass(fx, k);
      if (cost < best) best = cost, keep = fx->erf_k[erfs[e]];
    }
    fx->erf_k[erfs[e]] = keep;
  }
  free(cand);
  plan_pass(fx, k);
}

void evtc_cuda_factors_free(evtc_cuda_factors *fx) {
  free(fx->how);
  free(fx->pivot);
  free(fx->f);
  free(fx->erf_k);
}

/* "w<a>" for a carried value, else "v<a>" (its factor is then 1) */
static const char *wname(const evtc_cuda_factors *fx, int a, char *buf, size_t cap) {
  snprintf(buf, cap, "%c%d", fx->how[a] != EVTC_FX_NONE ? 'w' : 'v', a);
  return buf;
}

bool evtc_cuda_factors_emit(evtc_sb *b, const char *ind, const evtc_kernel *k, const evtc_cuda_factors *fx, int i) {
  if (fx->how[i] == EVTC_FX_NONE) return false;
  const evtc_vnode *v = &k->v[i];
  const int a = v->args[0], bb = v->n_args > 1 ? v->args[1] : -1;
  char na[24], nb[24];
  wname(fx, a, na, sizeof na);
  if (bb >= 0) wname(fx, bb, nb, sizeof nb);
  evtc_sb_printf(b, "%sconst float w%d = ", ind, i);
  switch (fx->how[i]) {
    case EVTC_FX_ALIAS: evtc_sb_printf(b, "%s", na); break;
    case EVTC_FX_ALIAS_B: evtc_sb_printf(b, "%s", nb); break;
    case EVTC_FX_MUL: evtc_sb_printf(b, "%s * %s", na, nb); break;
    case EVTC_FX_EXP:     /* e^(F w) = 2^(w F log2 e), the hardware exp2 as evtc_expf */
      evtc_sb_printf(b, "__nvvm_ex2_approx_ftz_f(%s * %.9ef)", na, (double)(float)(fx->f[a] * LOG2E));
      break;
    case EVTC_FX_ERF1P: {
      const int x = evtc_cpu_erf_plus_one(k, v);
      const double f = fx->f[x];
      wname(fx, x, na, sizeof na);
      evtc_sb_printf(b, "evtc_erf1p_scaledf<%s>(%s, %.9ef, %.9ef, %.9ef)", v->dtype == EVTC_BF16 ? "true" : "false", na,
                     (double)(float)f, (double)(float)fx->erf_k[i], (double)(float)(-(f * f) * LOG2E));
      break;
    }
    case EVTC_FX_ADD_IMM: {     /* imm_a: v = c +- fb w_b; else v = fa w_a +- c (a polynomial's step: one FFMA) */
      const bool imm_a = !isnan(imm_value(k, a));
      const double c = imm_value(k, imm_a ? a : bb), sub = v->op == EVTC_OP_SUB ? -1 : 1;
      const double mul = imm_a ? sub * fx->f[bb] : fx->f[a], add = imm_a ? c : sub * c;
      if (mul == 1) evtc_sb_printf(b, "%s + %.9ef", imm_a ? nb : na, (double)(float)add);
      else evtc_sb_printf(b, "fmaf(%s, %.9ef, %.9ef)", imm_a ? nb : na, (double)(float)mul, (double)(float)add);
      break;
    }
    case EVTC_FX_ADD: {
      const double ga = fx->f[a], gb = v->op == EVTC_OP_SUB ? -fx->f[bb] : fx->f[bb];
      const char *wp = fx->pivot[i] ? nb : na, *wo = fx->pivot[i] ? na : nb;
      const double r = (fx->pivot[i] ? ga : gb) / fx->f[i];
      if (r == 1) evtc_sb_printf(b, "%s + %s", wp, wo);
      else if (r == -1) evtc_sb_printf(b, "%s - %s", wp, wo);
      else evtc_sb_printf(b, "fmaf(%s, %.9ef, %s)", wo, (double)(float)r, wp);
      break;
    }
    default: EVTC_ASSERT(!"a carried value's kind");
  }
  if (fx->f[i] == 1) evtc_sb_printf(b, ";\n%sconst float v%d = w%d;\n", ind, i, i);
  else evtc_sb_printf(b, ";\n%sconst float v%d = w%d * %.9ef;\n", ind, i, i, (double)(float)fx->f[i]);
  return true;
}
