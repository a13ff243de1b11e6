/* shim_gemm.h -- the Hopper instructions of evtc's sm_90a GEMM template
 * (src/backend/cuda/cuda_emit_gemm.c) on a CPU, for tests/test_gemm_emu_slow.py.
 *
 * A CTA is 128 (1 + consumers) POSIX threads over one buffer of shared
 * memory (tests/attention_emu/shim.h: thread indices, warp collectives,
 * 16-bit roundings), one CTA of the persistent grid after another, or the
 * two CTAs of a 2x1 cluster at once, each with its own shared memory,
 * barriers and mbarriers (emu_cta, the thread's rank).  What
 * the template adds, emulated here in place of the module's asm helpers
 * (the test rewrites the one-instruction asm of conversions and
 * approximations into calls of the functions below, then drops every
 * helper whose body still holds asm and keeps the rest, the wgmma
 * descriptor encoder and the prelude's math included):
 *   - wgmma m64nNk16 from shared memory through its descriptors, K-major
 *     or MN-major per operand (tests/attention_emu/shim_wg.h decodes the
 *     128B-swizzled layouts); it runs where it is issued, so its fence,
 *     commit and wait are no-ops;
 *   - mbarriers, by shared address: init with an arrival count, arrive,
 *     arrive.expect_tx (the transaction bytes the phase also waits for),
 *     the TMA copy's complete_tx, and try_wait.parity (true once the phase
 *     of that parity has completed: a fresh barrier is in phase 0, so
 *     parity 1 passes at once);
 *   - TMA tensor copies (a box of the map the emulated driver wrote,
 *     emu_tmap.h) between global and shared memory with the 128-byte
 *     swizzle (16-byte chunk c of each 128-byte row r at c ^ r % 8, from
 *     the shared address's own bits), zeros for a load's elements outside
 *     the tensor, a store clipped to it; both complete at once; a
 *     multicast load into every CTA of its mask, at the same offset,
 *     completing on each one's barrier;
 *   - the cluster: its rank, its barrier of every thread of both CTAs, an
 *     arrive on the partner's mbarrier (mapa + mbarrier.arrive);
 *   - named barriers with a thread count, bar.sync waiting and bar.arrive
 *     not (the warpgroups' barriers, the pingpong turns, split-K's meeting
 *     of the cooperative consumers);
 *   - split-K's workspace loads and stores and its counts' atomic adds,
 *     on host memory (CTAs run one after another, so the last unit of a
 *     tile is the last one launched).
 * A wait that nothing completes within 30 s aborts with the barrier, its
 * parity and the thread, and the state of every barrier: a hang here is a
 * protocol error in the kernel (or in this emulation).
 */
#define EMU_WHOLE_MODULE   /* the module's prelude and wgmma descriptor encoder stand, not shim.h's copies */
#include "shim.h"
#include "shim_wg.h"
#include "emu_tmap.h"

#include <cerrno>
#include <ctime>
#include <unordered_map>

#define __grid_constant__
#define __cluster_dims__(...)
#define __shared__ static   /* a NAME_fin's arrays: the block's threads share them, and blocks run one by one */
#define __align__(n) alignas(n)
struct emu_dim3 { unsigned x, y, z; };
static emu_dim3 gridDim, blockDim;

static void emu_dump_barriers();   /* below: every barrier's state, for a wait that never completed */
/* Stops the run, naming what failed and the thread; with hang, every barrier's state too. */
[[noreturn]] static void emu_fail(const char *what, unsigned a, unsigned b, bool hang = false) {
  fprintf(stderr, "gemm emulation: %s (%u, %u) in thread %u of block %u\n", what, a, b, threadIdx.x, blockIdx.x);
  if (hang) emu_dump_barriers();
  abort();
}
static void emu_deadline(timespec *t) {
  clock_gettime(CLOCK_REALTIME, t);
  t->tv_sec += 30;
}

/* ---- named barriers: bar.sync / bar.arrive id, count ---- */
struct emu_named {
  pthread_mutex_t m;
  pthread_cond_t c;
  unsigned arrived, gen, count;
};
static emu_named emu_named_bars[2][16];   /* a CTA's own: [emu_cta][id] */
static void emu_named_init(unsigned cta) {
  for (emu_named &b : emu_named_bars[cta]) {
    pthread_mutex_init(&b.m, nullptr);
    pthread_cond_init(&b.c, nullptr);
    b.arrived = b.gen = b.count = 0;
  }
}
static void emu_counted_bar(unsigned id, unsigned count, bool wait) {
  emu_named &b = emu_named_bars[emu_cta][id];
  pthread_mutex_lock(&b.m);
  if (b.arrived == 0) b.count = count;
  else if (b.count != count) emu_fail("named barrier used with two thread counts", id, count);
  const unsigned gen = b.gen;
  if (++b.arrived == count) {
    b.arrived = 0;
    b.gen++;
    pthread_cond_broadcast(&b.c);
  } else if (wait) {
    timespec t;
    emu_deadline(&t);
    while (b.gen == gen)
      if (pthread_cond_timedwait(&b.c, &b.m, &t) == ETIMEDOUT) emu_fail("named barrier never completed", id, count, true);
  }
  pthread_mutex_unlock(&b.m);
}
__device__ __forceinline__ void evtc_wg_sync(unsigned id) { emu_counted_bar(id, 128, true); }
__device__ __forceinline__ void evtc_turn_wait(unsigned id) { emu_counted_bar(id, 256, true); }
__device__ __forceinline__ void evtc_turn_pass(unsigned id) { emu_counted_bar(id, 256, false); }

/* ---- mbarriers ---- */
struct emu_mbar {
  unsigned count, pending, phase;
  long long tx;
};
static pthread_mutex_t emu_mbar_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t emu_mbar_c = PTHREAD_COND_INITIALIZER;
static std::unordered_map<uint64_t, emu_mbar> emu_mbars;   /* by CTA rank and shared address; cleared for every launch of CTAs */

static uint64_t emu_mbar_key(unsigned cta, unsigned bar) { return (uint64_t)cta << 32 | bar; }
static emu_mbar &emu_mbar_at(unsigned cta, unsigned bar) {
  auto it = emu_mbars.find(emu_mbar_key(cta, bar));
  if (it == emu_mbars.end()) emu_fail("mbarrier used before its init", bar, cta);
  return it->second;
}
/* the phase completes once every expected arrival and every transaction byte is in (the bytes may come first: a
 * partner's multicast before this CTA's expect_tx) */
static void emu_mbar_update_at(unsigned cta, unsigned bar, int arrivals, long long tx) {
  pthread_mutex_lock(&emu_mbar_m);
  emu_mbar &b = emu_mbar_at(cta, bar);
  if ((unsigned)arrivals > b.pending) emu_fail("more arrivals than the mbarrier's count", bar, b.count);
  b.pending -= (unsigned)arrivals;
  b.tx += tx;
  if (b.pending == 0 && b.tx == 0) {
    b.phase++;
    b.pending = b.count;
    pthread_cond_broadcast(&emu_mbar_c);
  }
  pthread_mutex_unlock(&emu_mbar_m);
}
static void emu_mbar_update(unsigned bar, int arrivals, long long tx) { emu_mbar_update_at(emu_cta, bar, arrivals, tx); }
__device__ __forceinline__ void evtc_mbar_init(unsigned bar, unsigned count) {
  pthread_mutex_lock(&emu_mbar_m);
  emu_mbars[emu_mbar_key(emu_cta, bar)] = emu_mbar{count, count, 0, 0};
  pthread_mutex_unlock(&emu_mbar_m);
}
__device__ __forceinline__ void evtc_mbar_arrive_cta(unsigned bar, unsigned rank) { emu_mbar_update_at(rank, bar, 1, 0); }
__device__ __forceinline__ void evtc_mbar_expect_tx(unsigned bar, unsigned bytes) { emu_mbar_update(bar, 1, bytes); }
__device__ __forceinline__ void evtc_mbar_arrive(unsigned bar) { emu_mbar_update(bar, 1, 0); }
__device__ __forceinline__ void evtc_mbar_wait(unsigned bar, unsigned parity) {
  pthread_mutex_lock(&emu_mbar_m);
  timespec t;
  emu_deadline(&t);
  while ((emu_mbar_at(emu_cta, bar).phase & 1u) == parity)
    if (pthread_cond_timedwait(&emu_mbar_c, &emu_mbar_m, &t) == ETIMEDOUT) emu_fail("mbarrier wait never completed", bar, parity, true);
  pthread_mutex_unlock(&emu_mbar_m);
}

/* The state of every mbarrier and named barrier (the CTAs' own, by rank); the named ones without their locks: the
 * run is stopping. */
static void emu_dump_barriers() {
  /* not taken: this thread holds it (an mbarrier's wait), or another does and the dump reads past it */
  const bool locked = pthread_mutex_trylock(&emu_mbar_m) == 0;
  for (const auto &kv : emu_mbars)
    fprintf(stderr, "  mbarrier %u of rank %u: count %u, %u arrivals pending, phase %u, %lld transaction bytes\n",
            (unsigned)kv.first, (unsigned)(kv.first >> 32), kv.second.count, kv.second.pending, kv.second.phase,
            kv.second.tx);
  for (unsigned r = 0; r < 2; r++)
    for (unsigned id = 0; id < 16; id++) {
      const emu_named &n = emu_named_bars[r][id];
      if (n.arrived) fprintf(stderr, "  named barrier %u of rank %u: %u of %u arrived, generation %u\n", id, r,
                             n.arrived, n.count, n.gen);
    }
  if (locked) pthread_mutex_unlock(&emu_mbar_m);
}

/* ---- TMA ---- */
/* Copies the box at (c0, c1, c2) of map between global memory and shared address sh of the CTA of rank cta; the
 * bytes of the box. */
static unsigned emu_tma_box(unsigned cta, bool load, unsigned sh, const void *map, int c0, int c1, int c2) {
  emu_tmap m;
  memcpy(&m, map, sizeof m);
  if (m.swizzle != 3 || m.box[0] * m.elem != 128) emu_fail("TMA box not 128 bytes wide with the 128B swizzle", m.swizzle, m.box[0]);
  unsigned o = sh;
  for (unsigned z = 0; z < m.box[2]; z++)
    for (unsigned y = 0; y < m.box[1]; y++)
      for (unsigned x = 0; x < m.box[0]; x++, o += m.elem) {
        const long long gx = c0 + (long long)x, gy = c1 + (long long)y, gz = c2 + (long long)z;
        const bool in = gx >= 0 && gy >= 0 && gz >= 0 && (unsigned long long)gx < m.dim[0] &&
                        (unsigned long long)gy < m.dim[1] && (unsigned long long)gz < m.dim[2];
        unsigned char *s = emu_smem_of[cta] + (o ^ (((o >> 7) & 7u) << 4));
        unsigned char *g = (unsigned char *)(uintptr_t)(m.base + gx * m.elem + gy * m.stride[0] + gz * m.stride[1]);
        if (load) {
          if (in) memcpy(s, g, m.elem);
          else memset(s, 0, m.elem);
        } else if (in) {
          memcpy(g, s, m.elem);
        }
      }
  return o - sh;
}
__device__ __forceinline__ void evtc_tma_load(unsigned dst, const void *map, unsigned bar, int c0, int c1, int c2) {
  const unsigned bytes = emu_tma_box(emu_cta, true, dst, map, c0, c1, c2);
  emu_mbar_update(bar, 0, -(long long)bytes);
}
__device__ __forceinline__ void evtc_tma_load_mc(unsigned dst, const void *map, unsigned bar, int c0, int c1, int c2,
                                                 unsigned short mask) {
  for (unsigned r = 0; r < 2; r++)
    if (mask >> r & 1u) emu_mbar_update_at(r, bar, 0, -(long long)emu_tma_box(r, true, dst, map, c0, c1, c2));
  if (mask >> 2) emu_fail("multicast to a CTA beyond a cluster of two", mask, 0);
}
__device__ __forceinline__ void evtc_tma_store(const void *map, unsigned src, int c0, int c1, int c2) {
  emu_tma_box(emu_cta, false, src, map, c0, c1, c2);
}

/* ---- the cluster: rank, barrier of every thread of its CTAs ---- */
static pthread_barrier_t emu_cluster_bar;
__device__ __forceinline__ unsigned evtc_cluster_rank() { return emu_cta; }
__device__ __forceinline__ void evtc_cluster_sync() { pthread_barrier_wait(&emu_cluster_bar); }
__device__ __forceinline__ void evtc_bulk_wait_read1() {}
__device__ __forceinline__ void evtc_bulk_wait_read0() {}
__device__ __forceinline__ void evtc_bulk_wait_all() {}
__device__ __forceinline__ void evtc_fence_smem_async() {}

/* ---- the CUDA prelude's built-ins (cuda_emit_common.c) and its one-instruction asm, which the test rewrites into
   calls of these: cvt roundings, ex2 / rcp (.approx.ftz: subnormals flushed), tanh (exact here) ---- */
template <typename To, typename From> static inline To emu_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
  To r;
  memcpy(&r, &v, sizeof r);
  return r;
}
static inline float __int_as_float(int i) { return emu_bits<float>(i); }
static inline float __uint_as_float(unsigned u) { return emu_bits<float>(u); }
static inline unsigned __float_as_uint(float f) { return emu_bits<unsigned>(f); }
static inline float emu_ftz(float x) { return std::fabs(x) < 1.17549435e-38f ? 0.0f * x : x; }
static inline float __nvvm_ex2_approx_ftz_f(float x) { return emu_ftz(exp2f(emu_ftz(x))); }
static inline float emu_rcp_approx_ftz(float x) { return emu_ftz(1.0f / emu_ftz(x)); }
static inline float __double2float_rz(double d) {
  float f = (float)d;
  if (std::fabs((double)f) > std::fabs(d)) f = nextafterf(f, 0.0f);
  return f;
}
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wbar(); }
/* Lane src's v (each lane's source lane a function of its own), and shim.h's float xor shuffle for any other
 * 4- or 8-byte value */
template <typename T> static inline T emu_shfl_from(T v, unsigned src) {
  static_assert(sizeof(T) <= 8, "a shuffle of at most 8 bytes");
  memcpy(&emu_slots[emu_warp()][emu_lane()].u[0], &v, sizeof v);
  emu_wbar();
  T r;
  memcpy(&r, &emu_slots[emu_warp()][src & 31].u[0], sizeof r);
  emu_wbar();
  return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl_from(v, emu_lane() ^ o); }
template <typename T> static inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl_from(v, (unsigned)src); }

/* ---- the sm_80 template's cp.async of up to 16 bytes (the rest zero-filled); shim.h has its ldmatrix, mma.sync and
   cp.async groups ---- */
__device__ __forceinline__ void evtc_cp16(unsigned dst, const void *src, unsigned bytes) {
  memset(emu_smem_base + dst, 0, 16);
  memcpy(emu_smem_base + dst, src, bytes);
}

/* ---- the visitor epilogue's quad exchange by stmatrix (shim_wg.h emulates it) ---- */
__device__ __forceinline__ void evtc_stsm_x4(unsigned a, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  emu_stmatrix_x4(a, r0, r1, r2, r3);
}

/* ---- split-K's workspace and counts (cuda_emit_gemm.c: evtc_split_*), the cooperative consumers' barrier ---- */
struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline void __stcg(float4 *p, float4 v) { *p = v; }
static inline float4 __ldcg(const float4 *p) { return *p; }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
__device__ __forceinline__ void evtc_consumers_sync() { emu_counted_bar(5, 256, true); }
__device__ __forceinline__ void evtc_split_order() {}   /* a compiler barrier: nothing to emulate */

/* ---- shared addresses, 16-bit stores to shared memory ---- */
__device__ __forceinline__ unsigned evtc_smem_u32(const void *p) {
  return (unsigned)((const unsigned char *)p - emu_smem_base);
}
template <bool BF> static inline uint32_t emu_pack2(float v0, float v1) {
  return (uint32_t)(BF ? emu_f2bf(v0) : emu_f2h(v0)) | (uint32_t)(BF ? emu_f2bf(v1) : emu_f2h(v1)) << 16;
}
/* The prelude's packed bf16x2 arithmetic (cuda_emit_common.c): each half computed in double and rounded once to
 * bf16 (through float rounded to odd, so the two roundings are one), as add.rn / sub.rn / mul.rn / fma.rn round
 * the exact result; tanh exact before its rounding (the hardware's is within bf16's). */
static inline uint16_t emu_d2bf(double d) {
  float f = __double2float_rz(d);
  if (f == f && (double)f != d) f = emu_bits<float>(emu_bits<uint32_t>(f) | 1u);
  return emu_f2bf(f);
}
template <typename F> static inline uint32_t emu_bf16x2(uint32_t a, uint32_t b, uint32_t c, F f) {
  const auto lo = [](uint32_t w) { return (double)emu_bits<float>(w << 16); };
  const auto hi = [](uint32_t w) { return (double)emu_bits<float>(w & 0xffff0000u); };
  return (uint32_t)emu_d2bf(f(lo(a), lo(b), lo(c))) | (uint32_t)emu_d2bf(f(hi(a), hi(b), hi(c))) << 16;
}
static inline uint32_t emu_bf16x2_add(uint32_t a, uint32_t b) {
  return emu_bf16x2(a, b, 0, [](double x, double y, double) { return x + y; });
}
static inline uint32_t emu_bf16x2_sub(uint32_t a, uint32_t b) {
  return emu_bf16x2(a, b, 0, [](double x, double y, double) { return x - y; });
}
static inline uint32_t emu_bf16x2_mul(uint32_t a, uint32_t b) {
  return emu_bf16x2(a, b, 0, [](double x, double y, double) { return x * y; });
}
static inline uint32_t emu_bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  return emu_bf16x2(a, b, c, [](double x, double y, double z) { return x * y + z; });
}
static inline uint32_t emu_bf16x2_neg(uint32_t a) { return a ^ 0x80008000u; }
static inline uint32_t emu_bf16x2_tanh(uint32_t a) {
  return emu_bf16x2(a, 0, 0, [](double x, double, double) { return std::tanh(x); });
}
__device__ __forceinline__ void evtc_sts2_f32(unsigned a, float v0, float v1) {
  memcpy(emu_smem_base + a, &v0, 4);
  memcpy(emu_smem_base + a + 4, &v1, 4);
}
__device__ __forceinline__ void evtc_sts2_bf16(unsigned a, float v0, float v1) {
  const uint32_t w = emu_pack2<true>(v0, v1);
  memcpy(emu_smem_base + a, &w, 4);
}
__device__ __forceinline__ void evtc_sts2_f16(unsigned a, float v0, float v1) {
  const uint32_t w = emu_pack2<false>(v0, v1);
  memcpy(emu_smem_base + a, &w, 4);
}

/* A kernel's NAME_mma (the test writes its calls): D (N / 2 floats a thread) += A B over one k16 step. */
template <bool BF, int N, bool TA, bool TB>
static inline void emu_gemm_mma(float (&d)[N / 2], unsigned long long da, unsigned long long db) {
  emu_wgmma_ss2<BF, N, TA, TB>(reinterpret_cast<float (*)[4]>(d), da, db, 1);
}
