/* gpu_attention_bench.c -- evtc's flash-attention template
 * (cuda_emit_attention.c) on the attention shapes of issue 9: BERT-Large
 * (B=32, H=16, S=T=512, D=64) and GPT-2 (B=8, H=12, S=T=1024, D=64,
 * causal), bf16.
 *
 * Each shape is a graph of the four ops of the family (attention,
 * attention_lse, attention_backward_q / _kv); each node becomes the OPAQUE
 * kernel the CUDA backend would run, in one module.  "fwd" times the
 * attention kernel, "fwd+bwd" the four kernels a training step runs
 * (forward, log-sum-exp, dq, dk with dv), "fwd+bwd1" the three of the
 * backward in one pass (forward, log-sum-exp, dk with dv and dq, its f32 dq
 * sums finished by NAME_fin; its dq is compared with dq's own kernel's; with
 * EVTC_ATTN_DQ=first, on the wgmma library, dk with dv launching dq's own
 * kernel first in place of the pass that computes Dd), in
 * three schedules: the mma.sync
 * library with blocks of 4 warps (system evtc-w4) and the wgmma library with
 * blocks of 1 and of 2 warpgroups (evtc-wg1, evtc-wg2; EVTC_ATTN_WG).  Each time is the median of 20 runs
 * after 5 warm-ups, each between two CUDA events.  Work: 4 B H S T D
 * FLOPs forward (half of it when causal), 3.5 times that forward +
 * backward (FlashAttention's convention: the backward is 2.5 forwards),
 * whatever evtc recomputes.  The key-block kernels are also timed in parts (NAME_pre, the kernel,
 * NAME_fin; events between them).  Lines "RESULT SYSTEM SHAPE PASS MS TFLOPS" feed
 * bench/gpu_attention.sh's table.
 *
 *   gpu_attention_bench                 run (needs an sm_90 GPU)
 *   gpu_attention_bench --compile-only  emit and compile the module through NVRTC (fills the disk cache)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_attention.h"
#include "kernel/kernel.h"
#include "runtime/elements.h"

typedef struct shape {
  const char *name;
  int64_t b, h, s, d;
  int causal;
} shape;

static const shape shapes[] = {{"bert-large", 32, 16, 512, 64, 0}, {"gpt2", 8, 12, 1024, 64, 1}};
enum { N_SHAPES = sizeof shapes / sizeof shapes[0], WARM = 5, ITERS = 20, N_OPS = 5, N_SYSTEMS = 3 };
static const char *const systems[N_SYSTEMS] = {"w4", "wg1", "wg2"}, *const wg_env[N_SYSTEMS] = {"0", "1", "2"};
/* kernel j of a shape: node ops[j]; the last is dk with dv writing dq too */
static const char *const ops[N_OPS] = {"out", "lse", "dq", "dkv", "dkv"};
static const char *const labels[N_OPS] = {"out", "lse", "dq", "dkv", "dkvq"};
enum { ONE_PASS = 4 };
static const char *const nvrtc_opts[] = {"--std=c++17", "-lineinfo", "--diag-suppress=177,550"};

static evtc_graph *shape_graph(const shape *sh) {
  evtc_graph *g = evtc_graph_new("bench");
  int64_t dims[4] = {sh->b, sh->h, sh->s, sh->d};
  evtc_type t = evtc_type_make(EVTC_BF16, 4, dims);
  evtc_node *q = evtc_leaf_add(g, EVTC_OP_INPUT, t, NULL, 0, "q"), *k = evtc_leaf_add(g, EVTC_OP_INPUT, t, NULL, 0, "k");
  evtc_node *v = evtc_leaf_add(g, EVTC_OP_INPUT, t, NULL, 0, "v"), *dout = evtc_leaf_add(g, EVTC_OP_INPUT, t, NULL, 0, "dout");
  evtc_attr at[2] = {evtc_attr_float("scale", 1.0 / sqrt((double)sh->d)), evtc_attr_int("causal", sh->causal)};
  evtc_node *o = evtc_node_add(g, EVTC_OP_ATTENTION, (evtc_node *[]){q, k, v}, 3, at, 2, "out");
  evtc_node *lse = evtc_node_add(g, EVTC_OP_ATTENTION_LSE, (evtc_node *[]){q, k}, 2, at, 2, "lse");
  evtc_node *ins[6] = {q, k, v, o, dout, lse};
  evtc_node_add(g, EVTC_OP_ATTENTION_BACKWARD_Q, ins, 6, at, 2, "dq");
  evtc_node_add(g, EVTC_OP_ATTENTION_BACKWARD_KV, ins, 6, at, 2, "dkv");
  if (g->diag.status != EVTC_OK) {
    fprintf(stderr, "gpu_attention_bench: %s\n", g->diag.msg);
    exit(1);
  }
  return g;
}

/* How the kernel of dk and dv gives dq in "fwd+bwd1" on the wgmma library: EVTC_ATTN_DQ as the bench was started
 * with, "1" (one pass) by default or "first" (dq's own kernel launched first, writing Dd); the mma.sync library
 * always in one pass. */
static const char *by_product_dq = "1";

/* The kernels of shape si in schedule sys and their module source (caller frees). */
static char *shape_module(int si, int sys, const evtc_graph *g, evtc_kernel **ks) {
  setenv("EVTC_ATTN_WARPS", "4", 1);
  setenv("EVTC_ATTN_WG", wg_env[sys], 1);
  setenv("EVTC_ATTN_DQ", strcmp(wg_env[sys], "0") == 0 ? "1" : by_product_dq, 1);
  evtc_sb src = {0};
  evtc_cuda_emit_prelude(&src);
  for (int j = 0; j < N_OPS; j++) {
    const evtc_node *n = evtc_graph_find(g, ops[j]);
    evtc_diag d = {0};
    char why[200] = "";
    ks[j] = evtc_kernel_build(g, &n->id, 1, &d);
    if (ks[j] && j == ONE_PASS) {     /* dq as a second output, as program.c's absorb_dq gives it */
      ks[j]->args = realloc(ks[j]->args, sizeof *ks[j]->args * ((size_t)ks[j]->n_args + 1));
      ks[j]->args[ks[j]->n_args++] = (evtc_karg){.node = evtc_graph_find(g, "dq"), .output = true};
    }
    if (!ks[j] || !evtc_cuda_attention_fits(ks[j], true, why, sizeof why)) {
      fprintf(stderr, "gpu_attention_bench: %s %s: %s%s\n", shapes[si].name, labels[j], d.msg, why);
      exit(1);
    }
    snprintf(ks[j]->name, sizeof ks[j]->name, "attb%d_%s_%s", si, systems[sys], labels[j]);
    evtc_cuda_emit_attention(&src, ks[j], true);
  }
  return src.s;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

#define TRY(call)                                                                \
  do {                                                                           \
    if ((call) != EVTC_OK) {                                                     \
      fprintf(stderr, "gpu_attention_bench: %s\n", d.msg);                      \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* Part `part` of kernel j: 0 its preparing kernel pre[j], 1 itself, 2 its finishing kernel fin[j] (nothing for a
 * part it does not have). */
static void launch_part(evtc_cuda_device *dev, evtc_cuda_kernel *fn, evtc_cuda_kernel *pre, evtc_cuda_kernel *fin,
                        evtc_kernel **ks, int j, void ***params, int part) {
  evtc_diag d = {0};
  evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(ks[j], true);
  unsigned grid[3] = {1, 1, 1}, block[3] = {256, 1, 1}, smem = 0;
  if (part == 1) evtc_cuda_attention_launch(ks[j], true, &grid[0], &block[0], &smem);
  else grid[0] = part == 0 ? x.pre_grid : x.fin_grid;
  if (part == 0) {
    block[0] = x.pre_block;
    smem = x.pre_smem;
  }
  evtc_cuda_kernel *kernel = part == 0 ? &pre[j] : part == 1 ? &fn[j] : &fin[j];
  if (grid[0]) TRY(evtc_cuda_launch(dev, kernel, grid, block, smem, params[j], &d));
}

/* Kernel j with its preparing and finishing kernels when it has them. */
static void launch(evtc_cuda_device *dev, evtc_cuda_kernel *fn, evtc_cuda_kernel *pre, evtc_cuda_kernel *fin,
                   evtc_kernel **ks, int j, void ***params) {
  for (int part = 0; part < 3; part++) launch_part(dev, fn, pre, fin, ks, j, params, part);
}

/* Median ms of launching kernels js[0..n) of ks in order (launch shapes for the current schedule). */
static float time_kernels(evtc_cuda_device *dev, evtc_cuda_kernel *fn, evtc_cuda_kernel *pre, evtc_cuda_kernel *fin,
                          evtc_kernel **ks, const int *js, int n, void ***params) {
  evtc_diag d = {0};
  CUevent e0, e1;
  TRY(evtc_cuda_event_new(dev, &e0, &d));
  TRY(evtc_cuda_event_new(dev, &e1, &d));
  float ms[ITERS];
  for (int it = 0; it < WARM + ITERS; it++) {
    TRY(evtc_cuda_event_record(dev, e0, &d));
    for (int i = 0; i < n; i++) launch(dev, fn, pre, fin, ks, js[i], params);
    TRY(evtc_cuda_event_record(dev, e1, &d));
    float t;
    TRY(evtc_cuda_event_ms(dev, e0, e1, &t, &d));
    if (it >= WARM) ms[it - WARM] = t;
  }
  evtc_cuda_event_free(dev, e0);
  evtc_cuda_event_free(dev, e1);
  qsort(ms, ITERS, sizeof ms[0], cmp_float);
  return ms[ITERS / 2];
}

/* Median ms of kernel j's parts launched in order: its preparing kernel, itself, its finishing kernel (0 for a part it
 * does not have), each between two CUDA events. */
static void time_parts(evtc_cuda_device *dev, evtc_cuda_kernel *fn, evtc_cuda_kernel *pre, evtc_cuda_kernel *fin,
                       evtc_kernel **ks, int j, void ***params, float part[3]) {
  evtc_diag d = {0};
  CUevent e[4];
  for (int i = 0; i < 4; i++) TRY(evtc_cuda_event_new(dev, &e[i], &d));
  float ms[3][ITERS];
  for (int it = 0; it < WARM + ITERS; it++) {
    TRY(evtc_cuda_event_record(dev, e[0], &d));
    for (int k = 0; k < 3; k++) {
      launch_part(dev, fn, pre, fin, ks, j, params, k);
      TRY(evtc_cuda_event_record(dev, e[k + 1], &d));
    }
    for (int k = 0; k < 3; k++) {
      float t;
      TRY(evtc_cuda_event_ms(dev, e[k], e[k + 1], &t, &d));
      if (it >= WARM) ms[k][it - WARM] = t;
    }
  }
  for (int i = 0; i < 4; i++) evtc_cuda_event_free(dev, e[i]);
  evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(ks[j], true);
  for (int k = 0; k < 3; k++) {
    qsort(ms[k], ITERS, sizeof ms[k][0], cmp_float);
    part[k] = (k == 0 && !x.pre_grid) || (k == 2 && !x.fin_grid) ? 0 : ms[k][ITERS / 2];
  }
}

static void run_shape(evtc_cuda_device *dev, int si, int sys) {
  const shape *sh = &shapes[si];
  evtc_graph *g = shape_graph(sh);
  evtc_kernel *ks[N_OPS];
  char *src = shape_module(si, sys, g, ks);
  evtc_diag d = {0};
  evtc_cuda_cubin cubin = {0};
  TRY(evtc_cuda_compile(src, sh->name, dev->arch, nvrtc_opts, 3, &cubin, &d));
  CUmodule mod;
  TRY(evtc_cuda_module_load(dev, &cubin, sh->name, &mod, &d));
  evtc_cuda_cubin_free(&cubin);
  /* one device buffer per graph node the kernels touch; inputs random bf16 in [-1, 1) */
  CUdeviceptr *buf = calloc((size_t)g->n_nodes, sizeof *buf);
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    int64_t m = evtc_type_numel(&n->type);
    size_t bytes = (size_t)m * evtc_dtype_size(n->type.dtype);
    if (dev->drv->cuMemAlloc(&buf[i], bytes) != 0) {
      fprintf(stderr, "gpu_attention_bench: cuMemAlloc of %zu bytes failed\n", bytes);
      exit(1);
    }
    if (n->op != EVTC_OP_INPUT) continue;
    uint16_t *h = malloc(bytes);
    uint64_t r = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    for (int64_t e = 0; e < m; e++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      h[e] = evtc_double_to_bf16((double)(r >> 11) * 0x1.0p-52 - 1.0);
    }
    TRY(evtc_cuda_copy_htod(dev, buf[i], h, bytes, &d));
    free(h);
  }
  struct params {
    void *a[EVTC_CUDA_MAX_ARGS];
  } pa[N_OPS];
  CUdeviceptr stepp = 0, err = 0, scratch = 0;     /* the step: a zeroed device word, as the backend's slot */
  if (dev->drv->cuMemAlloc(&stepp, sizeof(uint64_t)) != 0) {
    fprintf(stderr, "gpu_attention_bench: cuMemAlloc of the step failed\n");
    exit(1);
  }
  TRY(evtc_cuda_fill32(dev, stepp, 0, 2, &d));
  evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(ks[ONE_PASS], true);     /* dq's sums, zeroed */
  if (dev->drv->cuMemAlloc(&scratch, x.scratch_bytes) != 0) {
    fprintf(stderr, "gpu_attention_bench: cuMemAlloc of %zu bytes of scratch failed\n", x.scratch_bytes);
    exit(1);
  }
  TRY(evtc_cuda_fill32(dev, scratch, 0, x.scratch_bytes / 4, &d));
  void *pv[N_OPS][4], **pp[N_OPS];
  evtc_cuda_kernel fn[N_OPS], pre[N_OPS], fin[N_OPS];
  for (int j = 0; j < N_OPS; j++) {
    memset(&pa[j], 0, sizeof pa[j]);
    for (int a = 0; a < ks[j]->n_args; a++) pa[j].a[a] = (void *)(uintptr_t)buf[ks[j]->args[a].node->id];
    pv[j][0] = &pa[j];
    pv[j][1] = &stepp;
    pv[j][2] = &err;
    pv[j][3] = &scratch;
    pp[j] = pv[j];
    TRY(evtc_cuda_kernel_get(dev, mod, ks[j]->name, &fn[j], &d));
    evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(ks[j], true);
    char fname[80];
    if (x.fin_grid) {
      snprintf(fname, sizeof fname, "%s_fin", ks[j]->name);
      TRY(evtc_cuda_kernel_get(dev, mod, fname, &fin[j], &d));
    }
    if (x.pre_grid) {
      snprintf(fname, sizeof fname, "%s_pre", ks[j]->name);
      TRY(evtc_cuda_kernel_get(dev, mod, fname, &pre[j], &d));
    }
  }
  /* dq both ways on the same inputs (out and lse written by the kernels before them) */
  const evtc_node *dqn = evtc_graph_find(g, "dq");
  int64_t ndq = evtc_type_numel(&dqn->type);
  uint16_t *dq2 = malloc(sizeof *dq2 * (size_t)ndq), *dq1 = malloc(sizeof *dq1 * (size_t)ndq);
  for (int j = 0; j < 3; j++) launch(dev, fn, pre, fin, ks, j, pp);
  TRY(evtc_cuda_copy_dtoh(dev, dq2, buf[dqn->id], sizeof *dq2 * (size_t)ndq, &d));
  TRY(evtc_cuda_fill32(dev, buf[dqn->id], 0xFFFFFFFFu, (size_t)ndq / 2, &d));     /* NaN poison */
  launch(dev, fn, pre, fin, ks, ONE_PASS, pp);
  TRY(evtc_cuda_copy_dtoh(dev, dq1, buf[dqn->id], sizeof *dq1 * (size_t)ndq, &d));
  double num = 0, den = 0;
  for (int64_t e = 0; e < ndq; e++) {
    double a = evtc_bf16_to_double(dq1[e]), b = evtc_bf16_to_double(dq2[e]);
    num += (a - b) * (a - b);
    den += b * b;
  }
  double rel = isfinite(num) && den > 0 ? sqrt(num / den) : INFINITY;
  free(dq1);
  free(dq2);
  double flops = 4.0 * (double)(sh->b * sh->h * sh->s * sh->s * sh->d) * (sh->causal ? 0.5 : 1.0);
  static const int two[4] = {0, 1, 2, 3}, one[3] = {0, 1, ONE_PASS};
  float fwd = time_kernels(dev, fn, pre, fin, ks, two, 1, pp), all = time_kernels(dev, fn, pre, fin, ks, two, 4, pp);
  float all1 = time_kernels(dev, fn, pre, fin, ks, one, 3, pp);
  float part[N_OPS];
  for (int j = 0; j < N_OPS; j++) part[j] = time_kernels(dev, fn, pre, fin, ks, &j, 1, pp);
  printf("%s, evtc-%s: kernels out %.3f, lse %.3f, dq %.3f, dkv %.3f, dkv with dq (%s) %.3f ms; dq so against "
         "dq's own kernel: rel rms %.2e\n", sh->name, systems[sys], part[0], part[1], part[2], part[3],
         sys > 0 && strcmp(by_product_dq, "first") == 0 ? "dq first" : "one pass + fin", part[4], rel);
  static const int with_parts[2] = {3, ONE_PASS};     /* the key-block kernels: Dd before them, dq's sums after */
  for (int i = 0; i < 2; i++) {
    float pp3[3];
    time_parts(dev, fn, pre, fin, ks, with_parts[i], pp, pp3);
    printf("%s, evtc-%s: %s in parts: NAME_pre %.3f, the kernel %.3f, NAME_fin %.3f ms\n", sh->name, systems[sys],
           labels[with_parts[i]], pp3[0], pp3[1], pp3[2]);
  }
  printf("RESULT evtc-%s %s fwd %.4f %.1f\n", systems[sys], sh->name, fwd, flops / fwd * 1e-9);
  printf("RESULT evtc-%s %s fwd+bwd %.4f %.1f\n", systems[sys], sh->name, all, 3.5 * flops / all * 1e-9);
  printf("RESULT evtc-%s %s fwd+bwd1 %.4f %.1f %s\n", systems[sys], sh->name, all1, 3.5 * flops / all1 * 1e-9,
         rel < 1e-2 ? "PASS" : "FAIL");
  dev->drv->cuMemFree(scratch);
  dev->drv->cuMemFree(stepp);
  for (int32_t i = 0; i < g->n_nodes; i++) dev->drv->cuMemFree(buf[i]);
  free(buf);
  evtc_cuda_module_unload(dev, mod);
  for (int j = 0; j < N_OPS; j++) evtc_kernel_free(ks[j]);
  free(src);
  evtc_graph_free(g);
}

int main(int argc, char **argv) {
  bool compile_only = argc > 1 && strcmp(argv[1], "--compile-only") == 0;
  if (argc > 1 && !compile_only) {
    fprintf(stderr, "usage: %s [--compile-only]\n", argv[0]);
    return 2;
  }
  const char *dq_env = getenv("EVTC_ATTN_DQ");
  if (dq_env && strcmp(dq_env, "first") == 0) by_product_dq = "first";
  evtc_diag d = {0};
  if (compile_only) {
    for (int si = 0; si < N_SYSTEMS * N_SHAPES; si++) {
      evtc_graph *g = shape_graph(&shapes[si / N_SYSTEMS]);
      evtc_kernel *ks[N_OPS];
      char *src = shape_module(si / N_SYSTEMS, si % N_SYSTEMS, g, ks);
      evtc_cuda_cubin cubin = {0};
      TRY(evtc_cuda_compile(src, shapes[si / N_SYSTEMS].name, "sm_90a", nvrtc_opts, 3, &cubin, &d));
      printf("%s, evtc-%s: module compiled for sm_90a (%s)\n", shapes[si / N_SYSTEMS].name, systems[si % N_SYSTEMS],
             cubin.cache_hit ? "cache hit" : "NVRTC");
      evtc_cuda_cubin_free(&cubin);
      for (int j = 0; j < N_OPS; j++) evtc_kernel_free(ks[j]);
      free(src);
      evtc_graph_free(g);
    }
    return 0;
  }
  evtc_cuda_device dev;
  TRY(evtc_cuda_device_open(&dev, 0, &d));
  printf("device %s (%s), %d SMs\n", dev.name, dev.arch, dev.sm_count);
  for (int si = 0; si < N_SHAPES; si++)
    for (int sys = 0; sys < N_SYSTEMS; sys++) run_shape(&dev, si, sys);
  evtc_cuda_device_close(&dev);
  return 0;
}
