/* cpu_gemm_ab.c -- builds of one CPU GEMM kernel timed against each other in one process, alternating: on a
 * virtual machine whose speed drifts by tens of percent between runs (seen here: OpenBLAS's sgemm 27 to 57 ms
 * for the same call), two cpu_bench processes run one after the other do not compare codegen changes of a few
 * percent; calls alternated within a process do.
 *
 *   cpu_gemm_ab [--bias] KERNEL.so...   (each a CPU kernel cache entry, $XDG_CACHE_HOME/evtc/evtc-*.so, of the
 *                                        4096x1024x1024 f32 matmul of bench/cpu_bench.c: k0_matmul(A, B, C), or
 *                                        with --bias its linear + bias + GELU, k0_matmul(A, B, bias, C))
 *
 * 40 rounds, each calling every kernel once in the order given and then OpenBLAS's sgemm of the same product
 * (the peer; with --bias the GEMM alone), after one warm-up call each; prints each one's minimum, first
 * quartile and median in ms.  Build: cc -O2 bench/cpu_gemm_ab.c -lopenblas -ldl; run with the OpenBLAS core type
 * bench/cpu.sh sets (OPENBLAS_CORETYPE) and OMP_WAIT_POLICY=passive.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { M = 4096, N = 1024, K = 1024, ROUNDS = 40, MAX_KERNELS = 8 };

static float *sgemm_a, *sgemm_b, *sgemm_c;

/* the peer, called as the kernels are */
static void openblas_sgemm(void *const *args, uint64_t step, int *err) {
  (void)args, (void)step, (void)err;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, sgemm_a, K, sgemm_b, N, 0.0f, sgemm_c, N);
}

typedef void (*kernel_fn)(void *const *args, uint64_t step, int *err);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int first = 1;
  const int bias = argc > 1 && strcmp(argv[1], "--bias") == 0;
  first += bias;
  const int n = argc - first;
  if (n < 1 || n > MAX_KERNELS) {
    fprintf(stderr, "usage: %s [--bias] KERNEL.so... (1 to %d)\n", argv[0], MAX_KERNELS);
    return 2;
  }
  kernel_fn fn[MAX_KERNELS + 1];
  const char *name[MAX_KERNELS + 1];
  for (int i = 0; i < n; i++) {
    name[i] = argv[first + i];
    void *h = dlopen(argv[first + i], RTLD_NOW | RTLD_LOCAL);
    fn[i] = h ? (kernel_fn)dlsym(h, "k0_matmul") : NULL;
    if (!fn[i]) {
      fprintf(stderr, "cpu_gemm_ab: %s: %s\n", argv[first + i], h ? "no k0_matmul in it" : dlerror());
      return 1;
    }
  }
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
  float *bvec = malloc(sizeof(float) * N);
  if (!a || !b || !c || !bvec) return 1;
  for (uint32_t i = 0; i < (uint32_t)M * K; i++) a[i] = (float)(i * 2654435761u % 1000u) / 1000.0f - 0.5f;
  for (uint32_t i = 0; i < (uint32_t)K * N; i++) b[i] = (float)(i * 40503u % 1000u) / 1000.0f - 0.5f;
  for (int i = 0; i < N; i++) bvec[i] = 0.1f;
  fn[n] = openblas_sgemm;
  name[n] = bias ? "OpenBLAS sgemm (the GEMM alone)" : "OpenBLAS sgemm";
  sgemm_a = a, sgemm_b = b, sgemm_c = c;
  const int runs = n + 1;
  void *plain[] = {a, b, c}, *with_bias[] = {a, b, bvec, c};
  void *const *args = bias ? with_bias : plain;
  static double t[MAX_KERNELS + 1][ROUNDS];
  int err = 0;
  for (int i = 0; i < runs; i++) fn[i](args, 0, &err);
  for (int r = 0; r < ROUNDS; r++)
    for (int i = 0; i < runs; i++) {
      const double t0 = now();
      fn[i](args, 0, &err);
      t[i][r] = now() - t0;
    }
  for (int i = 0; i < runs; i++) {
    qsort(t[i], ROUNDS, sizeof t[i][0], cmp_double);
    printf("%-60s min %7.2f  q1 %7.2f  median %7.2f ms\n", name[i], 1e3 * t[i][0], 1e3 * t[i][ROUNDS / 4],
           1e3 * t[i][ROUNDS / 2]);
  }
  return err != 0;
}
