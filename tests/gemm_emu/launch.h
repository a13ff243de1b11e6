/* launch.h -- runs a kernel of the emulated GEMM module (after it in the translation unit that
 * tests/test_gemm_emu_slow.py builds into a shared library): the CTAs of the grid one after another (the two of
 * a 2x1 cluster at once), each `threads` POSIX threads over fresh shared memory, the parameters as
 * cuLaunchKernel's params[] holds them.
 * gemm_emu.c calls these through dlsym, and the prelude's 1 + erf of a bf16 value (emu_erf1p_bf16) to check its
 * polynomial. */
#include <functional>
#include <vector>

static std::function<void()> emu_call;   /* the kernel with its parameters */

static unsigned emu_cluster;   /* CTAs a cluster: 1 or 2 */

static void *emu_kernel_thread(void *arg) {
  threadIdx.x = (unsigned)((uintptr_t)arg & 0xFFFFu);
  blockIdx.x = (unsigned)((uintptr_t)arg >> 16);
  emu_cta = blockIdx.x % emu_cluster;
  emu_call();
  return nullptr;
}

static int emu_grid(unsigned grid, unsigned threads, unsigned smem, unsigned cluster) {
  if (threads % 128 || threads > 384) {
    fprintf(stderr, "gemm emulation: %u threads a block (128, 256 or 384 only)\n", threads);
    return -1;
  }
  if ((cluster != 1 && cluster != 2) || grid % cluster) {
    fprintf(stderr, "gemm emulation: a grid of %u in clusters of %u\n", grid, cluster);
    return -1;
  }
  gridDim = emu_dim3{grid, 1, 1};
  blockDim = emu_dim3{threads, 1, 1};
  emu_cluster = cluster;
  std::vector<unsigned char> mem[2];
  for (unsigned r = 0; r < cluster; r++) mem[r].resize(smem + 16);   /* the module's own starts at most 16 bytes in */
  for (unsigned b = 0; b < grid; b += cluster) {
    emu_mbars.clear();
    pthread_barrier_init(&emu_cluster_bar, nullptr, cluster * threads);
    for (unsigned r = 0; r < cluster; r++) {
      memset(mem[r].data(), 0xAB, mem[r].size());
      emu_smem_of[r] = mem[r].data();   /* an offset from here is a shared address of CTA r of the cluster */
      emu_named_init(r);
      pthread_barrier_init(&emu_block_bars[r], nullptr, threads);
      for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_init(&emu_warp_bar[12 * r + w], nullptr, 32);
    }
    std::vector<pthread_t> th(cluster * threads);
    for (unsigned r = 0; r < cluster; r++)
      for (unsigned t = 0; t < threads; t++)
        pthread_create(&th[r * threads + t], nullptr, emu_kernel_thread, (void *)(uintptr_t)((b + r) << 16 | t));
    for (pthread_t &x : th) pthread_join(x, nullptr);
    pthread_barrier_destroy(&emu_cluster_bar);
    for (unsigned r = 0; r < cluster; r++) {
      pthread_barrier_destroy(&emu_block_bars[r]);
      for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_destroy(&emu_warp_bar[12 * r + w]);
    }
  }
  return 0;
}

template <typename T> static T emu_param(void *const *params, int i) { return *(const T *)params[i]; }

/* A GEMM kernel in clusters of `cluster` CTAs (1 or 2): the five fixed parameters (tensor maps of A, B, D, the
 * output, the dims), then with n_params 9 the visitor epilogue's (evtc_params P, stepp, err, scratch) and with 10
 * its TMA tile's map.  0, or -1 with a message. */
extern "C" int emu_gemm_launch(void *kernel, int n_params, unsigned grid, unsigned threads, unsigned smem,
                               unsigned cluster, void **params) {
  typedef void (*builtin)(evtc_tmap, evtc_tmap, evtc_tmap, void *, evtc_gemm_dims);
  typedef void (*visitor)(evtc_tmap, evtc_tmap, evtc_tmap, void *, evtc_gemm_dims, evtc_params, const uint64_t *, int *,
                          void *);
  typedef void (*visitor_x)(evtc_tmap, evtc_tmap, evtc_tmap, void *, evtc_gemm_dims, evtc_params, const uint64_t *,
                            int *, void *, evtc_tmap);
  void **p = params;
  if (n_params == 5)
    emu_call = [=]() {
      ((builtin)kernel)(emu_param<evtc_tmap>(p, 0), emu_param<evtc_tmap>(p, 1), emu_param<evtc_tmap>(p, 2),
                        emu_param<void *>(p, 3), emu_param<evtc_gemm_dims>(p, 4));
    };
  else if (n_params == 9)
    emu_call = [=]() {
      ((visitor)kernel)(emu_param<evtc_tmap>(p, 0), emu_param<evtc_tmap>(p, 1), emu_param<evtc_tmap>(p, 2),
                        emu_param<void *>(p, 3), emu_param<evtc_gemm_dims>(p, 4), emu_param<evtc_params>(p, 5),
                        emu_param<const uint64_t *>(p, 6), emu_param<int *>(p, 7), emu_param<void *>(p, 8));
    };
  else if (n_params == 10)
    emu_call = [=]() {
      ((visitor_x)kernel)(emu_param<evtc_tmap>(p, 0), emu_param<evtc_tmap>(p, 1), emu_param<evtc_tmap>(p, 2),
                          emu_param<void *>(p, 3), emu_param<evtc_gemm_dims>(p, 4), emu_param<evtc_params>(p, 5),
                          emu_param<const uint64_t *>(p, 6), emu_param<int *>(p, 7), emu_param<void *>(p, 8),
                          emu_param<evtc_tmap>(p, 9));
    };
  else
    return -1;
  return emu_grid(grid, threads, smem, cluster);
}

/* A kernel of the backend's signature (cuda_emit.h: evtc_params P, stepp, err, scratch): a GEMM's NAME_fin. */
extern "C" int emu_kernel_launch(void *kernel, unsigned grid, unsigned threads, unsigned smem, void **params) {
  typedef void (*plain)(evtc_params, const uint64_t *, int *, void *);
  void **p = params;
  emu_call = [=]() {
    ((plain)kernel)(emu_param<evtc_params>(p, 0), emu_param<const uint64_t *>(p, 1), emu_param<int *>(p, 2),
                    emu_param<void *>(p, 3));
  };
  return emu_grid(grid, threads, smem, 1);
}

/* The CUDA prelude's 1 + erf(x) of a value stored as bf16 (its polynomial, with the exact ex2 and
 * reciprocal of shim_gemm.h where the GPU's approximations add up to 2^-22 relative). */
extern "C" float emu_erf1p_bf16(float x) { return evtc_erf1p_bf16f(x); }
