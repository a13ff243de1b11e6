/* cuda_rows_plain.c -- the plain vectors of a row: where a rows kernel's
 * one-hot and column-step values are zero, and what folds with them.
 *
 * A cross-entropy's rows kernel spends most of its time issuing
 * instructions, not waiting on memory: GPT-2's 8192 x 50264 logits took
 * about 37 instructions an element over three passes (RESULTS, sixteenth
 * session).  Several of them serve values that are zero on nearly every
 * column: the one-hot of the label (its product with the log-softmax,
 * summed into the loss, and subtracted from the softmax for the gradient)
 * and gemm-pad's mask, a step that is 0 below the vocabulary and a large
 * negative number above it (added to the logits, rounded to bf16 and kept
 * over them in shared memory).  On a vector of V columns that the row's
 * label misses and that lies wholly on a step's zero side, those values
 * are 0, and the pass runs a second copy of its element loop (the rows
 * template branches on the condition built here) where:
 *   - a product with zero is zero (NaN * 0 and inf * 0 are taken as 0: the
 *     one-hot's product stands for picking the label's column, as PyTorch's
 *     cross-entropy does);
 *   - a sum with zero, or a difference minus zero, is the other operand
 *     (-0 + 0 gives +0 in IEEE arithmetic; here -0 stays -0);
 *   - a negated zero is zero;
 *   - a sum reduction skips zero (the rows template drops the combine).
 * Only values a pass computes fold; values it reads back from a kept copy
 * are taken as they are.  Integer and bool values never fold.  On the H200
 * (sixteenth session, with evtc_exp_shiftf): GPT-2's masked cross-entropy
 * 609 -> 501 us a step, BERT-Large's MLM loss 916 -> 823; the loss kernel
 * compiled with only its plain loops has 30 % fewer instructions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"

/* Whether domain dim d is the column coordinate c itself. */
static bool is_column(const evtc_kernel *k, int d) { return d >= k->split && evtc_kernel_dim_is_whole(k, d); }

static bool is_float(evtc_dtype t) { return t == EVTC_F32 || t == EVTC_F64 || evtc_dtype_is_half(t); }

/* Appends " && term" (or the term alone) to pl->cond; false when it does not fit. */
static bool add_term(evtc_cuda_plain *pl, const char *term) {
  size_t n = strlen(pl->cond);
  int w = snprintf(pl->cond + n, sizeof pl->cond - n, "%s%s", n ? " && " : "", term);
  return w > 0 && (size_t)w < sizeof pl->cond - n;
}

/* The condition under which special value v (a one-hot of the column with a row's label, or a column step with a
 * zero side) is zero on the vector at column cb, into term; false when v is not special. */
static bool zero_term(const evtc_kernel *k, const evtc_vnode *v, int V, char *term, size_t cap) {
  if (!is_float(v->dtype) || v->dim < 0 || !is_column(k, v->dim)) return false;
  if (v->kind == EVTC_V_ONE_HOT) {
    if (k->v[v->args[0]].cls != EVTC_VC_COL) return false;
    if (k->cols < (int64_t)1 << 30) snprintf(term, cap, "(unsigned)((int)v%d - (int)cb) >= %du", v->args[0], V);
    else snprintf(term, cap, "(uint64_t)((int64_t)v%d - (int64_t)cb) >= %dull", v->args[0], V);
    return true;
  }
  if (v->kind != EVTC_V_STEP) return false;
  if (v->below == 0.0) snprintf(term, cap, "cb + %d <= %lld", V, (long long)v->depth);
  else if (v->value == 0.0) snprintf(term, cap, "cb >= %lld", (long long)v->depth);
  else return false;
  return true;
}

static int root(const evtc_cuda_plain *pl, int i) { return pl->fact[i] == EVTC_PLAIN_SAME ? pl->same[i] : i; }

bool evtc_cuda_plain_facts(const evtc_kernel *k, const bool *computed, int V, evtc_cuda_plain *pl) {
  pl->fact = calloc((size_t)k->n_v, sizeof *pl->fact);
  pl->same = malloc((size_t)k->n_v * sizeof *pl->same);
  pl->cond[0] = 0;
  int folded = 0;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    pl->same[i] = -1;
    if (!computed[i] || !is_float(v->dtype)) continue;
    char term[128];
    if (zero_term(k, v, V, term, sizeof term)) {
      if (add_term(pl, term)) pl->fact[i] = EVTC_PLAIN_ZERO;
      continue;
    }
    if (v->kind == EVTC_V_IMM && v->value == 0.0) pl->fact[i] = EVTC_PLAIN_ZERO;
    if (v->kind != EVTC_V_COMPUTE) continue;
    int a = v->args[0], b = v->n_args > 1 ? v->args[1] : -1;
    bool za = pl->fact[a] == EVTC_PLAIN_ZERO, zb = b >= 0 && pl->fact[b] == EVTC_PLAIN_ZERO;
    int same = -1;
    if (v->op == EVTC_OP_MUL && (za || zb)) pl->fact[i] = EVTC_PLAIN_ZERO;
    else if (v->op == EVTC_OP_NEG && za) pl->fact[i] = EVTC_PLAIN_ZERO;
    else if (v->op == EVTC_OP_ADD && za && zb) pl->fact[i] = EVTC_PLAIN_ZERO;
    else if (v->op == EVTC_OP_ADD && za) same = root(pl, b);
    else if ((v->op == EVTC_OP_ADD || v->op == EVTC_OP_SUB) && zb) same = root(pl, a);
    if (same >= 0) pl->fact[i] = EVTC_PLAIN_SAME, pl->same[i] = same;
    if (pl->fact[i] != EVTC_PLAIN_NONE) folded++;
  }
  if (folded == 0 || !pl->cond[0]) {    /* nothing to gain from a second loop */
    evtc_cuda_plain_free(pl);
    return false;
  }
  return true;
}

void evtc_cuda_plain_free(evtc_cuda_plain *pl) {
  free(pl->fact);
  free(pl->same);
  pl->fact = NULL, pl->same = NULL;
}
