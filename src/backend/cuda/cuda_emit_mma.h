/* cuda_emit_mma.h -- the mma.sync-generation device helpers (ldmatrix,
 * mma.sync m16n8k16, cp.async groups), emitted once per module for every
 * template that uses them: flash attention on mma.sync
 * (cuda_emit_attention.c, whose CPU emulation, tests/attention_emu/shim.h,
 * replaces them by name) and the sm_80 GEMM (cuda_emit_gemm80.c).
 */
#ifndef EVTC_CUDA_EMIT_MMA_H
#define EVTC_CUDA_EMIT_MMA_H

#include "backend/cpu/cpu_emit.h"

/* Appends, behind a preprocessor guard (a module holds them once):
 *   evtc_ldsm(r, addr), evtc_ldsm_t(r, addr)  ldmatrix .x4 (.trans) of 16-bit 8 x 8 matrices at shared address
 *                                             addr (lane 8 j + i gives row i of matrix j) into r[0..3];
 *   evtc_mma16816<BF>(c, a, b0, b1)           c[0..3] (a 16 x 8 f32 fragment) += a[0..3] (16 x 16) b0, b1
 *                                             (16 x 8), bf16 (BF) or f16 operands, row.col;
 *   evtc_cp_commit(), evtc_cp_wait<N>()       close a cp.async group; wait until at most N are in flight. */
void evtc_cuda_emit_mma_sync_helpers(evtc_sb *b);

#endif
