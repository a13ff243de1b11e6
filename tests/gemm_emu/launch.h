/* launch.h -- runs a kernel of the emulated GEMM module (after it in the translation unit that
 * tests/test_gemm_emu_slow.py builds into a shared library): the CTAs of the grid one after another, each
 * `threads` POSIX threads over fresh shared memory, with the fixed parameters of cuLaunchKernel's
 * params[] (the three tensor maps, the output pointer, the dims).  gemm_emu.c calls it through dlsym. */
#include <vector>

typedef void (*emu_gemm_kernel)(evtc_tmap, evtc_tmap, evtc_tmap, void *, evtc_gemm_dims);
static emu_gemm_kernel emu_kernel;
static void **emu_params;

static void *emu_gemm_thread(void *arg) {
  threadIdx.x = (unsigned)((uintptr_t)arg & 0xFFFFu);
  blockIdx.x = (unsigned)((uintptr_t)arg >> 16);
  emu_kernel(*(const evtc_tmap *)emu_params[0], *(const evtc_tmap *)emu_params[1], *(const evtc_tmap *)emu_params[2],
             *(void *const *)emu_params[3], *(const evtc_gemm_dims *)emu_params[4]);
  return nullptr;
}

/* The launch: 0, or -1 with a message when the shape does not fit the emulation. */
extern "C" int emu_gemm_launch(void *kernel, unsigned grid, unsigned threads, unsigned smem, void **params) {
  if (threads % 128 || threads > 384) {
    fprintf(stderr, "gemm emulation: %u threads a block (128, 256 or 384 only)\n", threads);
    return -1;
  }
  emu_kernel = (emu_gemm_kernel)kernel;
  emu_params = params;
  gridDim = emu_dim3{grid, 1, 1};
  blockDim = emu_dim3{threads, 1, 1};
  std::vector<unsigned char> mem(smem + 64);
  for (unsigned b = 0; b < grid; b++) {
    memset(mem.data(), 0xAB, mem.size());
    emu_smem_base = mem.data();   /* an offset from here is a shared address; the module's own starts 16 bytes in */
    emu_mbars.clear();
    emu_named_init();
    pthread_barrier_init(&emu_block_bar, nullptr, threads);
    for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_init(&emu_warp_bar[w], nullptr, 32);
    std::vector<pthread_t> th(threads);
    for (unsigned t = 0; t < threads; t++) pthread_create(&th[t], nullptr, emu_gemm_thread, (void *)(uintptr_t)(b << 16 | t));
    for (unsigned t = 0; t < threads; t++) pthread_join(th[t], nullptr);
    pthread_barrier_destroy(&emu_block_bar);
    for (unsigned w = 0; w < threads / 32; w++) pthread_barrier_destroy(&emu_warp_bar[w]);
  }
  return 0;
}
