/* cuda_emit_gemm80.c -- the sm_80 GEMM template (config.sm80): mma.sync,
 * cp.async and ldmatrix, for GPUs without wgmma and TMA (A100, the sm_8x
 * family), with the same signature, tile scheduler, accumulator layout and
 * epilogue hook as the sm_90a template (cuda_emit_gemm.h), so the visitor
 * DAG goes into its epilogue unchanged.
 *
 * Who owns what (Hidet's task mapping, written out).  A CTA is `consumers`
 * warpgroups of 4 warps; warpgroup cw owns WM = tile_m / (64 consumers)
 * atoms of 64 rows, warp w of it rows 16 w .. 16 w + 15 of each atom and
 * all tile_n columns: one m16n8k16 accumulator fragment per 8-column block
 * j, lane l holding rows l/4 (+8) and columns 8 j + 2 (l%4) (+1) as
 * acc[i][4 j + 2 h + e] -- the rows and columns a wgmma atom gives the same
 * warp, which is what lets the epilogue code be shared
 * (cuda_emit_gemm_parts.h).  For the copies every thread of the CTA takes
 * 16-byte chunks q = tid, tid + threads, ... of a stage: (tile_m + tile_n)
 * x 8 chunks.
 *
 * Shared memory.  A ring of `stages` stages, each a 64-wide k-block of A's
 * tile_m rows then B's tile_n rows in the sm_90a template's layout: a
 * K-major operand row r (m or n) takes 128 bytes, its 16-byte chunk c (8 k
 * values) stored at c ^ (r % 8); an MN-major operand is 64-wide panels of
 * 8192 bytes, k-row r of a panel at 128 r with chunk c (8 m or n values)
 * at c ^ (r % 8).  The eight rows one ldmatrix matrix reads (and the eight
 * chunks of one row that eight threads copy) land in eight different
 * 16-byte bank groups: no conflicts.  After the ring, EVTC_CUDA_GEMM_HOOK_SMEM
 * bytes per warpgroup for the epilogue hook.
 *
 * Fragments.  A K-major A fragment is one ldmatrix.x4 (lane l addresses row
 * l % 16 at k-chunk l / 16: matrices rows 0-7 / 8-15 x k 0-7 / 8-15 in a0..a3
 * order); an M-major one the same with .trans (lane l: k-row l % 8 + 8 (l /
 * 16), m-chunk (l / 8) % 2).  A B fragment pair (16 columns, two n8 blocks)
 * is one ldmatrix.x4: K-major lane l addresses n-row l % 8 + 8 (l / 16) at
 * k-chunk (l / 8) % 2; N-major with .trans k-row l % 8 + 8 ((l / 8) % 2) at
 * n-chunk l / 16; either way registers 0-1 feed block 2 jp, 2-3 block 2 jp + 1.
 *
 * Pipeline (per tile, the classic multistage loop).  Stages 0 .. S - 2
 * are copied ahead as one cp.async group each; at k-block kb every thread
 * waits until at most S - 2 of its groups are in flight (kb's has landed),
 * the CTA synchronises (so kb's stage is complete for every thread, and
 * the stage read at kb - 1 is free), then copies k-block kb + S - 1 into
 * that free stage and multiplies stage kb.  Edges need no code in the loop:
 * a chunk past M, N or K copies 0 bytes (cp.async zero-fills the rest; a
 * chunk straddling K copies only its bytes before K).  Persistent grid and
 * grouped raster as on sm_90a; once a tile's k-blocks are done the next
 * tile's first stages are issued before the epilogue runs, so their copies
 * fly during it.
 */
#include "backend/cuda/cuda_emit_gemm_parts.h"
#include "backend/cuda/cuda_emit_mma.h"

#include <stdio.h>

enum { ROW_BYTES = 128, PANEL_BYTES = 64 * 128 };

/* The shared helpers (cuda_emit_mma.h: ldmatrix, mma.sync, cp.async groups), and the copy of one chunk. */
static void emit_sm80_helpers(evtc_sb *b) {
  evtc_cuda_emit_gemm_helpers(b);
  evtc_cuda_emit_mma_sync_helpers(b);
  evtc_sb_printf(b,
    "#ifndef EVTC_SM80_GEMM_HELPERS\n#define EVTC_SM80_GEMM_HELPERS\n"
    "/* sm_80 GEMM helper (cuda_emit_gemm80.c) */\n"
    "/* one 16-byte chunk, its first `bytes` read from global memory, the rest zero-filled */\n"
    "__device__ __forceinline__ void evtc_cp16(unsigned dst, const void *src, unsigned bytes) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%%0], [%%1], 16, %%2;\" :: \"r\"(dst), \"l\"(src), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "#endif\n\n");
}

/* The copies of one operand's k-block kb into stage address `dst`: `rows` rows (tile_m of A, tile_n of B) of
 * an operand whose outer extent is `ext` (dims.M or dims.N), row stride `ld`, base `base` (its batch's). */
static void emit_copy(evtc_sb *b, const evtc_cuda_gemm_config *c, bool kmajor, int rows, const char *base,
                      const char *dst, const char *ld, const char *ext, const char *o0) {
  const unsigned threads = evtc_cuda_gemm_threads(c);   /* divides rows x 8: config_check's tile shapes */
  if (kmajor)   /* row r, chunk ch: k = 64 kb + 8 ch */
    evtc_sb_printf(b,
      "#pragma unroll\n"
      "  for (int u = 0; u < %d; u++) {\n"
      "    const int q = threadIdx.x + u * %u, r = q >> 3, ch = q & 7, o = %s + r, k = kb * 64 + ch * 8;\n"
      "    int bytes = (dims.K - k) * 2;\n"
      "    bytes = o >= %s || bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;\n"
      "    evtc_cp16(%s + r * 128u + ((ch ^ (r & 7)) << 4), bytes ? %s + ((long long)o * %s + k) * 2 : %s,\n"
      "              (unsigned)bytes);\n"
      "  }\n",
      rows * 8 / (int)threads, threads, o0, ext, dst, base, ld, base);
  else          /* panel p, k-row kr, chunk ch: outer index o0 + 64 p + 8 ch */
    evtc_sb_printf(b,
      "#pragma unroll\n"
      "  for (int u = 0; u < %d; u++) {\n"
      "    const int q = threadIdx.x + u * %u, p = q >> 9, kr = (q >> 3) & 63, ch = q & 7, o = %s + p * 64 + ch * 8, k = kb * 64 + kr;\n"
      "    int bytes = (%s - o) * 2;\n"
      "    bytes = k >= dims.K || bytes < 0 ? 0 : bytes > 16 ? 16 : bytes;\n"
      "    evtc_cp16(%s + p * %uu + kr * 128u + ((ch ^ (kr & 7)) << 4), bytes ? %s + ((long long)k * %s + o) * 2 : %s,\n"
      "              (unsigned)bytes);\n"
      "  }\n",
      rows * 8 / (int)threads, threads, o0, ext, dst, (unsigned)PANEL_BYTES, base, ld, base);
}

/* NAME_load: every thread's copies of k-block kb of the tile at (bat, m0, n0) into the stage at sa (A) and
 * sb (B). */
static void emit_load(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  evtc_sb_printf(b,
    "__device__ __forceinline__ void %s_load(unsigned sa, unsigned sb, const evtc_gemm_dims &dims, int kb, int bat,\n"
    "                                        int m0, int n0) {\n"
    "  const unsigned char *const ga = dims.a + (long long)bat * dims.a_bstride * 2;\n"
    "  const unsigned char *const gb = dims.b + (long long)bat * dims.b_bstride * 2;\n",
    name);
  emit_copy(b, c, v->a_kmajor, c->tile_m, "ga", "sa", "dims.lda", "dims.M", "m0");
  emit_copy(b, c, v->b_kmajor, c->tile_n, "gb", "sb", "dims.ldb", "dims.N", "n0");
  evtc_sb_printf(b, "}\n");
}

/* NAME_mma: the warp's products of one stage (sa, sb) into acc: 4 k16 steps, each the warp's A fragments of
 * its WM atoms, then per 16 columns one B fragment pair and 2 WM mma.sync. */
static void emit_stage_mma(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v) {
  const int wm = evtc_cuda_gemm_atoms(c), regs = c->tile_n / 2;
  const char *bf = v->in == EVTC_BF16 ? "true" : "false";
  evtc_sb_printf(b,
    "__device__ __forceinline__ void %s_mma(float (&acc)[%d][%d], unsigned sa, unsigned sb, int cw, int warp, int lane) {\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < 4; kk++) {\n"
    "    unsigned af[%d][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < %d; i++) {\n",
    name, wm, regs, wm, wm);
  if (v->a_kmajor)
    evtc_sb_printf(b,
      "      const int r = (cw * %d + i) * 64 + warp * 16 + (lane & 15);\n"
      "      evtc_ldsm(af[i], sa + r * 128u + (((kk * 2 + (lane >> 4)) ^ (lane & 7)) << 4));\n", wm);
  else
    evtc_sb_printf(b,
      "      const int kr = kk * 16 + (lane & 7) + ((lane >> 4) << 3), mm = (cw * %d + i) * 64 + warp * 16 + ((lane >> 3) & 1) * 8;\n"
      "      evtc_ldsm_t(af[i], sa + (mm >> 6) * %uu + kr * 128u + ((((mm & 63) >> 3) ^ (kr & 7)) << 4));\n",
      wm, (unsigned)PANEL_BYTES);
  evtc_sb_printf(b,
    "    }\n"
    "#pragma unroll\n"
    "    for (int jp = 0; jp < %d; jp++) {\n"
    "      unsigned bf[4];\n", c->tile_n / 16);
  if (v->b_kmajor)
    evtc_sb_printf(b,
      "      const int n = jp * 16 + (lane & 7) + ((lane >> 4) << 3);\n"
      "      evtc_ldsm(bf, sb + n * 128u + (((kk * 2 + ((lane >> 3) & 1)) ^ (lane & 7)) << 4));\n");
  else
    evtc_sb_printf(b,
      "      const int kr = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), n = jp * 16 + ((lane >> 4) << 3);\n"
      "      evtc_ldsm_t(bf, sb + (n >> 6) * %uu + kr * 128u + ((((n & 63) >> 3) ^ (kr & 7)) << 4));\n",
      (unsigned)PANEL_BYTES);
  evtc_sb_printf(b,
    "#pragma unroll\n"
    "      for (int i = 0; i < %d; i++) {\n"
    "        evtc_mma16816<%s>(&acc[i][8 * jp], af[i], bf[0], bf[1]);\n"
    "        evtc_mma16816<%s>(&acc[i][8 * jp + 4], af[i], bf[2], bf[3]);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n",
    wm, bf, bf);
}

void evtc_cuda_gemm80_emit(evtc_sb *b, const char *name, const evtc_cuda_gemm_config *c, const evtc_cuda_gemm_variant *v,
                           const evtc_cuda_gemm_epilogue *epi) {
  EVTC_ASSERT(!epi || epi->aux_smem == 0);   /* no TMA tiles on sm_80: the plan does not ask for them */
  const int S = c->stages, wm = evtc_cuda_gemm_atoms(c), regs = c->tile_n / 2;
  const unsigned stage = evtc_cuda_gemm_stage_bytes(c), a_bytes = (unsigned)c->tile_m * ROW_BYTES;
  const bool hook = epi && epi->emit_element;
  emit_sm80_helpers(b);
  evtc_cuda_gemm_emit_comment(b, name, c, v);
  emit_load(b, name, c, v);
  emit_stage_mma(b, name, c, v);
  evtc_cuda_gemm_emit_signature(b, name, c, epi);
  evtc_sb_printf(b,
    ") {\n"
    "  extern __shared__ __align__(128) unsigned char evtc_smem[];\n"
    "  const unsigned ring = evtc_smem_u32(evtc_smem);   /* stage s: A at ring + %u s, B %u bytes after it */\n"
    "  const int tiles_m = (dims.M + %d) / %d, tiles_n = (dims.N + %d) / %d;\n"
    "  const int tiles = tiles_m * tiles_n * dims.batch, kblocks = (dims.K + 63) / 64;\n"
    "  const int wg = threadIdx.x >> 7, cw = wg, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;\n"
    "  (void)warp; (void)cw;\n",
    stage, a_bytes, c->tile_m - 1, c->tile_m, c->tile_n - 1, c->tile_n);
  /* the consumer-side code of the shared pieces is indented for the sm_90a kernel's consumer branch */
  if (hook)
    evtc_sb_printf(b, "    unsigned char *const hook_smem = evtc_smem + %uu + (unsigned)wg * %uu;\n    (void)hook_smem;\n",
                   (unsigned)S * stage, (unsigned)EVTC_CUDA_GEMM_HOOK_SMEM);
  if (epi && epi->emit_setup) epi->emit_setup(b, "    ", epi->ctx);
  if (!hook) evtc_cuda_gemm_emit_store_setup(b, v);
  evtc_sb_printf(b,
    "    float acc[%d][%d];\n"
    "    int t = blockIdx.x;\n"
    "    if (t < tiles) {                      /* the first tile's first stages */\n"
    "      int bat, m0, n0;\n"
    "      evtc_gemm_tile(t, tiles_m, tiles_n, %d, %d, %d, &bat, &m0, &n0);\n"
    "#pragma unroll\n"
    "      for (int s = 0; s < %d; s++) {\n"
    "        if (s < kblocks) %s_load(ring + s * %uu, ring + s * %uu + %uu, dims, s, bat, m0, n0);\n"
    "        evtc_cp_commit();\n"
    "      }\n"
    "    }\n"
    "    for (int it = 0; t < tiles; t += gridDim.x, it++) {\n"
    "      (void)it;\n"
    "      int bat, m0, n0;\n"
    "      evtc_gemm_tile(t, tiles_m, tiles_n, %d, %d, %d, &bat, &m0, &n0);\n",
    wm, regs, c->group_m, c->tile_m, c->tile_n, S - 1, name, stage, stage, a_bytes, c->group_m, c->tile_m, c->tile_n);
  evtc_cuda_gemm_emit_prefetch_first(b, c, epi);
  evtc_sb_printf(b,
    "#pragma unroll\n"
    "      for (int i = 0; i < %d; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < %d; j++) acc[i][j] = 0.0f;\n"
    "      unsigned rs = 0, ws = %du;            /* the stage k-block kb is read from, the one kb + %d goes to */\n"
    "      for (int kb = 0; kb < kblocks; kb++) {\n"
    "        evtc_cp_wait<%d>();                 /* this thread's copies of k-block kb have landed */\n"
    "        __syncthreads();                    /* everyone's have, and stage ws is no longer read */\n"
    "        if (kb + %d < kblocks) %s_load(ring + ws * %uu, ring + ws * %uu + %uu, dims, kb + %d, bat, m0, n0);\n"
    "        evtc_cp_commit();\n"
    "        %s_mma(acc, ring + rs * %uu, ring + rs * %uu + %uu, cw, warp, lane);\n"
    "        rs = rs + 1 == %du ? 0 : rs + 1;\n"
    "        ws = ws + 1 == %du ? 0 : ws + 1;\n"
    "      }\n"
    "      evtc_cp_wait<0>();\n"
    "      __syncthreads();                      /* the ring is free: the next tile's first stages fly during the epilogue */\n"
    "      if (t + (int)gridDim.x < tiles) {\n"
    "        int bat2, m2, n2;\n"
    "        evtc_gemm_tile(t + gridDim.x, tiles_m, tiles_n, %d, %d, %d, &bat2, &m2, &n2);\n"
    "#pragma unroll\n"
    "        for (int s = 0; s < %d; s++) {\n"
    "          if (s < kblocks) %s_load(ring + s * %uu, ring + s * %uu + %uu, dims, s, bat2, m2, n2);\n"
    "          evtc_cp_commit();\n"
    "        }\n"
    "      }\n",
    wm, regs, S - 1, S - 1, S - 2, S - 1, name, stage, stage, a_bytes, S - 1, name, stage, stage, a_bytes, S, S,
    c->group_m, c->tile_m, c->tile_n, S - 1, name, stage, stage, a_bytes);
  if (hook) {
    evtc_cuda_gemm_emit_hook_tile(b, c, epi);
  } else {
    evtc_sb_printf(b, "      {\n");
    evtc_cuda_gemm_emit_direct_store(b, c, v);
    evtc_sb_printf(b, "      }\n");
  }
  evtc_sb_printf(b, "    }\n}\n\n");
}
