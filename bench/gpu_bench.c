/* gpu_bench.c -- times evtc's CUDA backend on the memory-bound workloads
 * of bench/gpu.sh and prints, per workload, "RESULT <work> <impl> <ms>
 * <minimal bytes>" and checksums of every output ("CHECK <work> <output>
 * <sum> <sum of |x|>") for gpu_torch.py to compare with PyTorch on the
 * same inputs.  Inputs come from an integer hash of the element index that
 * gpu_torch.py computes the same way: x[i] = (h(i + salt) >> 8) * 2^-24 * 2 - 1,
 * h(i) = (i * 2654435761) mod 2^32; labels[i] = (i * 7919) mod classes.
 * A step is one run of every kernel, timed on the device clock
 * (evtc_program_profile: CUDA events before, between and after the
 * kernels, so the gaps between them count; BENCHMARKS.md's device events);
 * the median of 30 steps after warm-ups (at least 5 steps and 250 ms: the
 * clocks ramp up).  The INFO line also gives the median of 30 whole
 * evtc_program_run calls on the host clock (the graph's launch, the wait
 * and the error-flag check included: about 15-20 us more on an H200).
 * Each graph (with its gradients) goes through the h200 pass pipeline, as `evtc train --backend cuda` runs it; plans
 * come from the fusion ILP (--partitioner ilp), else the built-in greedy plan.  f32 storage, except the
 * cross-entropy's bf16 logits (and their bf16 gradient) and the models' kernels (issue 9, bf16 as the models
 * have them: GPT-2's LM-head cross-entropy through gemm-pad's padded view, GPT-2's and BERT-Large's
 * position-embedding gradients, BERT-Large's layernorm gradient), the first two next to a copy of their size (an
 * elementwise neg).
 * Arguments: substrings of the workload names to run (default all).  With
 * EVTC_CUDA_SMEM_ROWS=0 the results are labelled evtc-reread.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "evtc.h"
#include "ir/ir.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

#include "../tests/ln_grad_graph.h"     /* BERT-Large's layernorm gradient, which test_gpu_kernels.c checks */

typedef struct workload {
  const char *name, *text;
  const char *wrt[5];
  int n_wrt;
  double bytes;            /* minimal bytes moved by one step */
} workload;

#define N1 (16384.0 * 4096.0)
#define N2 (8192.0 * 32000.0)
#define N3 (16384.0 * 1024.0)
#define NV (8192.0 * 50257.0)              /* GPT-2's logits (vocabulary 50257, batch 8 x 1024) */
#define NP (8192.0 * 50264.0)              /* gemm-pad's LM-head output they are a view of */
#define NW (8.0 * 1024.0 * 768.0)          /* GPT-2's residual stream (batch 8 x 1024, d 768) */
#define NB (32.0 * 512.0 * 1024.0)         /* BERT-Large's (batch 32 x 512, d 1024) */
#define NM (16384.0 * 30528.0)             /* BERT-Large's MLM logits (32 x 512 tokens, vocabulary padded to 30528) */

/* GPT-2's cross-entropy kernel as the model's joint graph has it (issue 9): bf16 logits read through a slice of
 * the padded GEMM output, reshaped into rows, the math in bf16 nodes, the loss and the logits' gradient. */
#define LM_CE_TEXT                                                                                                  \
  "graph lm_ce {\n  %lp = input() : bf16[8,1024,50264]\n  %labels = input() : i64[8192]\n"                             \
  "  %s = slice(%lp) {axes=[2], starts=[0], ends=[50257], steps=[1]} : bf16[8,1024,50257]\n"                          \
  "  %y = reshape(%s) {shape=[8192,-1]} : bf16[8192,50257]\n"                                                        \
  "  %max = reduce_max(%y) {axes=[1], keepdims=1} : bf16[8192,1]\n  %shift = sub(%y, %max) : bf16[8192,50257]\n"       \
  "  %exp = exp(%shift) : bf16[8192,50257]\n  %sum = reduce_sum(%exp) {axes=[1], keepdims=1} : bf16[8192,1]\n"         \
  "  %lse = log(%sum) : bf16[8192,1]\n  %lsm = sub(%shift, %lse) : bf16[8192,50257]\n"                                \
  "  %onehot = one_hot(%labels) {depth=50257, dtype=bf16, checked=1} : bf16[8192,50257]\n"                           \
  "  %picked = mul(%lsm, %onehot) : bf16[8192,50257]\n  %psum = reduce_sum(%picked) : bf16[]\n"                       \
  "  %scale = const() {value=-0.0001220703125} : bf16[]\n  %loss = mul(%psum, %scale) : bf16[]\n"                    \
  "  %t0 = div(%exp, %sum) : bf16[8192,50257]\n  %t2 = sub(%t0, %onehot) : bf16[8192,50257]\n"                         \
  "  %t3 = const() {value=0.0001220703125} : bf16[]\n  %grad = mul(%t2, %t3) : bf16[8192,50257]\n"                   \
  "  output %loss\n  output %grad\n}\n"

/* A position embedding's gradient beside the residual gradient (GPT-2's %grad._Add_output_0 and %grad.wpe):
 * a sum over the batch of few rows x many columns. */
#define POS_GRAD_TEXT(B, S, D)                                                                                      \
  "graph pos_grad {\n  %ga = input() : bf16[" #B "," #S "," #D "]\n  %gs = input() : bf16[" #B "," #S "," #D "]\n"     \
  "  %rm = input() : bf16[" #B "," #S ",1]\n  %k = const() {value=0.0013020833333333333} : bf16[]\n"                 \
  "  %t1 = add(%ga, %gs) : bf16[" #B "," #S "," #D "]\n  %t2 = mul(%rm, %k) : bf16[" #B "," #S ",1]\n"                 \
  "  %g = add(%t1, %t2) : bf16[" #B "," #S "," #D "]\n  %wpe = reduce_sum(%g) {axes=[0]} : bf16[" #S "," #D "]\n"      \
  "  output %g\n  output %wpe\n}\n"

static const workload works[] = {
    {"layernorm-fwd-bwd-16384x4096",
     "graph ln {\n  %x = input() : f32[16384,4096]\n  %dy = input() : f32[16384,4096]\n"
     "  %g = input() : f32[4096]\n  %b = input() : f32[4096]\n  %y = layernorm(%x, %g, %b) : f32[16384,4096]\n"
     "  %p = mul(%y, %dy) : f32[16384,4096]\n  %loss = reduce_sum(%p) : f32[]\n  output %y\n  loss %loss\n}\n",
     {"x", "g", "b"}, 3, 4 * N1 * 4},
    {"softmax-fwd-8192x32000",
     "graph sm {\n  %x = input() : f32[8192,32000]\n  %y = softmax(%x) : f32[8192,32000]\n  output %y\n}\n",
     {0}, 0, 2 * N2 * 4},
    /* fp32 math on bf16 logits: read x, write dx (both bf16), read the labels */
    {"cross-entropy-bf16-fwd-bwd-8192x32000",
     "graph ce {\n  %x = input() : bf16[8192,32000]\n  %lab = input() : i64[8192]\n"
     "  %xf = cast(%x) {dtype=f32} : f32[8192,32000]\n"
     "  %loss = cross_entropy(%xf, %lab) : f32[]\n  output %loss\n  loss %loss\n}\n",
     {"x"}, 1, 2 * N2 * 2 + 8192 * 8},
    {"dropout-residual-layernorm-fwd-bwd-16384x1024",
     "graph drl {\n  %x = input() : f32[16384,1024]\n  %res = input() : f32[16384,1024]\n"
     "  %dy = input() : f32[16384,1024]\n  %g = input() : f32[1024]\n  %b = input() : f32[1024]\n"
     "  %d = dropout(%x) {p=0.1, seed=1} : f32[16384,1024]\n  %h = add(%d, %res) : f32[16384,1024]\n"
     "  %y = layernorm(%h, %g, %b) : f32[16384,1024]\n  %p = mul(%y, %dy) : f32[16384,1024]\n"
     "  %loss = reduce_sum(%p) : f32[]\n  output %y\n  loss %loss\n}\n",
     {"x", "res", "g", "b"}, 4, 6 * N3 * 4},
    /* the models' memory-bound kernels (issue 9), each beside a copy of its size (one elementwise kernel) */
    {"gpt2-lmhead-ce-bf16-8192x50257", LM_CE_TEXT, {0}, 0, NP * 2 + NV * 2 + 8192 * 8},
    {"copy-bf16-8192x50264", "graph cp {\n  %x = input() : bf16[8192,50264]\n  %y = neg(%x) : bf16[8192,50264]\n  output %y\n}\n",
     {0}, 0, 2 * NP * 2},
    {"gpt2-wpe-grad-bf16-8x1024x768", POS_GRAD_TEXT(8, 1024, 768), {0}, 0, 3 * NW * 2 + 8192 * 2 + 1024 * 768 * 2},
    {"copy-bf16-8x1024x768", "graph cp {\n  %x = input() : bf16[8,1024,768]\n  %y = neg(%x) : bf16[8,1024,768]\n  output %y\n}\n",
     {0}, 0, 2 * NW * 2},
    {"bert-pos-grad-bf16-32x512x1024", POS_GRAD_TEXT(32, 512, 1024), {0}, 0, 3 * NB * 2 + 16384 * 2 + 512 * 1024 * 2},
    {"bert-ln-grad-bf16-16384x1024", LN_GRAD_TEXT("bf16", 16384, 1024), {0}, 0, 4 * NB * 2 + 16384 * 2 + 3 * 1024 * 2},
    /* BERT-Large's MLM loss with its bias gradient: read the logits, write their gradient, sum its columns */
    {"bert-mlm-ce-bias-bf16-16384x30528",
     "graph ceb {\n  %x = input() : bf16[16384,30528]\n  %b = input() : bf16[30528]\n  %lab = input() : i64[16384]\n"
     "  %z = add(%x, %b) : bf16[16384,30528]\n  %loss = cross_entropy(%z, %lab) : bf16[]\n  output %loss\n"
     "  loss %loss\n}\n",
     {"x", "b"}, 2, 2 * NM * 2 + 16384 * 8 + 2 * 30528 * 2},
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void fill(const evtc_node *n, double *v, uint32_t salt) {
  int64_t numel = evtc_type_numel(&n->type);
  if (evtc_dtype_is_int(n->type.dtype)) {
    int64_t classes = 30528;   /* labels of every workload's vocabulary: BERT-Large's, the smallest */
    for (int64_t i = 0; i < numel; i++) v[i] = (double)((i * 7919) % classes);
    return;
  }
  for (int64_t i = 0; i < numel; i++) {
    uint32_t h = (uint32_t)((uint64_t)(i + salt) * 2654435761u);
    v[i] = (double)(h >> 8) * (1.0 / 16777216.0) * 2 - 1;
  }
}

static void run(const evtc_backend *be, const workload *w) {
  char err[512];
  evtc_diag d = {0};
  evtc_graph *fwd = evtc_graph_parse_string(w->text, w->name, err, sizeof err), *g = fwd;
  if (!fwd) {
    fprintf(stderr, "%s: %s\n", w->name, err);
    return;
  }
  if (w->n_wrt) {
    evtc_optim_config none = evtc_optim_default(EVTC_OPTIM_NONE);
    g = evtc_autodiff(fwd, w->wrt, w->n_wrt, &none, &d);
    if (!g) {
      fprintf(stderr, "%s: autodiff: %s\n", w->name, d.msg);
      evtc_graph_free(fwd);
      return;
    }
  }
  evtc_graph *opt = evtc_program_optimize(g, be, &d);      /* the h200 pass pipeline, as `evtc train` runs it */
  evtc_program *p = NULL;
  if (!opt) {
    fprintf(stderr, "%s: passes: %s\n", w->name, d.msg);
    goto out;
  }
  int nk = 0;
  const char *plan_name = "ilp";
  int32_t *plan = evtc_program_plan(opt, plan_name, be, &nk, stderr, &d);
  if (!plan) {
    fprintf(stderr, "%s: no ILP plan (%s); using the built-in plan\n", w->name, d.msg);
    d = (evtc_diag){0};
    plan_name = "builtin";
  }
  p = evtc_program_new(opt, plan, nk, be, stderr, &d);
  free(plan);
  if (!p) {
    fprintf(stderr, "%s: %s\n", w->name, d.msg);
    goto out;
  }
  uint32_t salt = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT) continue;
    int64_t numel = evtc_type_numel(&n->type);
    double *v = malloc(sizeof(double) * (size_t)numel);
    fill(n, v, salt);
    salt += 1000003;
    const evtc_node *in = evtc_graph_find(opt, n->name);      /* NULL: no longer read after the passes */
    if (in) evtc_program_set(p, in, v);
    free(v);
  }
  /* warm-ups: at least 5 steps and 250 ms, so the GPU's clocks have ramped up (an idle H200 sits at 345 MHz) */
  enum { WARM = 5, ITERS = 30 };
  const double warm_ms = 250;
  double t[ITERS], warm_end = now_ms() + warm_ms;
  for (int i = 0; i < WARM || now_ms() < warm_end; i++)
    if (evtc_program_run(p, 1, &d) != EVTC_OK) {
      fprintf(stderr, "%s: %s\n", w->name, d.msg);
      goto out;
    }
  for (int i = 0; i < ITERS; i++) {
    double t0 = now_ms();
    if (evtc_program_run(p, 1, &d) != EVTC_OK) {
      fprintf(stderr, "%s: %s\n", w->name, d.msg);
      goto out;
    }
    t[i] = now_ms() - t0;
  }
  qsort(t, ITERS, sizeof t[0], cmp_double);
  const int n_kernels = evtc_program_kernel_count(p);
  double dev[ITERS], *us = malloc(sizeof(double) * (size_t)(n_kernels + 1));
  double *kernel_us = calloc((size_t)n_kernels + 1, sizeof(double));   /* each kernel's sum over the runs */
  bool device_clock = false;
  for (int i = 0; i < ITERS; i++) {
    if (evtc_program_profile(p, 1, 1, us, &device_clock, &d) != EVTC_OK) {
      fprintf(stderr, "%s: %s\n", w->name, d.msg);
      free(us);
      free(kernel_us);
      goto out;
    }
    dev[i] = 0;
    for (int k = 0; k < n_kernels; k++) {
      dev[i] += us[k] * 1e-3;
      kernel_us[k] += us[k];
    }
  }
  printf("KERNELS %s (mean us, run order):", w->name);   /* where the workload's time goes */
  for (int k = 0; k < n_kernels; k++)
    printf(" %%%s %.1f", opt->nodes[evtc_program_kernel_first_node(p, k)]->name, kernel_us[k] / ITERS);
  putchar('\n');
  free(us);
  free(kernel_us);
  qsort(dev, ITERS, sizeof dev[0], cmp_double);
  evtc_program_stats st = evtc_program_get_stats(p);
  const char *smem = getenv("EVTC_CUDA_SMEM_ROWS"), *impl = smem && strcmp(smem, "0") == 0 ? "evtc-reread" : "evtc";
  printf("RESULT %s %s %.4f %.0f\n", w->name, impl, dev[ITERS / 2], w->bytes);
  printf("INFO %s %s: %d kernels (%d interpreted), plan %s, %s clock; min %.4f ms; host clock (a whole run and its "
         "wait) median %.4f ms\n", w->name, impl, st.kernels, st.interpreted, plan_name,
         device_clock ? "device" : "HOST (the backend has no events)", dev[0], t[ITERS / 2]);
  for (int k = 0; k < opt->n_outputs; k++) {
    const evtc_node *n = opt->outputs[k].node;
    int64_t numel = evtc_type_numel(&n->type);
    double *v = malloc(sizeof(double) * (size_t)numel), s = 0, a = 0;
    evtc_program_get(p, n, v);
    for (int64_t e = 0; e < numel; e++) {
      s += v[e];
      a += v[e] < 0 ? -v[e] : v[e];
    }
    if (strcmp(impl, "evtc") == 0) printf("CHECK %s %s %.9g %.9g\n", w->name, n->name, s, a);
    free(v);
  }
  fflush(stdout);
out:
  evtc_program_free(p);
  evtc_graph_free(opt);
  if (g != fwd) evtc_graph_free(g);
  evtc_graph_free(fwd);
}

int main(int argc, char **argv) {
  evtc_diag d = {0};
  const evtc_backend *be = evtc_backend_cuda(&d);
  if (!be) {
    fprintf(stderr, "gpu_bench: %s\n", d.msg);
    return 77;
  }
  for (size_t i = 0; i < sizeof works / sizeof works[0]; i++) {
    bool pick = argc < 2;
    for (int a = 1; a < argc; a++) pick |= strstr(works[i].name, argv[a]) != NULL;
    if (pick) run(be, &works[i]);
  }
  return 0;
}
