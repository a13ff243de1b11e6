/* cpu_emit_rows.c -- the reduce-then-apply template: kernels over rows.
 *
 * Rows are split across OpenMP threads (static schedule, so a run is
 * deterministic for a given thread count).  For each row the kernel runs
 * its phases: phase p first computes the row's column-vector values that
 * became available (reductions finished in phase p-1 and what depends on
 * them), then, when anything needs it, one loop over the row's columns
 * computes the FULL values that the phase's reductions and stores need --
 * recomputing earlier-phase values, except a transcendental one (a
 * softmax's exponentials) that a later loop needs again, which the first
 * loop keeps in a scratch row of the thread's -- and accumulates the column
 * reductions it finishes.  Reductions over rows
 * (ROW) and over everything (SCALAR) accumulate into per-thread partials,
 * combined in thread order after the parallel loop; a column loop sums (or
 * takes the max or min of) its row's share of a SCALAR reduction in a local
 * accumulator, added to the thread's partial after the loop.  All
 * accumulation is in double, and every column loop with reductions is
 * vectorised over lanes (simd_pragma).
 */
#include <stdlib.h>

#include "backend/cpu/cpu_emit.h"

static const char *acc_init(evtc_op op) {
  return op == EVTC_OP_REDUCE_MAX ? "-INFINITY" : op == EVTC_OP_REDUCE_MIN ? "INFINITY" : "0.0";
}

/* "acc = acc (op) x;" for a reduction. */
static void emit_accumulate(evtc_sb *b, const char *ind, evtc_op op, const char *acc, int x) {
  if (op == EVTC_OP_REDUCE_MAX) evtc_sb_printf(b, "%s%s = EVTC_MAXN(%s, (double)v%d);\n", ind, acc, acc, x);
  else if (op == EVTC_OP_REDUCE_MIN) evtc_sb_printf(b, "%s%s = EVTC_MINN(%s, (double)v%d);\n", ind, acc, acc, x);
  else evtc_sb_printf(b, "%s%s += (double)v%d;\n", ind, acc, x);
}

/* "T v<i> = (T)(acc / count);" finishing reduction i. */
static void emit_finish(evtc_sb *b, const char *ind, const evtc_vnode *v, int i, const char *acc) {
  const char *t = evtc_cpu_ctype(v->dtype);
  if (v->op == EVTC_OP_REDUCE_MEAN) evtc_sb_printf(b, "%s%s v%d = (%s)(%s / %.17g);\n", ind, t, i, t, acc, v->value);
  else evtc_sb_printf(b, "%s%s v%d = (%s)(%s);\n", ind, t, i, t, acc);
}

static bool is_value(const evtc_vnode *v) { return v->kind != EVTC_V_REDUCE && v->kind != EVTC_V_STORE; }

/* Emits everything of row r that belongs to the start of phase p. */
static void emit_phase_start(const evtc_cpu_vctx *x, int p) {
  const evtc_kernel *k = x->k;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->phase != p) continue;
    if (is_value(v) && v->cls == EVTC_VC_COL) evtc_cpu_emit_value(x, i);
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_COL) evtc_cpu_emit_store(x, i);
    if (v->kind == EVTC_V_REDUCE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].cls == EVTC_VC_COL) {
      char acc[32];
      snprintf(acc, sizeof acc, "pp%d[0]", i);
      emit_accumulate(x->sb, x->ind, v->op, acc, v->args[0]);
    }
  }
}

/* Whether phase p's column loop accumulates reduction v: it finishes in phase p + 1 and reads a value that varies
 * along the columns (FULL or ROW). */
static bool reduced_in_pass(const evtc_kernel *k, const evtc_vnode *v, int p) {
  const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;
  return v->kind == EVTC_V_REDUCE && v->phase == p + 1 && ((wide >> k->v[v->args[0]].cls) & 1);
}

/* "#pragma omp simd reduction(+: acc...) reduction(evtc_max: ...) reduction(evtc_min: ...)" before phase p's column
 * loop: the compiler may then split its reductions over vector lanes (a fixed order for a build, so still
 * deterministic), which it does not do of its own accord (no reassociation of a double sum without the pragma;
 * EVTC_MAXN's NaN is not OpenMP's max, hence the prelude's declared evtc_max / evtc_min).  Every reduction the
 * loop finishes has a local accumulator (acc<i>: a row's, or the row's share of a sum over everything) or a
 * partial of its own column (pp<i>[c]), so lanes never share one.  A max or min picks the same value in any order,
 * a -0 against a +0 aside. */
static void simd_pragma(const evtc_cpu_vctx *row, int p, evtc_sb *b) {
  const evtc_kernel *k = row->k;
  evtc_sb lists[3] = {{0}};   /* sums, maxima, minima */
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!reduced_in_pass(k, v, p)) continue;
    const int l = v->op == EVTC_OP_REDUCE_MAX ? 1 : v->op == EVTC_OP_REDUCE_MIN ? 2 : 0;
    if (v->cls != EVTC_VC_ROW) evtc_sb_printf(&lists[l], "%sacc%d", lists[l].s ? ", " : "", i);
  }
  static const char *const names[] = {"+", "evtc_max", "evtc_min"};
  if (lists[0].s || lists[1].s || lists[2].s) {
    evtc_sb_printf(b, "      #pragma omp simd");
    for (int l = 0; l < 3; l++)
      if (lists[l].s) evtc_sb_printf(b, " reduction(%s: %s)", names[l], lists[l].s);
    evtc_sb_printf(b, "\n");
  }
  for (int l = 0; l < 3; l++) free(lists[l].s);
}

static bool stored_in_pass(const evtc_kernel *k, const evtc_vnode *v, int p) {
  const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;
  return v->kind == EVTC_V_STORE && v->phase == p && ((wide >> v->cls) & 1) && k->v[v->args[0]].kind != EVTC_V_REDUCE;
}

/* need[i]: whether phase p's column loop computes value i (first[i] < p: a kept value, loaded instead, its inputs
 * not needed for it); false when the phase has no column loop. */
static bool pass_needs(const evtc_kernel *k, int p, const int *first, bool *need) {
  const unsigned wide = 1u << EVTC_VC_FULL | 1u << EVTC_VC_ROW;
  for (int i = 0; i < k->n_v; i++) need[i] = first && first[i] >= 0 && first[i] < p;
  bool any = false;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (!reduced_in_pass(k, v, p) && !stored_in_pass(k, v, p)) continue;
    any = true;
    evtc_cpu_mark_needed(k, v->args[0], wide, need);
  }
  return any;
}

/* A transcendental function of the IR (exp, log, tanh, erf, ...: dozens of instructions an element). */
static bool transcendental(const evtc_vnode *v) {
  switch (v->op) {
    case EVTC_OP_EXP: case EVTC_OP_LOG: case EVTC_OP_TANH: case EVTC_OP_SIGMOID: case EVTC_OP_ERF:
    case EVTC_OP_GELU: case EVTC_OP_GELU_TANH: case EVTC_OP_POW: case EVTC_OP_SIN: case EVTC_OP_COS: return true;
    default: return false;
  }
}

/* first[i]: the phase whose column loop computes and keeps FULL value i for later loops that need it again (a
 * transcendental compute node needed by two or more loops), else -1.  Not an erf that an add(erf(x), 1) reads
 * through (evtc_cpu_erf_plus_one: the add computes from x, which a kept erf would leave uncomputed).  A kept value
 * is bit for bit what recomputing it gives. */
static void choose_kept(const evtc_kernel *k, int *first, bool *need) {
  int *uses = calloc((size_t)k->n_v + 1, sizeof(int));
  for (int i = 0; i < k->n_v; i++) first[i] = -1;
  for (int p = 0; p < k->n_phases; p++) {
    if (!pass_needs(k, p, NULL, need)) continue;
    for (int i = 0; i < k->n_v; i++)
      if (need[i] && uses[i]++ == 0) first[i] = p;
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (uses[i] < 2 || v->kind != EVTC_V_COMPUTE || v->cls != EVTC_VC_FULL || !transcendental(v)) first[i] = -1;
    if (evtc_cpu_erf_plus_one(k, v) >= 0)   /* the erf among its two arguments is read through */
      for (int j = 0; j < v->n_args; j++)
        if (k->v[v->args[j]].kind == EVTC_V_COMPUTE && k->v[v->args[j]].op == EVTC_OP_ERF) first[v->args[j]] = -1;
  }
  free(uses);
}

/* The column loop of phase p, when it has work; kept values (first) stored into or loaded from kr<i>. */
static void emit_pass(const evtc_cpu_vctx *row, int p, const int *first, bool *need) {
  const evtc_kernel *k = row->k;
  evtc_sb *b = row->sb;
  if (!pass_needs(k, p, first, need)) return;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (reduced_in_pass(k, v, p) && v->cls != EVTC_VC_ROW) evtc_sb_printf(b, "      double acc%d = %s;\n", i, acc_init(v->op));
  }
  simd_pragma(row, p, b);
  evtc_sb_printf(b, "      for (int64_t c = 0; c < CC; c++) {\n");
  evtc_cpu_vctx x = *row;
  x.ind = "        ";
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (need[i] && first[i] >= 0 && first[i] < p) {
      evtc_sb_printf(b, "%s%s v%d = kr%d[c];\n", x.ind, evtc_cpu_ctype(v->dtype), i, i);
    } else if (need[i] && is_value(v)) {
      evtc_cpu_emit_value(&x, i);
      if (first[i] == p) evtc_sb_printf(b, "%skr%d[c] = v%d;\n", x.ind, i, i);
    }
    if (reduced_in_pass(k, v, p)) {
      char acc[48];
      if (v->cls == EVTC_VC_ROW) snprintf(acc, sizeof acc, "pp%d[c]", i);
      else snprintf(acc, sizeof acc, "acc%d", i);
      emit_accumulate(b, x.ind, v->op, acc, v->args[0]);
    }
    if (stored_in_pass(k, v, p)) evtc_cpu_emit_store(&x, i);
  }
  evtc_sb_printf(b, "      }\n");
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->phase != p + 1) continue;
    if (v->cls == EVTC_VC_COL) {
      char acc[32];
      snprintf(acc, sizeof acc, "acc%d", i);
      emit_finish(b, row->ind, v, i, acc);
    } else if (v->cls == EVTC_VC_SCALAR && reduced_in_pass(k, v, p)) {   /* the row's share, summed here */
      const char *f = v->op == EVTC_OP_REDUCE_MAX ? "EVTC_MAXN" : v->op == EVTC_OP_REDUCE_MIN ? "EVTC_MINN" : NULL;
      if (f) evtc_sb_printf(b, "%spp%d[0] = %s(pp%d[0], acc%d);\n", row->ind, i, f, i, i);
      else evtc_sb_printf(b, "%spp%d[0] += acc%d;\n", row->ind, i, i);
    }
  }
}

void evtc_cpu_emit_rows(evtc_sb *b, const evtc_kernel *k) {
  evtc_sb_printf(b, "void %s(void *const *args, uint64_t step, int *err) {\n", k->name);
  evtc_cpu_emit_args(b, k);
  evtc_sb_printf(b, "  const int64_t RR = %lldLL, CC = %lldLL;\n  (void)step; (void)err;\n", (long long)k->rows,
                 (long long)k->cols);
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  "};
  for (int i = 0; i < k->n_v; i++) {           /* scalars: once */
    const evtc_vnode *v = &k->v[i];
    if (is_value(v) && v->cls == EVTC_VC_SCALAR) evtc_cpu_emit_value(&top, i);
    if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_SCALAR && k->v[v->args[0]].kind != EVTC_V_REDUCE)
      evtc_cpu_emit_store(&top, i);
  }
  evtc_sb_printf(b, "  const int nth = omp_get_max_threads();\n");
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    const char *len = v->cls == EVTC_VC_ROW ? "CC" : "1";
    evtc_sb_printf(b, "  double *part%d = malloc(sizeof(double) * (size_t)nth * (size_t)%s);\n", i, len);
    evtc_sb_printf(b, "  for (int64_t j = 0; j < nth * %s; j++) part%d[j] = %s;\n", len, i, acc_init(v->op));
  }
  evtc_sb_printf(b, "  #pragma omp parallel num_threads(nth) if (RR * CC > 16384)\n  {\n");
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_REDUCE && v->cls != EVTC_VC_COL)
      evtc_sb_printf(b, "    double *pp%d = part%d + (size_t)omp_get_thread_num() * %s;\n", i, i,
                     v->cls == EVTC_VC_ROW ? "(size_t)CC" : "1");
  }
  bool *need = calloc((size_t)k->n_v + 1, sizeof(bool));
  int *first = calloc((size_t)k->n_v + 1, sizeof(int));
  choose_kept(k, first, need);
  for (int i = 0; i < k->n_v; i++)
    if (first[i] >= 0)
      evtc_sb_printf(b, "    %s *const kr%d = malloc(sizeof(%s) * (size_t)CC);   /* kept for a later column loop */\n",
                     evtc_cpu_ctype(k->v[i].dtype), i, evtc_cpu_ctype(k->v[i].dtype));
  evtc_sb_printf(b, "    #pragma omp for schedule(static)\n    for (int64_t r = 0; r < RR; r++) {\n");
  evtc_cpu_vctx row = {.k = k, .sb = b, .ind = "      "};
  for (int p = 0; p <= k->n_phases; p++) {
    emit_phase_start(&row, p);
    if (p < k->n_phases) emit_pass(&row, p, first, need);
  }
  evtc_sb_printf(b, "    }\n");
  for (int i = 0; i < k->n_v; i++)
    if (first[i] >= 0) evtc_sb_printf(b, "    free(kr%d);\n", i);
  evtc_sb_printf(b, "  }\n");
  free(first);
  free(need);
  for (int i = 0; i < k->n_v; i++) {            /* combine partials in thread order, then store */
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_REDUCE || v->cls == EVTC_VC_COL) continue;
    bool rowv = v->cls == EVTC_VC_ROW;
    evtc_sb_printf(b, "  for (int64_t c = 0; c < %s; c++) {\n    double acc = part%d[c];\n", rowv ? "CC" : "1", i);
    evtc_sb_printf(b, "    for (int t = 1; t < nth; t++) {\n      double v = part%d[(size_t)t * %s + (size_t)c];\n", i,
                   rowv ? "(size_t)CC" : "1");
    evtc_sb_printf(b, "      acc = %s;\n    }\n",
                   v->op == EVTC_OP_REDUCE_MAX ? "EVTC_MAXN(acc, v)" : v->op == EVTC_OP_REDUCE_MIN ? "EVTC_MINN(acc, v)"
                                                                                      : "acc + v");
    emit_finish(b, "    ", v, i, "acc");
    evtc_cpu_vctx x = {.k = k, .sb = b, .ind = "    "};
    for (int j = i + 1; j < k->n_v; j++)
      if (k->v[j].kind == EVTC_V_STORE && k->v[j].args[0] == i) evtc_cpu_emit_store(&x, j);
    evtc_sb_printf(b, "  }\n  free(part%d);\n", i);
  }
  evtc_sb_printf(b, "}\n\n");
}
