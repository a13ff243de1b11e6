#!/bin/sh
# calibrate_cpu.sh -- measures this machine's constants for the fusion cost
# model (data/devices/cpu.txt): a STREAM-like copy, a small matmul and the
# cost of one OpenMP parallel region (the CPU backend's "launch").  The C
# program below is compiled the way the CPU backend compiles kernels
# (cc -O3 -march=native -fopenmp) and prints the "key value" lines to paste.
# Usage: tools/calibrate_cpu.sh
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/cal.c" <<'C'
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
  /* copy: 64 MiB arrays, best of 10 (bytes read + written) */
  long n = 1L << 23;
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  #pragma omp parallel for
  for (long i = 0; i < n; i++) a[i] = i, b[i] = 0;
  double best = 1e9;
  for (int r = 0; r < 10; r++) {
    double t = now();
    #pragma omp parallel for
    for (long i = 0; i < n; i++) b[i] = a[i];
    t = now() - t;
    if (t < best) best = t;
  }
  printf("copy_bw %.3g\n", 2.0 * n * sizeof(double) / best);
  /* matmul: 256^3 float, i-k-j loops (vectorisable), best of 5 */
  int m = 256;
  float *x = malloc(sizeof(float) * m * m), *y = malloc(sizeof(float) * m * m), *z = malloc(sizeof(float) * m * m);
  for (int i = 0; i < m * m; i++) x[i] = (float)(i % 7), y[i] = (float)(i % 5);
  best = 1e9;
  for (int r = 0; r < 5; r++) {
    double t = now();
    #pragma omp parallel for
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < m; j++) z[i * m + j] = 0;
      for (int k = 0; k < m; k++) {
        float s = x[i * m + k];
        for (int j = 0; j < m; j++) z[i * m + j] += s * y[k * m + j];
      }
    }
    t = now() - t;
    if (t < best) best = t;
  }
  printf("gemm_flops %.3g\n", 2.0 * m * m * m / best);
  /* vector: 16 dependent multiply-adds per element in registers, 1 Mi elements */
  long v = 1L << 20;
  best = 1e9;
  for (int r = 0; r < 10; r++) {
    double t = now();
    #pragma omp parallel for
    for (long i = 0; i < v; i++) {
      double s = a[i];
      for (int k = 0; k < 16; k++) s = s * 1.0001 + 0.5;
      b[i] = s;
    }
    t = now() - t;
    if (t < best) best = t;
  }
  printf("vector_flops %.3g\n", 32.0 * v / best);
  /* launch: an empty parallel region, mean of 10000 */
  double t = now();
  for (int r = 0; r < 10000; r++) {
    #pragma omp parallel
    { if (omp_get_thread_num() < 0) printf("x"); }
  }
  printf("launch_us %.3g\n", (now() - t) / 10000 * 1e6);
  printf("calibrated %d threads, copy 64 MiB, matmul 256^3 f32, vector 1 Mi x 16 fma f64, empty omp region"
         " (checksum %g)\n", omp_get_max_threads(), (double)z[m + 1] + b[1]);
  free(a); free(b); free(x); free(y); free(z);
  return 0;
}
C
${CC:-cc} -O3 -march=native -fopenmp -o "$dir/cal" "$dir/cal.c"
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$dir/cal"
