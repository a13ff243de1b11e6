/* gemm_emu.c -- evtc's sm_90a GEMM template, host side and kernels, on a CPU emulation of the GPU
 * (tests/test_gemm_emu_slow.py builds it against libevtc and runs it).
 *
 *   gemm_emu emit         the CUDA module of every case's kernel (emu0, emu1, ...: cuda_emit_gemm.c's
 *                         evtc_cuda_gemm_emit, built-in store) on stdout, for the test to turn into C++
 *   gemm_emu run LIB.so   each case through that module built into LIB.so (shim_gemm.h, launch.h):
 *                         evtc_cuda_gemm_launch_init fills the launch (grid, shared memory, tensor maps,
 *                         whether D goes through TMA stores) on an emulated driver whose
 *                         cuTensorMapEncodeTiled writes what it was given into the map (emu_tmap.h), the
 *                         library runs the grid, and every element of D is checked against a float64
 *                         product of the same 16-bit inputs; D's padding columns must keep their poison.
 * Prints one line a case and "N checks, F failed"; exits 1 on any failure.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit_gemm.h"
#include "gemm_emu/emu_tmap.h"
#include "util/diag.h"

typedef struct gemm_case {
  const char *config;          /* evtc_cuda_gemm_config_parse's format */
  evtc_cuda_gemm_variant v;
  int64_t M, N, K, batch, ldc_pad;
  int sms;                     /* the grid's SMs: fewer than the tiles, so each CTA walks several */
  const char *what;
} gemm_case;

static const gemm_case cases[] = {
    {"128x256x64 s4 c2 g8", {EVTC_BF16, EVTC_BF16, true, true}, 200, 299, 136, 1, 1, 2,
     "cooperative, edges in M, N (odd) and K; rows of 600 bytes: direct stores, the last column alone"},
    {"128x256x64 s4 c2 g8", {EVTC_BF16, EVTC_BF16, true, true}, 200, 300, 136, 1, 4, 2,
     "N 300 into rows of 608 bytes: TMA stores, direct ones for the column-edge tiles"},
    {"128x128x64 s6 c2 g8 pp", {EVTC_F16, EVTC_F32, false, false}, 130, 264, 200, 2, 8, 3,
     "pingpong, A K x M and B K x N (MN-major), two batches, f32 TMA stores"},
    {"128x128x64 s4 c1 g2", {EVTC_BF16, EVTC_F16, true, false}, 257, 136, 72, 1, 0, 2,
     "one consumer warpgroup of two atoms, B K x N, f16 TMA stores"},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

static evtc_cuda_gemm_config config_of(const gemm_case *c) {
  evtc_cuda_gemm_config cfg;
  char why[256];
  if (!evtc_cuda_gemm_config_parse(c->config, &cfg) || !evtc_cuda_gemm_config_check(&cfg, &c->v, why, sizeof why)) {
    fprintf(stderr, "gemm_emu: config '%s' does not build: %s\n", c->config, why);
    exit(2);
  }
  return cfg;
}

static int emit(void) {
  evtc_sb b = {0};
  for (int i = 0; i < N_CASES; i++) {
    const evtc_cuda_gemm_config cfg = config_of(&cases[i]);
    char name[16];
    snprintf(name, sizeof name, "emu%d", i);
    evtc_cuda_gemm_emit(&b, name, &cfg, &cases[i].v, NULL);
  }
  fputs(b.s, stdout);
  free(b.s);
  return 0;
}

/* The emulated driver's tensor map encoder: what the GEMM asked for, into the map's opaque bytes. */
static CUresult encode_tiled(void *map, int type, unsigned rank, void *base, const unsigned long long *dim,
                             const unsigned long long *stride, const unsigned *box, const unsigned *estride,
                             int interleave, int swizzle, int l2, int oob) {
  (void)estride, (void)interleave, (void)l2, (void)oob;
  if (rank != 3) return 1;
  emu_tmap m = {.base = (uint64_t)(uintptr_t)base, .elem = type == 7 ? 4u : 2u, .swizzle = (uint32_t)swizzle};
  for (int i = 0; i < 3; i++) m.dim[i] = dim[i], m.box[i] = box[i];
  m.stride[0] = stride[0];
  m.stride[1] = stride[1];
  memset(map, 0, 128);
  memcpy(map, &m, sizeof m);
  return 0;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {   /* in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float from_f16(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static uint16_t to_f16(float f) {
  _Float16 x = (_Float16)f;   /* round to nearest even */
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}

/* A random operand of `rows` x `cols` stored in rows of ld elements, `batch` of them `bstride` apart; its
 * values (the rounded ones) in val. */
static uint16_t *operand(evtc_dtype t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t bstride,
                         double *val) {
  uint16_t *s = calloc((size_t)(batch * bstride), 2);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < cols; c++) {
        const float x = (float)uniform();
        const uint16_t h = t == EVTC_BF16 ? to_bf16(x) : to_f16(x);
        s[b * bstride + r * ld + c] = h;
        val[(b * rows + r) * cols + c] = t == EVTC_BF16 ? from_bf16(h) : from_f16(h);
      }
  return s;
}

static int run_case(void *lib, int i, int *checks) {
  const gemm_case *c = &cases[i];
  const evtc_cuda_gemm_config cfg = config_of(c);
  const evtc_cuda_gemm_variant *v = &c->v;
  const int64_t M = c->M, N = c->N, K = c->K, B = c->batch;
  evtc_cuda_gemm_problem p = {.M = M, .N = N, .K = K, .batch = B};
  p.lda = v->a_kmajor ? K : (M + 7) / 8 * 8;
  p.ldb = v->b_kmajor ? K : (N + 7) / 8 * 8;
  p.ldc = N + c->ldc_pad;
  p.a_bstride = (v->a_kmajor ? M : K) * p.lda;
  p.b_bstride = (v->b_kmajor ? N : K) * p.ldb;
  p.c_bstride = M * p.ldc;
  double *av = malloc(sizeof(double) * (size_t)(B * M * K)), *bv = malloc(sizeof(double) * (size_t)(B * N * K));
  /* av[b][m][k] and bv[b][n][k] whatever the storage: a K x M operand is drawn as rows of k */
  double *tmp = malloc(sizeof(double) * (size_t)(B * (M > N ? M : N) * K));
  uint16_t *a = operand(v->in, v->a_kmajor ? M : K, v->a_kmajor ? K : M, p.lda, B, p.a_bstride, v->a_kmajor ? av : tmp);
  if (!v->a_kmajor)
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t m = 0; m < M; m++) av[(b * M + m) * K + k] = tmp[(b * K + k) * M + m];
  uint16_t *bm = operand(v->in, v->b_kmajor ? N : K, v->b_kmajor ? K : N, p.ldb, B, p.b_bstride, v->b_kmajor ? bv : tmp);
  if (!v->b_kmajor)
    for (int64_t b = 0; b < B; b++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) bv[(b * N + n) * K + k] = tmp[(b * K + k) * N + n];
  const size_t es = evtc_dtype_size(v->out), d_bytes = (size_t)(B * p.c_bstride) * es;
  unsigned char *d = malloc(d_bytes);
  memset(d, 0x7E, d_bytes);   /* a NaN in f16, bf16 and f32 */

  evtc_cuda_driver drv = {0};
  drv.cuTensorMapEncodeTiled = encode_tiled;
  evtc_cuda_gemm_launch L;
  evtc_diag diag = {0};
  if (evtc_cuda_gemm_launch_init(&L, &drv, &cfg, v, &p, (CUdeviceptr)(uintptr_t)a, (CUdeviceptr)(uintptr_t)bm,
                                 (CUdeviceptr)(uintptr_t)d, c->sms, &diag) != EVTC_OK) {
    printf("case %d (%s): launch_init: %s\n", i, c->config, diag.msg);
    return 1;
  }
  char name[16];
  snprintf(name, sizeof name, "emu%d", i);
  int (*launch)(void *, unsigned, unsigned, unsigned, void **) =
      (int (*)(void *, unsigned, unsigned, unsigned, void **))dlsym(lib, "emu_gemm_launch");
  void *kernel = dlsym(lib, name);
  if (!launch || !kernel || launch(kernel, L.grid[0], L.block[0], L.smem, L.params) != 0) {
    printf("case %d (%s): no kernel %s or launch in the library\n", i, c->config, name);
    return 1;
  }
  const double rel = v->out == EVTC_F32 ? ldexp(1, -18) : v->out == EVTC_BF16 ? ldexp(1, -8) : ldexp(1, -10);
  int bad = 0, poison = 0;
  double worst = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < p.ldc; n++) {
        const unsigned char *e = d + (size_t)((b * p.c_bstride + m * p.ldc + n) * (int64_t)es);
        if (n >= N) {   /* padding: untouched */
          for (size_t x = 0; x < es; x++) poison += e[x] != 0x7E;
          continue;
        }
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          const double t = av[(b * M + m) * K + k] * bv[(b * N + n) * K + k];
          ref += t;
          mag += fabs(t);
        }
        uint16_t h;
        float f;
        memcpy(&h, e, 2);
        memcpy(&f, e, 4);
        const double got = v->out == EVTC_F32 ? f : v->out == EVTC_BF16 ? from_bf16(h) : from_f16(h);
        const double err = fabs(got - ref), tol = rel * fabs(ref) + ldexp(mag, -18);
        if (!(err <= tol)) {
          if (bad < 4)
            printf("  case %d batch %lld D[%lld][%lld] = %g, want %g\n", i, (long long)b, (long long)m, (long long)n, got,
                   ref);
          bad++;
        }
        if (err / (tol > 0 ? tol : 1) > worst) worst = err / (tol > 0 ? tol : 1);
      }
  printf("case %d: %s, %lldx%lldx%lld x%lld, %s, grid %u, %u threads, %u B shared, %s: %d of %lld elements off, "
         "worst at %.0f%% of the tolerance, %d padding bytes written\n",
         i, c->config, (long long)M, (long long)N, (long long)K, (long long)B, c->what, L.grid[0], L.block[0], L.smem,
         L.dims.tma_store ? "TMA store" : "direct stores", bad, (long long)(B * M * N), 100 * worst, poison);
  *checks += 2;
  free(av), free(bv), free(tmp), free(a), free(bm), free(d);
  return (bad > 0) + (poison > 0);
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "emit") == 0) return emit();
  if (argc != 3 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: gemm_emu emit | gemm_emu run LIB.so\n");
    return 2;
  }
  void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "gemm_emu: %s\n", dlerror());
    return 2;
  }
  int checks = 0, failed = 0;
  for (int i = 0; i < N_CASES; i++) failed += run_case(lib, i, &checks);
  printf("%d checks, %d failed\n", checks, failed);
  return failed ? 1 : 0;
}
