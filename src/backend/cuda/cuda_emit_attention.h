/* cuda_emit_attention.h -- the CUDA template of the attention family
 * (cuda_emit_attention.c): what the backend asks of it.
 */
#ifndef EVTC_CUDA_EMIT_ATTENTION_H
#define EVTC_CUDA_EMIT_ATTENTION_H

#include "backend/cuda/cuda_emit.h"

/* Whether OPAQUE kernel k is an attention-family node the template runs
 * (f16 / bf16, head dims 64 or 128, equal) on a device with (sm90a) or
 * without wgmma; else why ("no CUDA template for OP" for every other OPAQUE
 * kernel).  attention_backward_kv writing dq too is taken on the wgmma
 * library unless EVTC_ATTN_DQ=0 (from dq's kernel launched first, or in one
 * pass with EVTC_ATTN_DQ=1), on the mma.sync library only with
 * EVTC_ATTN_DQ=1 (one pass). */
bool evtc_cuda_attention_fits(const evtc_kernel *k, bool sm90a, char *why, size_t cap);
/* Its schedule: on an sm_90a device (wgmma) at head dim 64 the warpgroup
 * library (cuda_emit_attention_wg.c; the scale positive), blocks of EVTC_ATTN_WG warpgroups (1
 * or 2, default 1; 0 asks for the mma.sync library); otherwise the mma.sync library, blocks of
 * EVTC_ATTN_WARPS warps (4 or 8, default 4).  Warpgroups per block, 0 for
 * the mma.sync library. */
int evtc_cuda_attention_warpgroups(const evtc_kernel *k, bool sm90a);
/* Its launch: one block per 64 warpgroups (mma.sync: 16 warps) query
 * (attention_backward_kv: key) rows of each batch-head pair, its threads
 * and the dynamic shared memory in bytes. */
void evtc_cuda_attention_launch(const evtc_kernel *k, bool sm90a, unsigned *grid, unsigned *block, unsigned *smem);
/* What a kernel needs beyond its launch, in f32 scratch of scratch_bytes
 * that is zeroed before its first run and that its finishing kernel
 * NAME_fin (fin_grid blocks of 256 threads) leaves zeroed, so kernels run
 * one after another may share it:
 *   - attention_backward_kv writing dq too (a by-product, program.c) sums
 *     dq there, and NAME_fin stores dq;
 *   - the wgmma attention_backward_kv reads Dd = rowsum(dout * out) of each
 *     query row from there (after the dq sums), written by its preparing
 *     kernel NAME_pre (pre_grid blocks of pre_block threads, pre_smem
 *     bytes of dynamic shared memory) launched before it: a pass over dout
 *     and out, or, where it gives dq from dq's own kernel launched first,
 *     that kernel, which stores dq and writes Dd on the way.
 * All zero for the other kernels. */
typedef struct evtc_cuda_attention_extra {
  size_t scratch_bytes;
  unsigned fin_grid;
  unsigned pre_grid, pre_block, pre_smem;
} evtc_cuda_attention_extra;
evtc_cuda_attention_extra evtc_cuda_attention_extra_of(const evtc_kernel *k, bool sm90a);
/* Appends the device library (once per module) and the kernel k->name (and NAME_pre, NAME_fin when it has them). */
void evtc_cuda_emit_attention(evtc_sb *b, const evtc_kernel *k, bool sm90a);
/* The warpgroup library (cuda_emit_attention_wg.c), after the mma.sync one whose helpers it uses. */
void evtc_cuda_emit_attention_wg_lib(evtc_sb *b);

#endif
