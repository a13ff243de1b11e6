/* cpu_emit_elementwise.c -- the elementwise template: one flat loop.
 *
 * For kernels without reductions whose stores all cover the domain: one
 * OpenMP-parallel loop over the flat index i = r*C + c, vectorisable by the
 * compiler when every load is contiguous.  When a broadcast load, a one-hot,
 * a row-vector RNG or a permuted load needs the row r and column c, a loop
 * over rows (the parallel one) holds a loop over columns instead, so that
 * what depends on r alone is computed once a row and the inner loop stays
 * contiguous: a permute's copy of 1024 x 256 floats took 0.45 ms as one loop
 * that divided i per element, on 2 cores (2026-11-30).  Few rows keep the one
 * loop, which splits over the threads however many rows there are.  Scalar
 * values are computed once before the loop.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_emit.h"

bool evtc_cpu_needs_rc(const evtc_kernel *k) {
  evtc_sb probe = {0};
  evtc_cpu_vctx x = {.k = k, .sb = &probe, .ind = "", .flat = true};
  bool need = false;
  for (int i = 0; i < k->n_v && !need; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_ONE_HOT || v->kind == EVTC_V_STEP || (v->kind == EVTC_V_RNG && v->cls != EVTC_VC_FULL))
      need = true;
    if (v->kind == EVTC_V_STORE && v->cls != EVTC_VC_FULL) need = true;
    if (v->kind == EVTC_V_LOAD) {
      char buf[512];
      evtc_cpu_load_index(&x, v, buf, sizeof buf);
      if (strstr(buf, " r") || strstr(buf, " c") || strstr(buf, "(r") || strstr(buf, "(c")) need = true;
    }
  }
  free(probe.s);
  return need;
}

/* Rows and columns from which a kernel that needs r and c loops over rows, then columns (see the top). */
enum { MIN_ROWS = 64, MIN_COLS = 16 };

void evtc_cpu_emit_elementwise(evtc_sb *b, const evtc_kernel *k) {
  evtc_sb_printf(b, "void %s(void *const *args, uint64_t step, int *err) {\n", k->name);
  evtc_cpu_emit_args(b, k);
  evtc_sb_printf(b, "  const int64_t NN = %lldLL, CC = %lldLL;\n  (void)step; (void)err; (void)CC;\n",
                 (long long)(k->rows * k->cols), (long long)k->cols);
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  "};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls != EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) evtc_cpu_emit_store(&top, i);
    else evtc_cpu_emit_value(&top, i);
  }
  bool rc = evtc_cpu_needs_rc(k), by_rows = rc && k->rows >= MIN_ROWS && k->cols >= MIN_COLS;
  evtc_sb_printf(b, "  #pragma omp parallel for schedule(static) if (NN > 32768)\n");
  if (by_rows)
    evtc_sb_printf(b, "  for (int64_t r = 0; r < NN / CC; r++)\n  for (int64_t c = 0; c < CC; c++) {\n"
                      "    const int64_t i = r * CC + c;\n    (void)i;\n");
  else
    evtc_sb_printf(b, "  for (int64_t i = 0; i < NN; i++) {\n");
  if (rc && !by_rows) evtc_sb_printf(b, "    const int64_t r = i / CC, c = i - r * CC;\n    (void)r; (void)c;\n");
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = "    ", .flat = true};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) evtc_cpu_emit_store(&x, i);
    else evtc_cpu_emit_value(&x, i);
  }
  evtc_sb_printf(b, "  }\n}\n\n");
}
