/* test_cuda_runtime.c -- the CUDA runtime layer: dlopen'ed driver, NVRTC
 * with its disk cache, device arena, launches and events.
 *
 * Without NVRTC or a GPU the parts that need them are skipped; with NVRTC
 * alone (a build machine) compilation, the cache and compile errors are
 * still checked.  Without a GPU the test prints "SKIPPED: ..." and exits
 * 77, which CTest reports as a skip (tests/CMakeLists.txt).  On a GPU it
 * runs elementwise kernels (y = gelu(x)*a + b and y = x*a + b, each in a
 * grid-stride and a one-tile-per-block schedule) and a row softmax (one
 * warp per row, 16-byte accesses, warp shuffles) on fresh random inputs
 * with NaN-poisoned outputs, compares them with float64 references, checks
 * the error reports of a missing kernel, a bad launch and a full arena, that
 * a dependent launch (programmatic stream serialization) waits for the
 * kernel ahead of it, one by one and in a CUDA graph, and
 * times the kernels and a device-to-device copy with events (median of 50
 * after 5 warm-ups), printing a table of achieved bandwidth last
 * (bench/gpu_runtime.sh runs it on the GPU machine).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_device.h"
#include "check.h"

#define NAN_BITS 0x7fc00000u

/* y = gelu(x)*a + b, 16-byte accesses, in two schedules: "stride" (a
 * grid-stride loop over 8 blocks per SM, 4 float4 loads in flight per
 * thread) and "tile" (one 2048-float4 tile per 256-thread block, 8 loads in
 * flight per thread).  The same loops with GELU off (y = x*a + b) separate
 * the memory path from the arithmetic. */
static const char elementwise_src[] =
    "#define TILE_THREADS 256\n"
    "#define TILE_LOADS 8\n"
    "template <bool GELU> __device__ __forceinline__ float4 apply(float4 v, float a, float b) {\n"
    "  float e[4] = {v.x, v.y, v.z, v.w};\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < 4; j++) {\n"
    "    float g = GELU ? 0.5f * e[j] * (1.0f + erff(e[j] * 0.70710678118654752f)) : e[j];\n"
    "    e[j] = g * a + b;\n"
    "  }\n"
    "  return make_float4(e[0], e[1], e[2], e[3]);\n"
    "}\n"
    "template <bool GELU> __device__ __forceinline__ void\n"
    "stride_loop(const float4 *__restrict__ x4, float4 *__restrict__ y4, float a, float b, long long n4) {\n"
    "  long long stride = (long long)gridDim.x * blockDim.x;\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  for (; i + 3 * stride < n4; i += 4 * stride) {\n"
    "    float4 v[4];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 4; k++) v[k] = x4[i + k * stride];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < 4; k++) y4[i + k * stride] = apply<GELU>(v[k], a, b);\n"
    "  }\n"
    "  for (; i < n4; i += stride) y4[i] = apply<GELU>(x4[i], a, b);\n"
    "}\n"
    "template <bool GELU> __device__ __forceinline__ void\n"
    "tile(const float4 *__restrict__ x4, float4 *__restrict__ y4, float a, float b, long long n4) {\n"
    "  long long i = (long long)blockIdx.x * (TILE_THREADS * TILE_LOADS) + threadIdx.x;\n"
    "  if (i + (TILE_LOADS - 1) * TILE_THREADS < n4) {\n"
    "    float4 v[TILE_LOADS];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < TILE_LOADS; k++) v[k] = x4[i + k * TILE_THREADS];\n"
    "#pragma unroll\n"
    "    for (int k = 0; k < TILE_LOADS; k++) y4[i + k * TILE_THREADS] = apply<GELU>(v[k], a, b);\n"
    "  } else {\n"
    "    for (int k = 0; k < TILE_LOADS; k++)\n"
    "      if (i + k * TILE_THREADS < n4) y4[i + k * TILE_THREADS] = apply<GELU>(x4[i + k * TILE_THREADS], a, b);\n"
    "  }\n"
    "}\n"
    "template <bool GELU, bool TILE> __device__ __forceinline__ void\n"
    "elementwise(const float *__restrict__ x, float *__restrict__ y, float a, float b, long long n) {\n"
    "  long long n4 = n / 4;\n"
    "  if (TILE) tile<GELU>((const float4 *)x, (float4 *)y, a, b, n4);\n"
    "  else stride_loop<GELU>((const float4 *)x, (float4 *)y, a, b, n4);\n"
    "  long long t = n4 * 4 + (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (t < n) {  /* the last n % 4 elements */\n"
    "    float4 v = apply<GELU>(make_float4(x[t], 0.0f, 0.0f, 0.0f), a, b);\n"
    "    y[t] = v.x;\n"
    "  }\n"
    "}\n"
    "#define KERNEL(name, gelu, tile)                                                                   \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(256)                                                \\\n"
    "  name(const float *__restrict__ x, float *__restrict__ y, float a, float b, long long n) {         \\\n"
    "    elementwise<gelu, tile>(x, y, a, b, n);                                                         \\\n"
    "  }\n"
    "KERNEL(gelu_tile, true, true)\n"
    "KERNEL(gelu_stride, true, false)\n"
    "KERNEL(affine_tile, false, true)\n"
    "KERNEL(affine_stride, false, false)\n";

typedef struct elementwise_variant {
  const char *kernel, *label;
  bool gelu, tile;
} elementwise_variant;

static const elementwise_variant variants[] = {
    {"gelu_tile", "gelu tile", true, true},
    {"gelu_stride", "gelu stride", true, false},
    {"affine_tile", "x*a+b tile", false, true},
    {"affine_stride", "x*a+b stride", false, false},
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

/* One warp per row of COLS floats (COLS % 4 == 0), 8 rows per block; the
 * row stays in registers between the max, sum and scale steps. */
static const char softmax_fmt[] =
    "#define COLS %d\n"
    "#define V ((COLS / 4 + 31) / 32)\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "softmax_rows(const float *__restrict__ x, float *__restrict__ y, int rows) {\n"
    "  int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;\n"
    "  if (row >= rows) return;\n"
    "  const float4 *xr = (const float4 *)(x + (size_t)row * COLS);\n"
    "  float4 *yr = (float4 *)(y + (size_t)row * COLS);\n"
    "  float4 v[V];\n"
    "  float m = __int_as_float(0xff800000);\n"
    "#pragma unroll\n"
    "  for (int k = 0; k < V; k++) {\n"
    "    int c = lane + 32 * k;\n"
    "    if (c < COLS / 4) {\n"
    "      v[k] = xr[c];\n"
    "      m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));\n"
    "    }\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));\n"
    "  float s = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int k = 0; k < V; k++) {\n"
    "    if (lane + 32 * k < COLS / 4) {\n"
    "      v[k] = make_float4(expf(v[k].x - m), expf(v[k].y - m), expf(v[k].z - m), expf(v[k].w - m));\n"
    "      s += (v[k].x + v[k].y) + (v[k].z + v[k].w);\n"
    "    }\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);\n"
    "  float inv = 1.0f / s;\n"
    "#pragma unroll\n"
    "  for (int k = 0; k < V; k++) {\n"
    "    int c = lane + 32 * k;\n"
    "    if (c < COLS / 4) yr[c] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);\n"
    "  }\n"
    "}\n";

static const char broken_src[] =
    "extern \"C\" __global__ void broken_kernel(float *y) {\n"
    "  y[threadIdx.x] = not_declared_anywhere * 2.0f;\n"
    "}\n";

static uint64_t rng_state;

static double uniform(double lo, double hi) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return lo + (hi - lo) * (double)(z >> 11) * 0x1p-53;
}

static void remove_tree(const char *path) {
  DIR *dir = opendir(path);
  if (dir) {
    struct dirent *e;
    while ((e = readdir(dir))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      remove_tree(sub);
    }
    closedir(dir);
    rmdir(path);
  } else {
    unlink(path);
  }
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Compilation, cache hits and compile errors: needs NVRTC only. */
/* A dependent launch (evtc_cuda_kernel.dependent: programmatic stream serialization): dep_produce lets its
 * dependent launch as its blocks start, then spends about 10 us before it writes buf; dep_check, launched
 * dependent on it, waits (griddepcontrol.wait) and counts the elements of buf that are not this round's. */
static const char dependent_src[] =
    "extern \"C\" __global__ void dep_produce(float *buf, int n, int round) {\n"
    "  asm volatile(\"griddepcontrol.launch_dependents;\");\n"
    "  long long t0 = clock64();\n"
    "  while (clock64() - t0 < 20000) {}\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) buf[i] = (float)(i + round);\n"
    "}\n"
    "extern \"C\" __global__ void dep_check(const float *buf, int n, int round, int *bad) {\n"
    "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "  int miss = 0;\n"
    "  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) miss += buf[i] != (float)(i + round);\n"
    "  if (miss) atomicAdd(bad, miss);\n"
    "}\n";

static void test_compile(const char *arch) {
  evtc_diag d = {0};
  evtc_cuda_cubin a, b, c;
  CHECK(evtc_cuda_compile(elementwise_src, "elementwise", arch, NULL, 0, &a, &d) == EVTC_OK, "compile: %s", d.msg);
  CHECK(!a.cache_hit && a.size > 4 && !memcmp(a.data, "\177ELF", 4), "first compile is a fresh ELF CUBIN");
  CHECK(evtc_cuda_compile(elementwise_src, "elementwise", arch, NULL, 0, &b, &d) == EVTC_OK, "recompile: %s", d.msg);
  CHECK(b.cache_hit && b.size == a.size && !memcmp(a.data, b.data, a.size), "second compile hits the disk cache");
  CHECK(a.path && b.path && !strcmp(a.path, b.path) && file_exists(a.path), "one cache entry");
  const char *opt = "-DEVTC_UNUSED=1";
  CHECK(evtc_cuda_compile(elementwise_src, "elementwise", arch, &opt, 1, &c, &d) == EVTC_OK, "compile: %s", d.msg);
  CHECK(!c.cache_hit && strcmp(c.path, a.path), "other options, other cache entry");
  evtc_cuda_cubin_free(&a);
  evtc_cuda_cubin_free(&b);
  evtc_cuda_cubin_free(&c);
  if (strncmp(arch, "sm_9", 4) == 0 || strncmp(arch, "sm_1", 4) == 0) {
    CHECK(evtc_cuda_compile(dependent_src, "dependent", arch, NULL, 0, &a, &d) == EVTC_OK, "compile: %s", d.msg);
    evtc_cuda_cubin_free(&a);
  }

  evtc_diag_clear(&d);
  evtc_cuda_cubin e;
  evtc_status s = evtc_cuda_compile(broken_src, "broken_kernel", arch, NULL, 0, &e, &d);
  CHECK(s == EVTC_ERR_INVALID, "broken source: status %d", (int)s);
  CHECK(strstr(d.msg, "kernel broken_kernel") && strstr(d.msg, "not_declared_anywhere"),
        "error names the kernel and quotes NVRTC's log: %s", d.msg);
  const char *src = strstr(d.msg, "(source ");
  char cu[4096] = "";
  if (src) sscanf(src + 8, "%4095[^,]", cu);
  CHECK(cu[0] && strstr(cu, ".cu") && file_exists(cu), "the source named in the error exists: %s", cu);
  CHECK(e.data == NULL && e.path == NULL, "nothing handed out on failure");
  printf("compile error, as reported: %.200s...\n", d.msg);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median milliseconds of `runs` launches (after 5 warm-ups) of k, or of a
 * device-to-device copy of copy_bytes when k is NULL. */
static float time_median(evtc_cuda_device *dev, evtc_cuda_kernel *k, const unsigned grid[3], void **params,
                         CUdeviceptr dst, CUdeviceptr src, size_t copy_bytes, int runs, evtc_diag *d) {
  static const unsigned block[3] = {256, 1, 1};
  CUevent start = NULL, end = NULL;
  float *ms = calloc((size_t)runs, sizeof *ms), med = -1.0f;
  bool ok = evtc_cuda_event_new(dev, &start, d) == EVTC_OK && evtc_cuda_event_new(dev, &end, d) == EVTC_OK;
  for (int i = -5; ok && i < runs; i++) {
    ok = evtc_cuda_event_record(dev, start, d) == EVTC_OK &&
         (k ? evtc_cuda_launch(dev, k, grid, block, 0, params, d) : evtc_cuda_copy_dtod(dev, dst, src, copy_bytes, d)) ==
             EVTC_OK &&
         evtc_cuda_event_record(dev, end, d) == EVTC_OK;
    if (ok && i >= 0) ok = evtc_cuda_event_ms(dev, start, end, &ms[i], d) == EVTC_OK;
  }
  if (ok) {
    qsort(ms, (size_t)runs, sizeof *ms, cmp_float);
    med = ms[runs / 2];
  }
  evtc_cuda_event_free(dev, start);
  evtc_cuda_event_free(dev, end);
  free(ms);
  return med;
}

/* Compares out with ref: every element finite and within rtol*|ref| + atol. */
static void check_close(const char *what, const float *out, const double *ref, size_t n, double rtol, double atol) {
  size_t bad = 0, first_bad = 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)out[i] - ref[i]);
    if (!isfinite(out[i]) || e > rtol * fabs(ref[i]) + atol) {
      if (!bad) first_bad = i;
      bad++;
    }
    num += e * e;
    den += ref[i] * ref[i];
  }
  double rel = sqrt(num / den);
  CHECK(bad == 0, "%s: %zu of %zu elements off, first [%zu] = %.9g vs %.9g", what, bad, n, first_bad,
        (double)out[first_bad], ref[first_bad]);
  CHECK(rel < 1e-6, "%s: relative L2 error %.3g", what, rel);
  printf("%s: %zu elements, relative L2 error %.3g\n", what, n, rel);
}

typedef struct bench_row {
  const char *name;
  char shape[32];
  float ms;
  double bytes; /* minimal bytes moved: inputs read once, outputs written once */
} bench_row;

/* Runs kernel k of variant v over n elements in x, y (arena buffers)
 * against float64; when row is non-NULL also times it. */
static void run_elementwise(evtc_cuda_device *dev, evtc_cuda_kernel *k, const elementwise_variant *v, CUdeviceptr x,
                            CUdeviceptr y, long long n, bench_row *row, evtc_diag *d) {
  float *hx = malloc((size_t)n * sizeof *hx), *hy = malloc((size_t)n * sizeof *hy);
  double *ref = malloc((size_t)n * sizeof *ref);
  float a = (float)uniform(0.5, 2.0), b = (float)uniform(-1.0, 1.0);
  for (long long i = 0; i < n; i++) hx[i] = (float)uniform(-6.0, 6.0);
  for (long long i = 0; i < n; i++)
    ref[i] = (v->gelu ? 0.5 * hx[i] * (1.0 + erf(hx[i] / sqrt(2.0))) : (double)hx[i]) * (double)a + (double)b;
  long long tiles = (n / 4 + 2047) / 2048;
  unsigned grid[3] = {v->tile ? (unsigned)(tiles ? tiles : 1) : (unsigned)dev->sm_count * 8, 1, 1};
  unsigned block[3] = {256, 1, 1};
  void *params[] = {&x, &y, &a, &b, &n};
  CHECK(evtc_cuda_copy_htod(dev, x, hx, (size_t)n * 4, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_fill32(dev, y, NAN_BITS, (size_t)n, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_launch(dev, k, grid, block, 0, params, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_copy_dtoh(dev, hy, y, (size_t)n * 4, d) == EVTC_OK, "%s", d->msg);
  char what[64];
  snprintf(what, sizeof what, "%s n=%lld", k->name, n);
  check_close(what, hy, ref, (size_t)n, 2e-6, 1e-6 * (fabs((double)b) + fabs((double)a) * 6.0));
  if (row) {
    row->name = v->label;
    snprintf(row->shape, sizeof row->shape, "%lld", n);
    row->ms = time_median(dev, k, grid, params, 0, 0, 0, 50, d);
    row->bytes = 8.0 * (double)n;
  }
  free(hx);
  free(hy);
  free(ref);
}

/* Row softmax of rows x cols (cols % 4 == 0) against float64; times it when row is non-NULL. */
static void run_softmax(evtc_cuda_device *dev, CUdeviceptr x, CUdeviceptr y, int rows, int cols, bench_row *row,
                        evtc_diag *d) {
  char src[sizeof softmax_fmt + 32];
  snprintf(src, sizeof src, softmax_fmt, cols);
  evtc_cuda_cubin cubin;
  CUmodule mod = NULL;
  evtc_cuda_kernel k;
  if (evtc_cuda_compile(src, "softmax_rows", dev->arch, NULL, 0, &cubin, d) != EVTC_OK) {
    CHECK(0, "%s", d->msg);
    return;
  }
  CHECK(evtc_cuda_module_load(dev, &cubin, "softmax_rows", &mod, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_kernel_get(dev, mod, "softmax_rows", &k, d) == EVTC_OK, "%s", d->msg);
  size_t n = (size_t)rows * (size_t)cols;
  float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
  double *ref = malloc(n * sizeof *ref);
  for (size_t i = 0; i < n; i++) hx[i] = (float)uniform(-8.0, 8.0);
  for (int r = 0; r < rows; r++) {
    const float *xr = hx + (size_t)r * cols;
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; c++) m = fmax(m, xr[c]);
    for (int c = 0; c < cols; c++) s += exp(xr[c] - m);
    for (int c = 0; c < cols; c++) ref[(size_t)r * cols + c] = exp(xr[c] - m) / s;
  }
  unsigned grid[3] = {(unsigned)((rows + 7) / 8), 1, 1}, block[3] = {256, 1, 1};
  void *params[] = {&x, &y, &rows};
  CHECK(evtc_cuda_copy_htod(dev, x, hx, n * 4, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_fill32(dev, y, NAN_BITS, n, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_launch(dev, &k, grid, block, 0, params, d) == EVTC_OK, "%s", d->msg);
  CHECK(evtc_cuda_copy_dtoh(dev, hy, y, n * 4, d) == EVTC_OK, "%s", d->msg);
  char what[64];
  snprintf(what, sizeof what, "softmax_rows %dx%d", rows, cols);
  check_close(what, hy, ref, n, 1e-5, 1e-12);
  if (row) {
    row->name = "softmax rows";
    snprintf(row->shape, sizeof row->shape, "%dx%d", rows, cols);
    row->ms = time_median(dev, &k, grid, params, 0, 0, 0, 50, d);
    row->bytes = 8.0 * (double)n;
  }
  free(hx);
  free(hy);
  free(ref);
  evtc_cuda_module_unload(dev, mod);
  evtc_cuda_cubin_free(&cubin);
}

/* Error reports name the kernel or call (kernel lookup, a bad launch, a full arena). */
static void test_errors(evtc_cuda_device *dev, CUmodule mod, evtc_cuda_kernel *k, evtc_cuda_arena *arena) {
  evtc_diag d = {0};
  evtc_cuda_kernel none;
  CHECK(evtc_cuda_kernel_get(dev, mod, "no_such_kernel", &none, &d) == EVTC_ERR_RUNTIME, "missing kernel");
  CHECK(strstr(d.msg, "CUDA error in cuModuleGetFunction (kernel no_such_kernel): CUDA_ERROR_") == d.msg,
        "lookup error: %s", d.msg);
  printf("lookup error, as reported: %s\n", d.msg);
  evtc_diag_clear(&d);
  unsigned grid[3] = {1, 1, 1}, block[3] = {4096, 1, 1};
  CUdeviceptr p = 0;
  long long n = 0;
  float a = 1, b = 0;
  void *params[] = {&p, &p, &a, &b, &n};
  CHECK(evtc_cuda_launch(dev, k, grid, block, 0, params, &d) == EVTC_ERR_RUNTIME, "oversized block");
  CHECK(strstr(d.msg, "CUDA error in kernel gelu_tile: CUDA_ERROR_") == d.msg, "launch error: %s", d.msg);
  printf("launch error, as reported: %s\n", d.msg);
  evtc_diag_clear(&d);
  CHECK(evtc_cuda_arena_alloc(arena, arena->size, 256, &p, &d) == EVTC_ERR_RUNTIME &&
            strstr(d.msg, "device arena exhausted"),
        "arena overflow: %s", d.msg);
}

/* The GPU part: properties, kernels against float64, error reports, timings. */
/* dep_produce then dep_check for `rounds` rounds (round numbers first, first + 1, ...) on dev's stream. */
static void queue_dependent_rounds(evtc_cuda_device *dev, evtc_cuda_kernel *produce, evtc_cuda_kernel *check,
                                   CUdeviceptr buf, CUdeviceptr bad, int n, int first, int rounds, evtc_diag *d) {
  unsigned grid[3] = {(unsigned)dev->sm_count * 2, 1, 1}, block[3] = {256, 1, 1};
  for (int r = first; r < first + rounds && d->status == EVTC_OK; r++) {
    void *pp[] = {&buf, &n, &r}, *pc[] = {&buf, &n, &r, &bad};
    if (evtc_cuda_launch(dev, produce, grid, block, 0, pp, d) == EVTC_OK) evtc_cuda_launch(dev, check, grid, block, 0, pc, d);
  }
}

/* 200 rounds launched one by one, then 10 captured in a CUDA graph and replayed 20 times, over buf (2^22 floats at
 * least): dep_check never sees an element of buf that dep_produce has not written yet. */
static void test_dependent_launch(evtc_cuda_device *dev, CUdeviceptr buf, evtc_cuda_arena *arena) {
  evtc_diag d = {0};
  const int n = 1 << 22;
  evtc_cuda_cubin cubin = {0};
  CUmodule mod = NULL;
  evtc_cuda_kernel produce, check;
  CUdeviceptr bad;
  CUgraphExec exec = NULL;
  int host_bad = -1;
  if (evtc_cuda_compile(dependent_src, "dependent", dev->arch, NULL, 0, &cubin, &d) ||
      evtc_cuda_module_load(dev, &cubin, "dependent", &mod, &d) || evtc_cuda_kernel_get(dev, mod, "dep_produce", &produce, &d) ||
      evtc_cuda_kernel_get(dev, mod, "dep_check", &check, &d) || evtc_cuda_arena_alloc(arena, 256, 256, &bad, &d) || evtc_cuda_fill32(dev, bad, 0, 1, &d))
    goto out;
  check.dependent = true;
  queue_dependent_rounds(dev, &produce, &check, buf, bad, n, 1, 200, &d);
  if (d.status || evtc_cuda_copy_dtoh(dev, &host_bad, bad, 4, &d)) goto out;
  CHECK(host_bad == 0, "dependent launches, one by one: %d elements read before they were written", host_bad);
  if (evtc_cuda_capture_begin(dev, &d)) goto out;
  queue_dependent_rounds(dev, &produce, &check, buf, bad, n, 1000, 10, &d);
  evtc_diag dc = {0};
  evtc_cuda_capture_end(dev, &exec, &dc);
  if (d.status == EVTC_OK) d = dc;
  for (int i = 0; i < 20 && d.status == EVTC_OK; i++)
    if (evtc_cuda_fill32(dev, buf, NAN_BITS, (size_t)n, &d) == EVTC_OK) evtc_cuda_graph_launch(dev, exec, &d);
  if (d.status || evtc_cuda_copy_dtoh(dev, &host_bad, bad, 4, &d)) goto out;
  CHECK(host_bad == 0, "dependent launches in a CUDA graph: %d elements read before they were written", host_bad);
  printf("dependent launches: 200 rounds one by one and 20 replays of 10 in a graph, every element read after its write\n");
out:
  CHECK(d.status == EVTC_OK, "dependent launches: %s", d.msg);
  evtc_cuda_graph_free(dev, exec);
  evtc_cuda_module_unload(dev, mod);
  evtc_cuda_cubin_free(&cubin);
}

static void test_device(evtc_cuda_device *dev) {
  evtc_diag d = {0};
  printf("device %d: %s, sm_%d%d (NVRTC target %s), %d SMs, %d KiB shared/block opt-in, %d MiB L2, %.1f GiB, "
         "driver %d\n",
         dev->ordinal, dev->name, dev->cc_major, dev->cc_minor, dev->arch, dev->sm_count,
         dev->smem_per_block_optin / 1024, dev->l2_bytes >> 20, (double)dev->total_mem / (1 << 30),
         dev->driver_version);
  CHECK(dev->sm_count > 0 && dev->l2_bytes > 0 && dev->smem_per_block_optin >= 48 * 1024, "device properties");

  const evtc_cuda_cublaslt *lt = evtc_cuda_cublaslt_get(&d);
  CHECK(lt != NULL, "cuBLASLt: %s", d.msg);
  if (lt) {
    cublasLtHandle_t h = NULL;
    CHECK(lt->cublasLtCreate(&h) == 0 && h, "cublasLtCreate");
    if (h) lt->cublasLtDestroy(h);
    printf("cuBLASLt %zu from %s\n", lt->cublasLtGetVersion(), lt->path);
  }

  const size_t copy_bytes = (size_t)1 << 30;
  const long long n_check = 10000003, n_time = 1ll << 26;
  const int sm_rows = 65536, sm_cols = 1024;
  evtc_cuda_arena arena;
  if (evtc_cuda_arena_init(&arena, dev, 2 * copy_bytes + 4 * (size_t)n_time * 4 + (1 << 20), &d) != EVTC_OK) {
    CHECK(0, "%s", d.msg);
    return;
  }
  CUdeviceptr cx, cy, x, y, sx, sy;
  CHECK(evtc_cuda_arena_alloc(&arena, copy_bytes, 256, &cx, &d) == EVTC_OK &&
            evtc_cuda_arena_alloc(&arena, copy_bytes, 256, &cy, &d) == EVTC_OK &&
            evtc_cuda_arena_alloc(&arena, (size_t)n_time * 4, 256, &x, &d) == EVTC_OK &&
            evtc_cuda_arena_alloc(&arena, (size_t)n_time * 4, 256, &y, &d) == EVTC_OK &&
            evtc_cuda_arena_alloc(&arena, (size_t)sm_rows * sm_cols * 4, 256, &sx, &d) == EVTC_OK &&
            evtc_cuda_arena_alloc(&arena, (size_t)sm_rows * sm_cols * 4, 256, &sy, &d) == EVTC_OK,
        "arena: %s", d.msg);

  evtc_cuda_cubin cubin;
  CUmodule mod = NULL;
  evtc_cuda_kernel ew[N_VARIANTS];
  enum { N_ROWS = 2 + N_VARIANTS };
  bench_row rows[N_ROWS] = {{"copy DtoD", "1 GiB", -1, 2.0 * (double)copy_bytes}};
  bool loaded = evtc_cuda_compile(elementwise_src, "elementwise", dev->arch, NULL, 0, &cubin, &d) == EVTC_OK &&
                evtc_cuda_module_load(dev, &cubin, "elementwise", &mod, &d) == EVTC_OK;
  for (int i = 0; loaded && i < N_VARIANTS; i++)
    loaded = evtc_cuda_kernel_get(dev, mod, variants[i].kernel, &ew[i], &d) == EVTC_OK;
  if (loaded) {
    CHECK(evtc_cuda_fill32(dev, cx, 0x3f800000u, copy_bytes / 4, &d) == EVTC_OK, "%s", d.msg);
    rows[0].ms = time_median(dev, NULL, NULL, NULL, cy, cx, copy_bytes, 20, &d);
    for (int i = 0; i < N_VARIANTS; i++) {
      run_elementwise(dev, &ew[i], &variants[i], x, y, n_check, NULL, &d);
      run_elementwise(dev, &ew[i], &variants[i], x, y, n_time, &rows[1 + i], &d);
    }
    run_softmax(dev, sx, sy, 4099, 1000, NULL, &d);
    run_softmax(dev, sx, sy, sm_rows, sm_cols, &rows[1 + N_VARIANTS], &d);
    test_errors(dev, mod, &ew[0], &arena);
    if (dev->cc_major >= 9) test_dependent_launch(dev, x, &arena);   /* griddepcontrol: sm_90 and later */
  }
  CHECK(d.status == EVTC_OK, "%s", d.msg);
  evtc_cuda_module_unload(dev, mod);
  evtc_cuda_cubin_free(&cubin);
  evtc_cuda_arena_free(&arena);

  double ceiling = rows[0].ms > 0 ? rows[0].bytes / (rows[0].ms * 1e-3) / 1e9 : 0;
  printf("\n%-14s %-12s %10s %9s %8s\n", "kernel", "shape", "median ms", "GB/s", "of copy");
  for (int i = 0; i < N_ROWS; i++) {
    double gbs = rows[i].ms > 0 ? rows[i].bytes / (rows[i].ms * 1e-3) / 1e9 : 0;
    printf("%-14s %-12s %10.4f %9.1f %7.1f%%\n", rows[i].name, rows[i].shape, rows[i].ms, gbs,
           ceiling > 0 ? 100.0 * gbs / ceiling : 0.0);
  }
}

int main(int argc, char **argv) {
  rng_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  printf("seed %llu\n", (unsigned long long)rng_state);
  char cache[] = "/tmp/evtc-cuda-test-XXXXXX";
  CHECK(mkdtemp(cache) != NULL, "mkdtemp");
  setenv("XDG_CACHE_HOME", cache, 1);

  evtc_diag d = {0};
  evtc_cuda_device dev;
  evtc_status s = evtc_cuda_device_open(&dev, 0, &d);
  CHECK(s == EVTC_OK || (s == EVTC_ERR_UNSUPPORTED && !strncmp(d.msg, "no CUDA ", 8)),
        "no GPU is a clean EVTC_ERR_UNSUPPORTED: %d %s", (int)s, d.msg);
  char why[1024];
  snprintf(why, sizeof why, "%s", d.msg);

  evtc_diag_clear(&d);
  const evtc_cuda_nvrtc *nv = evtc_cuda_nvrtc_get(&d);
  if (nv) {
    printf("NVRTC %d.%d from %s\n", nv->major, nv->minor, nv->path);
    test_compile(s == EVTC_OK ? dev.arch : "sm_90a");
  } else {
    CHECK(d.status == EVTC_ERR_UNSUPPORTED, "missing NVRTC is EVTC_ERR_UNSUPPORTED");
    printf("NVRTC checks skipped: %s\n", d.msg);
  }
  if (s == EVTC_OK) {
    test_device(&dev);
    evtc_cuda_device_close(&dev);
  }
  remove_tree(cache);
  if (s != EVTC_OK) {
    if (!strncmp(why, "no CUDA device", 14)) printf("SKIPPED: %s\n", why);
    else printf("SKIPPED: no CUDA device (%s)\n", why);
    int rc = check_summary();
    return rc ? rc : 77;
  }
  return check_summary();
}
