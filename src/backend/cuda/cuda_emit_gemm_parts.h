/* cuda_emit_gemm_parts.h -- the pieces of emitted GEMM code that the sm_90a
 * template (cuda_emit_gemm.c) and the sm_80 one (cuda_emit_gemm80.c) share:
 * whatever runs after a tile's accumulators are complete, the epilogue
 * hook's loops and the built-in direct store, in the accumulator layout both
 * templates give a warp (cuda_emit_gemm.h).  Internal to those two files.
 *
 * In scope where these are emitted: dims, out_ptr, bat, m0, n0, cw, warp,
 * lane and float acc[atoms][tile_n / 2].
 */
#ifndef EVTC_CUDA_EMIT_GEMM_PARTS_H
#define EVTC_CUDA_EMIT_GEMM_PARTS_H

#include "backend/cuda/cuda_emit_gemm.h"

/* Bytes of one ring stage: a 64-wide k-block of A's tile_m rows and B's tile_n rows. */
unsigned evtc_cuda_gemm_stage_bytes(const evtc_cuda_gemm_config *c);

/* The comment naming a GEMM kernel's types, layouts and config. */
void evtc_cuda_gemm_emit_comment(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                                 const evtc_cuda_gemm_variant *v);
/* Both templates' kernel signature up to the closing parenthesis: the three tensor maps (zero on sm_80), out_ptr,
 * dims, then the hook's parameters. */
void evtc_cuda_gemm_emit_signature(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c,
                                   const evtc_cuda_gemm_epilogue *epi);

/* Whether hook epi loads ahead of use (cuda_emit_gemm.h: prefetch_blocks). */
bool evtc_cuda_gemm_prefetches(const evtc_cuda_gemm_epilogue *epi);
/* The hook's loads issued per tile before its main loop: emit_prefetch_begin, then the first prefetched
 * blocks (nothing without emit_prefetch_begin). */
void evtc_cuda_gemm_emit_prefetch_first(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi);
/* The hook on one finished tile: tile_begin, the element loops (full and edge tile), tile_end. */
void evtc_cuda_gemm_emit_hook_tile(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_epilogue *epi);

/* Declares `pairs` (whether two adjacent columns may be stored as one) once per thread, for the direct store. */
void evtc_cuda_gemm_emit_store_setup(evtc_sb *b, const evtc_cuda_gemm_variant *v);
/* The built-in store of a finished tile, element pairs straight to global memory with bounds checks. */
void evtc_cuda_gemm_emit_direct_store(evtc_sb *b, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v);

/* The sm_80 template's kernel (cuda_emit_gemm80.c); evtc_cuda_gemm_emit calls it for a config with sm80 set. */
void evtc_cuda_gemm80_emit(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v,
                           const evtc_cuda_gemm_epilogue *epi);

#endif
