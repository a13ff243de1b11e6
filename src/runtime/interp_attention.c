/* interp_attention.c -- the float64 reference of the attention family:
 * attention, attention_lse and the backward ops (ops.def).
 *
 * Each (batch, head) pair is done on its own with the full S x T score
 * matrix in scratch (the reference needs no tiling).  Scores are
 * scale * q.k, causal rows keep keys t <= s + (T - S); a row's softmax
 * subtracts its maximum first.  The backward ops follow FlashAttention-2:
 * P = exp(score - lse), D = rowsum(dout * out), dP = dout v^T,
 * dS = P (dP - D); dq = scale dS k, dk = scale dS^T q, dv = P^T dout
 * (attention_backward_kv: row t holds dk[t] then dv[t]).
 */
#include <math.h>
#include <stdlib.h>

#include "runtime/interp_kernels.h"

typedef struct attn_dims {
  int64_t bh, s, t, d, dv;
  double scale;
  bool causal;
} attn_dims;

static attn_dims dims_of(const evtc_kernel_args *k) {
  const evtc_type *q = evtc_kernel_in_type(k, 0), *kt = evtc_kernel_in_type(k, 1);
  attn_dims a = {.bh = q->shape[0] * q->shape[1], .s = q->shape[2], .t = kt->shape[2], .d = q->shape[3],
                 .scale = evtc_node_float(k->node, "scale"), .causal = evtc_node_int(k->node, "causal") != 0};
  a.dv = k->node->op == EVTC_OP_ATTENTION_LSE ? 0 : evtc_kernel_in_type(k, 2)->shape[3];
  return a;
}

/* Whether key t is visible from query s. */
static bool visible(const attn_dims *a, int64_t s, int64_t t) { return !a->causal || t <= s + (a->t - a->s); }

/* Fills p[s*T + t] with the scores of one (batch, head) (-inf where masked)
 * and lse[s] with each row's log-sum-exp; with `normalise`, p becomes the
 * softmax itself. */
static void scores(const attn_dims *a, const double *q, const double *kk, double *p, double *lse, bool normalise) {
  for (int64_t s = 0; s < a->s; s++) {
    double *row = p + s * a->t, mx = -INFINITY;
    for (int64_t t = 0; t < a->t; t++) {
      double acc = 0.0;
      for (int64_t j = 0; j < a->d; j++) acc += q[s * a->d + j] * kk[t * a->d + j];
      row[t] = visible(a, s, t) ? a->scale * acc : -INFINITY;
      if (row[t] > mx) mx = row[t];
    }
    double sum = 0.0;
    for (int64_t t = 0; t < a->t; t++) sum += row[t] == -INFINITY ? 0.0 : exp(row[t] - mx);
    lse[s] = a->t ? mx + log(sum) : -INFINITY;
    if (normalise)
      for (int64_t t = 0; t < a->t; t++) row[t] = row[t] == -INFINITY ? 0.0 : exp(row[t] - mx) / sum;
  }
}

evtc_status evtc_kernel_attention(const evtc_kernel_args *k) {
  attn_dims a = dims_of(k);
  bool lse_only = k->node->op == EVTC_OP_ATTENTION_LSE;
  double *p = malloc(sizeof(double) * (size_t)(a.s * a.t + a.s + 1)), *lse = p + a.s * a.t;
  EVTC_ASSERT(p != NULL);
  for (int64_t h = 0; h < a.bh; h++) {
    const double *q = k->in[0] + h * a.s * a.d, *kk = k->in[1] + h * a.t * a.d;
    scores(&a, q, kk, p, lse_only ? k->out + h * a.s : lse, !lse_only);
    if (lse_only) continue;
    const double *v = k->in[2] + h * a.t * a.dv;
    double *o = k->out + h * a.s * a.dv;
    for (int64_t s = 0; s < a.s; s++)
      for (int64_t j = 0; j < a.dv; j++) {
        double acc = 0.0;
        for (int64_t t = 0; t < a.t; t++) acc += p[s * a.t + t] * v[t * a.dv + j];
        o[s * a.dv + j] = acc;
      }
  }
  free(p);
  return EVTC_OK;
}

/* (q, k, v, out, dout, lse) -> dq, or dk and dv side by side ([B,H,T,D+Dv]). */
evtc_status evtc_kernel_attention_backward(const evtc_kernel_args *k) {
  attn_dims a = dims_of(k);
  evtc_op op = k->node->op;
  double *p = malloc(sizeof(double) * (size_t)(2 * a.s * a.t + a.s + 1)), *ds = p + a.s * a.t, *dd = ds + a.s * a.t;
  EVTC_ASSERT(p != NULL);
  for (int64_t h = 0; h < a.bh; h++) {
    const double *q = k->in[0] + h * a.s * a.d, *kk = k->in[1] + h * a.t * a.d, *v = k->in[2] + h * a.t * a.dv;
    const double *o = k->in[3] + h * a.s * a.dv, *dout = k->in[4] + h * a.s * a.dv, *lse = k->in[5] + h * a.s;
    for (int64_t s = 0; s < a.s; s++) {
      double acc = 0.0;
      for (int64_t j = 0; j < a.dv; j++) acc += dout[s * a.dv + j] * o[s * a.dv + j];
      dd[s] = acc;
      for (int64_t t = 0; t < a.t; t++) {
        double sc = 0.0, dp = 0.0;
        for (int64_t j = 0; j < a.d; j++) sc += q[s * a.d + j] * kk[t * a.d + j];
        for (int64_t j = 0; j < a.dv; j++) dp += dout[s * a.dv + j] * v[t * a.dv + j];
        double pr = visible(&a, s, t) ? exp(a.scale * sc - lse[s]) : 0.0;
        p[s * a.t + t] = pr;
        ds[s * a.t + t] = pr * (dp - dd[s]);
      }
    }
    if (op == EVTC_OP_ATTENTION_BACKWARD_Q) {
      double *dq = k->out + h * a.s * a.d;
      for (int64_t s = 0; s < a.s; s++)
        for (int64_t j = 0; j < a.d; j++) {
          double acc = 0.0;
          for (int64_t t = 0; t < a.t; t++) acc += ds[s * a.t + t] * kk[t * a.d + j];
          dq[s * a.d + j] = a.scale * acc;
        }
    } else {
      int64_t w = a.d + a.dv;
      double *dkv = k->out + h * a.t * w;
      for (int64_t t = 0; t < a.t; t++)
        for (int64_t j = 0; j < w; j++) {
          bool dk = j < a.d;
          int64_t c = dk ? j : j - a.d, xw = dk ? a.d : a.dv;
          const double *m = dk ? ds : p, *x = dk ? q : dout;
          double acc = 0.0;
          for (int64_t s = 0; s < a.s; s++) acc += m[s * a.t + t] * x[s * xw + c];
          dkv[t * w + j] = dk ? a.scale * acc : acc;
        }
    }
  }
  free(p);
  return EVTC_OK;
}
