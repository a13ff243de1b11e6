/* cuda_emit_attention_wg.c -- the attention family on Hopper's warpgroup
 * MMA (sm_90a, head dim 64): the device library that cuda_emit_attention.c
 * emits instead of its mma.sync one where the device has wgmma.
 *
 * The schedule is FlashAttention's, as in the mma.sync library (same
 * tiles in shared memory, same cp.async loads and layouts, same online
 * softmax and recomputation of P in the backward), with each 16 x 16
 * mma.sync step replaced by warpgroup MMAs: a block of NWG warpgroups
 * (EVTC_ATTN_WG, 1 or 2) owns 64 NWG query rows (forward, dq) or key rows
 * (dk with dv), each warpgroup 64 of them, one wgmma m64nNk16 per 16 of
 * the reduced dimension.
 *   - Operands in shared memory are the swizzled [rows, 64] tiles the
 *     mma.sync library writes (16-byte chunk c of row r at chunk c ^ r % 8):
 *     at a 1024-byte boundary that is wgmma's canonical 128B-swizzled
 *     K-major layout (SBO 1024: 8 rows of 128 bytes; the k16 step kk starts
 *     32 kk bytes in), so S = Q K^T, dP = dO V^T and their transposes read
 *     both operands from there.
 *   - The products whose reduced dimension is the tile's rows (O += P V,
 *     dq += dS K, dv += P^T dO, dk += dS^T Q) read the same tile as an
 *     MN-major B (imm-trans-b 1; SBO 1024 for 8 k-rows, LBO 8192 for the
 *     next 64 columns, never used at D = 64; the k16 step kk starts 2048 kk
 *     bytes in), and take A -- P or dS, rounded to f16 / bf16 -- from
 *     registers: wgmma's accumulator layout (row 16 w + lane / 4 (+ 8),
 *     columns 8 j + 2 (lane % 4) (+ 1) in registers 4 j .. 4 j + 3) is the
 *     A-fragment layout of its k16 steps, so no shuffle is needed.
 * Each warpgroup waits for its own MMAs before it uses their results
 * (evtc_awg_pin keeps the compiler from reading accumulators above the
 * wait); the warpgroups of a block and the blocks on an SM overlap one
 * another's softmax with their MMAs.  The key-block kernel (dk with dv)
 * keeps WG_KV_STAGES query tiles in flight and reads Dd = rowsum(dout *
 * out) of each query row, which its preparing kernel NAME_pre
 * (evtc_awg_dd, or the dq kernel where dq runs first: cuda_emit_attention.c)
 * writes once, instead of loading the out tile and summing Dd again in
 * every key block; with the tile loads unrolled and its wgmma
 * descriptors made once, BERT-Large's shape went from 0.397 to 0.344 ms
 * with dq (H200, 2026-11-30).  With dq in the pass of dk and dv
 * (EVTC_ATTN_DQ=1; the default launches dq's kernel first:
 * cuda_emit_attention.c) each warpgroup also writes its dS^T to a swizzled
 * tile and reads it back as a transposed A for dq = dS K, and adds the f32
 * result to scratch with 16-byte reductions: dq costs one product more
 * instead of dq's own kernel's three, its exponentials and loads
 * (BERT-Large's shape: 0.403 ms with NAME_fin against 0.173 + 0.261; dq
 * first, since: 0.313).
 *
 * The softmax folds the scale into one FMA before ex2.approx.ftz (the row
 * maxima are taken on the unscaled scores: the scale must be positive).
 * On the H200 (2026-11-29, bench/gpu_attention_bench.c, bf16) one
 * warpgroup a block beats two and the mma.sync library: BERT-Large's shape
 * (32 x 16 heads, 512 x 512) forward 0.126 ms, dq 0.172, dk with dv 0.261
 * against 0.189 / 0.252 / 0.369 for mma.sync; GPT-2's (8 x 12, 1024,
 * causal) 0.068 / 0.088 / 0.127 against 0.095 / 0.156 / 0.179 (exp2f and a
 * separate scaling: 0.137 / 0.182 / 0.272 and 0.077 / 0.100 / 0.136).  Key
 * tiles of 64 rows in the forward (WG_FWD_KEYS, 100 registers instead of
 * 160): 0.136 / 0.071 ms with one warpgroup, 0.126 / 0.071 with two.  Tried and
 * not kept: each warpgroup overlapping its softmax with its next products
 * (S then dP as two groups, P computed while dP runs, a tile's last
 * products finishing under the next tile's loads): dk with dv 0.322 and
 * 0.156 ms, dq no better.
 */
#include "backend/cuda/cuda_emit_attention.h"
#include "backend/cuda/cuda_emit_gemm.h"

/* evtc_awg_ss_nN<BF> (A and B from shared memory, N = 64 or 128; scale-d 0 when acc is 0: D = A B), with
 * `trans` evtc_awg_ss_nNtt<BF> (the same, both A and B transposed: MN-major); with a_regs evtc_awg_rs_nN<BF> (A
 * from four registers, B K-major, acc as for ss) and with `trans` too evtc_awg_rs_nNt<BF> (B transposed, D += A B):
 * f32 accumulators d[N / 8][4]. */
static void emit_wgmma(evtc_sb *b, int n, bool a_regs, bool trans) {
  const int regs = n / 2;
  if (a_regs)
    evtc_sb_printf(b, "template <bool BF> __device__ __forceinline__ void evtc_awg_rs_n%d%s(float (*d)[4], const uint32_t *a, "
                      "unsigned long long db%s) {\n", n, trans ? "t" : "", trans ? "" : ", int acc");
  else
    evtc_sb_printf(b, "template <bool BF> __device__ __forceinline__ void evtc_awg_ss_n%d%s(float (*d)[4], unsigned long long da, "
                      "unsigned long long db, int acc) {\n", n, trans ? "tt" : "");
  for (int t = 0; t < 2; t++) {
    const char *ty = t == 0 ? "bf16" : "f16";
    evtc_sb_printf(b, "  %sasm volatile(\"{ .reg .pred p; setp.ne.b32 p, %%%d, 0;\\n\"\n", t == 0 ? "if (BF) " : "else ",
                   regs + (a_regs ? 5 : 2));
    evtc_sb_printf(b, "    \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, ty, ty);
    for (int i = 0; i < regs; i++) evtc_sb_printf(b, "%s%%%d", i ? ", " : "", i);
    if (a_regs)
      evtc_sb_printf(b, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d; }\\n\"\n    :", regs, regs + 1, regs + 2, regs + 3,
                     regs + 4, trans);
    else
      evtc_sb_printf(b, "}, %%%d, %%%d, p, 1, 1, %d, %d; }\\n\"\n    :", regs, regs + 1, trans, trans);
    for (int i = 0; i < regs; i++)
      evtc_sb_printf(b, "%s\"+f\"(d[%d][%d])", i ? (i % 8 ? ", " : ",\n      ") : " ", i / 4, i % 4);
    if (a_regs)
      evtc_sb_printf(b, "\n    : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(db), \"r\"(%s));\n",
                     trans ? "1" : "acc");
    else
      evtc_sb_printf(b, "\n    : \"l\"(da), \"l\"(db), \"r\"(acc));\n");
  }
  evtc_sb_printf(b, "}\n");
}

static const char attention_wg_kernels[] =
    "/* evtc attention on Hopper's wgmma (cuda_emit_attention_wg.c): D = 64, blocks of NWG warpgroups of 64 rows;\n"
    "   the wgmma descriptor, fence, commit and wait are the GEMM's (cuda_emit_gemm.c) */\n"
    "#define EVTC_AWG_KMAJ(a) evtc_wgmma_desc((a), 16u, 1024u)     /* K-major tile [rows][64], 128B swizzle */\n"
    "#define EVTC_AWG_MNMAJ(a) evtc_wgmma_desc((a), 8192u, 1024u)  /* the same tile read as MN-major (transposed B) */\n"
    "/* Descriptor d moved by b bytes (a multiple of 16): the start address is its low 14 bits in 16-byte units, and a\n"
    "   shared address below 256 KiB never carries out of them. */\n"
    "#define EVTC_AWG_STEP(d, b) ((d) + (unsigned long long)((b) >> 4))\n"
    "/* After wait: every accumulator register is (re)defined here, so no read of it moves above the wait. */\n"
    "template <int N> __device__ __forceinline__ void evtc_awg_pin(float (*d)[4]) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < N; i++) asm volatile(\"\" : \"+f\"(d[i][0]), \"+f\"(d[i][1]), \"+f\"(d[i][2]), \"+f\"(d[i][3]) :: \"memory\");\n"
    "}\n"
    "/* The first byte of the dynamic shared memory at a 1024-byte boundary (the 128B swizzle's period). */\n"
    "__device__ __forceinline__ uint16_t *evtc_awg_smem() {\n"
    "  extern __shared__ uint4 evtc_att_smem[];\n"
    "  const uint32_t a = evtc_att_saddr(evtc_att_smem);\n"
    "  return (uint16_t *)((char *)evtc_att_smem + (((a + 1023u) & ~1023u) - a));\n"
    "}\n"
    "/* 2^x by the SFU, subnormal results flushed to zero (exp2f adds a rescaling around it for them). */\n"
    "__device__ __forceinline__ float evtc_awg_ex2(float x) {\n"
    "  float y;\n"
    "  asm(\"ex2.approx.ftz.f32 %0, %1;\\n\" : \"=f\"(y) : \"f\"(x));\n"
    "  return y;\n"
    "}\n"
    "/* A fragments of k16 step kk of rows 16 warp .. 16 warp + 15 of a swizzled [rows][64] tile t, in the layout\n"
    "   evtc_awg_afrag makes, by ldmatrix: lane l gives row l % 8 (+ 8 for odd l / 8) of 16-byte chunk 2 kk + l / 16. */\n"
    "__device__ __forceinline__ void evtc_awg_ldfrag(uint32_t *a, const uint16_t *t, int warp, int lane, int kk) {\n"
    "  const int r = warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), c = 2 * kk + (lane >> 4);\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n\"\n"
    "               : \"=r\"(a[0]), \"=r\"(a[1]), \"=r\"(a[2]), \"=r\"(a[3]) : \"r\"(evtc_att_saddr(t + r * 64 + ((c ^ (r & 7)) << 3))));\n"
    "}\n"
    "/* A fragments of k16 step kk from a 16-row slice of f32 accumulators in the wgmma / mma.sync layout. */\n"
    "template <bool BF> __device__ __forceinline__ void evtc_awg_afrag(uint32_t *a, const float (*p)[4], int kk) {\n"
    "  a[0] = evtc_att_pack<BF>(p[2 * kk][0], p[2 * kk][1]);\n"
    "  a[1] = evtc_att_pack<BF>(p[2 * kk][2], p[2 * kk][3]);\n"
    "  a[2] = evtc_att_pack<BF>(p[2 * kk + 1][0], p[2 * kk + 1][1]);\n"
    "  a[3] = evtc_att_pack<BF>(p[2 * kk + 1][2], p[2 * kk + 1][3]);\n"
    "}\n"
    "\n"
    "/* Forward (LSE false: out [BH, S, 64] by lo, and with lse_out the log-sum-exp) or the log-sum-exp alone (LSE true:\n"
    "   out is lse [BH, S] f32) of query block blockIdx.x: NWG warpgroups of 64 query rows, key tiles of BC (64 or\n"
    "   128) rows double-buffered; S = Q K^T by wgmma from shared memory, the online softmax in registers, O += P V with P\n"
    "   from registers and V read as a transposed B. */\n"
    "template <bool BF, bool CAUSAL, bool LSE, int NWG, int BC>\n"
    "__device__ __forceinline__ void evtc_awg_fwd(const uint16_t *Q, const uint16_t *K, const uint16_t *V, void *out,\n"
    "                                             float *lse_out, int S, int T, float scale, evtc_att_lay lq, evtc_att_lay lk,\n"
    "                                             evtc_att_lay lv, evtc_att_lay lo) {\n"
    "  constexpr int D = 64, BR = 64 * NWG, NT = 128 * NWG;\n"
    "  uint16_t *sq = evtc_awg_smem(), *sk = sq + BR * D, *sv = sk + 2 * BC * D;\n"
    "  const int qblocks = (S + BR - 1) / BR, wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;\n"
    "  const int64_t bh = blockIdx.x / qblocks;\n"
    "  const int q0 = (qblocks - 1 - (int)(blockIdx.x % qblocks)) * BR, off = T - S;\n"
    "  const float sl2 = scale * EVTC_ATT_LOG2E;\n"
    "  Q += evtc_att_base(lq, bh) + q0 * lq.sr;\n"
    "  K += evtc_att_base(lk, bh);\n"
    "  V += evtc_att_base(lv, bh);\n"
    "  evtc_att_load<D, BR, NT>(sq, Q, S - q0, lq.sr);\n"
    "  const int kend = CAUSAL ? min(T, q0 + BR + off) : T, nkb = kend > 0 ? (kend + BC - 1) / BC : 0;\n"
    "  if (nkb > 0) {\n"
    "    evtc_att_load<D, BC, NT>(sk, K, T, lk.sr);\n"
    "    if (!LSE) evtc_att_load<D, BC, NT>(sv, V, T, lv.sr);\n"
    "  }\n"
    "  evtc_cp_commit();\n"
    "  const uint32_t aq = evtc_att_saddr(sq + wg * 64 * D), ak = evtc_att_saddr(sk), av = evtc_att_saddr(sv);\n"
    "  float o[LSE ? 1 : 8][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < (LSE ? 1 : 8); i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;\n"
    "  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};\n"
    "  const int ra = q0 + wg * 64 + warp * 16 + (lane >> 2);\n"
    "  for (int j = 0; j < nkb; j++) {\n"
    "    const int b = j & 1;\n"
    "    evtc_cp_wait<0>();\n"
    "    __syncthreads();\n"
    "    if (j + 1 < nkb) {     /* the other buffer's last readers finished with tile j - 1 */\n"
    "      evtc_att_load<D, BC, NT>(sk + (b ^ 1) * BC * D, K + (int64_t)(j + 1) * BC * lk.sr, T - (j + 1) * BC, lk.sr);\n"
    "      if (!LSE) evtc_att_load<D, BC, NT>(sv + (b ^ 1) * BC * D, V + (int64_t)(j + 1) * BC * lv.sr, T - (j + 1) * BC, lv.sr);\n"
    "      evtc_cp_commit();\n"
    "    }\n"
    "    float s[BC / 8][4];\n"
    "    evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++)\n"
    "      if (BC == 128) evtc_awg_ss_n128<BF>(s, EVTC_AWG_KMAJ(aq + kk * 32), EVTC_AWG_KMAJ(ak + b * BC * 128 + kk * 32), kk);\n"
    "      else evtc_awg_ss_n64<BF>(s, EVTC_AWG_KMAJ(aq + kk * 32), EVTC_AWG_KMAJ(ak + b * BC * 128 + kk * 32), kk);\n"
    "    evtc_wgmma_commit();\n"
    "    evtc_wgmma_wait<0>();\n"
    "    evtc_awg_pin<BC / 8>(s);\n"
    "    const int t0 = j * BC;\n"
    "    const bool edge = t0 + BC > T || (CAUSAL && t0 + BC - 1 > q0 + off);\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < BC / 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {     /* masked scores -inf; the scale is folded into the exponent below */\n"
    "        const int t = t0 + nt * 8 + 2 * (lane & 3) + (e & 1), r = ra + (e >> 1) * 8;\n"
    "        if (edge && (t >= T || (CAUSAL && t > r + off))) s[nt][e] = -INFINITY;\n"
    "      }\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "      float mx = m[h];\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < BC / 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));\n"
    "      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));\n"
    "      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));\n"
    "      const float base = mx == -INFINITY ? 0.0f : mx, nb = -base * sl2;\n"
    "      const float alpha = evtc_awg_ex2(fmaf(m[h], sl2, nb));\n"
    "      m[h] = mx;\n"
    "      l[h] *= alpha;\n"
    "      if (!LSE)\n"
    "#pragma unroll\n"
    "        for (int i = 0; i < 8; i++) o[i][2 * h] *= alpha, o[i][2 * h + 1] *= alpha;\n"
    "      float sum = 0.0f;\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < BC / 8; nt++) {\n"
    "        s[nt][2 * h] = evtc_awg_ex2(fmaf(s[nt][2 * h], sl2, nb));\n"
    "        s[nt][2 * h + 1] = evtc_awg_ex2(fmaf(s[nt][2 * h + 1], sl2, nb));\n"
    "        sum += s[nt][2 * h] + s[nt][2 * h + 1];\n"
    "      }\n"
    "      l[h] += sum;\n"
    "    }\n"
    "    if (!LSE) {\n"
    "      uint32_t a[BC / 16][4];\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < BC / 16; kk++) evtc_awg_afrag<BF>(a[kk], s, kk);\n"
    "      evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < BC / 16; kk++) evtc_awg_rs_n64t<BF>(o, a[kk], EVTC_AWG_MNMAJ(av + b * BC * 128 + kk * 2048));\n"
    "      evtc_wgmma_commit();\n"
    "      evtc_wgmma_wait<0>();\n"
    "      evtc_awg_pin<8>(o);\n"
    "    }\n"
    "  }\n"
    "  const float m2[2] = {m[0] * sl2, m[1] * sl2};     /* the row maxima in log2 units */\n"
    "  evtc_att_fwd_end<BF, D, LSE>(l, m2, o, out, lse_out, bh, ra, S, lo);\n"
    "}\n"
    "\n"
    "/* dq of query block blockIdx.x (NWG warpgroups of 64 rows; key tiles of 64 double-buffered): S = Q K^T and\n"
    "   dP = dout V^T by wgmma with the block's q and dout as A fragments in registers (loaded once: the key tiles\n"
    "   alone are read from shared memory in the loop), dS = P (dP - Dd) in registers, dq += dS K with K read as a\n"
    "   transposed B.  With ddo, Dd of each row into ddo[bh sp + s] too (sp = S rounded up to 64), for the key-block\n"
    "   kernel after it. */\n"
    "template <bool BF, bool CAUSAL, int NWG>\n"
    "__device__ __forceinline__ void evtc_awg_bwd_q(const uint16_t *Q, const uint16_t *K, const uint16_t *V, const uint16_t *O,\n"
    "                                               const uint16_t *dO, const float *lse, uint16_t *dQ, int S, int T, float scale,\n"
    "                                               evtc_att_lay lq, evtc_att_lay lk, evtc_att_lay lv, evtc_att_lay lo,\n"
    "                                               evtc_att_lay ld, evtc_att_lay lg, float *ddo, int sp) {\n"
    "  constexpr int D = 64, BR = 64 * NWG, BC = 64, NT = 128 * NWG;\n"
    "  uint16_t *sq = evtc_awg_smem(), *sd = sq + BR * D, *sk = sd + BR * D, *sv = sk + 2 * BC * D;\n"
    "  const int qblocks = (S + BR - 1) / BR, wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;\n"
    "  const int64_t bh = blockIdx.x / qblocks;\n"
    "  const int q0 = (qblocks - 1 - (int)(blockIdx.x % qblocks)) * BR, off = T - S;\n"
    "  const float sl2 = scale * EVTC_ATT_LOG2E;\n"
    "  Q += evtc_att_base(lq, bh) + q0 * lq.sr;\n"
    "  O += evtc_att_base(lo, bh) + q0 * lo.sr;\n"
    "  dO += evtc_att_base(ld, bh) + q0 * ld.sr;\n"
    "  K += evtc_att_base(lk, bh);\n"
    "  V += evtc_att_base(lv, bh);\n"
    "  evtc_att_load<D, BR, NT>(sq, Q, S - q0, lq.sr);\n"
    "  evtc_att_load<D, BR, NT>(sd, dO, S - q0, ld.sr);\n"
    "  const int kend = CAUSAL ? min(T, q0 + BR + off) : T, nkb = kend > 0 ? (kend + BC - 1) / BC : 0;\n"
    "  if (nkb > 0) {\n"
    "    evtc_att_load<D, BC, NT>(sk, K, T, lk.sr);\n"
    "    evtc_att_load<D, BC, NT>(sv, V, T, lv.sr);\n"
    "  }\n"
    "  evtc_cp_commit();\n"
    "  const int r = wg * 64 + warp * 16 + (lane >> 2);\n"
    "  float dd[2], lse2[2];\n"
    "  evtc_att_dq_rows<BF, D>(dd, lse2, dO, O, lse, bh, q0, r, S, ld, lo);\n"
    "  if (ddo && (lane & 3) == 0)     /* each lane of a quad holds its rows' sums */\n"
    "#pragma unroll\n"
    "    for (int h = 0; h < 2; h++)\n"
    "      if (r + 8 * h < S - q0) ddo[bh * sp + q0 + r + 8 * h] = dd[h];\n"
    "  const uint32_t ak = evtc_att_saddr(sk), av = evtc_att_saddr(sv);\n"
    "  evtc_cp_wait<0>();     /* q and dout (with the first key tiles) arrived: their A fragments, once */\n"
    "  __syncthreads();\n"
    "  uint32_t qa[4][4], da[4][4];\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < 4; kk++) {\n"
    "    evtc_awg_ldfrag(qa[kk], sq + wg * 64 * D, warp, lane, kk);\n"
    "    evtc_awg_ldfrag(da[kk], sd + wg * 64 * D, warp, lane, kk);\n"
    "  }\n"
    "  float dq[8][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.0f;\n"
    "  for (int j = 0; j < nkb; j++) {\n"
    "    const int b = j & 1;\n"
    "    evtc_cp_wait<0>();\n"
    "    __syncthreads();\n"
    "    if (j + 1 < nkb) {\n"
    "      evtc_att_load<D, BC, NT>(sk + (b ^ 1) * BC * D, K + (int64_t)(j + 1) * BC * lk.sr, T - (j + 1) * BC, lk.sr);\n"
    "      evtc_att_load<D, BC, NT>(sv + (b ^ 1) * BC * D, V + (int64_t)(j + 1) * BC * lv.sr, T - (j + 1) * BC, lv.sr);\n"
    "      evtc_cp_commit();\n"
    "    }\n"
    "    float s[8][4], dp[8][4];\n"
    "    evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) {\n"
    "      evtc_awg_rs_n64<BF>(s, qa[kk], EVTC_AWG_KMAJ(ak + b * BC * 128 + kk * 32), kk);\n"
    "      evtc_awg_rs_n64<BF>(dp, da[kk], EVTC_AWG_KMAJ(av + b * BC * 128 + kk * 32), kk);\n"
    "    }\n"
    "    evtc_wgmma_commit();\n"
    "    evtc_wgmma_wait<0>();\n"
    "    evtc_awg_pin<8>(s);\n"
    "    evtc_awg_pin<8>(dp);\n"
    "    const int t0 = j * BC;\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int t = t0 + nt * 8 + 2 * (lane & 3) + (e & 1), h = e >> 1;\n"
    "        const bool masked = t >= T || (CAUSAL && t > q0 + r + 8 * h + off);\n"
    "        const float p = masked ? 0.0f : evtc_awg_ex2(fmaf(s[nt][e], sl2, -lse2[h]));\n"
    "        s[nt][e] = p * (dp[nt][e] - dd[h]);\n"
    "      }\n"
    "    uint32_t a[4][4];\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) evtc_awg_afrag<BF>(a[kk], s, kk);\n"
    "    evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) evtc_awg_rs_n64t<BF>(dq, a[kk], EVTC_AWG_MNMAJ(ak + b * BC * 128 + kk * 2048));\n"
    "    evtc_wgmma_commit();\n"
    "    evtc_wgmma_wait<0>();\n"
    "    evtc_awg_pin<8>(dq);\n"
    "  }\n"
    "  evtc_att_store<BF, D>(dQ + evtc_att_base(lg, bh) + q0 * lg.sr, dq, r, S - q0, lg.sr, scale, scale);\n"
    "}\n"
    "\n"
    "/* Dd = rowsum(dout * out) of each of the rows query rows (S a batch-head pair) into dd[bh sp + s], sp = S rounded\n"
    "   up to 64, for the key-block kernel to read like the log-sum-exp: 8 threads a row, a 16-byte chunk each. */\n"
    "template <bool BF> __device__ __forceinline__ void evtc_awg_dd(const uint16_t *dO, const uint16_t *O, float *dd, int S, int sp,\n"
    "                                                           int64_t rows, evtc_att_lay ld, evtc_att_lay lo) {\n"
    "  const int64_t r = (blockIdx.x * 256ll + threadIdx.x) >> 3, bh = r / S;\n"
    "  const int s = (int)(r % S), c = (int)(threadIdx.x & 7);\n"
    "  float a = 0.0f;\n"
    "  if (r < rows)\n"
    "    a = evtc_att_dot8<BF>(*(const uint4 *)(dO + evtc_att_base(ld, bh) + s * ld.sr + 8 * c),\n"
    "                          *(const uint4 *)(O + evtc_att_base(lo, bh) + s * lo.sr + 8 * c));\n"
    "#pragma unroll\n"
    "  for (int o = 1; o < 8; o <<= 1) a += __shfl_xor_sync(0xffffffffu, a, o);\n"
    "  if (r < rows && c == 0) dd[bh * sp + s] = a;\n"
    "}\n"
    "\n"
    "/* 4 bytes from global src into shared dst by cp.async (zero-filled when !in; src must be a valid address). */\n"
    "__device__ __forceinline__ void evtc_awg_cp4(float *dst, const float *src, bool in) {\n"
    "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" ::\"r\"(evtc_att_saddr(dst)), \"l\"(src), \"r\"(in ? 4 : 0));\n"
    "}\n"
    "/* The query tile of rows [s0, s0 + 64) for evtc_awg_bwd_kv, all in one cp.async group: q and dout (rows lq, ld\n"
    "   elements apart) into the swizzled tiles sq, sd, the log-sum-exp (natural log units) into slse and Dd into sdd,\n"
    "   all zero past S (a zero row of q gives P = 1 there, but with zero rows of dout and Dd 0 it adds nothing). */\n"
    "template <int NT> __device__ __forceinline__ void evtc_awg_qtile(uint16_t *sq, uint16_t *sd, float *slse, float *sdd,\n"
    "                                                             const uint16_t *Q, const uint16_t *dO, const float *lse,\n"
    "                                                             const float *dd, int s0, int S, int64_t lq, int64_t ld) {\n"
    "  evtc_att_load<64, 64, NT>(sq, Q + s0 * lq, S - s0, lq);\n"
    "  evtc_att_load<64, 64, NT>(sd, dO + s0 * ld, S - s0, ld);\n"
    "  if (threadIdx.x < 64) {\n"
    "    const bool in = s0 + (int)threadIdx.x < S;\n"
    "    evtc_awg_cp4(slse + threadIdx.x, in ? lse + s0 + threadIdx.x : lse, in);\n"
    "    evtc_awg_cp4(sdd + threadIdx.x, in ? dd + s0 + threadIdx.x : dd, in);\n"
    "  }\n"
    "  evtc_cp_commit();\n"
    "}\n"
    "\n"
    "/* dk and dv of key block blockIdx.x (NWG warpgroups of 64 keys), the query tiles of 64 rows (q, dout, their\n"
    "   log-sum-exp and Dd from evtc_awg_dd's dd) in QS stages: S^T = K Q^T and dP^T = V dout^T by wgmma, P^T and\n"
    "   dS^T = P^T (dP^T - Dd) in registers, then dv += P^T dout and dk += dS^T q with dout and q read as transposed Bs.\n"
    "   dK = scale dk and dV go side by side into the rows of dKV laid out by lg (dV from column lg.c2).  With DQ also\n"
    "   each query tile's share of dq: dS^T goes to a swizzled tile of the warpgroup's own, read back as a transposed A\n"
    "   for dS K (K a transposed B), and the 64 x 64 f32 result is added into dqacc by 16-byte reductions\n"
    "   (red.global.add.v4.f32) in the accumulators' order: tile (bh, query tile) of 4096 floats, thread t's registers\n"
    "   4 j .. 4 j + 3 at 4 (128 j + t) (evtc_cuda_emit_attention's NAME_fin reads them back). */\n"
    "template <bool BF, bool CAUSAL, int NWG, bool DQ, int QS>\n"
    "__device__ __forceinline__ void evtc_awg_bwd_kv(const uint16_t *Q, const uint16_t *K, const uint16_t *V, const float *dd,\n"
    "                                                const uint16_t *dO, const float *lse, uint16_t *dKV, int S, int T, float scale,\n"
    "                                                evtc_att_lay lq, evtc_att_lay lk, evtc_att_lay lv, evtc_att_lay ld,\n"
    "                                                evtc_att_lay lg, float *dqacc) {\n"
    "  constexpr int D = 64, BR = 64 * NWG, NT = 128 * NWG;\n"
    "  uint16_t *sk = evtc_awg_smem(), *sv = sk + BR * D, *stage = sv + BR * D;   /* stage b < QS: sq, sd (64 rows each) */\n"
    "  uint16_t *sds = stage + QS * 2 * 64 * D;     /* DQ: each warpgroup's dS^T (64 keys x 64 queries) */\n"
    "  float *slse = (float *)(sds + (DQ ? BR * D : 0)), *sdd = slse + QS * 64;\n"
    "  const int kblocks = (T + BR - 1) / BR, wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;\n"
    "  const int64_t bh = blockIdx.x / kblocks;\n"
    "  const int k0 = (int)(blockIdx.x % kblocks) * BR, off = T - S;\n"
    "  const float sl2 = scale * EVTC_ATT_LOG2E;\n"
    "  const int first = CAUSAL ? max(0, k0 - off) / 64 : 0, qblocks = (S + 63) / 64;\n"
    "  K += evtc_att_base(lk, bh) + k0 * lk.sr;\n"
    "  V += evtc_att_base(lv, bh) + k0 * lv.sr;\n"
    "  Q += evtc_att_base(lq, bh);\n"
    "  dO += evtc_att_base(ld, bh);\n"
    "  lse += bh * S;\n"
    "  dd += bh * qblocks * 64;\n"
    "  evtc_att_load<D, BR, NT>(sk, K, T - k0, lk.sr);\n"
    "  evtc_att_load<D, BR, NT>(sv, V, T - k0, lv.sr);\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < QS - 1; i++) {     /* QS - 1 query tiles in flight, one cp.async group each (empty past S) */\n"
    "    uint16_t *nq = stage + i * 2 * 64 * D;\n"
    "    if (first + i < qblocks)\n"
    "      evtc_awg_qtile<NT>(nq, nq + 64 * D, slse + i * 64, sdd + i * 64, Q, dO, lse, dd, (first + i) * 64, S, lq.sr, ld.sr);\n"
    "    else\n"
    "      evtc_cp_commit();\n"
    "  }\n"
    "  const int t = k0 + wg * 64 + warp * 16 + (lane >> 2);\n"
    "  const uint32_t ak = evtc_att_saddr(sk + wg * 64 * D), av = evtc_att_saddr(sv + wg * 64 * D);\n"
    "  /* descriptors made once, each k16 step an addition (EVTC_AWG_STEP): dS^T's tile stays put too */\n"
    "  const unsigned long long kk0 = EVTC_AWG_KMAJ(ak), kv0 = EVTC_AWG_KMAJ(av), mk0 = EVTC_AWG_MNMAJ(ak);\n"
    "  const unsigned long long ms0 = EVTC_AWG_MNMAJ(evtc_att_saddr(sds + wg * 64 * D));\n"
    "  float dk[8][4], dv[8][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++)\n"
    "#pragma unroll\n"
    "    for (int e = 0; e < 4; e++) dk[i][e] = dv[i][e] = 0.0f;\n"
    "  for (int ib = first, b = 0; ib < qblocks; ib++, b = b == QS - 1 ? 0 : b + 1) {\n"
    "    const int s0 = ib * 64;\n"
    "    uint16_t *sq = stage + b * 2 * 64 * D, *sd = sq + 64 * D;\n"
    "    const float *bl = slse + b * 64, *bd = sdd + b * 64;\n"
    "    evtc_cp_wait<QS - 2>();     /* tile ib's group is done (the later ones may not be) */\n"
    "    __syncthreads();\n"
    "    {     /* tile ib + QS - 1 into the buffer of tile ib - 1, which every thread is past (an empty group past S) */\n"
    "      const int nb = b == 0 ? QS - 1 : b - 1;\n"
    "      uint16_t *nq = stage + nb * 2 * 64 * D;\n"
    "      if (ib + QS - 1 < qblocks)\n"
    "        evtc_awg_qtile<NT>(nq, nq + 64 * D, slse + nb * 64, sdd + nb * 64, Q, dO, lse, dd, s0 + (QS - 1) * 64, S, lq.sr,\n"
    "                           ld.sr);\n"
    "      else\n"
    "        evtc_cp_commit();\n"
    "    }\n"
    "    const uint32_t aq = evtc_att_saddr(sq), ad = evtc_att_saddr(sd);\n"
    "    const unsigned long long kq = EVTC_AWG_KMAJ(aq), kd = EVTC_AWG_KMAJ(ad), mq = EVTC_AWG_MNMAJ(aq), md = EVTC_AWG_MNMAJ(ad);\n"
    "    float p[8][4], dp[8][4];\n"
    "    evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) {\n"
    "      evtc_awg_ss_n64<BF>(p, EVTC_AWG_STEP(kk0, kk * 32), EVTC_AWG_STEP(kq, kk * 32), kk);\n"
    "      evtc_awg_ss_n64<BF>(dp, EVTC_AWG_STEP(kv0, kk * 32), EVTC_AWG_STEP(kd, kk * 32), kk);\n"
    "    }\n"
    "    evtc_wgmma_commit();\n"
    "    evtc_wgmma_wait<0>();\n"
    "    evtc_awg_pin<8>(p);\n"
    "    evtc_awg_pin<8>(dp);\n"
    "    const bool diag = CAUSAL && k0 + BR - 1 > s0 + off;\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++) {\n"
    "        const int sc = nt * 8 + 2 * (lane & 3) + (e & 1), tt = t + 8 * (e >> 1);\n"
    "        p[nt][e] = diag && tt > s0 + sc + off ? 0.0f : evtc_awg_ex2(fmaf(p[nt][e], sl2, -bl[sc] * EVTC_ATT_LOG2E));\n"
    "        dp[nt][e] = p[nt][e] * (dp[nt][e] - bd[sc]);\n"
    "      }\n"
    "    uint32_t ap[4][4], as[4][4];\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) {\n"
    "      evtc_awg_afrag<BF>(ap[kk], p, kk);\n"
    "      evtc_awg_afrag<BF>(as[kk], dp, kk);\n"
    "    }\n"
    "    if (DQ) {     /* dS^T into the warpgroup's tile (the previous tile's dq products were waited for), for the async\n"
    "                     proxy: stmatrix step kk stores the four 8 x 8 blocks of as[kk] (the A-fragment layout), lane l\n"
    "                     giving the address of row l % 8 of block l / 8 (8 rows down for odd blocks, 8 columns right for\n"
    "                     the last two), a swizzled 16-byte chunk */\n"
    "      const int sr = warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1), sc = lane >> 4;\n"
    "      const uint16_t *srow = sds + wg * 64 * D + sr * D;\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < 4; kk++)\n"
    "        asm volatile(\"stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\\n\"\n"
    "                     ::\"r\"(evtc_att_saddr(srow + (((2 * kk + sc) ^ (sr & 7)) << 3))), \"r\"(as[kk][0]), \"r\"(as[kk][1]),\n"
    "                     \"r\"(as[kk][2]), \"r\"(as[kk][3]) : \"memory\");\n"
    "      asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n"
    "      if (NWG == 1 || wg == 0) asm volatile(\"bar.sync 1, 128;\\n\" ::: \"memory\");     /* the warpgroup's tile written */\n"
    "      else asm volatile(\"bar.sync 2, 128;\\n\" ::: \"memory\");\n"
    "    }\n"
    "    float dq[DQ ? 8 : 1][4];\n"
    "    evtc_wgmma_fence();\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) {\n"
    "      evtc_awg_rs_n64t<BF>(dv, ap[kk], EVTC_AWG_STEP(md, kk * 2048));\n"
    "      evtc_awg_rs_n64t<BF>(dk, as[kk], EVTC_AWG_STEP(mq, kk * 2048));\n"
    "    }\n"
    "    if (DQ) {     /* dq = dS K over the warpgroup's 64 keys */\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < 4; kk++) evtc_awg_ss_n64tt<BF>(dq, EVTC_AWG_STEP(ms0, kk * 2048), EVTC_AWG_STEP(mk0, kk * 2048), kk);\n"
    "    }\n"
    "    evtc_wgmma_commit();\n"
    "    evtc_wgmma_wait<0>();\n"
    "    evtc_awg_pin<8>(dv);\n"
    "    evtc_awg_pin<8>(dk);\n"
    "    if (DQ) {\n"
    "      evtc_awg_pin<8>(dq);\n"
    "      float *g = dqacc + ((bh * qblocks + ib) * 1024 + (threadIdx.x & 127)) * 4;\n"
    "#pragma unroll\n"
    "      for (int j = 0; j < 8; j++)\n"
    "        asm volatile(\"red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\\n\" ::\"l\"(g + 512 * j), \"f\"(dq[j][0]), \"f\"(dq[j][1]),\n"
    "                     \"f\"(dq[j][2]), \"f\"(dq[j][3]) : \"memory\");\n"
    "    }\n"
    "  }\n"
    "  uint16_t *out = dKV + evtc_att_base(lg, bh) + k0 * lg.sr;\n"
    "  evtc_att_store<BF, D>(out, dk, t - k0, T - k0, lg.sr, scale, scale);\n"
    "  evtc_att_store<BF, D>(out + lg.c2, dv, t - k0, T - k0, lg.sr, 1.0f, 1.0f);\n"
    "}\n";

void evtc_cuda_emit_attention_wg_lib(evtc_sb *b) {
  evtc_cuda_emit_sm90_helpers(b);
  evtc_sb_printf(b, "#ifndef EVTC_ATTN_WG_LIB\n#define EVTC_ATTN_WG_LIB\n");
  emit_wgmma(b, 64, false, false);
  emit_wgmma(b, 64, false, true);
  emit_wgmma(b, 128, false, false);
  emit_wgmma(b, 64, true, true);
  emit_wgmma(b, 64, true, false);
  evtc_sb_printf(b, "%s#endif\n", attention_wg_kernels);
}
