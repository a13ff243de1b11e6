/* cpu_bench.c -- times evtc's CPU backend, its interpreter and OpenBLAS sgemm.
 *
 *   cpu_bench SRC_DIR   prints "RESULT <workload> <impl> <ms per step>" lines
 *
 * Workloads (the same in cpu_torch.py): a training step (AdamW) of the
 * digits MLP (examples/mlp.evt, batch 32), of a 1024-wide MLP (batch 256)
 * and of the MLP block 1024->4096->1024 + LayerNorm (1024 rows); the
 * forward linear + bias + GELU 4096x1024x1024 against OpenBLAS sgemm alone,
 * and the bare matmul of the same size against sgemm.
 * Inputs are random; every run is checked finite.  Built and run by cpu.sh.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "runtime/init.h"
#include "runtime/interp.h"
#include "runtime/program.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Leaf values: random inputs (labels in [0, 10)), initialised params. */
static double **leaves(const evtc_graph *g) {
  double **v = calloc((size_t)g->n_nodes + 1, sizeof *v);
  uint64_t s = 99;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    v[i] = calloc((size_t)(numel > 0 ? numel : 1), sizeof(double));
    if (n->op != EVTC_OP_INPUT) {
      evtc_init_leaf(n, v[i], 1);
      continue;
    }
    for (int64_t e = 0; e < numel; e++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      double u = (double)(s >> 11) / 9007199254740992.0;
      v[i][e] = evtc_dtype_is_int(n->type.dtype) ? floor(u * 10) : 2 * u - 1;
    }
  }
  return v;
}

/* ms per run of g on the CPU backend (or the interpreter); min_runs runs at least, ~1 s. */
static double time_graph(const evtc_graph *g, bool interp, int max_runs) {
  double **v = leaves(g);
  evtc_diag d = {0};
  evtc_program *p = NULL;
  evtc_interp *it = NULL;
  if (interp) it = evtc_interp_new(g);
  else if (!(p = evtc_program_new(g, NULL, 0, evtc_backend_cpu(), stderr, &d))) {
    fprintf(stderr, "cpu_bench: %s\n", d.msg);
    exit(1);
  }
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (v[i]) {
      if (p) evtc_program_set(p, g->nodes[i], v[i]);
      else evtc_interp_set(it, g->nodes[i], v[i]);
    }
  int runs = 0;
  double t0 = 0, start = 0;
  for (int r = 0; r < max_runs + 1; r++) {
    if (r == 1) start = now();                         /* the first run warms up */
    if ((p ? evtc_program_run(p, (uint64_t)r, &d) : evtc_interp_run(it, (uint64_t)r, &d)) != EVTC_OK) {
      fprintf(stderr, "cpu_bench: %s\n", d.msg);
      exit(1);
    }
    if (p) evtc_program_update(p);
    if (r >= 1) runs++;
    t0 = now();
    if (r >= 3 && t0 - start > 1.0) break;
  }
  const evtc_node *out = g->loss ? g->loss : g->outputs[0].node;
  int64_t numel = evtc_type_numel(&out->type);
  double *val = malloc(sizeof(double) * (size_t)numel);
  if (p) evtc_program_get(p, out, val);
  else memcpy(val, evtc_interp_value(it, out), sizeof(double) * (size_t)numel);
  for (int64_t e = 0; e < numel; e++)
    if (!isfinite(val[e])) {
      fprintf(stderr, "cpu_bench: non-finite result\n");
      break;
    }
  free(val);
  evtc_program_free(p);
  if (it) evtc_interp_free(it);
  for (int32_t i = 0; i < g->n_nodes; i++) free(v[i]);
  free(v);
  return 1000.0 * (t0 - start) / runs;
}

static evtc_graph *joint_of(const char *text) {
  char err[512];
  evtc_graph *fwd = evtc_graph_parse_string(text, "bench", err, sizeof err);
  if (!fwd) {
    fprintf(stderr, "cpu_bench: %s\n", err);
    exit(1);
  }
  evtc_optim_config opt = evtc_optim_default(EVTC_OPTIM_ADAMW);
  evtc_diag d = {0};
  evtc_graph *j = evtc_autodiff(fwd, NULL, 0, &opt, &d);
  if (!j) {
    fprintf(stderr, "cpu_bench: %s\n", d.msg);
    exit(1);
  }
  evtc_graph_free(fwd);
  return j;
}

static void train_workload(const char *name, const char *text, int interp_runs) {
  evtc_graph *j = joint_of(text);
  printf("RESULT %s evtc-cpu %.4f\n", name, time_graph(j, false, 1000));
  if (interp_runs) printf("RESULT %s evtc-interp %.4f\n", name, time_graph(j, true, interp_runs));
  fflush(stdout);
  evtc_graph_free(j);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  s[fread(s, 1, (size_t)n, f)] = 0;
  fclose(f);
  return s;
}

static double time_sgemm(int m, int n, int k) {
  float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n),
        *c = malloc(sizeof(float) * (size_t)m * n);
  for (long i = 0; i < (long)m * k; i++) a[i] = (float)((i % 13) - 6) / 7;
  for (long i = 0; i < (long)k * n; i++) b[i] = (float)((i % 11) - 5) / 9;
  int runs = 0;
  double start = 0, t = 0;
  for (int r = 0; r < 1000; r++) {
    if (r == 1) start = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    if (r >= 1) runs++;
    t = now();
    if (r >= 3 && t - start > 1.0) break;
  }
  free(a);
  free(b);
  free(c);
  return 1000.0 * (t - start) / runs;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/mlp.evt", argv[1]);
  char *mlp = read_file(path);
  if (!mlp) return 1;
  train_workload("digits-mlp-train-b32", mlp, 20);
  free(mlp);
  train_workload("mlp1024-train-b256",
                 "graph m {\n  %x = input() : f32[256,1024]\n  %y = input() : i64[256]\n"
                 "  %w1 = param() : f32[1024,1024]\n  %b1 = param() {init=\"zeros\"} : f32[1024]\n"
                 "  %w2 = param() : f32[1024,1024]\n  %b2 = param() {init=\"zeros\"} : f32[1024]\n"
                 "  %w3 = param() : f32[1024,10]\n  %b3 = param() {init=\"zeros\"} : f32[10]\n"
                 "  %h1 = matmul(%x, %w1) : f32[256,1024]\n  %a1 = add(%h1, %b1) : f32[256,1024]\n"
                 "  %r1 = relu(%a1) : f32[256,1024]\n  %h2 = matmul(%r1, %w2) : f32[256,1024]\n"
                 "  %a2 = add(%h2, %b2) : f32[256,1024]\n  %r2 = relu(%a2) : f32[256,1024]\n"
                 "  %h3 = matmul(%r2, %w3) : f32[256,10]\n  %z = add(%h3, %b3) : f32[256,10]\n"
                 "  %loss = cross_entropy(%z, %y) : f32[]\n  output %loss\n  loss %loss\n}\n",
                 2);
  train_workload("mlp-block-ln-train-1024rows",
                 "graph b {\n  %x = input() : f32[1024,1024]\n  %w1 = param() : f32[1024,4096]\n"
                 "  %b1 = param() {init=\"zeros\"} : f32[4096]\n  %w2 = param() : f32[4096,1024]\n"
                 "  %b2 = param() {init=\"zeros\"} : f32[1024]\n  %g = param() {init=\"ones\"} : f32[1024]\n"
                 "  %be = param() {init=\"zeros\"} : f32[1024]\n"
                 "  %h = matmul(%x, %w1) : f32[1024,4096]\n  %hb = add(%h, %b1) : f32[1024,4096]\n"
                 "  %a = gelu(%hb) : f32[1024,4096]\n  %o = matmul(%a, %w2) : f32[1024,1024]\n"
                 "  %ob = add(%o, %b2) : f32[1024,1024]\n  %r = add(%ob, %x) : f32[1024,1024]\n"
                 "  %ln = layernorm(%r, %g, %be) : f32[1024,1024]\n  %sq = mul(%ln, %ln) : f32[1024,1024]\n"
                 "  %loss = reduce_mean(%sq) : f32[]\n  output %loss\n  loss %loss\n}\n",
                 0);
  char err[512];
  evtc_graph *lin = evtc_graph_parse_string(
      "graph l {\n  %x = input() : f32[4096,1024]\n  %w = param() : f32[1024,1024]\n  %b = param() : f32[1024]\n"
      "  %h = matmul(%x, %w) : f32[4096,1024]\n  %hb = add(%h, %b) : f32[4096,1024]\n"
      "  %y = gelu(%hb) : f32[4096,1024]\n  output %y\n}\n", "lin", err, sizeof err);
  printf("RESULT linear-bias-gelu-4096x1024x1024 evtc-cpu %.4f\n", time_graph(lin, false, 1000));
  printf("RESULT linear-bias-gelu-4096x1024x1024 openblas-sgemm-only %.4f\n", time_sgemm(4096, 1024, 1024));
  evtc_graph_free(lin);
  evtc_graph *mm = evtc_graph_parse_string(
      "graph l {\n  %x = input() : f32[4096,1024]\n  %w = param() : f32[1024,1024]\n"
      "  %y = matmul(%x, %w) : f32[4096,1024]\n  output %y\n}\n", "mm", err, sizeof err);
  printf("RESULT matmul-4096x1024x1024 evtc-cpu %.4f\n", time_graph(mm, false, 1000));
  printf("RESULT matmul-4096x1024x1024 openblas-sgemm %.4f\n", time_sgemm(4096, 1024, 1024));
  evtc_graph_free(mm);
  return 0;
}
