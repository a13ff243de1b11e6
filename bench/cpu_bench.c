/* cpu_bench.c -- times evtc's CPU backend, its interpreter and OpenBLAS sgemm.
 *
 *   cpu_bench SRC_DIR [FILTER]   prints "RESULT <workload> <impl> <ms per step>" lines
 *                                (only workloads whose name contains FILTER, when given)
 *
 * Workloads (the same in cpu_torch.py): a training step (AdamW) of the
 * digits MLP (examples/mlp.evt, batch 32), of a 1024-wide MLP (batch 256)
 * of the MLP block 1024->4096->1024 + LayerNorm (1024 rows) and of a
 * post-norm transformer encoder layer (d 256, 4 heads, FFN 1024 with GELU,
 * batch 8, sequence 128); the
 * forward linear + bias + GELU 4096x1024x1024 against OpenBLAS sgemm alone,
 * and the bare matmul of the same size against sgemm.
 * Each figure is the median time of the runs in about one second after a
 * warm-up run; in the two GEMM rows sgemm runs after each of evtc's runs
 * (about two seconds of pairs), so that both are timed on the same machine
 * state.  Inputs are random; every run is checked finite.  evtc's kernels follow
 * the plan of partitioner $EVTC_BENCH_PARTITIONER (default ilp, as `evtc
 * train` uses).  Built and run by cpu.sh.
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
#include "runtime/program_plan.h"

/* The median of n run times (sorted in place): robust to other jobs on shared cores. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

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

/* OpenBLAS's sgemm of an m x k by k x n product (row-major, operands filled once): the GEMM rows' peer, called
 * between evtc's runs (time_graph) so that both see the same machine: on a virtual machine whose speed drifts
 * between seconds, timing each for a second in turn compared two different machines. */
typedef struct sgemm_peer {
  int m, n, k;
  float *a, *b, *c;
} sgemm_peer;

static sgemm_peer sgemm_new(int m, int n, int k) {
  sgemm_peer s = {m, n, k, malloc(sizeof(float) * (size_t)m * k), malloc(sizeof(float) * (size_t)k * n),
                  malloc(sizeof(float) * (size_t)m * n)};
  for (long i = 0; i < (long)m * k; i++) s.a[i] = (float)((i % 13) - 6) / 7;
  for (long i = 0; i < (long)k * n; i++) s.b[i] = (float)((i % 11) - 5) / 9;
  return s;
}

static void sgemm_run(const sgemm_peer *s) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, s->a, s->k, s->b, s->n, 0.0f, s->c,
              s->n);
}

static void sgemm_free(sgemm_peer *s) {
  free(s->a);
  free(s->b);
  free(s->c);
}

/* ms per run of g on the CPU backend (or the interpreter), the median of up to max_runs runs in about a second
 * after a warm-up run; with a peer, the peer runs after each of them and *peer_ms gets its median. */
static double time_graph(const evtc_graph *g, bool interp, int max_runs, const sgemm_peer *peer, double *peer_ms) {
  double **v = leaves(g);
  evtc_diag d = {0};
  evtc_program *p = NULL;
  evtc_interp *it = NULL;
  if (interp) it = evtc_interp_new(g);
  else {
    const char *part = getenv("EVTC_BENCH_PARTITIONER");
    int nk = 0;
    int32_t *plan = evtc_program_plan(g, part ? part : "ilp", evtc_backend_cpu(), &nk, NULL, &d);
    if (d.status == EVTC_OK) p = evtc_program_new(g, plan, nk, evtc_backend_cpu(), stderr, &d);
    free(plan);
    if (!p) {
      fprintf(stderr, "cpu_bench: %s\n", d.msg);
      exit(1);
    }
    fprintf(stderr, "cpu_bench: %d kernels (partitioner %s)\n", evtc_program_get_stats(p).kernels, part ? part : "ilp");
  }
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (v[i]) {
      if (p) evtc_program_set(p, g->nodes[i], v[i]);
      else evtc_interp_set(it, g->nodes[i], v[i]);
    }
  int runs = 0;
  double start = 0, *times = malloc(sizeof(double) * (size_t)(max_runs + 1));
  double *peer_times = malloc(sizeof(double) * (size_t)(max_runs + 1));
  for (int r = 0; r < max_runs + 1; r++) {
    double t_run = now();
    if (r == 1) start = t_run;                         /* the first run warms up */
    if ((p ? evtc_program_run(p, (uint64_t)r, &d) : evtc_interp_run(it, (uint64_t)r, &d)) != EVTC_OK) {
      fprintf(stderr, "cpu_bench: %s\n", d.msg);
      exit(1);
    }
    if (p) evtc_program_update(p);
    double t1 = now();
    if (peer) {
      sgemm_run(peer);
      if (r >= 1) peer_times[runs] = now() - t1;
    }
    if (r >= 1) times[runs++] = t1 - t_run;
    if (r >= 3 && now() - start > (peer ? 2.0 : 1.0)) break;
  }
  if (peer) *peer_ms = 1000.0 * median(peer_times, runs);
  free(peer_times);
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
  double ms = 1000.0 * median(times, runs);
  free(times);
  return ms;
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

static const char *filter;   /* run only workloads whose name contains it (NULL: all) */

static bool wanted(const char *name) { return !filter || strstr(name, filter); }

static void train_workload(const char *name, const char *text, int interp_runs) {
  if (!wanted(name)) return;
  evtc_graph *j = joint_of(text);
  printf("RESULT %s evtc-cpu %.4f\n", name, time_graph(j, false, 1000, NULL, NULL));
  if (interp_runs) printf("RESULT %s evtc-interp %.4f\n", name, time_graph(j, true, interp_runs, NULL, NULL));
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

static const char encoder_text[] =
    "graph enc {\n  %x = input() : f32[8,128,256]\n  %xr = reshape(%x) {shape=[1024,256]} : f32[1024,256]\n"
    "  %wq = param() : f32[256,256]\n  %bq = param() {init=\"zeros\"} : f32[256]\n"
    "  %wk = param() : f32[256,256]\n  %bk = param() {init=\"zeros\"} : f32[256]\n"
    "  %wv = param() : f32[256,256]\n  %bv = param() {init=\"zeros\"} : f32[256]\n"
    "  %wo = param() : f32[256,256]\n  %bo = param() {init=\"zeros\"} : f32[256]\n"
    "  %q0 = matmul(%xr, %wq) : f32[1024,256]\n  %q1 = add(%q0, %bq) : f32[1024,256]\n"
    "  %q2 = reshape(%q1) {shape=[8,128,4,64]} : f32[8,128,4,64]\n  %q = permute(%q2) {perm=[0,2,1,3]} : f32[8,4,128,64]\n"
    "  %k0 = matmul(%xr, %wk) : f32[1024,256]\n  %k1 = add(%k0, %bk) : f32[1024,256]\n"
    "  %k2 = reshape(%k1) {shape=[8,128,4,64]} : f32[8,128,4,64]\n  %k = permute(%k2) {perm=[0,2,1,3]} : f32[8,4,128,64]\n"
    "  %v0 = matmul(%xr, %wv) : f32[1024,256]\n  %v1 = add(%v0, %bv) : f32[1024,256]\n"
    "  %v2 = reshape(%v1) {shape=[8,128,4,64]} : f32[8,128,4,64]\n  %v = permute(%v2) {perm=[0,2,1,3]} : f32[8,4,128,64]\n"
    "  %s = batch_matmul(%q, %k) {trans_b=1} : f32[8,4,128,128]\n  %sc = const() {value=0.125} : f32[]\n"
    "  %ss = mul(%s, %sc) : f32[8,4,128,128]\n  %p = softmax(%ss) : f32[8,4,128,128]\n"
    "  %a = batch_matmul(%p, %v) : f32[8,4,128,64]\n  %ap = permute(%a) {perm=[0,2,1,3]} : f32[8,128,4,64]\n"
    "  %ar = reshape(%ap) {shape=[1024,256]} : f32[1024,256]\n"
    "  %o0 = matmul(%ar, %wo) : f32[1024,256]\n  %o1 = add(%o0, %bo) : f32[1024,256]\n"
    "  %r1 = add(%xr, %o1) : f32[1024,256]\n  %g1 = param() {init=\"ones\"} : f32[256]\n"
    "  %be1 = param() {init=\"zeros\"} : f32[256]\n  %n1 = layernorm(%r1, %g1, %be1) : f32[1024,256]\n"
    "  %w1 = param() : f32[256,1024]\n  %b1 = param() {init=\"zeros\"} : f32[1024]\n"
    "  %h = matmul(%n1, %w1) : f32[1024,1024]\n  %hb = add(%h, %b1) : f32[1024,1024]\n  %ha = gelu(%hb) : f32[1024,1024]\n"
    "  %w2 = param() : f32[1024,256]\n  %b2 = param() {init=\"zeros\"} : f32[256]\n"
    "  %f = matmul(%ha, %w2) : f32[1024,256]\n  %fb = add(%f, %b2) : f32[1024,256]\n"
    "  %r2 = add(%n1, %fb) : f32[1024,256]\n  %g2 = param() {init=\"ones\"} : f32[256]\n"
    "  %be2 = param() {init=\"zeros\"} : f32[256]\n  %n2 = layernorm(%r2, %g2, %be2) : f32[1024,256]\n"
    "  %sq = mul(%n2, %n2) : f32[1024,256]\n  %loss = reduce_mean(%sq) : f32[]\n  output %loss\n  loss %loss\n}\n";

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  filter = argc > 2 ? argv[2] : NULL;
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
  train_workload("transformer-encoder-train-b8s128d256", encoder_text, 0);
  char err[512];
  sgemm_peer gemm_peer = sgemm_new(4096, 1024, 1024);
  if (wanted("linear-bias-gelu-4096x1024x1024")) {
    evtc_graph *lin = evtc_graph_parse_string(
        "graph l {\n  %x = input() : f32[4096,1024]\n  %w = param() : f32[1024,1024]\n  %b = param() : f32[1024]\n"
        "  %h = matmul(%x, %w) : f32[4096,1024]\n  %hb = add(%h, %b) : f32[4096,1024]\n"
        "  %y = gelu(%hb) : f32[4096,1024]\n  output %y\n}\n", "lin", err, sizeof err);
    double peer_ms = 0;
    printf("RESULT linear-bias-gelu-4096x1024x1024 evtc-cpu %.4f\n", time_graph(lin, false, 1000, &gemm_peer, &peer_ms));
    printf("RESULT linear-bias-gelu-4096x1024x1024 openblas-sgemm-only %.4f\n", peer_ms);
    evtc_graph_free(lin);
  }
  if (wanted("matmul-4096x1024x1024")) {
    evtc_graph *mm = evtc_graph_parse_string(
        "graph l {\n  %x = input() : f32[4096,1024]\n  %w = param() : f32[1024,1024]\n"
        "  %y = matmul(%x, %w) : f32[4096,1024]\n  output %y\n}\n", "mm", err, sizeof err);
    double peer_ms = 0;
    printf("RESULT matmul-4096x1024x1024 evtc-cpu %.4f\n", time_graph(mm, false, 1000, &gemm_peer, &peer_ms));
    printf("RESULT matmul-4096x1024x1024 openblas-sgemm %.4f\n", peer_ms);
    evtc_graph_free(mm);
  }
  sgemm_free(&gemm_peer);
  return 0;
}
