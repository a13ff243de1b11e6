/* cuda_emit_elementwise.c -- the elementwise template in CUDA C.
 *
 * For kernels without reductions whose stores cover the domain (and for
 * the epilogue of a cuBLASLt GEMM, whose accumulator tile is read from
 * scratch): each block of 256 threads owns one contiguous tile of 2048
 * elements, each thread 8 of them 256 apart, so every load instruction of
 * a warp is one coalesced 128-byte access and a thread has 8 independent
 * loads in flight (the "tile" schedule that measured best in
 * bench/RESULTS.md).  Row and column are only computed when a broadcast
 * load, a one-hot or a non-flat store needs them, with 32-bit division
 * when the domain allows.  Scalar values are computed by every thread;
 * scalar stores by thread 0 only.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"

void evtc_cuda_emit_elementwise(evtc_sb *b, const evtc_kernel *k, const char *acc_type) {
  const int nt = EVTC_CUDA_EW_THREADS, per = EVTC_CUDA_EW_PER_THREAD;
  int64_t nn = k->rows * k->cols;
  evtc_cuda_emit_head(b, k, "", nt);
  evtc_sb_printf(b, "  const int64_t NN = %lldLL, CC = %lldLL;\n  (void)CC;\n", (long long)nn, (long long)k->cols);
  if (acc_type) evtc_sb_printf(b, "  const %s *restrict acc = (const %s *)scratch;\n", acc_type, acc_type);
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  ", .flat = true, .acc_expr = "acc[i]"};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls != EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) {
      evtc_sb_printf(b, "  if (blockIdx.x == 0 && threadIdx.x == 0)\n");
      top.ind = "    ";
      evtc_cpu_emit_store(&top, i);
      top.ind = "  ";
    } else {
      evtc_cuda_emit_value(&top, i);
    }
  }
  bool rc = evtc_cpu_needs_rc(k), narrow = nn < ((int64_t)1 << 31);
  evtc_sb_printf(b, "  const int64_t i0 = (int64_t)blockIdx.x * %d + threadIdx.x;\n#pragma unroll\n", nt * per);
  evtc_sb_printf(b, "  for (int j = 0; j < %d; j++) {\n    const int64_t i = i0 + j * %d;\n    if (i < NN) {\n", per, nt);
  if (rc && narrow)
    evtc_sb_printf(b, "      const int64_t r = (int64_t)((uint32_t)i / (uint32_t)CC), c = i - r * CC;\n"
                      "      (void)r; (void)c;\n");
  else if (rc)
    evtc_sb_printf(b, "      const int64_t r = i / CC, c = i - r * CC;\n      (void)r; (void)c;\n");
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = "      ", .flat = true, .acc_expr = "acc[i]"};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) evtc_cpu_emit_store(&x, i);
    else evtc_cuda_emit_value(&x, i);
  }
  evtc_sb_printf(b, "    }\n  }\n}\n\n");
}
