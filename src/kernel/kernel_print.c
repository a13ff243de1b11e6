/* kernel_print.c -- a readable dump of a kernel, for debugging and tests.
 *
 *   kernel k_matmul: gemm M=32 N=128 K=64 batch=1, domain [32,128] split 1 (32 x 128), 1 phase
 *     in  0 %xs f32[32,64]
 *     out 2 %a f32[32,128]
 *     v0 = acc                      full f32           phase 0
 *     v1 = row_broadcast arg1 +0 [0,1]  row f32
 *     v2 = compute add(v0, v1)      full f32
 *     ...
 *   schedule: mc=96 nc=256 kc=256 rows/task=16
 */
#include "kernel/kernel.h"

const char *evtc_vclass_name(evtc_vclass c) {
  static const char *names[] = {"full", "col", "row", "scalar"};
  return names[c];
}

const char *evtc_vnode_kind_name(const evtc_vnode *v) {
  switch (v->kind) {
    case EVTC_V_ACC: return "acc";
    case EVTC_V_LOAD:
      return v->cls == EVTC_VC_FULL ? "aux_load" : v->cls == EVTC_VC_ROW ? "row_broadcast"
           : v->cls == EVTC_VC_COL ? "col_broadcast" : "scalar_broadcast";
    case EVTC_V_IMM: return "imm";
    case EVTC_V_COMPUTE: return "compute";
    case EVTC_V_REDUCE:
      return v->cls == EVTC_VC_ROW ? "row_reduce" : v->cls == EVTC_VC_COL ? "col_reduce" : "scalar_reduce";
    case EVTC_V_STORE: return "aux_store";
    case EVTC_V_RNG: return "rng";
    case EVTC_V_ONE_HOT: return "one_hot";
    case EVTC_V_STEP: return "step";
  }
  return "?";
}

static const char *kind_name(evtc_mainloop_kind k) {
  static const char *names[] = {"elementwise", "rows", "gemm", "conv", "opaque"};
  return names[k];
}

void evtc_kernel_print(const evtc_kernel *k, FILE *out) {
  fprintf(out, "kernel %s: %s", k->name, kind_name(k->kind));
  if (k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV)
    fprintf(out, " M=%lld N=%lld K=%lld batch=%lld", (long long)k->gemm.M, (long long)k->gemm.N,
            (long long)k->gemm.K, (long long)k->gemm.batch);
  if (k->kind == EVTC_ML_OPAQUE) fprintf(out, " %%%s (%s)", k->main->name, evtc_op_get(k->main->op)->name);
  fprintf(out, ", domain [");
  for (int d = 0; d < k->rank; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)k->dom[d]);
  fprintf(out, "] split %d (%lld x %lld), %d phase%s\n", k->split, (long long)k->rows, (long long)k->cols,
          k->n_phases, k->n_phases == 1 ? "" : "s");
  char buf[128];
  for (int i = 0; i < k->n_args; i++)
    fprintf(out, "  %s %d %%%s %s\n", k->args[i].output ? "out" : "in ", i, k->args[i].node->name,
            evtc_type_str(&k->args[i].node->type, buf, sizeof buf));
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    fprintf(out, "  v%d = %s", i, evtc_vnode_kind_name(v));
    if (v->kind == EVTC_V_COMPUTE || v->kind == EVTC_V_REDUCE) fprintf(out, " %s", evtc_op_get(v->op)->name);
    if (v->kind == EVTC_V_LOAD || v->kind == EVTC_V_STORE) fprintf(out, " arg%d", v->arg);
    if (v->kind == EVTC_V_LOAD) {
      fprintf(out, " +%lld [", (long long)v->offset);
      for (int d = 0; d < k->rank; d++) fprintf(out, "%s%lld", d ? "," : "", (long long)v->strides[d]);
      fputc(']', out);
    }
    if (v->kind == EVTC_V_IMM) fprintf(out, " %.9g", v->value);
    if (v->kind == EVTC_V_RNG) fprintf(out, " p=%g seed=%llu", v->value, (unsigned long long)v->seed);
    if (v->kind == EVTC_V_ONE_HOT) fprintf(out, " dim=%d depth=%lld%s", v->dim, (long long)v->depth,
                                           v->check ? " checked" : "");
    if (v->kind == EVTC_V_STEP)
      fprintf(out, " dim=%d %.9g below %lld, then %.9g", v->dim, v->below, (long long)v->depth, v->value);
    if (v->n_args) {
      fputc('(', out);
      for (int j = 0; j < v->n_args; j++) fprintf(out, "%sv%d", j ? ", " : "", v->args[j]);
      fputc(')', out);
    }
    fprintf(out, " : %s %s phase %d", evtc_vclass_name(v->cls), evtc_dtype_name(v->dtype), v->phase);
    if (v->node) fprintf(out, "  # %%%s", v->node->name);
    fputc('\n', out);
  }
  fprintf(out, "  schedule: mc=%lld nc=%lld kc=%lld rows/task=%lld\n", (long long)k->sched.mc,
          (long long)k->sched.nc, (long long)k->sched.kc, (long long)k->sched.rows_per_task);
}
