/* cuda_emit_attention.h -- the CUDA template of the attention family
 * (cuda_emit_attention.c): what the backend asks of it.
 */
#ifndef EVTC_CUDA_EMIT_ATTENTION_H
#define EVTC_CUDA_EMIT_ATTENTION_H

#include "backend/cuda/cuda_emit.h"

/* Whether OPAQUE kernel k is an attention-family node the template runs
 * (f16 / bf16, head dims 64 or 128, equal); else why ("no CUDA template
 * for OP" for every other OPAQUE kernel). */
bool evtc_cuda_attention_fits(const evtc_kernel *k, char *why, size_t cap);
/* Its launch: blocks of 32 NW threads (NW warps: EVTC_ATTN_WARPS, 4 or 8,
 * default 4), one per 16 NW query (attention_backward_kv: key) rows of
 * each batch-head pair, and the dynamic shared memory in bytes. */
void evtc_cuda_attention_launch(const evtc_kernel *k, unsigned *grid, unsigned *block, unsigned *smem);
/* What a kernel needs beyond its launch: attention_backward_kv writing dq too
 * (a by-product, program.c) sums dq in f32 scratch of scratch_bytes, zeroed
 * once, and its finishing kernel NAME_fin (fin_grid blocks of 256 threads)
 * stores dq and zeroes the sums again.  All zero for the other kernels. */
typedef struct evtc_cuda_attention_extra {
  size_t scratch_bytes;
  unsigned fin_grid;
} evtc_cuda_attention_extra;
evtc_cuda_attention_extra evtc_cuda_attention_extra_of(const evtc_kernel *k);
/* Appends the device library (once per module) and the kernel k->name (and NAME_fin when it has one). */
void evtc_cuda_emit_attention(evtc_sb *b, const evtc_kernel *k);

#endif
