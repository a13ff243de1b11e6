/* gpu_graph_bench.c -- what replaying a program's launches as one CUDA graph saves (runtime/program_replay.c).
 *
 * Two workloads, each built twice on the CUDA backend: with EVTC_CUDA_GRAPH=0 (every run launches its kernels one
 * by one) and with graph replay (the default: the second run is captured, the later ones replay the graph):
 *   chain  N one-node kernels on f32[1024] (evtc_plan_single): tanh, and a dropout every 8th node, so the step
 *          matters -- launch overhead alone
 *   block  the dropout + residual + layernorm + GEMM + cross-entropy block of test_gpu_kernels.c (f32[64,1024]),
 *          trained with AdamW, under the built-in greedy plan
 * Both programs of a workload get the same leaves and run the same steps in turn: 3 warm-ups, then 50 timed ones,
 * each measured on the host around evtc_program_run (launches + one wait for the GPU + the error-flag read); the
 * graph outputs must agree bit for bit after every step (the training block's updates copied back in both).
 * Prints, per workload: kernels per run, the median ms each way, the microseconds saved per kernel, PASS or FAIL.
 * Without a GPU it says so and exits 77.
 *
 *   cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/gpu_graph_bench.c build/libevtc.a \
 *      $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o gpu_graph_bench
 *   ./gpu_graph_bench [N]        (N: the chain's length, default 1000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "kernel/kernel.h"
#include "runtime/program.h"

#include "../tests/dropout_block.h"     /* the training block test_gpu_kernels.c checks */

enum { WARM = 3, TIMED = 50 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static char *chain_text(int n) {
  size_t cap = 128 + 96 * (size_t)n, len = 0;
  char *t = malloc(cap);
  len += (size_t)snprintf(t + len, cap - len, "graph chain {\n  %%x0 = input() : f32[1024]\n");
  for (int i = 1; i <= n; i++) {
    if (i % 8 == 0)
      len += (size_t)snprintf(t + len, cap - len, "  %%x%d = dropout(%%x%d) {p=0.1, seed=%d} : f32[1024]\n", i, i - 1, i);
    else len += (size_t)snprintf(t + len, cap - len, "  %%x%d = tanh(%%x%d) : f32[1024]\n", i, i - 1);
  }
  snprintf(t + len, cap - len, "  output %%x%d\n}\n", n);
  return t;
}

/* The program of g (plan: NULL for the greedy one) with EVTC_CUDA_GRAPH=value, or NULL after a message. */
static evtc_program *build(const evtc_graph *g, const int32_t *plan, int nk, const evtc_backend *be, const char *value) {
  setenv("EVTC_CUDA_GRAPH", value, 1);
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, plan, nk, be, NULL, &d);
  unsetenv("EVTC_CUDA_GRAPH");
  if (!p) fprintf(stderr, "gpu_graph_bench: %s (EVTC_CUDA_GRAPH=%s): %s\n", g->name, value, d.msg);
  return p;
}

/* Leaves of g from a fixed LCG: floats in [-1, 1], integers in [0, 10). */
static void fill(const evtc_graph *g, evtc_program *const *ps, int n_ps) {
  uint64_t rng = 12345;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    double *v = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
    for (int64_t e = 0; e < numel; e++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      double u = (double)(rng >> 11) * 0x1p-53;
      v[e] = evtc_dtype_is_int(n->type.dtype) ? (double)(int)(u * 10) : strstr(n->name, ".v") ? u : 2 * u - 1;
    }
    for (int k = 0; k < n_ps; k++) evtc_program_set(ps[k], n, v);
    free(v);
  }
}

/* Whether every graph output agrees bit for bit between a and b. */
static bool same_outputs(const evtc_graph *g, const evtc_program *a, const evtc_program *b) {
  bool same = true;
  for (int k = 0; k < g->n_outputs && same; k++) {
    const evtc_node *n = g->outputs[k].node;
    int64_t numel = evtc_type_numel(&n->type);
    size_t bytes = sizeof(double) * (size_t)(numel > 0 ? numel : 1);
    double *x = malloc(bytes), *y = malloc(bytes);
    same = evtc_program_get(a, n, x) && evtc_program_get(b, n, y) && memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
  }
  return same;
}

/* Times the two programs of g step after step; prints the workload's line.  Returns whether it passed. */
static bool bench(const char *name, const evtc_graph *g, const int32_t *plan, int nk, const evtc_backend *be) {
  evtc_program *ps[2] = {build(g, plan, nk, be, "0"), build(g, plan, nk, be, "1")};
  bool ok = ps[0] && ps[1];
  double t[2][TIMED];
  if (ok) fill(g, ps, 2);
  for (int s = 0; ok && s < WARM + TIMED; s++) {
    for (int k = 0; k < 2 && ok; k++) {
      evtc_diag d = {0};
      double t0 = now_ms();
      ok = evtc_program_run(ps[k], (uint64_t)s, &d) == EVTC_OK;
      if (s >= WARM) t[k][s - WARM] = now_ms() - t0;
      if (!ok) fprintf(stderr, "gpu_graph_bench: %s step %d: %s\n", name, s, d.msg);
    }
    if (ok && !same_outputs(g, ps[0], ps[1])) {
      fprintf(stderr, "gpu_graph_bench: %s step %d: the replayed outputs differ from the one-by-one ones\n", name, s);
      ok = false;
    }
    for (int k = 0; k < 2 && ok; k++) evtc_program_update(ps[k]);
  }
  if (ok) {
    evtc_program_stats st = evtc_program_get_stats(ps[1]);
    qsort(t[0], TIMED, sizeof t[0][0], cmp_double);
    qsort(t[1], TIMED, sizeof t[1][0], cmp_double);
    double plain = t[0][TIMED / 2], replay = t[1][TIMED / 2];
    ok = st.graph && st.graph_captures == 1;
    printf("%-6s %5d kernels: one by one %.3f ms, replayed %.3f ms, %.2f us saved per kernel, graph %s  %s\n", name,
           st.kernels, plain, replay, 1e3 * (plain - replay) / st.kernels, st.graph ? "replayed" : st.no_graph,
           ok ? "PASS" : "FAIL");
  }
  evtc_program_free(ps[0]);
  evtc_program_free(ps[1]);
  return ok;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: %s [N >= 1]\n", argv[0]);
    return 2;
  }
  evtc_diag d = {0};
  const evtc_backend *be = evtc_backend_cuda(&d);
  if (!be) {
    printf("SKIPPED: %s\n", d.msg);
    return 77;
  }
  char err[512];
  char *text = chain_text(n);
  evtc_graph *chain = evtc_graph_parse_string(text, "chain", err, sizeof err);
  free(text);
  evtc_graph *fwd = evtc_graph_parse_string(block_text, "block", err, sizeof err);
  evtc_optim_config adamw = evtc_optim_default(EVTC_OPTIM_ADAMW);
  evtc_graph *block = fwd ? evtc_autodiff(fwd, NULL, 0, &adamw, &d) : NULL;
  if (!chain || !block) {
    fprintf(stderr, "gpu_graph_bench: %s%s\n", err, d.msg);
    return 1;
  }
  int nk = 0;
  int32_t *plan = evtc_plan_single(chain, &nk);
  bool ok = bench("chain", chain, plan, nk, be);
  ok = bench("block", block, NULL, 0, be) && ok;
  free(plan);
  evtc_graph_free(chain);
  evtc_graph_free(block);
  evtc_graph_free(fwd);
  return ok ? 0 : 1;
}
