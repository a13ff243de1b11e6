/* shim_wg.h -- the Hopper instructions of evtc's wgmma attention library
 * (src/backend/cuda/cuda_emit_attention_wg.c) on shim.h's CPU emulation,
 * for tests/test_attention_emu_slow.py.
 *
 * wgmma.mma_async m64nNk16 (f32 accumulators, bf16 / f16 operands) runs at
 * once where it is issued, and its fence and commit are no-ops, its wait
 * only a meeting of the warp's lanes, as cp.async's waits are no-ops in
 * shim.h: a missing wait goes unnoticed here, a wrong fragment or
 * shared-memory layout does not.  An operand in shared memory
 * is read through its matrix descriptor as the PTX ISA lays out the
 * 128-byte-swizzled canonical layouts the library uses: 8 rows of 128
 * bytes a core block, SBO bytes from one 8-row block to the next, the
 * 16-byte chunk c of byte offset o in chunk c ^ ((o >> 7) & 7) (offsets in
 * the block's shared window, 1024-byte aligned as the library aligns its
 * tiles).  K-major (the reduced index k contiguous within a row of the
 * other index) or, transposed, MN-major (k the row; LBO bytes to the next
 * 64 columns).  Each thread computes its own accumulators, the wgmma
 * layout: thread t of the warpgroup, warp w = t / 32, lane l, holds rows
 * 16 w + l / 4 (+ 8 for registers 2, 3 of each group of four) and columns
 * 8 j + 2 (l % 4) (+ 1).  An A from registers is the same layout of a k16
 * step (register pairs of 16-bit values), so a thread reads its row's
 * fragments from the other three lanes of its quad through the warp's
 * slots.  stmatrix, the named barriers of a warpgroup, the vector
 * reductions, 4-byte cp.async and ex2 are emulated alike (ldmatrix is shim.h's).
 */
#ifndef EMU_WHOLE_MODULE   /* the GEMM's emulation keeps the module's own encoder (shim_gemm.h) */
__device__ __forceinline__ unsigned long long evtc_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
#endif
__device__ __forceinline__ void evtc_wgmma_fence() {}
__device__ __forceinline__ void evtc_wgmma_commit() {}
/* wait_group is .sync.aligned: the warp's lanes meet there, as they do on the GPU, so no lane runs on past
   one still short of it (an arrive after the wait speaks for lanes that are all past their own waits) */
template <int N> __device__ __forceinline__ void evtc_wgmma_wait() { emu_wbar(); }
template <int N> __device__ __forceinline__ void evtc_awg_pin(float (*)[4]) {}
__device__ __forceinline__ float evtc_awg_ex2(float x) { return exp2f(x); }

/* The 16-bit element at byte offset o of the window, through the 128-byte swizzle. */
template <bool BF> static inline float emu_swz(uint32_t o) {
  const uint16_t h = emu_sh(o ^ (((o >> 7) & 7u) << 4));
  return BF ? emu_bf2f(h) : emu_h2f(h);
}
/* Element (i, k) of an operand through descriptor d: K-major, row i at (i / 8) SBO + (i % 8) 128, k 2 bytes
   apart; MN-major (mn), row k the same way and i 2 bytes apart, LBO per 64 columns. */
template <bool BF> static inline float emu_desc_at(unsigned long long d, bool mn, int i, int k) {
  const uint32_t start = (uint32_t)(d & 0x3FFFu) << 4, lbo = (uint32_t)((d >> 16) & 0x3FFFu) << 4,
                 sbo = (uint32_t)((d >> 32) & 0x3FFFu) << 4;
  const int row = mn ? k : i, col = mn ? i : k;
  return emu_swz<BF>(start + (uint32_t)(row / 8) * sbo + (uint32_t)(row % 8) * 128u + (uint32_t)(col / 64) * lbo +
                     (uint32_t)(col % 64) * 2u);
}
/* D (N / 8 groups of four f32) = A B (+ D when acc): A(i, k) from a(i, k), B(k, j) from b(k, j), i in 64, k in 16. */
template <int N, typename FA, typename FB> static inline void emu_wgmma(float (*d)[4], FA a, FB b, bool acc) {
  const int t = threadIdx.x & 127, w = t >> 5, l = t & 31;
  for (int j = 0; j < N / 8; j++)
    for (int e = 0; e < 4; e++) {
      const int i = 16 * w + l / 4 + 8 * (e >> 1), col = 8 * j + 2 * (l % 4) + (e & 1);
      float s = 0;
      for (int k = 0; k < 16; k++) s += a(i, k) * b(k, col);
      d[j][e] = acc ? d[j][e] + s : s;
    }
}
/* A and B from shared memory, each K-major (B(k, j) at row j) or MN-major (TA, TB: the instruction's imm-trans). */
template <bool BF, int N, bool TA, bool TB>
static inline void emu_wgmma_ss2(float (*d)[4], unsigned long long da, unsigned long long db, int acc) {
  auto a_at = [&](int i, int k) { return emu_desc_at<BF>(da, TA, i, k); };
  emu_wgmma<N>(d, a_at, [&](int k, int j) { return emu_desc_at<BF>(db, TB, j, k); }, acc != 0);
}
/* both K-major, or both MN-major (tt) */
template <bool BF, int N, bool TT>
static inline void emu_wgmma_ss(float (*d)[4], unsigned long long da, unsigned long long db, int acc) {
  emu_wgmma_ss2<BF, N, TT, TT>(d, da, db, acc);
}
/* A from registers (a k16 step's fragments), B through db: K-major, or MN-major (trans). */
template <bool BF, bool TRANS>
static inline void emu_wgmma_rs(float (*d)[4], const uint32_t *a, unsigned long long db, int acc) {
  const int wp = emu_warp(), l = emu_lane();
  for (int r = 0; r < 4; r++) emu_slots[wp][l].u[r] = a[r];
  emu_wbar();
  /* A(i, k), i a row of this warp: of lane 4 (i % 8) + (k % 8) / 2, register (i % 16 >= 8) + 2 (k >= 8) */
  auto a_at = [&](int i, int k) {
    const int lane = 4 * (i % 8) + (k % 8) / 2, reg = ((i % 16) >= 8) + 2 * (k >= 8);
    return emu_half<BF>((uint32_t)emu_slots[wp][lane].u[reg], k & 1);
  };
  emu_wgmma<64>(d, a_at, [&](int k, int j) { return emu_desc_at<BF>(db, TRANS, j, k); }, acc != 0);
  emu_wbar();
}
template <bool BF>
__device__ __forceinline__ void evtc_awg_ss_n64(float (*d)[4], unsigned long long da, unsigned long long db, int acc) {
  emu_wgmma_ss<BF, 64, false>(d, da, db, acc);
}
template <bool BF>
__device__ __forceinline__ void evtc_awg_ss_n128(float (*d)[4], unsigned long long da, unsigned long long db, int acc) {
  emu_wgmma_ss<BF, 128, false>(d, da, db, acc);
}
template <bool BF> __device__ __forceinline__ void evtc_awg_ss_n64tt(float (*d)[4], unsigned long long da,
                                                                     unsigned long long db, int acc) {
  emu_wgmma_ss<BF, 64, true>(d, da, db, acc);
}
template <bool BF>
__device__ __forceinline__ void evtc_awg_rs_n64(float (*d)[4], const uint32_t *a, unsigned long long db, int acc) {
  emu_wgmma_rs<BF, false>(d, a, db, acc);
}
template <bool BF>
__device__ __forceinline__ void evtc_awg_rs_n64t(float (*d)[4], const uint32_t *a, unsigned long long db) {
  emu_wgmma_rs<BF, true>(d, a, db, 1);
}

/* stmatrix .x4: lane 8 j + r gives the address of row r of matrix j; lane l holds, of matrix j, row l / 4,
   columns 2 (l % 4) and + 1 (register j) */
static inline void emu_stmatrix_x4(uint32_t addr, uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
  const int w = emu_warp(), l = emu_lane();
  emu_slots[w][l].u[0] = addr;
  emu_slots[w][l].u[1] = x0, emu_slots[w][l].u[2] = x1, emu_slots[w][l].u[3] = x2, emu_slots[w][l].u[4] = x3;
  emu_wbar();
  const int j = l / 8, row = l % 8;
  for (int c = 0; c < 4; c++) { /* the row's four register pairs, from lanes 4 row .. 4 row + 3 */
    const uint32_t v = (uint32_t)emu_slots[w][4 * row + c].u[1 + j];
    memcpy(emu_smem_base + (uint32_t)emu_slots[w][l].u[0] + 4 * c, &v, 4);
  }
  emu_wbar();
}
/* bar.sync id, 128 */
static inline void emu_bar_named(int id) { pthread_barrier_wait(&emu_named_bar[id]); }
/* red.global.add.v4.f32 */
static inline void emu_red_v4(float *g, float a, float b, float c, float e) {
  evtc_att_red(g, a), evtc_att_red(g + 1, b), evtc_att_red(g + 2, c), evtc_att_red(g + 3, e);
}
/* cp.async of 4 bytes (zero-filled when src_bytes is 0) */
static inline void emu_cp_async4(uint32_t dst, const void *src, int src_bytes) {
  if (src_bytes) memcpy(emu_smem_base + dst, src, 4);
  else memset(emu_smem_base + dst, 0, 4);
}
