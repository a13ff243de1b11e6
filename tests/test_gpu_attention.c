/* test_gpu_attention.c -- the CUDA attention template (cuda_emit_attention.c)
 * against the float64 interpreter.
 *
 * Each case is a graph of f16 or bf16 q, k, v and dout with the four ops of
 * the family: attention, attention_lse, attention_backward_q and
 * attention_backward_kv (dk and dv side by side, each half checked).  The
 * interpreter runs the graph; then every node runs alone on the GPU as the
 * backend runs it (the OPAQUE kernel evtc_kernel_build gives, the backend's
 * acceptance, emitter and launch shape), on the interpreter's values of its
 * inputs (so out and lse feeding the backward ops are the same on both
 * sides), into an output poisoned with NaN, in each schedule: the mma.sync
 * library with blocks of 4 and of 8 warps (EVTC_ATTN_WG=0,
 * EVTC_ATTN_WARPS) and, at head dim 64, the wgmma library with blocks of 1
 * and of 2 warpgroups (EVTC_ATTN_WG; at head dim 128 those two run the
 * mma.sync library again).  Geometries: head dims 64 and
 * 128, causal and not, odd lengths (1, 77, 129, 200, 250, 390), S < T, S > T
 * (non-causal), several batch-heads.  Error: ||got - want|| / ||want||
 * below 2e-2 (bf16) or 4e-3 (f16) per output -- one rounding of the
 * probabilities and of dS to the 16-bit type before the tensor-core
 * products, and of the result -- and every element finite (written).
 *
 * Two cases also run as programs on the CUDA backend (every schedule) (the backend's
 * supports, emit and launch; cpu_oracle.h's comparison with the
 * interpreter, per element |got - want| <= tol (1 + |want|)), with no node
 * left to the interpreter, and so do the joint graphs of their gradients
 * (autodiff of sum(attention * c): dk and dv as slices of
 * attention_backward_kv's output, read as views by the kernels after it,
 * dk also through a head merge, permute and reshape, as a projection's
 * backward reads it).
 *
 * The programs write the log-sum-exp from the forward kernel (a by-product,
 * program.c), which the check of their by-product count confirms, and, run
 * again with EVTC_ATTN_DQ=1 on each library, the gradients' dq from the
 * kernel of dk and dv (one pass over the scores, dq summed by atomics), and
 * with EVTC_ATTN_DQ=first on the wgmma library, from dq's own kernel
 * launched first by the kernel of dk and dv (the default there).  Without a
 * GPU the kernels of dk and dv with dq of every case are compiled for the
 * wgmma schedules, both ways.  One more
 * program splits the heads of a packed bf16 projection and merges them back,
 * forward and backward: the attention kernels read and write them in place
 * through views (program_views.c), 14 layout kernels fewer.  Two chained
 * attention layers and their gradients run as two programs in turn: their
 * one-pass kernels share the backend's scratch, which each leaves zeroed.
 * The two layers with dropout between them run 4 steps replayed from one
 * captured CUDA graph against launched kernel by kernel (replay_check.h):
 * bit for bit, or within the bf16 tolerance where dq is summed by atomics.
 *
 * Without a GPU each case's modules are emitted as on the GPU and compiled
 * through NVRTC for sm_90a (CUBINs into the usual disk cache, so a staged
 * cache serves the GPU run), the backend's acceptance is checked, and the
 * test prints SKIPPED and exits 77.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "backend/cuda/cuda_compile.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_attention.h"
#include "cpu_oracle.h"
#include "gpu_session.h"
#include "replay_check.h"
#include "kernel/kernel.h"
#include "runtime/elements.h"
#include "runtime/interp.h"
#include "runtime/precision.h"
#include "runtime/program.h"

typedef struct att_case {
  int64_t b, h, s, t, d;
  int causal;
  evtc_dtype dt;
} att_case;

static const att_case cases[] = {
    {1, 2, 77, 77, 64, 0, EVTC_BF16},  {1, 2, 77, 77, 64, 1, EVTC_BF16},  {2, 3, 129, 129, 128, 1, EVTC_F16},
    {1, 2, 1, 129, 64, 0, EVTC_F16},   {2, 1, 65, 200, 64, 1, EVTC_BF16}, {1, 2, 129, 1, 128, 0, EVTC_BF16},
    {1, 1, 1, 1, 64, 1, EVTC_F16},     {2, 2, 256, 256, 128, 0, EVTC_BF16}, {1, 4, 200, 200, 64, 1, EVTC_F16},
    {2, 2, 300, 250, 64, 0, EVTC_BF16}, {1, 2, 130, 390, 64, 1, EVTC_BF16},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

enum { N_NODES = 4 };
static const char *const node_names[N_NODES] = {"out", "lse", "dq", "dkv"};
static const char *const nvrtc_opts[] = {"--std=c++17", "-lineinfo", "--diag-suppress=177,550"};

static void case_name(const att_case *c, char *buf, size_t cap) {
  snprintf(buf, cap, "%s [%lld,%lld,%lld/%lld,%lld]%s", evtc_dtype_name(c->dt), (long long)c->b, (long long)c->h,
           (long long)c->s, (long long)c->t, (long long)c->d, c->causal ? " causal" : "");
}

static evtc_graph *case_graph(const att_case *c) {
  evtc_graph *g = evtc_graph_new("att");
  int64_t qs[4] = {c->b, c->h, c->s, c->d}, ks[4] = {c->b, c->h, c->t, c->d};
  evtc_node *q = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(c->dt, 4, qs), NULL, 0, "q");
  evtc_node *k = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(c->dt, 4, ks), NULL, 0, "k");
  evtc_node *v = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(c->dt, 4, ks), NULL, 0, "v");
  evtc_node *dout = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(c->dt, 4, qs), NULL, 0, "dout");
  evtc_attr at[2] = {evtc_attr_float("scale", 1.0 / sqrt((double)c->d)), evtc_attr_int("causal", c->causal)};
  evtc_node *o = evtc_node_add(g, EVTC_OP_ATTENTION, (evtc_node *[]){q, k, v}, 3, at, 2, "out");
  evtc_node *lse = evtc_node_add(g, EVTC_OP_ATTENTION_LSE, (evtc_node *[]){q, k}, 2, at, 2, "lse");
  evtc_node *ins[6] = {q, k, v, o, dout, lse};
  evtc_op ops[2] = {EVTC_OP_ATTENTION_BACKWARD_Q, EVTC_OP_ATTENTION_BACKWARD_KV};
  for (int i = 0; i < 2; i++) evtc_graph_add_output(g, evtc_node_add(g, ops[i], ins, 6, at, 2, node_names[2 + i]), NULL);
  evtc_graph_add_output(g, o, NULL);
  CHECK(g->diag.status == EVTC_OK, "case graph: %s", g->diag.msg);
  return g;
}

/* The schedules every case runs in (EVTC_ATTN_WG, EVTC_ATTN_WARPS, EVTC_ATTN_DQ); the programs run them again with
 * dq in the pass of dk and dv (4 warps, or warpgroups: at head dim 128 the mma.sync library's one pass). */
static const struct schedule {
  const char *name, *wg, *warps, *dq;
} schedules[] = {{"mma_w4", "0", "4", "0"},       {"mma_w8", "0", "8", "0"},        {"wgmma_1", "1", "4", "0"},
                 {"wgmma_2", "2", "4", "0"},      {"mma_w4_dq", "0", "4", "1"},     {"wgmma_1_dq", "1", "4", "1"},
                 {"wgmma_2_dq", "2", "4", "1"},   {"wgmma_1_dqf", "1", "4", "first"}, {"wgmma_2_dqf", "2", "4", "first"}};
enum { N_SCHEDULES = 4, N_PROGRAM_SCHEDULES = 9 };
static void schedule_set(int w) {
  setenv("EVTC_ATTN_WG", schedules[w].wg, 1);
  setenv("EVTC_ATTN_WARPS", schedules[w].warps, 1);
  setenv("EVTC_ATTN_DQ", schedules[w].dq, 1);
}

/* The module of node `name` of g (kernel named kname) as the backend emits it; *k is the kernel. */
static char *node_module(const evtc_graph *g, const char *name, const char *kname, evtc_kernel **kp) {
  const evtc_node *n = evtc_graph_find(g, name);
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, &n->id, 1, &d);
  CHECK(k && k->kind == EVTC_ML_OPAQUE, "%s: kernel build: %s", name, d.msg);
  if (!k) return NULL;
  char why[200];
  bool fits = evtc_cuda_attention_fits(k, true, why, sizeof why);
  CHECK(fits, "%s: the CUDA template refuses it: %s", name, why);
  if (!fits) {
    evtc_kernel_free(k);
    return NULL;
  }
  snprintf(k->name, sizeof k->name, "%s", kname);
  evtc_sb src = {0};
  evtc_cuda_emit_prelude(&src);
  evtc_cuda_emit_attention(&src, k, true);
  *kp = k;
  return src.s;
}

/* Random inputs exact in the case's dtype (in [-1, 1); q and k scaled so that the softmax is not flat). */
static double *random_input(const evtc_node *n, double scale) {
  int64_t m = evtc_type_numel(&n->type);
  double *x = malloc(sizeof(double) * (size_t)m);
  for (int64_t i = 0; i < m; i++) x[i] = evtc_round_to(n->type.dtype, scale * (2 * check_urand() - 1));
  return x;
}

/* Kernel k writing node `by` too (a by-product, program.c): the forward with the log-sum-exp, or the kernel of dk
 * and dv with dq (its sums in scratch, NAME_fin storing them): accepted, emitted and compiled through NVRTC (on a
 * GPU the programs run them: run_program). */
static void compile_by_product(const evtc_graph *g, evtc_kernel *k, const char *kname, const char *what, const char *by) {
  k->args = realloc(k->args, sizeof *k->args * ((size_t)k->n_args + 1));
  k->args[k->n_args++] = (evtc_karg){.node = evtc_graph_find(g, by), .output = true};
  char why[200] = "", name[sizeof k->name];
  CHECK(evtc_cuda_attention_fits(k, true, why, sizeof why), "%s with %s: refused: %s", what, by, why);
  const char *mode = getenv("EVTC_ATTN_DQ");
  snprintf(name, sizeof name, "%.40s_%s%s", kname, by, mode && strcmp(mode, "first") == 0 ? "f" : "");
  snprintf(k->name, sizeof k->name, "%s", name);
  evtc_sb src = {0};
  evtc_cuda_emit_prelude(&src);
  evtc_cuda_emit_attention(&src, k, true);
  CHECK(strstr(src.s, strcmp(by, "lse") == 0 ? "(float *)P.a[" : "(float *)scratch") != NULL &&
            (strcmp(by, "dq") != 0 || strstr(src.s, "_fin(evtc_params") != NULL),
        "%s with %s: no pointer to it in the call, or no finishing kernel", what, by);
  evtc_cuda_cubin cubin = {0};
  evtc_diag cd = {0};
  CHECK(evtc_cuda_compile(src.s, name, "sm_90a", nvrtc_opts, 3, &cubin, &cd) == EVTC_OK && cubin.size > 0,
        "%s with %s: NVRTC: %s", what, by, cd.msg);
  evtc_cuda_cubin_free(&cubin);
  free(src.s);
}

typedef struct gpu {
  evtc_cuda_device dev;
  bool open;
} gpu;

/* ||got - want|| / ||want|| over the elements whose index along the last axis (of size w) is in [c0, c1). */
static double rel_rms(const double *got, const double *want, int64_t n, int64_t w, int64_t c0, int64_t c1, bool *finite) {
  double num = 0, den = 0;
  *finite = true;
  for (int64_t i = 0; i < n; i++) {
    if (i % w < c0 || i % w >= c1) continue;
    if (!isfinite(got[i])) *finite = false;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Runs kernel k (module src) on the GPU with the interpreter's input values; compares its output. */
static void run_node(gpu *G, const char *what, const evtc_kernel *k, const char *src, evtc_interp *it) {
  evtc_diag d = {0};
  evtc_cuda_cubin cubin = {0};
  if (evtc_cuda_compile(src, k->name, G->dev.arch, nvrtc_opts, 3, &cubin, &d) != EVTC_OK) {
    CHECK(false, "%s: NVRTC: %s", what, d.msg);
    return;
  }
  CUmodule mod;
  evtc_status st = evtc_cuda_module_load(&G->dev, &cubin, k->name, &mod, &d);
  evtc_cuda_cubin_free(&cubin);
  CHECK(st == EVTC_OK, "%s: module load: %s", what, d.msg);
  if (st != EVTC_OK) return;
  evtc_cuda_kernel fn;
  CUdeviceptr ptr[16] = {0};
  int out = -1;
  if (evtc_cuda_kernel_get(&G->dev, mod, k->name, &fn, &d) == EVTC_OK) {
    for (int a = 0; a < k->n_args && d.status == EVTC_OK; a++) {
      const evtc_node *n = k->args[a].node;
      int64_t m = evtc_type_numel(&n->type);
      size_t bytes = (size_t)m * evtc_dtype_size(n->type.dtype);
      if (G->dev.drv->cuMemAlloc(&ptr[a], bytes ? bytes : 8) != 0) {
        evtc_diag_set(&d, EVTC_ERR_RUNTIME, "cuMemAlloc of %zu bytes", bytes);
        break;
      }
      if (k->args[a].output) {
        out = a;
        evtc_cuda_fill32(&G->dev, ptr[a], 0xFFFFFFFFu, bytes / 4, &d);     /* NaN poison */
        continue;
      }
      unsigned char *buf = malloc(bytes ? bytes : 1);
      evtc_elements_encode(n->type.dtype, evtc_interp_value(it, n), m, buf);
      evtc_cuda_copy_htod(&G->dev, ptr[a], buf, bytes, &d);
      free(buf);
    }
    struct {
      void *a[EVTC_CUDA_MAX_ARGS];
    } params = {{0}};
    for (int a = 0; a < k->n_args; a++) params.a[a] = (void *)(uintptr_t)ptr[a];
    CUdeviceptr stepp = 0, err = 0, scratch = 0;     /* the step: a zeroed device word, as the backend's slot */
    if (d.status == EVTC_OK && G->dev.drv->cuMemAlloc(&stepp, sizeof(uint64_t)) != 0)
      evtc_diag_set(&d, EVTC_ERR_RUNTIME, "cuMemAlloc of the step");
    if (d.status == EVTC_OK) evtc_cuda_fill32(&G->dev, stepp, 0, 2, &d);
    void *pv[] = {&params, &stepp, &err, &scratch};
    unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, smem = 0;
    evtc_cuda_attention_launch(k, true, &grid[0], &block[0], &smem);
    /* the wgmma dk with dv reads Dd from its NAME_pre in zeroed scratch, which its NAME_fin zeroes again */
    evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(k, true);
    evtc_cuda_kernel pre = {0}, fin = {0};
    char fname[sizeof k->name + 8];
    if (x.scratch_bytes && d.status == EVTC_OK) {
      if (G->dev.drv->cuMemAlloc(&scratch, x.scratch_bytes) != 0)
        evtc_diag_set(&d, EVTC_ERR_RUNTIME, "cuMemAlloc of %zu bytes of scratch", x.scratch_bytes);
      else
        evtc_cuda_fill32(&G->dev, scratch, 0, x.scratch_bytes / 4, &d);
    }
    unsigned pgrid[3] = {x.pre_grid, 1, 1}, pblock[3] = {x.pre_block, 1, 1}, fgrid[3] = {x.fin_grid, 1, 1};
    unsigned b256[3] = {256, 1, 1};
    snprintf(fname, sizeof fname, "%s_pre", k->name);
    if (x.pre_grid && d.status == EVTC_OK && evtc_cuda_kernel_get(&G->dev, mod, fname, &pre, &d) == EVTC_OK)
      evtc_cuda_launch(&G->dev, &pre, pgrid, pblock, x.pre_smem, pv, &d);
    if (d.status == EVTC_OK) evtc_cuda_launch(&G->dev, &fn, grid, block, smem, pv, &d);
    snprintf(fname, sizeof fname, "%s_fin", k->name);
    if (x.fin_grid && d.status == EVTC_OK && evtc_cuda_kernel_get(&G->dev, mod, fname, &fin, &d) == EVTC_OK)
      evtc_cuda_launch(&G->dev, &fin, fgrid, b256, 0, pv, &d);
    if (d.status == EVTC_OK) evtc_cuda_sync(&G->dev, what, &d);
    if (scratch && d.status == EVTC_OK) {     /* NAME_fin left the scratch zeroed */
      uint32_t *left = malloc(x.scratch_bytes);
      size_t nonzero = 0;
      evtc_cuda_copy_dtoh(&G->dev, left, scratch, x.scratch_bytes, &d);
      for (size_t i = 0; d.status == EVTC_OK && i < x.scratch_bytes / 4; i++) nonzero += left[i] != 0;
      CHECK(nonzero == 0, "%s: %zu words of scratch left nonzero after NAME_fin", what, nonzero);
      free(left);
    }
    if (scratch) G->dev.drv->cuMemFree(scratch);
    CHECK(d.status == EVTC_OK, "%s: %s", what, d.msg);
    if (d.status == EVTC_OK && out >= 0) {
      const evtc_node *n = k->args[out].node;
      int64_t m = evtc_type_numel(&n->type);
      size_t bytes = (size_t)m * evtc_dtype_size(n->type.dtype);
      unsigned char *buf = malloc(bytes);
      double *got = malloc(sizeof(double) * (size_t)m);
      evtc_cuda_copy_dtoh(&G->dev, buf, ptr[out], bytes, &d);
      evtc_elements_decode(n->type.dtype, buf, m, got);
      double tol = k->main->inputs[0]->type.dtype == EVTC_BF16 ? 2e-2 : 4e-3;
      int64_t w = n->type.shape[n->type.rank - 1];
      bool kv = k->main->op == EVTC_OP_ATTENTION_BACKWARD_KV;
      for (int part = 0; part < (kv ? 2 : 1); part++) {     /* dkv: dk and dv, each half on its own */
        bool finite;
        const char *pname = kv ? (part ? "dv" : "dk") : n->name;
        double e = rel_rms(got, evtc_interp_value(it, n), m, w, kv ? part * w / 2 : 0, kv ? (part + 1) * w / 2 : w, &finite);
        printf("  %-4s %3u threads: rel rms err %.2e%s\n", pname, block[0], e, finite ? "" : " (NaN: unwritten elements)");
        CHECK(finite && e < tol, "%s %s: rel rms err %.3e (tolerance %.1e)%s", what, pname, e, tol,
              finite ? "" : ", NaN elements");
      }
      free(buf);
      free(got);
    }
    if (stepp) G->dev.drv->cuMemFree(stepp);
  } else {
    CHECK(false, "%s: %s", what, d.msg);
  }
  for (int a = 0; a < k->n_args; a++)
    if (ptr[a]) G->dev.drv->cuMemFree(ptr[a]);
  evtc_cuda_module_unload(&G->dev, mod);
}

static void run_case(gpu *G, int ci, bool nvrtc) {
  const att_case *c = &cases[ci];
  char name[96];
  case_name(c, name, sizeof name);
  printf("%s\n", name);
  evtc_graph *g = case_graph(c);
  evtc_interp *it = NULL;
  if (G->open) {
    it = evtc_interp_new(g);
    const char *leaves[4] = {"q", "k", "v", "dout"};
    double *x[4];
    for (int i = 0; i < 4; i++) {
      x[i] = random_input(evtc_graph_find(g, leaves[i]), i < 2 ? 2.0 : 1.0);
      evtc_interp_set(it, evtc_graph_find(g, leaves[i]), x[i]);
    }
    evtc_diag d = {0};
    CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "%s: interpreter: %s", name, d.msg);
    for (int i = 0; i < 4; i++) free(x[i]);
  }
  for (int w = 0; w < N_SCHEDULES; w++)
    for (int j = 0; j < N_NODES; j++) {
      char kname[64], what[160];
      schedule_set(w);
      snprintf(kname, sizeof kname, "att_case%d_%s_%s", ci, schedules[w].name, node_names[j]);
      snprintf(what, sizeof what, "%s %s (%s)", name, node_names[j], schedules[w].name);
      evtc_kernel *k = NULL;
      char *src = node_module(g, node_names[j], kname, &k);
      if (!src) continue;
      if (G->open) {
        run_node(G, what, k, src, it);
      } else if (nvrtc) {
        evtc_cuda_cubin cubin = {0};
        evtc_diag cd = {0};
        CHECK(evtc_cuda_compile(src, kname, "sm_90a", nvrtc_opts, 3, &cubin, &cd) == EVTC_OK && cubin.size > 0,
              "%s: NVRTC: %s", what, cd.msg);
        printf("  %-4s %s: compiled for sm_90a (%s)\n", node_names[j], schedules[w].name, cubin.cache_hit ? "cache hit" : "NVRTC");
        evtc_cuda_cubin_free(&cubin);
      }
      free(src);
      if (j == 0 && k && !G->open && nvrtc) compile_by_product(g, k, kname, what, "lse");
      if (j == 3 && k && !G->open && nvrtc && strcmp(schedules[w].wg, "0") != 0) {     /* wgmma's one pass, dq first */
        setenv("EVTC_ATTN_DQ", "1", 1);
        compile_by_product(g, k, kname, what, "dq");
        if (c->d == 64) {     /* the wgmma library's: dq first */
          k->n_args--;
          setenv("EVTC_ATTN_DQ", "first", 1);
          compile_by_product(g, k, kname, what, "dq");
        }
      }
      evtc_kernel_free(k);
    }
  if (it) evtc_interp_free(it);
  evtc_graph_free(g);
}

/* What the template refuses, with the reason the backend reports. */
static void check_refusals(void) {
  static const char *const texts[] = {
      "graph r {\n  %q = input() : f32[1,1,8,64]\n  %o = attention(%q, %q, %q) {scale=0.125} : f32[1,1,8,64]\n"
      "  output %o\n}\n",
      "graph r {\n  %q = input() : bf16[1,1,8,32]\n  %o = attention(%q, %q, %q) {scale=0.125} : bf16[1,1,8,32]\n"
      "  output %o\n}\n"};
  static const char *const want[] = {"f16 and bf16", "64 and 128"};
  for (int i = 0; i < 2; i++) {
    evtc_graph *g = evtc_graph_parse_string(texts[i], "refusal", NULL, 0);
    CHECK(g != NULL, "refusal case %d does not parse", i);
    if (!g) continue;
    evtc_diag d = {0};
    const evtc_node *o = evtc_graph_find(g, "o");
    evtc_kernel *k = evtc_kernel_build(g, &o->id, 1, &d);
    char why[200] = "";
    CHECK(k && !evtc_cuda_attention_fits(k, true, why, sizeof why) && strstr(why, want[i]), "refusal %d: \"%s\"", i, why);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

/* Whether the programs of attention at head dim d take dq from the kernel of dk and dv: EVTC_ATTN_DQ=1 with
 * blocks of 4 warps (one pass: taken by the wgmma library at head dim 64 and by the mma.sync one otherwise), or
 * EVTC_ATTN_DQ=first on the wgmma library (head dim 64: dq's own kernel launched first by the kernel of dk and
 * dv). */
static bool dq_by_product(int64_t d) {
  const char *dq = getenv("EVTC_ATTN_DQ"), *warps = getenv("EVTC_ATTN_WARPS"), *wg = getenv("EVTC_ATTN_WG");
  if (dq && strcmp(dq, "first") == 0) return d == 64 && wg && strcmp(wg, "0") != 0;
  return dq && strcmp(dq, "1") == 0 && warps && strcmp(warps, "4") == 0;
}

/* Case ci as a program on the CUDA backend: every node compiled, outputs near the interpreter's. */
static void run_program(int ci) {
  char name[96];
  case_name(&cases[ci], name, sizeof name);
  evtc_graph *g = case_graph(&cases[ci]);
  double tol = cases[ci].dt == EVTC_BF16 ? 4.0 / 256 : 4.0 / 2048;
  evtc_program *p = cpu_compare(g, NULL, 0, tol, 0, name);
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    int want = dq_by_product(cases[ci].d) ? 2 : 1;
    CHECK(st.interpreted == 0 && st.by_products == want, "%s: %d kernels in the interpreter, %d by-products (want %d)",
          name, st.interpreted, st.by_products, want);
    printf("program %s (%s warps): %d kernels on the CUDA backend, %d interpreted, %d by-products\n", name,
           getenv("EVTC_ATTN_WARPS"), st.compiled, st.interpreted, st.by_products);
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* The joint graph of loss = sum(attention(q, k, v) * c) of case ci for q, k, v, and dk head-merged, on the CUDA
   backend against the interpreter. */
static void run_joint_program(int ci) {
  const att_case *c = &cases[ci];
  char name[96], text[1024];
  case_name(c, name, sizeof name);
  strcat(name, " gradients");
  const char *dt = evtc_dtype_name(c->dt);
  long long b = c->b, h = c->h, s = c->s, t = c->t, d = c->d;
  snprintf(text, sizeof text,
           "graph joint {\n  %%q = input() : %s[%lld,%lld,%lld,%lld]\n  %%k = input() : %s[%lld,%lld,%lld,%lld]\n"
           "  %%v = input() : %s[%lld,%lld,%lld,%lld]\n  %%c = input() : %s[%lld,%lld,%lld,%lld]\n"
           "  %%o = attention(%%q, %%k, %%v) {scale=%.17g, causal=%d} : %s[%lld,%lld,%lld,%lld]\n"
           "  %%m = mul(%%o, %%c) : %s[%lld,%lld,%lld,%lld]\n  %%l = reduce_sum(%%m) : %s[]\n  output %%o\n  loss %%l\n}\n",
           dt, b, h, s, d, dt, b, h, t, d, dt, b, h, t, d, dt, b, h, s, d, 1.0 / sqrt((double)d), c->causal, dt, b, h, s,
           d, dt, b, h, s, d, dt);
  evtc_graph *g = oracle_parse(text, name);
  evtc_diag d0 = {0};
  static const char *const wrt[3] = {"q", "k", "v"};
  evtc_graph *jg = g ? evtc_autodiff(g, wrt, 3, NULL, &d0) : NULL;
  CHECK(jg != NULL, "%s: autodiff: %s", name, d0.msg);
  evtc_node *gk = jg ? evtc_graph_find(jg, "grad.k") : NULL;
  if (gk) {
    evtc_attr perm = evtc_attr_ints("perm", 4, (int64_t[]){0, 2, 1, 3}), shape = evtc_attr_ints("shape", 3, (int64_t[]){b, t, h * d});
    evtc_node *mk = evtc_node_add(jg, EVTC_OP_PERMUTE, &gk, 1, &perm, 1, NULL);
    mk = evtc_node_add(jg, EVTC_OP_RESHAPE, &mk, 1, &shape, 1, "merged_dk");
    CHECK(mk != NULL, "%s: head merge: %s", name, jg->diag.msg);
    if (mk) evtc_graph_add_output(jg, mk, NULL);
  }
  if (jg && jg->diag.status == EVTC_OK) {
    evtc_program *p = cpu_compare(jg, NULL, 0, c->dt == EVTC_BF16 ? 4.0 / 256 : 4.0 / 2048, 0, name);
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      int want = dq_by_product(c->d) ? 2 : 1;
      CHECK(st.interpreted == 0 && st.by_products == want, "%s: %d kernels in the interpreter, %d by-products (want %d: "
            "the log-sum-exp from the forward%s)", name, st.interpreted, st.by_products, want,
            want == 2 ? ", dq from the kernel of dk and dv" : "");
      printf("program %s (%s warps): %d kernels on the CUDA backend, %d interpreted, %d by-products\n", name,
             getenv("EVTC_ATTN_WARPS"), st.compiled, st.interpreted, st.by_products);
    }
    evtc_program_free(p);
  }
  evtc_graph_free(jg);
  evtc_graph_free(g);
}

/* Two attention layers over bf16 [1, 2, 130, 64], the second reading the first's output as its queries (through a
 * dropout when `dropout`), differentiated for q, k, v, k2 and v2; NULL after a failed check.  The loss sums the
 * second's squared output: a sum of products with a random input cancels to a few hundredths of its terms' size,
 * below what 16640 bf16 roundings let one compare with the interpreter (on the H200: 0.154 against 0.126). */
#define TWO_T "bf16[1,2,130,64]"
static evtc_graph *two_layers(bool dropout, const char *what) {
  char text[1024];
  snprintf(text, sizeof text,
           "graph two {\n  %%q = input() : " TWO_T "\n  %%k = input() : " TWO_T "\n  %%v = input() : " TWO_T "\n"
           "  %%k2 = input() : " TWO_T "\n  %%v2 = input() : " TWO_T "\n"
           "  %%o = attention(%%q, %%k, %%v) {scale=0.125, causal=0} : " TWO_T "\n%s"
           "  %%o2 = attention(%%%s, %%k2, %%v2) {scale=0.125, causal=1} : " TWO_T "\n"
           "  %%m = mul(%%o2, %%o2) : " TWO_T "\n  %%l = reduce_sum(%%m) : bf16[]\n  output %%o2\n  loss %%l\n}\n",
           dropout ? "  %od = dropout(%o) {p=0.1, seed=3} : " TWO_T "\n" : "", dropout ? "od" : "o");
  evtc_graph *g = oracle_parse(text, what);
  evtc_diag d = {0};
  static const char *const wrt[5] = {"q", "k", "v", "k2", "v2"};
  evtc_graph *jg = g ? evtc_autodiff(g, wrt, 5, NULL, &d) : NULL;
  CHECK(jg != NULL, "%s: autodiff: %s", what, d.msg);
  evtc_graph_free(g);
  return jg;
}

/* The two layers without dropout and their gradients: both kernels of dk and dv (taking dq, one pass) add into the
 * backend's one shared scratch in turn, so the second one's dq is right only if the first one's NAME_fin left the
 * scratch zeroed; a second program on the same backend then starts from what the first left. */
static void run_two_layer_program(void) {
  evtc_graph *jg = two_layers(false, "two layers");
  for (int run = 0; jg && run < 2; run++) {
    char what[64];
    snprintf(what, sizeof what, "two layers gradients, program %d", run + 1);
    evtc_program *p = cpu_compare(jg, NULL, 0, 4.0 / 256, 0, what);
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      int want = dq_by_product(64) ? 4 : 2;
      CHECK(st.interpreted == 0 && st.by_products == want, "%s: %d kernels in the interpreter, %d by-products (want %d)",
            what, st.interpreted, st.by_products, want);
      printf("program %s (%s warps): %d kernels on the CUDA backend, %d by-products\n", what, getenv("EVTC_ATTN_WARPS"),
             st.compiled, st.by_products);
    }
    evtc_program_free(p);
  }
  evtc_graph_free(jg);
}

/* Heads split from a packed bf16 projection and merged back, forward and backward, on the one-kernel-per-node
 * plan: the attention kernels read q, k, v and dout in place, write the merged output and their parts of the
 * concatenated gradient (dv apart from dk) through views (program_views.c), and the numbers match. */
static void run_views_program(void) {
  char text[4096] = "graph views {\n";
  const long long b = 2, s = 70, h = 2, d = 64, hd = h * d;
#define LINE(...) snprintf(text + strlen(text), sizeof text - strlen(text), __VA_ARGS__)
  LINE("  %%qkv = input() : bf16[%lld,%lld,%lld]\n  %%do = input() : bf16[%lld,%lld,%lld]\n", b, s, 3 * hd, b, s, hd);
  const char *const qkv[] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    LINE("  %%%s = slice(%%qkv) {axes=[2], starts=[%lld], ends=[%lld]} : bf16[%lld,%lld,%lld]\n", qkv[i], i * hd,
         (i + 1) * hd, b, s, hd);
    LINE("  %%%sh = reshape(%%%s) {shape=[%lld,%lld,%lld,%lld]} : bf16[%lld,%lld,%lld,%lld]\n", qkv[i], qkv[i], b, s, h,
         d, b, s, h, d);
    LINE("  %%%st = permute(%%%sh) {perm=[0,2,1,3]} : bf16[%lld,%lld,%lld,%lld]\n", qkv[i], qkv[i], b, h, s, d);
  }
  LINE("  %%doh = reshape(%%do) {shape=[%lld,%lld,%lld,%lld]} : bf16[%lld,%lld,%lld,%lld]\n", b, s, h, d, b, s, h, d);
  LINE("  %%dot = permute(%%doh) {perm=[0,2,1,3]} : bf16[%lld,%lld,%lld,%lld]\n", b, h, s, d);
  LINE("  %%a = attention(%%qt, %%kt, %%vt) {scale=0.125, causal=1} : bf16[%lld,%lld,%lld,%lld]\n", b, h, s, d);
  LINE("  %%l = attention_lse(%%qt, %%kt) {scale=0.125, causal=1} : f32[%lld,%lld,%lld]\n", b, h, s);
  LINE("  %%dq = attention_backward_q(%%qt, %%kt, %%vt, %%a, %%dot, %%l) {scale=0.125, causal=1} : "
       "bf16[%lld,%lld,%lld,%lld]\n", b, h, s, d);
  LINE("  %%dkv = attention_backward_kv(%%qt, %%kt, %%vt, %%a, %%dot, %%l) {scale=0.125, causal=1} : "
       "bf16[%lld,%lld,%lld,%lld]\n", b, h, s, 2 * d);
  LINE("  %%dk = slice(%%dkv) {axes=[3], starts=[0], ends=[%lld]} : bf16[%lld,%lld,%lld,%lld]\n", d, b, h, s, d);
  LINE("  %%dv = slice(%%dkv) {axes=[3], starts=[%lld], ends=[%lld]} : bf16[%lld,%lld,%lld,%lld]\n", d, 2 * d, b, h, s, d);
  const char *const back[] = {"dq", "dk", "dv", "a"};
  for (int i = 0; i < 4; i++) {
    LINE("  %%%sp = permute(%%%s) {perm=[0,2,1,3]} : bf16[%lld,%lld,%lld,%lld]\n", back[i], back[i], b, s, h, d);
    LINE("  %%%sr = reshape(%%%sp) {shape=[%lld,%lld,%lld]} : bf16[%lld,%lld,%lld]\n", back[i], back[i], b, s, hd, b, s,
         hd);
  }
  LINE("  %%gr = concat(%%dqr, %%dkr, %%dvr) {axis=2} : bf16[%lld,%lld,%lld]\n  output %%gr\n  output %%ar\n}\n", b, s,
       3 * hd);
#undef LINE
  evtc_graph *g = oracle_parse(text, "views");
  if (!g) return;
  int nk = 0;
  int32_t *plan = evtc_plan_single(g, &nk);
  evtc_program *p = cpu_compare(g, plan, nk, 4.0 / 256, 0, "views (packed bf16 heads, one kernel per node)");
  if (p) {
    evtc_program_stats st = evtc_program_get_stats(p);
    int want = dq_by_product(d) ? 2 : 1;
    CHECK(st.views == 14 && st.interpreted == 0 && st.by_products == want, "views: %d layout kernels read or written "
          "in place (want 14), %d interpreted, %d by-products (want %d)", st.views, st.interpreted, st.by_products, want);
    printf("program views (%s warps): %d kernels on the CUDA backend, %d views, %d by-products\n",
           getenv("EVTC_ATTN_WARPS"), st.compiled, st.views, st.by_products);
  }
  evtc_program_free(p);
  free(plan);
  evtc_graph_free(g);
}

/* The two layers with dropout on the first one's output, as training steps replayed from one CUDA graph and
 * launched one by one (program_replay.c): bit for bit unless dq is summed by atomics in the pass of dk and dv
 * (EVTC_ATTN_DQ=1), whose order varies from run to run. */
static void run_replay_program(const struct schedule *w) {
  char what[96];
  snprintf(what, sizeof what, "graph replay: two layers with dropout (%s)", w->name);
  evtc_graph *jg = two_layers(true, what);
  const bool atomics = strcmp(w->dq, "1") == 0;
  if (jg) evtc_program_free(replay_compare(jg, oracle_be, 4, 4.0 / 256, atomics ? 4.0 / 256 : 0, 0, what));
  evtc_graph_free(jg);
}

int main(void) {
  check_rng = 0xF1A5A77Eull;
  check_refusals();
  gpu G = {0};
  evtc_diag d = {0};
  bool nvrtc;
  G.open = gpu_open(&G.dev, &d, &nvrtc);
  for (int i = 0; i < N_CASES; i++) run_case(&G, i, nvrtc);
  if (!G.open) return gpu_skip(d.msg);
  evtc_diag bd = {0};
  oracle_be = evtc_backend_cuda(&bd);
  CHECK(oracle_be != NULL, "CUDA backend: %s", bd.msg);
  for (int w = 0; w < N_PROGRAM_SCHEDULES && oracle_be; w++) {
    schedule_set(w);
    printf("schedule %s\n", schedules[w].name);
    run_program(1);
    run_program(2);
    run_joint_program(1);
    run_joint_program(2);
    run_views_program();
    run_two_layer_program();
    run_replay_program(&schedules[w]);
  }
  evtc_cuda_device_close(&G.dev);
  return check_summary();
}
