/* cuda_emit_attention.c -- the CUDA template of the attention family
 * (attention, attention_lse, attention_backward_q / _kv; ops.def): flash
 * attention on the tensor cores, emitted as CUDA C.
 *
 * One device library per module (behind a preprocessor guard), then one
 * extern "C" kernel per node that instantiates it with the node's dtype,
 * head dim, causality and shapes.  FlashAttention-2's schedule: a block of
 * NW warps (4, or 8 with EVTC_ATTN_WARPS=8) owns 16 NW query rows (forward,
 * log-sum-exp, dq) or key rows (dk with dv), each warp 16 of them; the other
 * operand streams through shared memory in 64-row tiles (cp.async,
 * zero-filled past the end, 16-byte chunks swizzled by row so that
 * ldmatrix is conflict-free) and mma.sync.m16n8k16 multiplies f16 / bf16
 * fragments into f32.  The forward
 * keeps the online softmax (running max and sum, the output rescaled when
 * the max grows; exp2 with the scale folded in), so no S x T matrix exists;
 * causal blocks stop at their last visible key and mask only the diagonal
 * tiles.  The backward recomputes P = exp(scale q.k - lse) from the saved
 * log-sum-exp: dq per query block (dP = dout v^T, dS = P (dP - D),
 * dq += dS k with D = rowsum(dout * out)), dk and dv in one kernel per key
 * block from the transposed products (P^T, dP^T = v dout^T and dS^T computed
 * once per query tile feed both dv += P^T dout and dk += dS^T q; the key
 * block's k and v stay in shared memory and the query tiles of q, dout and
 * out stream through two buffers for D = 64, the next one loading while the
 * current one is used, one buffer for D = 128), written side by side into
 * rows of 2 D, so every block owns the rows it writes and no atomics are
 * needed.  Query blocks run in reverse order so that causal blocks with the
 * most keys start first.
 *
 * The key-block kernel also gives dq where the program asks for it (a
 * by-product), in one of two ways.  By default on the wgmma library it
 * launches dq's own kernel first, as its NAME_pre (EVTC_ATTN_DQ=first): that
 * kernel computes Dd for its rows anyway and writes it to the scratch the
 * key-block kernel reads, in place of NAME_pre's own pass over dout and out
 * (25 us a layer at BERT-Large's shape on the H200), and dq is the same bit
 * for bit as from dq's kernel apart.  With EVTC_ATTN_DQ=1 (on either
 * library) it sums dq in its own pass over the scores, FlashAttention-2's
 * single backward pass: f32 atomics into scratch that NAME_fin stores and
 * zeroes again.  On the H200 (bench/gpu_attention_bench.c, 2026-11-30) that
 * took 0.342 ms at BERT-Large's shape (32 x 16 heads, 512 x 512, D = 64)
 * against 0.313 with dq first and 0.146 + 0.185 for the kernels apart, and
 * 0.157 at GPT-2's (8 x 12, 1024 x 1024, causal) against 0.152 with dq
 * first; an earlier session had one pass ahead of the kernels apart at
 * GPT-2's shape (0.158 against 0.073 + 0.091), behind inside BERT-Large's
 * step (403-422 us a layer against 385-399); on mma.sync 0.739 against
 * 0.252 + 0.369 (scalar atomics, a second pass through shared memory), and
 * with two warpgroups 1.1 ms and more (spills).  Tried and not kept
 * (2026-11-30): the last key block of each batch-head pair storing dq from
 * L2 instead of NAME_fin (a count per pair): BERT-Large's shape 0.340 ->
 * 0.355-0.360 ms, GPT-2's 0.158 -> 0.185; one block finishing a pair's
 * 128 KB of sums alone is slower than NAME_fin's pass over all of them.
 *
 * On an sm_90a device at D = 64 the kernels call the warpgroup-MMA library
 * of cuda_emit_attention_wg.c instead (same schedule, same tiles; blocks of
 * EVTC_ATTN_WG warpgroups), which uses this library's loads and stores.
 *
 * Supported: f16 / bf16, D = Dv in {64, 128}, any S and T (>= 1); the
 * backend refuses the rest with a reason (the program runs them in the
 * interpreter).  tests/test_attention_emu_slow.py runs this library on a
 * CPU emulation of ldmatrix / mma.sync (its asm helpers, and those of
 * cuda_emit_mma.c it is emitted after, are replaced by name: keep them one
 * per function), test_gpu_attention.c on the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit_attention.h"
#include "backend/cuda/cuda_emit_mma.h"

static const char attention_lib[] =
    "#ifndef EVTC_ATTN_LIB\n"
    "#define EVTC_ATTN_LIB\n"
    "/* evtc attention: FlashAttention-2 style, mma.sync m16n8k16 (f16 / bf16 in, f32 accumulate), blocks of NW\n"
    "   warps of 16 rows, 64-row tiles in shared memory with 16-byte chunks swizzled by row (chunk ^ row % 8) */\n"
    "#define EVTC_ATT_LOG2E 1.4426950408889634f\n"
    "__device__ __forceinline__ uint32_t evtc_att_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }\n"
    "template <int D> __device__ __forceinline__ int evtc_att_sw(int row, int col) {\n"
    "  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);\n"
    "}\n"
    "/* two floats -> one register of two 16-bit values, lo in the low half */\n"
    "template <bool BF> __device__ __forceinline__ uint32_t evtc_att_pack(float lo, float hi) {\n"
    "  uint32_t r;\n"
    "  if (BF) asm(\"cvt.rn.bf16x2.f32 %0, %1, %2;\\n\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
    "  else asm(\"cvt.rn.f16x2.f32 %0, %1, %2;\\n\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
    "  return r;\n"
    "}\n"
    "template <bool BF> __device__ __forceinline__ float evtc_att_tof(uint16_t h) { return BF ? evtc_bf2f(h) : evtc_h2f(h); }\n"
    "/* Where one operand's rows lie: row r of batch-head bh (batch bh / h, head bh % h) starts at element off +\n"
    "   (bh / h) sb + (bh % h) sh + r sr and its columns are contiguous; dK and dV start at columns 0 and c2 of the\n"
    "   key-block kernel's output.  Contiguous [BH, rows, D]: off 0, sb = h rows D, sh = rows D, sr = D. */\n"
    "struct evtc_att_lay { int64_t off, sb, sh, sr, c2; int h; };\n"
    "__device__ __forceinline__ int64_t evtc_att_base(const evtc_att_lay &l, int64_t bh) { return l.off + bh / l.h * l.sb + bh % l.h * l.sh; }\n"
    "/* Rows [0, ROWS) of a [rows, D] tile at g (rows ld elements apart) into swizzled shared memory s by NT threads;\n"
    "   rows >= valid are zero-filled.  Thread t copies 16-byte chunk t % CH of rows t / CH + RS i: a step of RS rows\n"
    "   (a multiple of 8) keeps the chunk's swizzle, so each copy after the first is two additions from the last\n"
    "   (a loop from threadIdx.x left nvcc a generic loop of about 30 instructions a copy). */\n"
    "template <int D, int ROWS, int NT> __device__ __forceinline__ void evtc_att_load(uint16_t *s, const uint16_t *g, int valid, int64_t ld) {\n"
    "  constexpr int CH = D / 8, RS = NT / CH, IT = (ROWS + RS - 1) / RS;\n"
    "  static_assert(NT % CH == 0 && RS % 8 == 0, \"evtc_att_load: a step of whole swizzle periods\");\n"
    "  const int row0 = (int)threadIdx.x / CH, ch = (int)threadIdx.x % CH;\n"
    "  const uint16_t *src0 = g + (int64_t)row0 * ld + ch * 8;\n"
    "  const uint32_t dst0 = evtc_att_saddr(s + evtc_att_sw<D>(row0, ch * 8));\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < IT; i++) {\n"
    "    const int row = row0 + RS * i;\n"
    "    if (ROWS % RS == 0 || row < ROWS) {\n"
    "      const bool in = row < valid;\n"
    "      const uint32_t dst = dst0 + (uint32_t)(RS * i * D * 2);\n"
    "      const uint16_t *src = in ? src0 + (int64_t)RS * i * ld : g;\n"
    "      asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src), \"r\"(in ? 16 : 0));\n"
    "    }\n"
    "  }\n"
    "}\n"
    "/* A fragments (16 x D, row major) of rows [r0, r0 + 16) of a swizzled tile. */\n"
    "template <int D> __device__ __forceinline__ void evtc_att_afrag(uint32_t (*f)[4], const uint16_t *s, int r0) {\n"
    "  const int lane = threadIdx.x & 31;\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < D / 16; kk++)\n"
    "    evtc_ldsm(f[kk], evtc_att_saddr(s + evtc_att_sw<D>(r0 + (lane & 7) + 8 * ((lane >> 3) & 1), kk * 16 + 8 * (lane >> 4))));\n"
    "}\n"
    "/* acc[16 x 16 NP] += A[16 x 16] (fragment a: columns [16 kk, 16 kk + 16) of A) x the same columns of B^T, B rows\n"
    "   [16 np0, 16 np0 + 16 NP) of a swizzled [64, D] tile (rows = output columns). */\n"
    "template <bool BF, int D, int NP> __device__ __forceinline__ void evtc_att_abt_step(float (*acc)[4], const uint32_t *a,\n"
    "                                                                                   const uint16_t *s, int kk, int np0) {\n"
    "  const int lane = threadIdx.x & 31;\n"
    "#pragma unroll\n"
    "  for (int np = 0; np < NP; np++) {\n"
    "    uint32_t b[4];\n"
    "    evtc_ldsm(b, evtc_att_saddr(s + evtc_att_sw<D>((np0 + np) * 16 + (lane & 7) + 8 * (lane >> 4), kk * 16 + 8 * ((lane >> 3) & 1))));\n"
    "    evtc_mma16816<BF>(acc[2 * np], a, b[0], b[1]);\n"
    "    evtc_mma16816<BF>(acc[2 * np + 1], a, b[2], b[3]);\n"
    "  }\n"
    "}\n"
    "/* acc[16 x 64] += A[16 x D] (fragments a) x B^T where B is a swizzled [64, D] tile (rows = output columns). */\n"
    "template <bool BF, int D> __device__ __forceinline__ void evtc_att_abt(float (*acc)[4], const uint32_t (*a)[4], const uint16_t *s) {\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < D / 16; kk++) evtc_att_abt_step<BF, D, 4>(acc, a[kk], s, kk, 0);\n"
    "}\n"
    "/* acc[16 x 16 NP] += A[16 x D] x B^T for B rows [16 np0, 16 np0 + 16 NP) of the swizzled [64, D] tile s, A rows\n"
    "   [r0, r0 + 16) of the swizzled tile sa, its fragments loaded as they are used. */\n"
    "template <bool BF, int D, int NP> __device__ __forceinline__ void evtc_att_sabt(float (*acc)[4], const uint16_t *sa, int r0,\n"
    "                                                                               const uint16_t *s, int np0) {\n"
    "  const int lane = threadIdx.x & 31;\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < D / 16; kk++) {\n"
    "    uint32_t a[4];\n"
    "    evtc_ldsm(a, evtc_att_saddr(sa + evtc_att_sw<D>(r0 + (lane & 7) + 8 * ((lane >> 3) & 1), kk * 16 + 8 * (lane >> 4))));\n"
    "    evtc_att_abt_step<BF, D, NP>(acc, a, s, kk, np0);\n"
    "  }\n"
    "}\n"
    "/* acc[16 x D] += A[16 x 16] (fragment a) x rows [16 kk, 16 kk + 16) of the swizzled [.., D] tile s. */\n"
    "template <bool BF, int D> __device__ __forceinline__ void evtc_att_pb_step(float (*acc)[4], const uint32_t *a, const uint16_t *s,\n"
    "                                                                         int kk) {\n"
    "  const int lane = threadIdx.x & 31;\n"
    "#pragma unroll\n"
    "  for (int dp = 0; dp < D / 16; dp++) {\n"
    "    uint32_t b[4];\n"
    "    evtc_ldsm_t(b, evtc_att_saddr(s + evtc_att_sw<D>(kk * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), dp * 16 + 8 * (lane >> 4))));\n"
    "    evtc_mma16816<BF>(acc[2 * dp], a, b[0], b[1]);\n"
    "    evtc_mma16816<BF>(acc[2 * dp + 1], a, b[2], b[3]);\n"
    "  }\n"
    "}\n"
    "/* acc[16 x D] += P[16 x 64] (accumulator layout, converted to A fragments) x B where B is a swizzled [64, D] tile. */\n"
    "template <bool BF, int D> __device__ __forceinline__ void evtc_att_pb(float (*acc)[4], const float (*p)[4], const uint16_t *s) {\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < 4; kk++) {\n"
    "    uint32_t a[4] = {evtc_att_pack<BF>(p[2 * kk][0], p[2 * kk][1]), evtc_att_pack<BF>(p[2 * kk][2], p[2 * kk][3]),\n"
    "                     evtc_att_pack<BF>(p[2 * kk + 1][0], p[2 * kk + 1][1]), evtc_att_pack<BF>(p[2 * kk + 1][2], p[2 * kk + 1][3])};\n"
    "    evtc_att_pb_step<BF, D>(acc, a, s, kk);\n"
    "  }\n"
    "}\n"
    "/* Stores rows r (c[0], c[1]) and r + 8 (c[2], c[3]) of a 16 x D accumulator times mul into D columns of\n"
    "   rows ld elements apart. */\n"
    "template <bool BF, int D> __device__ __forceinline__ void evtc_att_store(uint16_t *g, const float (*c)[4], int r, int rows,\n"
    "                                                                        int64_t ld, float mul_a, float mul_b) {\n"
    "  const int lane = threadIdx.x & 31;\n"
    "#pragma unroll\n"
    "  for (int dt = 0; dt < D / 8; dt++) {\n"
    "    const int col = dt * 8 + 2 * (lane & 3);\n"
    "    if (r < rows) *(uint32_t *)(g + (int64_t)r * ld + col) = evtc_att_pack<BF>(c[dt][0] * mul_a, c[dt][1] * mul_a);\n"
    "    if (r + 8 < rows) *(uint32_t *)(g + (int64_t)(r + 8) * ld + col) = evtc_att_pack<BF>(c[dt][2] * mul_b, c[dt][3] * mul_b);\n"
    "  }\n"
    "}\n"
    "/* The dot product of two 16-byte vectors of 8 16-bit values. */\n"
    "template <bool BF> __device__ __forceinline__ float evtc_att_dot8(uint4 a, uint4 b) {\n"
    "  const uint32_t x[4] = {a.x, a.y, a.z, a.w}, y[4] = {b.x, b.y, b.z, b.w};\n"
    "  float acc = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; i++)\n"
    "    acc += evtc_att_tof<BF>((uint16_t)x[i]) * evtc_att_tof<BF>((uint16_t)y[i]) +\n"
    "           evtc_att_tof<BF>((uint16_t)(x[i] >> 16)) * evtc_att_tof<BF>((uint16_t)(y[i] >> 16));\n"
    "  return acc;\n"
    "}\n"
    "/* rowsum(dout * out) of row r of [rows, D] tensors with rows ldd and ldo elements apart (0 past the end): the 4\n"
    "   lanes of a row group split the columns. */\n"
    "template <bool BF, int D> __device__ __forceinline__ float evtc_att_rowdot(const uint16_t *dout, const uint16_t *out, int r, int rows,\n"
    "                                                                         int64_t ldd, int64_t ldo) {\n"
    "  float acc = 0.0f;\n"
    "  if (r < rows) {\n"
    "    const int c0 = (threadIdx.x & 3) * (D / 4);\n"
    "#pragma unroll 4\n"
    "    for (int c = 0; c < D / 4; c++) acc += evtc_att_tof<BF>(dout[(int64_t)r * ldd + c0 + c]) * evtc_att_tof<BF>(out[(int64_t)r * ldo + c0 + c]);\n"
    "  }\n"
    "  acc += __shfl_xor_sync(0xffffffffu, acc, 1);\n"
    "  acc += __shfl_xor_sync(0xffffffffu, acc, 2);\n"
    "  return acc;\n"
    "}\n"
    "\n"
    "/* The forward's end for rows ra and ra + 8 of batch-head bh: each row's sum l over its quad of lanes, the\n"
    "   log-sum-exp ((m2 + log2 l) ln 2, m2 the row maxima in log2 units) into lse (LSE true: out; else lse_out, if\n"
    "   any), and (LSE false) O / l into out laid out by lo. */\n"
    "template <bool BF, int D, bool LSE>\n"
    "__device__ __forceinline__ void evtc_att_fwd_end(float *l, const float *m2, const float (*o)[4], void *out, float *lse_out,\n"
    "                                                 int64_t bh, int ra, int S, const evtc_att_lay &lo) {\n"
    "#pragma unroll\n"
    "  for (int h = 0; h < 2; h++) {\n"
    "    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);\n"
    "    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);\n"
    "  }\n"
    "  float *lse = LSE ? (float *)out : lse_out;\n"
    "  if (lse && (threadIdx.x & 3) == 0)\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++)\n"
    "      if (ra + 8 * h < S) lse[bh * S + ra + 8 * h] = (m2[h] + log2f(l[h])) * 0.6931471805599453f;\n"
    "  if (!LSE) evtc_att_store<BF, D>((uint16_t *)out + evtc_att_base(lo, bh), o, ra, S, lo.sr, 1.0f / l[0], 1.0f / l[1]);\n"
    "}\n"
    "/* What dq needs of its rows q0 + r and q0 + r + 8 of batch-head bh (dout and out already at row q0): Dd =\n"
    "   rowsum(dout * out) and the log-sum-exp in log2 units (0 past S). */\n"
    "template <bool BF, int D>\n"
    "__device__ __forceinline__ void evtc_att_dq_rows(float *dd, float *lse2, const uint16_t *dO, const uint16_t *O, const float *lse,\n"
    "                                                 int64_t bh, int q0, int r, int S, const evtc_att_lay &ld, const evtc_att_lay &lo) {\n"
    "#pragma unroll\n"
    "  for (int h = 0; h < 2; h++) {\n"
    "    dd[h] = evtc_att_rowdot<BF, D>(dO, O, r + 8 * h, S - q0, ld.sr, lo.sr);\n"
    "    lse2[h] = r + 8 * h < S - q0 ? lse[bh * S + q0 + r + 8 * h] * EVTC_ATT_LOG2E : 0.0f;\n"
    "  }\n"
    "}\n"
    "/* What the query-block kernels (forward, dq) start with: the shared buffers sk, sv, rows per block BR,\n"
    "   threads NT, this block's batch-head bh and first query row q0 (blocks walk the rows last first), the\n"
    "   causal offset and the scale in log2 units. */\n"
    "#define EVTC_ATT_QBLOCK_SETUP \\\n"
    "  extern __shared__ uint4 evtc_att_smem[]; \\\n"
    "  constexpr int BR = 16 * NW, NT = 32 * NW; \\\n"
    "  uint16_t *sk = (uint16_t *)evtc_att_smem, *sv = sk + 64 * D; \\\n"
    "  const int qblocks = (S + BR - 1) / BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31; \\\n"
    "  const int64_t bh = blockIdx.x / qblocks; \\\n"
    "  const int q0 = (qblocks - 1 - (int)(blockIdx.x % qblocks)) * BR, off = T - S; \\\n"
    "  const float sl2 = scale * EVTC_ATT_LOG2E;\n"
    "\n"
    "/* Forward (LSE false: out [BH, S, D] laid out by lo, and with lse_out also the log-sum-exp there) or log-sum-exp\n"
    "   alone (LSE true: out is lse [BH, S] f32) of query block blockIdx.x (NW warps, 16 NW rows); q, k, v laid out by\n"
    "   lq, lk, lv. */\n"
    "template <bool BF, int D, bool CAUSAL, bool LSE, int NW>\n"
    "__device__ __forceinline__ void evtc_att_fwd(const uint16_t *Q, const uint16_t *K, const uint16_t *V, void *out,\n"
    "                                             float *lse_out, int S, int T, float scale, evtc_att_lay lq, evtc_att_lay lk,\n"
    "                                             evtc_att_lay lv, evtc_att_lay lo) {\n"
    "  EVTC_ATT_QBLOCK_SETUP\n"
    "  Q += evtc_att_base(lq, bh) + q0 * lq.sr;\n"
    "  K += evtc_att_base(lk, bh);\n"
    "  V += evtc_att_base(lv, bh);\n"
    "  evtc_att_load<D, BR, NT>(sk, Q, S - q0, lq.sr);     /* BR rows: sk and sv */\n"
    "  evtc_cp_commit();\n"
    "  evtc_cp_wait<0>();\n"
    "  __syncthreads();\n"
    "  uint32_t qf[D / 16][4];\n"
    "  evtc_att_afrag<D>(qf, sk, warp * 16);\n"
    "  __syncthreads();\n"
    "  const int kend = CAUSAL ? min(T, q0 + BR + off) : T, nkb = (kend + 63) / 64;\n"
    "  evtc_att_load<D, 64, NT>(sk, K, T, lk.sr);\n"
    "  evtc_cp_commit();\n"
    "  if (!LSE) {\n"
    "    evtc_att_load<D, 64, NT>(sv, V, T, lv.sr);\n"
    "    evtc_cp_commit();\n"
    "  }\n"
    "  float o[LSE ? 1 : D / 8][4];\n"
    "  if (!LSE)\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;\n"
    "  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};\n"
    "  const int ra = q0 + warp * 16 + (lane >> 2);\n"
    "  for (int j = 0; j < nkb; j++) {\n"
    "    if (LSE) evtc_cp_wait<0>();\n"
    "    else evtc_cp_wait<1>();\n"
    "    __syncthreads();\n"
    "    float s[8][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;\n"
    "    evtc_att_abt<BF, D>(s, qf, sk);\n"
    "    __syncthreads();\n"
    "    if (j + 1 < nkb) {\n"
    "      evtc_att_load<D, 64, NT>(sk, K + (int64_t)(j + 1) * 64 * lk.sr, T - (j + 1) * 64, lk.sr);\n"
    "      evtc_cp_commit();\n"
    "    }\n"
    "    const int t0 = j * 64;\n"
    "    const bool edge = t0 + 64 > T || (CAUSAL && t0 + 63 > q0 + off);\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {     /* scores in log2 units (scale folded in), masked ones -inf */\n"
    "        const int t = t0 + nt * 8 + 2 * (lane & 3) + (e & 1), r = ra + (e >> 1) * 8;\n"
    "        s[nt][e] = edge && (t >= T || (CAUSAL && t > r + off)) ? -INFINITY : s[nt][e] * sl2;\n"
    "      }\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "      float mx = m[h];\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));\n"
    "      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));\n"
    "      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));\n"
    "      const float base = mx == -INFINITY ? 0.0f : mx;\n"
    "      const float alpha = exp2f(m[h] - base);\n"
    "      m[h] = mx;\n"
    "      l[h] *= alpha;\n"
    "      if (!LSE)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < D / 8; i++) o[i][2 * h] *= alpha, o[i][2 * h + 1] *= alpha;\n"
    "      float sum = 0.0f;\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < 8; nt++) {\n"
    "        s[nt][2 * h] = exp2f(s[nt][2 * h] - base);\n"
    "        s[nt][2 * h + 1] = exp2f(s[nt][2 * h + 1] - base);\n"
    "        sum += s[nt][2 * h] + s[nt][2 * h + 1];\n"
    "      }\n"
    "      l[h] += sum;\n"
    "    }\n"
    "    if (!LSE) {\n"
    "      if (j + 1 < nkb) evtc_cp_wait<1>();\n"
    "      else evtc_cp_wait<0>();\n"
    "      __syncthreads();\n"
    "      evtc_att_pb<BF, D>(o, s, sv);\n"
    "      __syncthreads();\n"
    "      if (j + 1 < nkb) {\n"
    "        evtc_att_load<D, 64, NT>(sv, V + (int64_t)(j + 1) * 64 * lv.sr, T - (j + 1) * 64, lv.sr);\n"
    "        evtc_cp_commit();\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "  evtc_att_fwd_end<BF, D, LSE>(l, m, o, out, lse_out, bh, ra, S, lo);     /* m: in log2 units already */\n"
    "}\n"
    "\n"
    "/* dq of query block blockIdx.x: dq = scale sum_t P (dP - Dd) k, P = exp(scale q.k - lse), dP = dout.v; q, k, v,\n"
    "   out, dout and dq laid out by lq, lk, lv, lo, ld and lg. */\n"
    "template <bool BF, int D, bool CAUSAL, int NW>\n"
    "__device__ __forceinline__ void evtc_att_bwd_q(const uint16_t *Q, const uint16_t *K, const uint16_t *V, const uint16_t *O,\n"
    "                                               const uint16_t *dO, const float *lse, uint16_t *dQ, int S, int T, float scale,\n"
    "                                               evtc_att_lay lq, evtc_att_lay lk, evtc_att_lay lv, evtc_att_lay lo,\n"
    "                                               evtc_att_lay ld, evtc_att_lay lg) {\n"
    "  EVTC_ATT_QBLOCK_SETUP\n"
    "  Q += evtc_att_base(lq, bh) + q0 * lq.sr;\n"
    "  O += evtc_att_base(lo, bh) + q0 * lo.sr;\n"
    "  dO += evtc_att_base(ld, bh) + q0 * ld.sr;\n"
    "  K += evtc_att_base(lk, bh);\n"
    "  V += evtc_att_base(lv, bh);\n"
    "  evtc_att_load<D, BR, NT>(sk, Q, S - q0, lq.sr);     /* BR rows: sk and sv, then dO there */\n"
    "  evtc_cp_commit();\n"
    "  const int r = warp * 16 + (lane >> 2);\n"
    "  float dd[2], lse2[2];\n"
    "  evtc_att_dq_rows<BF, D>(dd, lse2, dO, O, lse, bh, q0, r, S, ld, lo);\n"
    "  evtc_cp_wait<0>();\n"
    "  __syncthreads();\n"
    "  uint32_t qf[D / 16][4], df[D / 16][4];\n"
    "  evtc_att_afrag<D>(qf, sk, warp * 16);\n"
    "  __syncthreads();\n"
    "  evtc_att_load<D, BR, NT>(sk, dO, S - q0, ld.sr);\n"
    "  evtc_cp_commit();\n"
    "  evtc_cp_wait<0>();\n"
    "  __syncthreads();\n"
    "  evtc_att_afrag<D>(df, sk, warp * 16);\n"
    "  __syncthreads();\n"
    "  const int kend = CAUSAL ? min(T, q0 + BR + off) : T, nkb = (kend + 63) / 64;\n"
    "  evtc_att_load<D, 64, NT>(sk, K, T, lk.sr);\n"
    "  evtc_att_load<D, 64, NT>(sv, V, T, lv.sr);\n"
    "  evtc_cp_commit();\n"
    "  float dq[D / 8][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < D / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;\n"
    "  for (int j = 0; j < nkb; j++) {\n"
    "    evtc_cp_wait<0>();\n"
    "    __syncthreads();\n"
    "    float s[8][4], dp[8][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;\n"
    "    evtc_att_abt<BF, D>(s, qf, sk);\n"
    "    evtc_att_abt<BF, D>(dp, df, sv);\n"
    "    const int t0 = j * 64;\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int t = t0 + nt * 8 + 2 * (lane & 3) + (e & 1), h = e >> 1;\n"
    "        const bool masked = t >= T || (CAUSAL && t > q0 + r + 8 * h + off);\n"
    "        const float p = masked ? 0.0f : exp2f(s[nt][e] * sl2 - lse2[h]);\n"
    "        s[nt][e] = p * (dp[nt][e] - dd[h]);\n"
    "      }\n"
    "    evtc_att_pb<BF, D>(dq, s, sk);\n"
    "    __syncthreads();\n"
    "    if (j + 1 < nkb) {\n"
    "      evtc_att_load<D, 64, NT>(sk, K + (int64_t)(j + 1) * 64 * lk.sr, T - (j + 1) * 64, lk.sr);\n"
    "      evtc_att_load<D, 64, NT>(sv, V + (int64_t)(j + 1) * 64 * lv.sr, T - (j + 1) * 64, lv.sr);\n"
    "      evtc_cp_commit();\n"
    "    }\n"
    "  }\n"
    "  evtc_att_store<BF, D>(dQ + evtc_att_base(lg, bh) + q0 * lg.sr, dq, r, S - q0, lg.sr, scale, scale);\n"
    "}\n"
    "\n"
    "/* The query tile of rows [s0, s0 + 64) for the key-block kernel: q, dout, out (rows lq, ld, lo elements apart)\n"
    "   into the swizzled tiles sq, sd, so (one cp.async group, zero-filled past S) and the log-sum-exp in log2 units\n"
    "   into slse (inf past S: P = 0). */\n"
    "template <int D, int NT> __device__ __forceinline__ void evtc_att_qtile(uint16_t *sq, uint16_t *sd, uint16_t *so, float *slse,\n"
    "                                                                       const uint16_t *Q, const uint16_t *dO, const uint16_t *O,\n"
    "                                                                       const float *lse, int s0, int S, int64_t lq, int64_t ld,\n"
    "                                                                       int64_t lo) {\n"
    "  evtc_att_load<D, 64, NT>(sq, Q + s0 * lq, S - s0, lq);\n"
    "  evtc_att_load<D, 64, NT>(sd, dO + s0 * ld, S - s0, ld);\n"
    "  evtc_att_load<D, 64, NT>(so, O + s0 * lo, S - s0, lo);\n"
    "  evtc_cp_commit();\n"
    "  if (threadIdx.x < 64) slse[threadIdx.x] = s0 + (int)threadIdx.x < S ? lse[s0 + threadIdx.x] * EVTC_ATT_LOG2E : INFINITY;\n"
    "}\n"
    "\n"
    "/* Dd = rowsum(dout * out) of a query tile's 64 rows (0 past the end: zero-filled tiles) from the swizzled tiles sd\n"
    "   and so into dd[64] by NT threads, NT / 64 a row. */\n"
    "template <bool BF, int D, int NT> __device__ __forceinline__ void evtc_att_tile_dd(const uint16_t *sd, const uint16_t *so, float *dd) {\n"
    "  constexpr int TPR = NT / 64;\n"
    "  const int row = threadIdx.x / TPR, part = threadIdx.x % TPR;\n"
    "  float a = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int c = part * (D / 8 / TPR); c < (part + 1) * (D / 8 / TPR); c++)\n"
    "    a += evtc_att_dot8<BF>(*(const uint4 *)(sd + evtc_att_sw<D>(row, c * 8)), *(const uint4 *)(so + evtc_att_sw<D>(row, c * 8)));\n"
    "#pragma unroll\n"
    "  for (int o = 1; o < TPR; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);\n"
    "  if (!part) dd[row] = a;\n"
    "}\n"
    "\n"
    "/* The key-block kernels' start: q, k, v, out, dout and lse moved to batch-head bh (k and v to key row k0) and the\n"
    "   block's BR rows of k and v loading into sk and sv (cp.async, left for the caller to commit). */\n"
    "template <int D, int BR, int NT>\n"
    "__device__ __forceinline__ void evtc_att_kv_start(const uint16_t *&Q, const uint16_t *&K, const uint16_t *&V, const uint16_t *&O,\n"
    "                                                  const uint16_t *&dO, const float *&lse, uint16_t *sk, uint16_t *sv, int64_t bh,\n"
    "                                                  int k0, int S, int T, const evtc_att_lay &lq, const evtc_att_lay &lk,\n"
    "                                                  const evtc_att_lay &lv, const evtc_att_lay &lo, const evtc_att_lay &ld) {\n"
    "  K += evtc_att_base(lk, bh) + k0 * lk.sr;\n"
    "  V += evtc_att_base(lv, bh) + k0 * lv.sr;\n"
    "  Q += evtc_att_base(lq, bh);\n"
    "  O += evtc_att_base(lo, bh);\n"
    "  dO += evtc_att_base(ld, bh);\n"
    "  lse += bh * S;\n"
    "  evtc_att_load<D, BR, NT>(sk, K, T - k0, lk.sr);\n"
    "  evtc_att_load<D, BR, NT>(sv, V, T - k0, lv.sr);\n"
    "}\n"
    "/* The f32 accumulator of rows [r0, r0 + 16) x 64 columns (a warp's dS^T) as 16-bit values into the same rows of the\n"
    "   swizzled [rows, 64] tile s. */\n"
    "template <bool BF> __device__ __forceinline__ void evtc_att_stile(uint16_t *s, const float (*c)[4], int r0) {\n"
    "  const int lane = threadIdx.x & 31, r = r0 + (lane >> 2);\n"
    "#pragma unroll\n"
    "  for (int nt = 0; nt < 8; nt++) {\n"
    "    const int col = nt * 8 + 2 * (lane & 3);\n"
    "    *(uint32_t *)(s + evtc_att_sw<64>(r, col)) = evtc_att_pack<BF>(c[nt][0], c[nt][1]);\n"
    "    *(uint32_t *)(s + evtc_att_sw<64>(r + 8, col)) = evtc_att_pack<BF>(c[nt][2], c[nt][3]);\n"
    "  }\n"
    "}\n"
    "/* acc[16 x D] += A[16 x KB] x B, A the transpose of columns [r0, r0 + 16) of the swizzled [KB, 64] tile sa (ldmatrix\n"
    "   .trans), B a swizzled [KB, D] tile. */\n"
    "template <bool BF, int D, int KB> __device__ __forceinline__ void evtc_att_tab(float (*acc)[4], const uint16_t *sa, int r0,\n"
    "                                                                              const uint16_t *s) {\n"
    "  const int lane = threadIdx.x & 31, i = lane >> 3;\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < KB / 16; kk++) {\n"
    "    uint32_t a[4];\n"
    "    evtc_ldsm_t(a, evtc_att_saddr(sa + evtc_att_sw<64>(kk * 16 + 8 * (i >> 1) + (lane & 7), r0 + 8 * (i & 1))));\n"
    "    evtc_att_pb_step<BF, D>(acc, a, s, kk);\n"
    "  }\n"
    "}\n"
    "/* *g += v, atomically (red.global.add.f32). */\n"
    "__device__ __forceinline__ void evtc_att_red(float *g, float v) { atomicAdd(g, v); }\n"
    "\n"
    "/* dk and dv of key block blockIdx.x, from the transposed products: per query tile, P^T = exp(scale k.q - lse),\n"
    "   dP^T = v.dout and dS^T = P^T (dP^T - Dd) once, then dv += P^T dout and dk += dS^T q; dK = scale dk.  They go\n"
    "   side by side into rows of dKV [BH, T, 2 D] laid out by lg (dV from column lg.c2).  k and v of the block stay in\n"
    "   shared memory (sk, sv); the query tiles stream through ST buffers (2 for D = 64: the next tile loads while this\n"
    "   one is used).  q, k, v, out, dout laid out by lq, lk, lv, lo, ld.  With DQ (4 warps) the same pass gives dq too\n"
    "   (FlashAttention-2's backward): dS^T goes through shared memory (sds) and each warp adds 16 of the tile's query\n"
    "   rows of dS k, summed over the block's keys, into the f32 sums dq_acc [BH, S, D] (scaled and stored by the\n"
    "   finishing kernel). */\n"
    "template <bool BF, int D, bool CAUSAL, int NW, bool DQ>\n"
    "__device__ __forceinline__ void evtc_att_bwd_kv(const uint16_t *Q, const uint16_t *K, const uint16_t *V, const uint16_t *O,\n"
    "                                                const uint16_t *dO, const float *lse, uint16_t *dKV, int S, int T, float scale,\n"
    "                                                evtc_att_lay lq, evtc_att_lay lk, evtc_att_lay lv, evtc_att_lay lo,\n"
    "                                                evtc_att_lay ld, evtc_att_lay lg, float *dq_acc) {\n"
    "  extern __shared__ uint4 evtc_att_smem[];\n"
    "  constexpr int BR = 16 * NW, NT = 32 * NW, ST = D == 64 ? 2 : 1;\n"
    "  uint16_t *sk = (uint16_t *)evtc_att_smem, *sv = sk + BR * D, *stage = sv + BR * D;   /* stage b: sq, sd, so */\n"
    "  float *slse = (float *)(stage + ST * 3 * 64 * D), *sdd = slse + ST * 64;\n"
    "  uint16_t *sds = (uint16_t *)(sdd + 64);     /* DQ: dS^T [BR, 64] */\n"
    "  const int kblocks = (T + BR - 1) / BR, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
    "  const int64_t bh = blockIdx.x / kblocks;\n"
    "  const int k0 = (int)(blockIdx.x % kblocks) * BR, off = T - S;\n"
    "  const float sl2 = scale * EVTC_ATT_LOG2E;\n"
    "  evtc_att_kv_start<D, BR, NT>(Q, K, V, O, dO, lse, sk, sv, bh, k0, S, T, lq, lk, lv, lo, ld);\n"
    "  const int first = CAUSAL ? max(0, k0 - off) / 64 : 0, qblocks = (S + 63) / 64;\n"
    "  evtc_att_qtile<D, NT>(stage, stage + 64 * D, stage + 128 * D, slse, Q, dO, O, lse, first * 64, S, lq.sr, ld.sr,\n"
    "                         lo.sr);   /* first < qblocks */\n"
    "  const int t = k0 + warp * 16 + (lane >> 2);\n"
    "  float dk[D / 8][4], dv[D / 8][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < D / 8; i++)\n"
    "#pragma unroll\n"
    "    for (int e = 0; e < 4; e++) dk[i][e] = dv[i][e] = 0.0f;\n"
    "  for (int ib = first; ib < qblocks; ib++) {\n"
    "    const int s0 = ib * 64, b = ST == 2 ? (ib - first) & 1 : 0;\n"
    "    uint16_t *sq = stage + b * 3 * 64 * D, *sd = sq + 64 * D, *so = sd + 64 * D;\n"
    "    const float *bl = slse + b * 64;\n"
    "    evtc_cp_wait<0>();\n"
    "    __syncthreads();\n"
    "    if (ST == 2 && ib + 1 < qblocks) {     /* every thread is past the tile that used the other buffer */\n"
    "      uint16_t *nq = stage + (b ^ 1) * 3 * 64 * D;\n"
    "      evtc_att_qtile<D, NT>(nq, nq + 64 * D, nq + 128 * D, slse + (b ^ 1) * 64, Q, dO, O, lse, s0 + 64, S, lq.sr, ld.sr, lo.sr);\n"
    "    }\n"
    "    evtc_att_tile_dd<BF, D, NT>(sd, so, sdd);     /* Dd of the tile's query rows */\n"
    "    __syncthreads();\n"
    "    float p[8][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 8; i++) p[i][0] = p[i][1] = p[i][2] = p[i][3] = 0.0f;\n"
    "    evtc_att_sabt<BF, D, 4>(p, sk, warp * 16, sq, 0);\n"
    "    const bool diag = CAUSAL && k0 + BR - 1 > s0 + off;\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int sc = nt * 8 + 2 * (lane & 3) + (e & 1), tt = t + 8 * (e >> 1);\n"
    "        p[nt][e] = diag && tt > s0 + sc + off ? 0.0f : exp2f(p[nt][e] * sl2 - bl[sc]);\n"
    "      }\n"
    "    evtc_att_pb<BF, D>(dv, p, sd);\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {     /* dS^T, 32 query columns at a time (fewer live registers) */\n"
    "      float dp[4][4];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < 4; i++) dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;\n"
    "      evtc_att_sabt<BF, D, 2>(dp, sv, warp * 16, sd, 2 * h);\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < 4; nt++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++) p[4 * h + nt][e] *= dp[nt][e] - sdd[(4 * h + nt) * 8 + 2 * (lane & 3) + (e & 1)];\n"
    "    }\n"
    "    evtc_att_pb<BF, D>(dk, p, sq);\n"
    "    if (DQ) {     /* dq of the tile's query rows [s0 + 16 warp, + 16) += dS k over the block's keys */\n"
    "      evtc_att_stile<BF>(sds, p, warp * 16);\n"
    "      __syncthreads();\n"
    "      float dq[D / 8][4];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < D / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;\n"
    "      evtc_att_tab<BF, D, BR>(dq, sds, warp * 16, sk);\n"
    "      const int qr = s0 + warp * 16 + (lane >> 2);\n"
    "      float *acc = dq_acc + (bh * S + qr) * D + 2 * (lane & 3);\n"
    "#pragma unroll\n"
    "      for (int dt = 0; dt < D / 8; dt++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++)\n"
    "          if (qr + 8 * (e >> 1) < S) evtc_att_red(acc + 8 * (e >> 1) * D + dt * 8 + (e & 1), dq[dt][e]);\n"
    "    }\n"
    "    if (ST == 1) {\n"
    "      __syncthreads();\n"
    "      if (ib + 1 < qblocks)\n"
    "        evtc_att_qtile<D, NT>(stage, stage + 64 * D, stage + 128 * D, slse, Q, dO, O, lse, s0 + 64, S, lq.sr, ld.sr, lo.sr);\n"
    "    }\n"
    "  }\n"
    "  uint16_t *out = dKV + evtc_att_base(lg, bh) + k0 * lg.sr;\n"
    "  evtc_att_store<BF, D>(out, dk, t - k0, T - k0, lg.sr, scale, scale);\n"
    "  evtc_att_store<BF, D>(out + lg.c2, dv, t - k0, T - k0, lg.sr, 1.0f, 1.0f);\n"
    "}\n"
    "#endif\n";


/* Warps per block: EVTC_ATTN_WARPS (4 or 8), default 4. */
static int attention_warps(void) {
  const char *e = getenv("EVTC_ATTN_WARPS");
  return e && strcmp(e, "8") == 0 ? 8 : 4;
}

/* The argument of an attention kernel's second output, written as a by-product (program.c): the forward's
 * log-sum-exp of the same q, k, scale and causality, or attention_backward_kv's dq of the same inputs; -1 when it
 * has none, -2 when its other outputs are not that. */
static int by_product_arg(const evtc_kernel *k) {
  int found = -1, first = evtc_kernel_output_arg(k);
  for (int i = 0; i < k->n_args; i++) {
    if (!k->args[i].output || i == first) continue;
    if (found != -1 || !(evtc_kernel_lse_of(k->main, k->args[i].node) || evtc_kernel_dq_of(k->main, k->args[i].node)))
      return -2;
    found = i;
  }
  return found;
}

/* Whether kernel argument a is laid out as the template reads or writes it: row-major, or a view whose
 * [B, H, rows, cols] rows have contiguous columns and start on 16-byte boundaries (cp.async moves 16 bytes),
 * dV too where it lies apart from dK; the log-sum-exp (f32) only row-major. */
static bool layout_fits(const evtc_kernel *k, int a) {
  const evtc_karg *g = &k->args[a];
  if (!g->strided) return true;
  const evtc_type *t = &g->node->type;
  if (t->rank != 4 || t->dtype == EVTC_F32 || g->strides[3] != 1 || g->offset % 8 || g->second_half % 8) return false;
  if (g->second_half && g->node->op != EVTC_OP_ATTENTION_BACKWARD_KV) return false;
  for (int d = 0; d < 3; d++)
    if (t->shape[d] > 1 && g->strides[d] % 8) return false;
  return true;
}

/* How an attention_backward_kv kernel gives dq when the program asks it to (a by-product): not at all (dq keeps
 * its own kernel), in its one pass over the scores (dq summed in f32 scratch, stored by NAME_fin), or from dq's
 * own kernel launched first as its NAME_pre, which also writes the Dd the key-block kernel reads (wgmma library
 * only), so that the pass that computed Dd alone goes.  EVTC_ATTN_DQ=0, 1 or first says; by default dq first on
 * the wgmma library and dq's own kernel on the mma.sync library (nwg 0).  On the H200 (2026-11-30, bench/
 * gpu_attention_bench.c, one warpgroup a block) dq first took 0.313 ms at BERT-Large's shape against 0.342 in
 * one pass and 0.146 + 0.185 apart, and 0.152 at GPT-2's (causal) against 0.157 in one pass; its dq is bit for
 * bit dq's own kernel's (no atomics). */
typedef enum dq_mode { DQ_OWN, DQ_ONE_PASS, DQ_FIRST } dq_mode;
static dq_mode dq_mode_of(int nwg) {
  const char *e = getenv("EVTC_ATTN_DQ");
  if (e && strcmp(e, "1") == 0) return DQ_ONE_PASS;
  if (e && strcmp(e, "0") == 0) return DQ_OWN;
  return nwg ? DQ_FIRST : DQ_OWN;     /* "first", and the default */
}

/* kernel k's dq_mode: DQ_OWN unless it is attention_backward_kv with dq as a by-product. */
static dq_mode dq_mode_of_kernel(const evtc_kernel *k, bool sm90a) {
  if (k->main->op != EVTC_OP_ATTENTION_BACKWARD_KV || by_product_arg(k) < 0) return DQ_OWN;
  return dq_mode_of(evtc_cuda_attention_warpgroups(k, sm90a));
}

bool evtc_cuda_attention_fits(const evtc_kernel *k, bool sm90a, char *why, size_t cap) {
  if (k->kind != EVTC_ML_OPAQUE || !evtc_op_is_attention(k->main->op)) {
    snprintf(why, cap, "no CUDA template for %s", k->main ? evtc_op_get(k->main->op)->name : "this kernel");
    return false;
  }
  int by = by_product_arg(k);
  if (by == -2) {
    snprintf(why, cap, "%s with outputs other than its own and its log-sum-exp or dq", evtc_op_get(k->main->op)->name);
    return false;
  }
  const int nwg = by >= 0 && k->main->op == EVTC_OP_ATTENTION_BACKWARD_KV ? evtc_cuda_attention_warpgroups(k, sm90a) : 0;
  if (by >= 0 && k->main->op == EVTC_OP_ATTENTION_BACKWARD_KV && !nwg && attention_warps() != 4) {
    snprintf(why, cap, "attention_backward_kv with dq in blocks of %d warps (dq in the same pass takes 4)",
             attention_warps());
    return false;
  }
  if (by >= 0 && k->main->op == EVTC_OP_ATTENTION_BACKWARD_KV && dq_mode_of_kernel(k, sm90a) == DQ_OWN) {
    const char *e = getenv("EVTC_ATTN_DQ");
    snprintf(why, cap, "attention_backward_kv with dq (%s)",
             e && strcmp(e, "0") == 0 ? "EVTC_ATTN_DQ=0"
             : e && strcmp(e, "first") == 0
                 ? "dq first needs the wgmma library"
                 : "slower than dq's own kernel on the mma.sync library; EVTC_ATTN_DQ=1 asks for it");
    return false;
  }
  for (int a = 0; a < k->n_args; a++)
    if (!layout_fits(k, a)) {
      snprintf(why, cap, "%s reading or writing %%%s through a view whose rows are not contiguous and 16-byte aligned",
               evtc_op_get(k->main->op)->name, k->args[a].node->name);
      return false;
    }
  const evtc_node *n = k->main;
  const evtc_type *q = &n->inputs[0]->type, *kt = &n->inputs[1]->type;
  if (q->dtype != EVTC_F16 && q->dtype != EVTC_BF16) {
    snprintf(why, cap, "%s %s (the CUDA template takes f16 and bf16)", evtc_dtype_name(q->dtype),
             evtc_op_get(n->op)->name);
    return false;
  }
  int64_t d = q->shape[3], dv = n->op == EVTC_OP_ATTENTION_LSE ? d : n->inputs[2]->type.shape[3];
  if ((d != 64 && d != 128) || dv != d) {
    snprintf(why, cap, "%s with head dims %lld / %lld (the CUDA template takes 64 and 128, equal)",
             evtc_op_get(n->op)->name, (long long)d, (long long)dv);
    return false;
  }
  if (q->shape[0] * q->shape[1] * q->shape[2] == 0 || kt->shape[2] == 0 || q->shape[2] > INT32_MAX / 2 ||
      kt->shape[2] > INT32_MAX / 2) {
    snprintf(why, cap, "%s over %lld queries and %lld keys", evtc_op_get(n->op)->name, (long long)q->shape[2],
             (long long)kt->shape[2]);
    return false;
  }
  return true;
}

/* Whether kernel k is attention_backward_kv summing dq in its pass (DQ_ONE_PASS). */
static bool with_dq(const evtc_kernel *k, bool sm90a) { return dq_mode_of_kernel(k, sm90a) == DQ_ONE_PASS; }

/* Floats of dq's f32 sums: row-major [B H, S, D] on the mma.sync library, tiles of 64 whole rows (S rounded up)
 * in the wgmma accumulators' order on the warpgroup one. */
static int64_t dq_sums(const evtc_kernel *k, bool sm90a) {
  const evtc_type *q = &k->main->inputs[0]->type;
  if (!evtc_cuda_attention_warpgroups(k, sm90a)) return evtc_type_numel(q);
  return q->shape[0] * q->shape[1] * ((q->shape[2] + 63) / 64) * 64 * q->shape[3];
}

/* Floats of Dd from NAME_pre (the wgmma key-block kernel; else 0): [B H, S rounded up to 64]. */
static int64_t dd_floats(const evtc_kernel *k, bool sm90a) {
  const evtc_type *q = &k->main->inputs[0]->type;
  if (k->main->op != EVTC_OP_ATTENTION_BACKWARD_KV || !evtc_cuda_attention_warpgroups(k, sm90a)) return 0;
  return q->shape[0] * q->shape[1] * ((q->shape[2] + 63) / 64) * 64;
}

/* Dynamic shared memory of the wgmma dq kernel in blocks of br query rows: a 1024-byte boundary, q and dout of
 * the block, two buffers of k and v (64 x 64 each). */
static unsigned wg_q_smem(unsigned br) { return 1024 + 2 * br * 64 * 2 + 4 * 64 * 64 * 2; }

/* Blocks of 256 threads for n items, at most 65536 (the kernels loop over the rest). */
static unsigned grid_for(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return (unsigned)(blocks < 65536 ? blocks : 65536);
}

evtc_cuda_attention_extra evtc_cuda_attention_extra_of(const evtc_kernel *k, bool sm90a) {
  evtc_cuda_attention_extra x = {0};
  const int64_t sums = with_dq(k, sm90a) ? dq_sums(k, sm90a) : 0, dd = dd_floats(k, sm90a);
  if (!sums && !dd) return x;
  const int per_thread = evtc_cuda_attention_warpgroups(k, sm90a) ? 4 : 2;     /* sums NAME_fin takes a thread */
  x.scratch_bytes = (size_t)(sums + dd) * sizeof(float);
  x.fin_grid = grid_for((sums > dd ? sums : dd) / per_thread);
  const evtc_type *q = &k->main->inputs[0]->type;
  if (dq_mode_of_kernel(k, sm90a) == DQ_FIRST) {     /* dq's own kernel: a block per 64 nwg query rows */
    const int64_t br = 64 * evtc_cuda_attention_warpgroups(k, sm90a);
    x.pre_grid = (unsigned)(q->shape[0] * q->shape[1] * ((q->shape[2] + br - 1) / br));
    x.pre_block = (unsigned)(2 * br);
    x.pre_smem = wg_q_smem((unsigned)br);
  } else if (dd) {     /* 8 threads a row of q */
    x.pre_grid = (unsigned)((q->shape[0] * q->shape[1] * q->shape[2] * 8 + 255) / 256);
    x.pre_block = 256;
  }
  return x;
}

/* Key rows per tile of the wgmma forward, query tiles in flight in the wgmma key-block kernel (cuda_emit_attention_wg.c;
 * with 3, 3 blocks of one warpgroup and dq still fit an SM's shared memory). */
enum { WG_FWD_KEYS = 128, WG_KV_STAGES = 3 };

int evtc_cuda_attention_warpgroups(const evtc_kernel *k, bool sm90a) {
  const char *e = getenv("EVTC_ATTN_WG");
  /* scale > 0: the wgmma forward takes the row maxima of the unscaled scores */
  if (!sm90a || k->main->inputs[0]->type.shape[3] != 64 || !(evtc_node_float(k->main, "scale") > 0) ||
      (e && strcmp(e, "0") == 0))
    return 0;
  return e && strcmp(e, "2") == 0 ? 2 : 1;
}

void evtc_cuda_attention_launch(const evtc_kernel *k, bool sm90a, unsigned *grid, unsigned *block, unsigned *smem) {
  const evtc_node *n = k->main;
  const int nwg = evtc_cuda_attention_warpgroups(k, sm90a);
  int64_t br = nwg ? 64 * nwg : 16 * attention_warps();
  const evtc_type *q = &n->inputs[0]->type;
  int64_t bh = q->shape[0] * q->shape[1], d = q->shape[3];
  bool kv = n->op == EVTC_OP_ATTENTION_BACKWARD_KV;
  int64_t rows = kv ? n->inputs[1]->type.shape[2] : q->shape[2];
  *grid = (unsigned)(bh * ((rows + br - 1) / br));
  *block = (unsigned)(2 * br);
  if (nwg) {     /* a 1024-byte boundary, then (cuda_emit_attention_wg.c) */
    const unsigned tile = 64 * 64 * 2, rows_bytes = (unsigned)br * 64 * 2;
    if (kv)     /* k, v; stages x (q, dout); dS^T for dq; stages x (lse, Dd) */
      *smem = 1024 + 2 * rows_bytes + WG_KV_STAGES * (2 * tile + 2 * 64 * sizeof(float)) + (with_dq(k, sm90a) ? rows_bytes : 0);
    else if (n->op == EVTC_OP_ATTENTION_BACKWARD_Q) *smem = wg_q_smem((unsigned)br);
    else *smem = 1024 + rows_bytes + 4 * tile * (WG_FWD_KEYS / 64);     /* q; 2 x (k, v) of WG_FWD_KEYS rows */
    return;
  }
  if (kv) {     /* evtc_att_bwd_kv: k and v of the block, ST query tiles of q, dout, out and their lse, Dd */
    int64_t st = d == 64 ? 2 : 1;
    *smem = (unsigned)(2 * br * d * 2 + st * (3 * 64 * d * 2 + 64 * sizeof(float)) + 64 * sizeof(float) +
                       (with_dq(k, sm90a) ? br * 64 * 2 : 0));     /* dS^T for dq */
  } else {
    *smem = (unsigned)(2 * 64 * d * 2 + 2 * 64 * sizeof(float));
  }
}

/* The evtc_att_lay of argument a, a [B, H, rows, cols] value (cols 2 D for dK with dV: dV from column D):
 * its view, or row-major. */
static void emit_layout(evtc_sb *b, const evtc_kernel *k, int a) {
  const evtc_karg *g = &k->args[a];
  const int64_t *sh = g->node->type.shape;
  int64_t off = 0, st[3] = {sh[1] * sh[2] * sh[3], sh[2] * sh[3], sh[3]};
  if (g->strided) {
    off = g->offset;
    for (int d = 0; d < 3; d++) st[d] = sh[d] > 1 ? g->strides[d] : 0;
  }
  int64_t c2 = g->node->op != EVTC_OP_ATTENTION_BACKWARD_KV ? 0
               : g->strided && g->second_half                  ? g->second_half
                                                                : g->node->inputs[0]->type.shape[3];
  evtc_sb_printf(b, "evtc_att_lay{%lldLL, %lldLL, %lldLL, %lldLL, %lldLL, %d}", (long long)off, (long long)st[0],
                 (long long)st[1], (long long)st[2], (long long)c2, (int)sh[1]);
}

/* "  evtc_awg_bwd_q<...>(...);": the wgmma dq of kernel k's inputs (q, k, v, out, dout, lse) into argument `out`
 * -- an attention_backward_q node's own, or the by-product dq of a key-block kernel that launches it first --
 * with Dd written to `ddo` ("nullptr, 0": nowhere). */
static void emit_awg_bwd_q(evtc_sb *b, const evtc_kernel *k, int nwg, int out, const char *ddo) {
  const evtc_node *n = k->main;
  const char *u = "(const uint16_t *)";
  evtc_sb_printf(b, "  evtc_awg_bwd_q<%d, %d, %d>(", n->inputs[0]->type.dtype == EVTC_BF16,
                 (int)evtc_node_int(n, "causal"), nwg);
  for (int j = 0; j < 5; j++) evtc_sb_printf(b, "%sP.a[%d], ", u, evtc_kernel_input_arg(k, j));
  evtc_sb_printf(b, "(const float *)P.a[%d], (uint16_t *)P.a[%d], %d, %d, (float)%.17g,\n    ",
                 evtc_kernel_input_arg(k, 5), out, (int)n->inputs[0]->type.shape[2], (int)n->inputs[1]->type.shape[2],
                 evtc_node_float(n, "scale"));
  for (int j = 0; j < 5; j++) {
    emit_layout(b, k, evtc_kernel_input_arg(k, j));
    evtc_sb_printf(b, ", ");
  }
  emit_layout(b, k, out);
  evtc_sb_printf(b, ", %s);\n", ddo);
}

void evtc_cuda_emit_attention(evtc_sb *b, const evtc_kernel *k, bool sm90a) {
  const evtc_node *n = k->main;
  const evtc_type *q = &n->inputs[0]->type;
  int bf = q->dtype == EVTC_BF16, d = (int)q->shape[3], causal = (int)evtc_node_int(n, "causal");
  int s = (int)q->shape[2], t = (int)n->inputs[1]->type.shape[2];
  double scale = evtc_node_float(n, "scale");
  const int nwg = evtc_cuda_attention_warpgroups(k, sm90a);
  int nw = nwg ? 4 * nwg : attention_warps();
  /* The 4-warp key-block kernel at D = 64 asks for 3 blocks an SM (168 registers, a few spilled; their shared
     memory fits): on the H200, 0.363 ms against 0.384 with the default bounds at BERT-Large's shape, 0.177
     against 0.197 at GPT-2's.  So does the one-warpgroup key-block kernel with dq (168 registers and 60 bytes
     spilled instead of 199, 2 blocks an SM): with its NAME_fin 0.403 ms against 0.444 at BERT-Large's shape, 0.188
     against 0.200 at GPT-2's (2026-11-30).  The others keep the default: a minimum of 1 block given explicitly
     made the forward and dq slower, and 2 warpgroups with dq asking for 2 or 3 blocks spill far more. */
  char bounds[32];
  if (n->op == EVTC_OP_ATTENTION_BACKWARD_KV && d == 64 && nw == 4 && !nwg) snprintf(bounds, sizeof bounds, "%d, 3", 32 * nw);
  else if (nwg == 1 && with_dq(k, sm90a)) snprintf(bounds, sizeof bounds, "%d, 3", 32 * nw);
  else snprintf(bounds, sizeof bounds, "%d", 32 * nw);
  evtc_cuda_emit_mma_sync_helpers(b);
  evtc_sb_printf(b, "%s", attention_lib);
  if (nwg) evtc_cuda_emit_attention_wg_lib(b);
  evtc_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(%s) %s(evtc_params P, const uint64_t *stepp, "
                    "int *err, void *scratch) {\n  const uint64_t step = *stepp;\n  (void)step; (void)err; (void)scratch;\n",
                 bounds, k->name);
  const char *u = "(const uint16_t *)";
  switch (n->op) {
    case EVTC_OP_ATTENTION:
    case EVTC_OP_ATTENTION_LSE: {
      char lse[32] = "nullptr";
      int by = by_product_arg(k);
      if (by >= 0) snprintf(lse, sizeof lse, "(float *)P.a[%d]", by);
      bool lse_only = n->op == EVTC_OP_ATTENTION_LSE;
      int qa = evtc_kernel_input_arg(k, 0), ka = evtc_kernel_input_arg(k, 1), va = lse_only ? ka : evtc_kernel_input_arg(k, 2);
      int oa = lse_only ? qa : evtc_kernel_output_arg(k);     /* the log-sum-exp alone has no rows of D to lay out */
      if (nwg)
        evtc_sb_printf(b, "  evtc_awg_fwd<%d, %d, %d, %d, %d>(", bf, causal, lse_only, nwg, WG_FWD_KEYS);
      else
        evtc_sb_printf(b, "  evtc_att_fwd<%d, %d, %d, %d, %d>(", bf, d, causal, lse_only, nw);
      evtc_sb_printf(b, "%sP.a[%d], %sP.a[%d], %sP.a[%d], P.a[%d], %s, %d, %d, (float)%.17g,\n    ", u, qa, u, ka, u, va,
                     evtc_kernel_output_arg(k), lse, s, t, scale);
      int lay[4] = {qa, ka, va, oa};
      for (int i = 0; i < 4; i++) {
        emit_layout(b, k, lay[i]);
        evtc_sb_printf(b, i < 3 ? ", " : ");\n");
      }
      break;
    }
    default: {
      bool kv = n->op == EVTC_OP_ATTENTION_BACKWARD_KV, pre = dd_floats(k, sm90a) > 0;
      if (nwg && !kv) {
        emit_awg_bwd_q(b, k, nwg, evtc_kernel_output_arg(k), "nullptr, 0");
        break;
      }
      if (nwg)
        evtc_sb_printf(b, "  evtc_awg_bwd_kv<%d, %d, %d, %s, %d>(", bf, causal, nwg, with_dq(k, sm90a) ? "true" : "false",
                       WG_KV_STAGES);
      else
        evtc_sb_printf(b, "  evtc_att_bwd_%s<%d, %d, %d, %d%s>(", kv ? "kv" : "q", bf, d, causal, nw,
                       !kv ? "" : with_dq(k, sm90a) ? ", true" : ", false");
      for (int j = 0; j < 5; j++) {
        if (j == 3 && pre)     /* Dd from NAME_pre in place of out, after the dq sums */
          evtc_sb_printf(b, "(const float *)scratch + %lld, ", (long long)(with_dq(k, sm90a) ? dq_sums(k, sm90a) : 0));
        else
          evtc_sb_printf(b, "%sP.a[%d], ", u, evtc_kernel_input_arg(k, j));
      }
      evtc_sb_printf(b, "(const float *)P.a[%d], (uint16_t *)P.a[%d], %d, %d, (float)%.17g,\n    ",
                     evtc_kernel_input_arg(k, 5), evtc_kernel_output_arg(k), s, t, scale);
      int lay[6] = {evtc_kernel_input_arg(k, 0), evtc_kernel_input_arg(k, 1), evtc_kernel_input_arg(k, 2),
                    evtc_kernel_input_arg(k, 3), evtc_kernel_input_arg(k, 4), evtc_kernel_output_arg(k)};
      for (int i = 0; i < 6; i++) {
        if (i == 3 && pre) continue;     /* out's layout is NAME_pre's */
        emit_layout(b, k, lay[i]);
        evtc_sb_printf(b, i < 5 ? ", " : kv ? ", %s);\n" : ");\n", with_dq(k, sm90a) ? "(float *)scratch" : "nullptr");
      }
      break;
    }
  }
  evtc_sb_printf(b, "}\n\n");
  const int64_t dd = dd_floats(k, sm90a), sums = with_dq(k, sm90a) ? dq_sums(k, sm90a) : 0;
  if (dq_mode_of_kernel(k, sm90a) == DQ_FIRST) {     /* NAME_pre: dq's own kernel, writing Dd into the scratch too */
    char ddo[48];
    snprintf(ddo, sizeof ddo, "(float *)scratch, %d", (s + 63) / 64 * 64);
    evtc_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d) %s_pre(evtc_params P, const uint64_t *stepp, "
                      "int *err, void *scratch) {\n  const uint64_t step = *stepp;\n  (void)step; (void)err;\n",
                   128 * nwg, k->name);
    emit_awg_bwd_q(b, k, nwg, by_product_arg(k), ddo);
    evtc_sb_printf(b, "}\n\n");
  } else if (dd) {     /* NAME_pre: Dd of every query row into the scratch after the dq sums */
    evtc_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(256) %s_pre(evtc_params P, const uint64_t *stepp, "
                      "int *err, void *scratch) {\n  const uint64_t step = *stepp;\n  (void)step; (void)err;\n"
                      "  evtc_awg_dd<%d>(%sP.a[%d], %sP.a[%d], (float *)scratch + %lld, %d, %d, %lldLL,\n    ",
                   k->name, bf, u, evtc_kernel_input_arg(k, 4), u, evtc_kernel_input_arg(k, 3), (long long)sums, s,
                   (s + 63) / 64 * 64, (long long)(q->shape[0] * q->shape[1] * s));
    emit_layout(b, k, evtc_kernel_input_arg(k, 4));
    evtc_sb_printf(b, ", ");
    emit_layout(b, k, evtc_kernel_input_arg(k, 3));
    evtc_sb_printf(b, ");\n}\n\n");
  }
  if (!sums && !dd) return;
  /* NAME_fin: dq = scale * the f32 sums, through its layout; the sums and Dd zeroed for the next run */
  evtc_sb_printf(b, "extern \"C\" __global__ void __launch_bounds__(256) %s_fin(evtc_params P, const uint64_t *stepp, "
                    "int *err, void *scratch) {\n  const uint64_t step = *stepp;\n  (void)step; (void)err;\n", k->name);
  if (dd)
    evtc_sb_printf(b, "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < %lldLL; i += (int64_t)gridDim.x * 256)\n"
                      "    ((float4 *)scratch)[%lldLL + i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n",
                   (long long)(dd / 4), (long long)(sums / 4));
  if (!sums) {
    evtc_sb_printf(b, "}\n\n");
    return;
  }
  int dq = by_product_arg(k);
  evtc_sb_printf(b, "  const evtc_att_lay lg = ");
  emit_layout(b, k, dq);
  if (nwg) {     /* 4 sums a thread: tile (bh, query tile), accumulator registers 4 j.. of thread t (evtc_awg_bwd_kv) */
    evtc_sb_printf(b, ";\n  float4 *acc = (float4 *)scratch;\n"
                      "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < %lldLL; i += (int64_t)gridDim.x * 256) {\n"
                      "    const int64_t tile = i >> 10, bh = tile / %d;\n"
                      "    const int t = (int)(i & 127), j = (int)(i >> 7) & 7, lane = t & 31;\n"
                      "    const int r = (int)(tile %% %d) * 64 + (t >> 5) * 16 + (lane >> 2), c = 8 * j + 2 * (lane & 3);\n"
                      "    const float4 v = acc[i];\n"
                      "    uint16_t *o = (uint16_t *)P.a[%d] + evtc_att_base(lg, bh) + c;\n"
                      "    if (r < %d) *(uint32_t *)(o + r * lg.sr) = evtc_att_pack<%d>(v.x * (float)%.17g, v.y * (float)%.17g);\n"
                      "    if (r + 8 < %d) *(uint32_t *)(o + (r + 8) * lg.sr) = evtc_att_pack<%d>(v.z * (float)%.17g, v.w * (float)%.17g);\n"
                      "    acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);\n  }\n}\n\n",
                   (long long)(dq_sums(k, sm90a) / 4), (s + 63) / 64, (s + 63) / 64, dq, s, bf, scale, scale, s, bf, scale,
                   scale);
    return;
  }
  evtc_sb_printf(b, ";\n  float2 *acc = (float2 *)scratch;\n"
                    "  for (int64_t i = blockIdx.x * 256ll + threadIdx.x; i < %lldLL; i += (int64_t)gridDim.x * 256) {\n"
                    "    const int64_t e = 2 * i, row = e / %d, bh = row / %d;\n"
                    "    const float2 v = acc[i];\n"
                    "    *(uint32_t *)((uint16_t *)P.a[%d] + evtc_att_base(lg, bh) + (row %% %d) * lg.sr + e %% %d) =\n"
                    "        evtc_att_pack<%d>(v.x * (float)%.17g, v.y * (float)%.17g);\n"
                    "    acc[i] = make_float2(0.0f, 0.0f);\n  }\n}\n\n",
                 (long long)(evtc_type_numel(q) / 2), d, s, dq, s, d, bf, scale, scale);
}
