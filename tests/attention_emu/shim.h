/* shim.h -- the CUDA primitives of evtc's attention library
 * (src/backend/cuda/cuda_emit_attention.c), emulated on the CPU for
 * tests/test_attention_emu_slow.py.
 *
 * A block is NT POSIX threads (threadIdx.x = 0..NT-1) sharing one buffer as
 * shared memory; __syncthreads is a barrier of the block, warp-collective
 * instructions (shuffles, ldmatrix, mma.sync m16n8k16) post each lane's
 * operands to a per-warp slot array, meet at a barrier of the warp, compute
 * each lane's result from everyone's operands by the PTX ISA's fragment
 * layouts, and meet again.  cp.async copies at once (its waits are no-ops),
 * so a missing wait would go unnoticed here, but a write into a tile that
 * another warp still reads would show.  bf16 / f16 round to nearest even.
 * The test substitutes these for the library's asm helpers.
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
using std::max;
using std::min;
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
struct emu_idx { unsigned x; };
struct uint4 { uint32_t x, y, z, w; };
thread_local emu_idx threadIdx, blockIdx;
/* The thread's block's rank in its cluster (0 outside one; the GEMM's 2x1 clusters run their two blocks at once),
 * which picks its shared memory, block barrier and warps' slots below. */
thread_local unsigned emu_cta;
static unsigned char *emu_smem_of[2];
#define emu_smem_base emu_smem_of[emu_cta]
static pthread_barrier_t emu_block_bars[2], emu_warp_bar[24];   /* up to 384 threads a block: the GEMM's three warpgroups */
#define emu_block_bar emu_block_bars[emu_cta]
static pthread_barrier_t emu_named_bar[4];   /* bar.sync id, 128 of the wgmma library: ids 1 and 2, a warpgroup each */
struct emu_slot { uint64_t u[8]; float f; };
static emu_slot emu_slots[24][32];
static inline int emu_lane() { return threadIdx.x & 31; }
/* the warp's slots and barrier among those of the blocks running at once */
static inline int emu_warp() { return (int)(threadIdx.x >> 5) + 12 * (int)emu_cta; }
static inline void emu_wbar() { pthread_barrier_wait(&emu_warp_bar[emu_warp()]); }
static inline void __syncthreads() { pthread_barrier_wait(&emu_block_bar); }
static inline float __shfl_xor_sync(unsigned, float v, int o) {
  emu_slots[emu_warp()][emu_lane()].f = v;
  emu_wbar();
  float r = emu_slots[emu_warp()][emu_lane() ^ o].f;
  emu_wbar();
  return r;
}
static inline float emu_bf2f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t emu_f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static inline float emu_h2f(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static inline uint16_t emu_f2h(float f) {
  _Float16 x = (_Float16)f;
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}
#ifndef EMU_WHOLE_MODULE   /* the GEMM's emulation runs a whole module, whose prelude has its own (shim_gemm.h) */
/* the module prelude's conversions */
static inline float evtc_bf2f(uint16_t h) { return emu_bf2f(h); }
static inline float evtc_h2f(uint16_t h) { return emu_h2f(h); }
#endif

/* ---- the library's asm helpers ---- */
__device__ __forceinline__ uint32_t evtc_att_saddr(const void *p) {
  return (uint32_t)((const unsigned char *)p - emu_smem_base);
}
static inline uint16_t emu_sh(uint32_t a) {
  uint16_t h;
  memcpy(&h, emu_smem_base + a, 2);
  return h;
}
/* ldmatrix .x4: lane 8 j + r gives the address of row r of matrix j; lane l gets, of matrix j, row l / 4,
   columns 2 (l % 4) and + 1 (.trans: rows 2 (l % 4) and + 1 of column l / 4) */
__device__ __forceinline__ void evtc_ldsm(uint32_t *r, uint32_t addr) {
  int w = emu_warp(), l = emu_lane();
  emu_slots[w][l].u[0] = addr;
  emu_wbar();
  for (int j = 0; j < 4; j++) {
    uint32_t row = (uint32_t)emu_slots[w][8 * j + l / 4].u[0];
    r[j] = (uint32_t)emu_sh(row + 4 * (l % 4)) | ((uint32_t)emu_sh(row + 4 * (l % 4) + 2) << 16);
  }
  emu_wbar();
}
__device__ __forceinline__ void evtc_ldsm_t(uint32_t *r, uint32_t addr) {
  int w = emu_warp(), l = emu_lane();
  emu_slots[w][l].u[0] = addr;
  emu_wbar();
  for (int j = 0; j < 4; j++) {
    uint32_t r0 = (uint32_t)emu_slots[w][8 * j + 2 * (l % 4)].u[0], r1 = (uint32_t)emu_slots[w][8 * j + 2 * (l % 4) + 1].u[0];
    r[j] = (uint32_t)emu_sh(r0 + 2 * (l / 4)) | ((uint32_t)emu_sh(r1 + 2 * (l / 4)) << 16);
  }
  emu_wbar();
}
template <bool BF> static inline float emu_half(uint32_t reg, int hi) {
  uint16_t h = (uint16_t)(hi ? reg >> 16 : reg);
  return BF ? emu_bf2f(h) : emu_h2f(h);
}
/* mma.sync m16n8k16 row.col, f32 accumulate: A row g (+8 for regs 1, 3), columns 2t.. (+8 for regs 2, 3);
   B column g, rows 2t.. (+8 for reg 1); C row g (+8 for c2, c3), columns 2t, 2t + 1 (g = lane / 4, t = lane % 4) */
template <bool BF> __device__ __forceinline__ void evtc_mma16816(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
  int w = emu_warp(), l = emu_lane();
  for (int i = 0; i < 4; i++) emu_slots[w][l].u[i] = a[i];
  emu_slots[w][l].u[4] = b0;
  emu_slots[w][l].u[5] = b1;
  emu_wbar();
  int g = l >> 2, t = l & 3;
  for (int e = 0; e < 4; e++) {
    int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    float acc = 0;
    for (int k = 0; k < 16; k++) {
      int al = (row % 8) * 4 + (k % 8) / 2, areg = (row >= 8) + 2 * (k >= 8);
      int bl = col * 4 + (k % 8) / 2, breg = 4 + (k >= 8);
      acc += emu_half<BF>((uint32_t)emu_slots[w][al].u[areg], k & 1) *
             emu_half<BF>((uint32_t)emu_slots[w][bl].u[breg], k & 1);
    }
    c[e] += acc;
  }
  emu_wbar();
}
template <bool BF> __device__ __forceinline__ uint32_t evtc_att_pack(float lo, float hi) {
  uint16_t a = BF ? emu_f2bf(lo) : emu_f2h(lo), b = BF ? emu_f2bf(hi) : emu_f2h(hi);
  return (uint32_t)a | ((uint32_t)b << 16);
}
__device__ __forceinline__ void evtc_cp_commit() {}
template <int N> __device__ __forceinline__ void evtc_cp_wait() {}
/* cp.async of 16 bytes (zero-filled when src_bytes is 0) */
static inline void emu_cp_async(uint32_t dst, const void *src, int src_bytes) {
  if (src_bytes) memcpy(emu_smem_base + dst, src, 16);
  else memset(emu_smem_base + dst, 0, 16);
}
/* red.global.add.f32: a compare-and-swap loop (the block's threads run as host threads) */
__device__ __forceinline__ void evtc_att_red(float *g, float v) {
  uint32_t *w = (uint32_t *)g, old = __atomic_load_n(w, __ATOMIC_RELAXED), next;
  do {
    float f;
    memcpy(&f, &old, 4);
    f += v;
    memcpy(&next, &f, 4);
  } while (!__atomic_compare_exchange_n(w, &old, next, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}
