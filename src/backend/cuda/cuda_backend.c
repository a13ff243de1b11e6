/* cuda_backend.c -- the CUDA backend behind the backend vtable (backend.h).
 *
 * One process-wide backend on GPU 0, opened at the first
 * evtc_backend_cuda() call.  supports() accepts elementwise and rows
 * kernels over every dtype (f16 and bf16 as 2-byte storage with f32 math:
 * cpu_visitor.c) and GEMMs: f16 / bf16 ones on evtc's own sm_90a GEMM with
 * the visitor DAG, reductions included, in its epilogue (cuda_emit_evt.c)
 * where the template fits and EVTC_GEMM does not say cublaslt; the others
 * through cuBLASLt into f32 scratch and an epilogue kernel, when cuBLASLt
 * can describe them and the epilogue has no reductions (a refused f16 /
 * bf16 GEMM says why on stderr and in the emitted source);
 * OPAQUE kernels of the attention family on the flash-attention template
 * (cuda_emit_attention.c), gather, embedding, scatter_add, pad and concat
 * on the data-movement templates (cuda_emit_opaque.c); conv2d and other
 * OPAQUE kernels are refused with
 * a reason, so the program runs them in the interpreter with device<->host
 * copies and warns.
 * emit() appends CUDA C (cuda_emit_*.c); compile() runs NVRTC for the
 * device's exact architecture through the disk cache (cuda_compile.h);
 * load() loads the CUBIN; kernel() makes a launch handle per kernel (the
 * launch shape from the same plan the emitter used, reduction scratch,
 * cuBLASLt descriptors, an error flag slot); begin_run() queues the write
 * of the step into the context's step slot, which every kernel reads (so
 * launches captured into a graph stay valid across steps); run() queues
 * its launches on the device stream; finish() waits and reports the first CUDA error,
 * failed copy or raised error flag, naming the kernel; mark() and
 * mark_intervals() time kernels by CUDA events (explain --profile);
 * graph_begin() .. graph_end() capture the launches of a run into a CUDA
 * graph that graph_launch() replays (not offered under
 * EVTC_CUDA_LAUNCH_BLOCKING=1, whose waits a capture cannot hold).
 *
 * Buffers are device memory (cuMemAlloc, zeroed); device pointers travel
 * through the program as void *.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit.h"
#include "backend/cuda/cuda_emit_attention.h"
#include "backend/cuda/cuda_gemm.h"

#define ERR_SLOTS 1024
#define WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct cuda_ctx {
  evtc_cuda_device dev;
  const evtc_cuda_cublaslt *lt;   /* NULL until a GEMM needs it */
  cublasLtHandle_t lt_handle;
  CUdeviceptr workspace;
  CUdeviceptr errs;                /* ERR_SLOTS ints: one error flag per kernel handle */
  CUdeviceptr step;                /* the step of the run being queued (begin_run), read by every kernel */
  char err_names[ERR_SLOTS][128];     /* kernel names (and an OPAQUE kernel's node) */
  int next_err, max_err;
  evtc_diag sticky;                /* the first failure of a call that cannot return one */
  CUevent *marks;                  /* mark() timestamps, created as profiles ask for them */
  int n_marks;
  CUdeviceptr zeroed;              /* scratch every user leaves zeroed after each run, shared (zeroed_scratch) */
  size_t zeroed_bytes;
  CUdeviceptr split_ws;            /* split-K GEMMs' partial tiles, shared (split_workspace) */
  size_t split_ws_bytes;
} cuda_ctx;

typedef struct cuda_handle {
  char name[64], fin_name[72], pre_name[72];    /* as messages name the kernel, its finishing and preparing passes */
  char entry[64], fin_entry[72], pre_entry[72]; /* their entry points in the module */
  evtc_cuda_kernel main, fin, pre; /* main: NULL fn for a direct GEMM; evt: the GEMM with its epilogue */
  bool has_fin, has_pre;           /* pre: attention's NAME_pre, launched before main */
  unsigned grid, block, smem, fin_grid, pre_grid, pre_block, pre_smem;
  int n_args;
  CUdeviceptr scratch;             /* rows: reduction partials; GEMM: the result for the epilogue */
  bool shared_scratch;             /* the context's zeroed scratch instead (zeroed_scratch) */
  int err_slot;
  bool gemm, direct;               /* direct: the GEMM writes the output argument `out_arg` */
  int a_arg, b_arg, out_arg;
  evtc_cuda_gemm g;
  bool evt;                        /* evtc's GEMM + visitor epilogue (plan evt, launch L for pointers a, b) */
  evtc_cuda_evt_plan evt_plan;
  evtc_cuda_gemm_launch *L;        /* 128-byte aligned (aligned_alloc); NULL until the first run */
  void *L_a, *L_b, *L_out, *L_x;
  struct cuda_handle *next;
} cuda_handle;

typedef struct cuda_module {
  CUmodule mod;
  cuda_handle *handles;
} cuda_module;

static cuda_ctx the_ctx;
static evtc_backend the_backend;

static cuda_ctx *ctx_of(const evtc_backend *be) { return be->ctx; }

/* Records the first failure of a void entry point for finish(). */
static void stick(cuda_ctx *c, const evtc_diag *d) {
  if (c->sticky.status == EVTC_OK && d->status != EVTC_OK) c->sticky = *d;
}

/* A GEMM writing its output itself: a plain f32 / f64 store (f16 / bf16 results are rounded by the epilogue). */
static bool is_direct_gemm(const evtc_kernel *k, int *out_arg) {
  if (k->n_v != 2 || k->v[0].kind != EVTC_V_ACC || k->v[1].kind != EVTC_V_STORE) return false;
  const evtc_vnode *s = &k->v[1];
  if (s->dtype != k->gemm.dtype || s->cls != EVTC_VC_FULL || (s->dtype != EVTC_F32 && s->dtype != EVTC_F64)) return false;
  *out_arg = s->arg;
  return true;
}

/* Whether the device has wgmma and TMA (an H100 / H200 as sm_90a). */
static bool is_sm90a(const cuda_ctx *c) { return strcmp(c->dev.arch, "sm_90a") == 0; }

/* Whether GEMM kernel k runs on evtc's GEMM on this device (sm_90a: wgmma and TMA; sm_8x, or EVTC_GEMM=sm80
 * on a later GPU: mma.sync and cp.async), *pl filled; else why. */
static bool use_evt(const cuda_ctx *c, const evtc_kernel *k, evtc_cuda_evt_plan *pl, char *why, size_t cap) {
  if (c->dev.cc_major < 8) {
    snprintf(why, cap, "the device is %s (evtc's GEMM needs sm_80 (mma.sync) or sm_90a (wgmma, TMA))", c->dev.arch);
    return false;
  }
  return evtc_cuda_gemm_use_evt(k, &c->dev, pl, why, cap);
}

static evtc_cuda_rows_plan plan_of(const cuda_ctx *c, const evtc_kernel *k) {
  return evtc_cuda_rows_plan_of(k, c->dev.sm_count, c->dev.smem_per_block_optin);
}

/* A rows kernel that sums columns (a bias gradient) next to row reductions (softmax, cross-entropy) over rows of
 * at least LONG_ROW columns whose partial of every column (one persistent wave of blocks, each over rows that
 * already fill it) would live in scratch or in f64 registers without a shared-memory flush.  BERT-Large's
 * vocabulary cross-entropy with its bias gradient (16384 x 30528 bf16) took 2.21 ms on the H200 so against 1.10
 * ms for the cross-entropy alone (2026-11-29); refused, the partitioner leaves the sum to a kernel of its own
 * (column tiles).  With its partial rows in shared memory (f32 where f64 ones do not fit: cuda_rows_plan.c) the
 * kernel is taken. */
enum { LONG_ROW = 8192 };
static bool long_rows_with_column_sums(const cuda_ctx *c, const evtc_kernel *k) {
  if (k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV || k->kind == EVTC_ML_OPAQUE || k->cols < LONG_ROW) return false;
  if (!evtc_kernel_has_reduce(k, EVTC_VC_COL) || !evtc_kernel_has_reduce(k, EVTC_VC_ROW)) return false;
  evtc_cuda_rows_plan pl = plan_of(c, k);
  return pl.row_partials == 2 || (pl.row_partials == 0 && !pl.row_flush);
}

static bool cuda_supports(const evtc_backend *be, const evtc_kernel *k, char *why, size_t cap) {
  if (k->kind == EVTC_ML_OPAQUE && !evtc_cuda_opaque_op(k->main->op))
    return evtc_cuda_attention_fits(k, is_sm90a(ctx_of(be)), why, cap);
  for (int a = 0; a < k->n_args; a++)
    if (k->args[a].strided) {
      snprintf(why, cap, "%%%s through a view (only the attention template takes views)", k->args[a].node->name);
      return false;
    }
  if (k->kind == EVTC_ML_OPAQUE) return evtc_cuda_opaque_fits(k, why, cap);
  bool gemm = k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV;
  if (k->rows * k->cols == 0 || (gemm && k->gemm.batch == 0)) {
    snprintf(why, cap, "an empty tensor");
    return false;
  }
  if (k->n_args > EVTC_CUDA_MAX_ARGS) {
    snprintf(why, cap, "more than %d arguments", EVTC_CUDA_MAX_ARGS);
    return false;
  }
  if (k->kind == EVTC_ML_GEMM) {
    evtc_cuda_evt_plan evt;
    char evt_why[200];
    if (use_evt(ctx_of(be), k, &evt, evt_why, sizeof evt_why)) return true;
    if (!evtc_cuda_gemm_fits(k, why, cap) || !evtc_kernel_visitor_fits(k, why, cap)) {
      size_t n = strlen(why);
      if (k->gemm.dtype == EVTC_BF16 || k->gemm.dtype == EVTC_F16)
        snprintf(why + n, cap > n ? cap - n : 0, " (cuBLASLt path; evtc's GEMM: %s)", evt_why);
      return false;
    }
    return true;
  }
  if (gemm && !evtc_cuda_gemm_fits(k, why, cap)) return false;
  if (long_rows_with_column_sums(ctx_of(be), k)) {
    snprintf(why, cap, "column sums next to row reductions over rows of %lld columns, their partial rows out of "
             "shared memory (slower than the two apart)", (long long)k->cols);
    return false;
  }
  return evtc_kernel_visitor_fits(k, why, cap);
}

static void cuda_emit(const evtc_backend *be, const evtc_kernel *k, char **src, size_t *len) {
  evtc_sb b = {.s = *src, .len = *len, .cap = *src ? *len + 1 : 0};
  if (!b.s) evtc_cuda_emit_prelude(&b);
  evtc_sb_printf(&b, "/* kernel %s: %d node%s */\n", k->name, k->n_nodes, k->n_nodes == 1 ? "" : "s");
  int out_arg;
  evtc_cuda_evt_plan evt;
  char why[200];
  if (k->kind == EVTC_ML_GEMM && use_evt(ctx_of(be), k, &evt, why, sizeof why)) {
    evtc_cuda_emit_evt(&b, k, &evt);
  } else if (k->kind == EVTC_ML_GEMM) {
    evtc_sb_printf(&b, "/* %s: cuBLASLt GEMM, then the epilogue kernel (evtc's GEMM: %s) */\n", k->name, why);
    if (!is_direct_gemm(k, &out_arg)) evtc_cuda_emit_elementwise(&b, k, evtc_cpu_ctype(k->gemm.dtype));
  } else if (k->kind == EVTC_ML_OPAQUE && evtc_cuda_opaque_op(k->main->op)) {
    evtc_cuda_emit_opaque(&b, k);
  } else if (k->kind == EVTC_ML_OPAQUE) {
    evtc_cuda_emit_attention(&b, k, is_sm90a(ctx_of(be)));
  } else if (evtc_kernel_flat_fits(k)) {
    evtc_cuda_emit_elementwise(&b, k, NULL);
  } else {
    evtc_cuda_rows_plan pl = plan_of(ctx_of(be), k);
    evtc_cuda_emit_rows(&b, k, &pl);
  }
  *src = b.s;
  *len = b.len;
}

static char *cuda_compile(const evtc_backend *be, const char *src, const evtc_kernel *const *kernels, int n_kernels,
                          evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  /* 177, 550: unused argument pointers and partial sums, normal in generated code */
  static const char *const opts[] = {"--std=c++17", "-lineinfo", "--diag-suppress=177,550"};
  char name[192];
  if (n_kernels == 1) snprintf(name, sizeof name, "%s", kernels[0]->name);
  else snprintf(name, sizeof name, "module of %d kernels (%s..%s)", n_kernels, kernels[0]->name,
                kernels[n_kernels - 1]->name);
  evtc_cuda_cubin cubin;
  if (evtc_cuda_compile(src, name, c->dev.arch, opts, 3, &cubin, d) != EVTC_OK) {
    if (n_kernels == 1) return NULL;
    const char *at = strstr(d->msg, ".cu(");       /* NVRTC's "FILE.cu(LINE): error" names the kernel at fault */
    const evtc_kernel *kk = at ? evtc_kernel_at_line(src, kernels, n_kernels, strtol(at + 4, NULL, 10)) : NULL;
    const char *k = kk ? kk->name : NULL;
    if (k) {
      char msg[sizeof d->msg];
      int n = snprintf(msg, sizeof msg, "kernel %s: ", k);
      if (n > 0 && (size_t)n < sizeof msg) {
        memcpy(msg + n, d->msg, sizeof msg - (size_t)n - 1);
        msg[sizeof msg - 1] = 0;
        memcpy(d->msg, msg, sizeof msg);
      }
    }
    return NULL;
  }
  char *path = cubin.path;
  cubin.path = NULL;
  evtc_cuda_cubin_free(&cubin);
  return path;
}

static void *cuda_load(const evtc_backend *be, const char *path, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  FILE *f = fopen(path, "rb");
  if (!f) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot read CUDA kernels %s", path);
    return NULL;
  }
  evtc_cuda_cubin cubin = {0};
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  cubin.data = malloc((size_t)(n > 0 ? n : 1));
  cubin.size = fread(cubin.data, 1, (size_t)(n > 0 ? n : 0), f);
  fclose(f);
  cuda_module *m = calloc(1, sizeof *m);
  evtc_status s = evtc_cuda_module_load(&c->dev, &cubin, path, &m->mod, d);
  free(cubin.data);
  if (s != EVTC_OK) {
    free(m);
    return NULL;
  }
  return m;
}

/* Looks entry point `entry` up in module m into *k, named `shown` in launch errors. */
static evtc_status entry_get(cuda_ctx *c, const cuda_module *m, const char *entry, const char *shown,
                             evtc_cuda_kernel *k, evtc_diag *d) {
  if (evtc_cuda_kernel_get(&c->dev, m->mod, entry, k, d) != EVTC_OK) return d->status;
  k->name = shown;
  return EVTC_OK;
}

static void handle_free(cuda_ctx *c, cuda_handle *h) {
  evtc_cuda_gemm_free(&h->g);
  free(h->L);
  if (h->scratch) c->dev.drv->cuMemFree(h->scratch);
  free(h);
}

static void cuda_unload(const evtc_backend *be, void *module) {
  cuda_ctx *c = ctx_of(be);
  cuda_module *m = module;
  evtc_cuda_sync(&c->dev, "unloading kernels", &c->sticky);
  for (cuda_handle *h = m->handles, *next; h; h = next) {
    next = h->next;
    handle_free(c, h);
  }
  evtc_cuda_module_unload(&c->dev, m->mod);
  free(m);
}

static evtc_status scratch_alloc(cuda_ctx *c, cuda_handle *h, size_t bytes, evtc_diag *d) {
  char what[160];
  snprintf(what, sizeof what, "cuMemAlloc (%zu bytes of scratch for kernel %s)", bytes, h->name);
  return evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(&h->scratch, bytes ? bytes : 8), what, EVTC_ERR_RUNTIME, d);
}

/* A buffer of the context that kernels share, one after another on the stream: at least `bytes` of it in *buf
 * (*have bytes now), grown when a kernel needs more -- once the kernels still queued are done with it -- and
 * zeroed when `zero`. */
static evtc_status shared_buffer(cuda_ctx *c, CUdeviceptr *buf, size_t *have, size_t bytes, bool zero, const char *what,
                                 evtc_diag *d) {
  if (bytes <= *have) return EVTC_OK;
  char msg[128];
  if (*buf) {
    snprintf(msg, sizeof msg, "growing the %s", what);
    if (evtc_cuda_sync(&c->dev, msg, d) != EVTC_OK) return d->status;
    c->dev.drv->cuMemFree(*buf);
    *buf = 0;
    *have = 0;
  }
  snprintf(msg, sizeof msg, "cuMemAlloc (%zu bytes of %s)", bytes, what);
  if (evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(buf, bytes), msg, EVTC_ERR_RUNTIME, d) ||
      (zero && evtc_cuda_fill32(&c->dev, *buf, 0, (bytes + 3) / 4, d)))
    return d->status;
  *have = bytes;
  return EVTC_OK;
}

/* The context's zeroed scratch: kernels that leave their scratch zeroed after each run (attention's dq sums,
 * scatter_add's accumulators) share one buffer instead of one each (BERT-Large's 24 attention backwards with dq:
 * 64 MiB instead of 1.5 GiB). */
static evtc_status zeroed_scratch(cuda_ctx *c, size_t bytes, evtc_diag *d) {
  return shared_buffer(c, &c->zeroed, &c->zeroed_bytes, bytes, true, "shared scratch", d);
}

/* The context's split-K workspace: split-K GEMMs (cuda_emit_gemm.c) keep nothing in it from one launch to the
 * next, so they share one (BERT-Large's 49 weight gradients of few tiles: 48 MiB instead of 2.3 GiB). */
static evtc_status split_workspace(cuda_ctx *c, size_t bytes, evtc_diag *d) {
  return shared_buffer(c, &c->split_ws, &c->split_ws_bytes, bytes, false, "split-K workspace", d);
}

/* Where h's scratch pointer is read at launch. */
static CUdeviceptr *scratch_of(cuda_ctx *c, cuda_handle *h) { return h->shared_scratch ? &c->zeroed : &h->scratch; }

static evtc_status gemm_handle(cuda_ctx *c, cuda_module *m, const evtc_kernel *k, cuda_handle *h, evtc_diag *d) {
  h->gemm = true;
  h->a_arg = k->gemm.a_arg;
  h->b_arg = k->gemm.b_arg;
  char why[200];
  if (use_evt(c, k, &h->evt_plan, why, sizeof why)) {
    h->evt = true;
    evtc_cuda_gemm_count(true);
    if (entry_get(c, m, h->entry, h->name, &h->main, d)) return d->status;
    h->has_fin = h->evt_plan.has_fin;
    h->fin_grid = h->evt_plan.fin_grid;
    if (h->has_fin && entry_get(c, m, h->fin_entry, h->fin_name, &h->fin, d)) return d->status;
    /* the reduction slots, then split-K's or the split tail's counts (zero before the first launch; each launch leaves
     * them zero) */
    const evtc_cuda_evt_plan *pl = &h->evt_plan;
    const size_t red = (size_t)pl->scratch_doubles * sizeof(double), counts = (size_t)pl->split_counts * 4;
    if (red + counts && scratch_alloc(c, h, red + counts, d)) return d->status;
    if (counts && (evtc_cuda_fill32(&c->dev, h->scratch + red, 0, (size_t)pl->split_counts, d) ||
                   split_workspace(c, (size_t)pl->split_floats * sizeof(float), d)))
      return d->status;
    return EVTC_OK;
  }
  evtc_cuda_gemm_count(false);
  if ((k->gemm.dtype == EVTC_BF16 || k->gemm.dtype == EVTC_F16) && evtc_cuda_gemm_mode_get() == EVTC_CUDA_GEMM_EVTC)
    fprintf(stderr, "evtc: cuda: kernel %s: %s GEMM on cuBLASLt + a separate epilogue kernel (evtc's GEMM: %s)\n",
            k->name, evtc_dtype_name(k->gemm.dtype), why);
  if (!c->lt) {
    if (!(c->lt = evtc_cuda_cublaslt_get(d))) return d->status;
    if (c->lt->cublasLtCreate(&c->lt_handle) != 0) {
      c->lt = NULL;
      return evtc_diag_set(d, EVTC_ERR_RUNTIME, "cublasLtCreate failed");
    }
    if (evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(&c->workspace, WORKSPACE_BYTES), "cuMemAlloc (cuBLASLt workspace)",
                       EVTC_ERR_RUNTIME, d))
      return d->status;
  }
  if (evtc_cuda_gemm_init(&h->g, c->lt, c->lt_handle, k, WORKSPACE_BYTES, d) != EVTC_OK) return d->status;
  h->direct = is_direct_gemm(k, &h->out_arg);
  if (h->direct) return EVTC_OK;
  size_t elem = k->gemm.dtype == EVTC_F64 ? 8 : 4;
  if (scratch_alloc(c, h, (size_t)(k->gemm.batch * k->gemm.M * k->gemm.N) * elem, d)) return d->status;
  if (entry_get(c, m, h->entry, h->name, &h->main, d)) return d->status;
  h->grid = evtc_cuda_ew_grid(k);
  h->block = EVTC_CUDA_EW_THREADS;
  return EVTC_OK;
}

/* A data-movement OPAQUE kernel (cuda_emit_opaque.c): its launch, NAME_fin, the context's zeroed scratch (scatter_add's
 * accumulators, which NAME_fin leaves zeroed), and the node named with the kernel when its index check fails. */
static evtc_status opaque_handle(cuda_ctx *c, cuda_module *m, const evtc_kernel *k, cuda_handle *h, evtc_diag *d) {
  snprintf(c->err_names[h->err_slot], sizeof c->err_names[0], "%s (node %%%s)", k->name, k->main->name);
  evtc_cuda_opaque_launch L = evtc_cuda_opaque_launch_of(k, c->dev.sm_count);
  h->grid = L.grid;
  h->block = L.block;
  h->has_fin = L.has_fin;
  h->fin_grid = L.fin_grid;
  if (h->has_fin && entry_get(c, m, h->fin_entry, h->fin_name, &h->fin, d)) return d->status;
  h->shared_scratch = L.scratch_bytes > 0;
  if (h->shared_scratch && zeroed_scratch(c, L.scratch_bytes, d)) return d->status;
  return EVTC_OK;
}

static void *cuda_kernel(const evtc_backend *be, void *module, const char *entry, const evtc_kernel *k,
                         evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  cuda_module *m = module;
  cuda_handle *h = calloc(1, sizeof *h);
  h->next = m->handles;
  m->handles = h;
  snprintf(h->name, sizeof h->name, "%s", k->name);
  snprintf(h->fin_name, sizeof h->fin_name, "%s_fin", k->name);
  snprintf(h->entry, sizeof h->entry, "%s", entry);
  snprintf(h->fin_entry, sizeof h->fin_entry, "%s_fin", entry);
  snprintf(h->pre_name, sizeof h->pre_name, "%s_pre", k->name);
  snprintf(h->pre_entry, sizeof h->pre_entry, "%s_pre", entry);
  h->n_args = k->n_args;
  h->err_slot = c->next_err;
  c->next_err = (c->next_err + 1) % ERR_SLOTS;
  if (h->err_slot + 1 > c->max_err) c->max_err = h->err_slot + 1;
  snprintf(c->err_names[h->err_slot], sizeof c->err_names[0], "%s", k->name);
  if (k->kind == EVTC_ML_GEMM) return gemm_handle(c, m, k, h, d) == EVTC_OK ? h : NULL;
  if (entry_get(c, m, h->entry, h->name, &h->main, d)) return NULL;
  if (k->kind == EVTC_ML_OPAQUE && evtc_cuda_opaque_op(k->main->op))
    return opaque_handle(c, m, k, h, d) == EVTC_OK ? h : NULL;
  if (k->kind == EVTC_ML_OPAQUE) {
    evtc_cuda_attention_launch(k, is_sm90a(c), &h->grid, &h->block, &h->smem);
    evtc_cuda_attention_extra x = evtc_cuda_attention_extra_of(k, is_sm90a(c));
    h->has_fin = x.fin_grid > 0;
    h->fin_grid = x.fin_grid;
    if (h->has_fin && entry_get(c, m, h->fin_entry, h->fin_name, &h->fin, d)) return NULL;
    h->has_pre = x.pre_grid > 0;
    h->pre_grid = x.pre_grid;
    h->pre_block = x.pre_block;
    h->pre_smem = x.pre_smem;
    if (h->has_pre && entry_get(c, m, h->pre_entry, h->pre_name, &h->pre, d)) return NULL;
    h->shared_scratch = x.scratch_bytes > 0;
    if (h->shared_scratch && zeroed_scratch(c, x.scratch_bytes, d)) return NULL;
    return h;
  }
  if (evtc_kernel_flat_fits(k)) {
    h->grid = evtc_cuda_ew_grid(k);
    h->block = EVTC_CUDA_EW_THREADS;
    return h;
  }
  evtc_cuda_rows_plan pl = plan_of(c, k);
  h->grid = pl.grid;
  h->block = (unsigned)(pl.threads * pl.rows_per_block);
  h->smem = pl.smem;
  h->has_fin = pl.has_fin;
  h->fin_grid = pl.fin_grid;
  if (pl.scratch_doubles && scratch_alloc(c, h, (size_t)pl.scratch_doubles * sizeof(double), d)) return NULL;
  if (h->has_fin && entry_get(c, m, h->fin_entry, h->fin_name, &h->fin, d)) return NULL;
  h->fin.dependent = pl.fin_dependent && c->dev.cc_major >= 9;
  h->main.cooperative = pl.grid_finish;   /* its blocks meet at a grid-wide barrier, whose words start at zero */
  if (pl.grid_finish &&
      evtc_cuda_fill32(&c->dev, h->scratch + (CUdeviceptr)pl.barrier_offset * sizeof(double), 0, 2, d))
    return NULL;
  return h;
}

/* The parameters every emitted kernel (and NAME_fin) takes after any of its own: the argument pointers as
 * evtc_params P, the context's step slot, the kernel's error-flag slot and its scratch. */
typedef struct launch_args {
  struct {
    void *a[EVTC_CUDA_MAX_ARGS];
  } params;
  CUdeviceptr stepp;
  CUdeviceptr err;
} launch_args;

static void launch_args_fill(const cuda_ctx *c, const cuda_handle *h, void *const *args, launch_args *la) {
  memset(la, 0, sizeof *la);
  memcpy(la->params.a, args, sizeof(void *) * (size_t)h->n_args);
  la->stepp = c->step;
  la->err = c->errs + (CUdeviceptr)h->err_slot * sizeof(int);
}

/* h's finishing kernel NAME_fin (the reductions' partials combined), when it has one. */
static evtc_status launch_fin(cuda_ctx *c, cuda_handle *h, launch_args *la, evtc_diag *d) {
  if (!h->has_fin) return EVTC_OK;
  void *fv[] = {&la->params, &la->stepp, &la->err, scratch_of(c, h)};
  unsigned fgrid[3] = {h->fin_grid, 1, 1}, fblock[3] = {256, 1, 1};
  return evtc_cuda_launch(&c->dev, &h->fin, fgrid, fblock, 0, fv, d);
}

/* evtc's GEMM with its epilogue: tensor maps for these operand pointers (kept while they stay), then the kernel
 * and, with reductions, NAME_fin. */
static evtc_status run_evt(cuda_ctx *c, cuda_handle *h, void *const *args, evtc_diag *d) {
  const evtc_cuda_evt_plan *pl = &h->evt_plan;
  void *a = args[h->a_arg], *b = args[h->b_arg], *out = pl->builtin_store || pl->staged_store ? args[pl->out_arg] : NULL;
  void *x = pl->tma_load ? args[pl->tma_arg] : NULL;   /* the epilogue's TMA tile (cuda_emit_evt.c) */
  if (!h->L || h->L_a != a || h->L_b != b || h->L_out != out || h->L_x != x) {
    if (!h->L && !(h->L = aligned_alloc(128, sizeof *h->L)))
      return evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: out of host memory", h->name);
    h->L_a = h->L_b = NULL;
    if (evtc_cuda_gemm_launch_init(h->L, c->dev.drv, &pl->cfg, &pl->var, &pl->prob, (CUdeviceptr)(uintptr_t)a,
                                   (CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)out, c->dev.sm_count, d)) {
      char msg[sizeof d->msg];
      int n = snprintf(msg, sizeof msg, "kernel %s: ", h->name);
      if (n > 0 && (size_t)n < sizeof msg) {
        memcpy(msg + n, d->msg, sizeof msg - (size_t)n - 1);
        msg[sizeof msg - 1] = 0;
        memcpy(d->msg, msg, sizeof msg);
      }
      return d->status;
    }
    if (pl->staged_store && !h->L->dims.tma_store)
      return evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: its output (argument %d) does not suit TMA stores (16-byte "
                           "aligned base and rows)", h->name, pl->out_arg);
    if (x) {
      const CUdeviceptr base = (CUdeviceptr)(uintptr_t)x + (CUdeviceptr)(pl->tma_offset * (int64_t)evtc_dtype_size(pl->tma_dtype));
      if (base % 16)
        return evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: the epilogue's TMA tile (argument %d) is not 16-byte aligned",
                             h->name, pl->tma_arg);
      if (evtc_cuda_gemm_tile_map(c->dev.drv, &h->L->map_x, pl->tma_dtype, base, pl->tma_cols, pl->tma_rows, pl->tma_ld,
                                  pl->tma_box_rows, d))
        return d->status;
      h->L->smem = evtc_cuda_gemm_smem_bytes_aux(&pl->cfg, pl->aux_bytes);
    }
    if (evtc_cuda_gemm_fit_clusters(&c->dev, &h->main, &pl->cfg, h->L, NULL, d)) return d->status;
    h->L_a = a;
    h->L_b = b;
    h->L_out = out;
    h->L_x = x;
  }
  evtc_cuda_gemm_launch *L = h->L;
  if (pl->split_counts > 0) {   /* the shared workspace may have moved since L was filled */
    L->dims.split_ws = c->split_ws;
    L->dims.split_cnt = h->scratch + (CUdeviceptr)pl->scratch_doubles * sizeof(double);
  }
  if (pl->builtin_store) return evtc_cuda_launch(&c->dev, &h->main, L->grid, L->block, L->smem, L->params, d);
  launch_args la;
  launch_args_fill(c, h, args, &la);
  void *pv[] = {L->params[0], L->params[1], L->params[2], L->params[3], L->params[4], &la.params, &la.stepp, &la.err,
                &h->scratch, &L->map_x};
  if (evtc_cuda_launch(&c->dev, &h->main, L->grid, L->block, L->smem, pv, d)) return d->status;
  return launch_fin(c, h, &la, d);
}

/* The step's two 32-bit words into the step slot by value (no host buffer to keep alive), queued before the
 * run's launches. */
static evtc_status cuda_begin_run(const evtc_backend *be, uint64_t step, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  if (evtc_cuda_fill32(&c->dev, c->step, (unsigned)step, 1, d)) return d->status;
  return evtc_cuda_fill32(&c->dev, c->step + 4, (unsigned)(step >> 32), 1, d);
}

static evtc_status cuda_run(const evtc_backend *be, void *kernel, void *const *args, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  cuda_handle *h = kernel;
  if (h->evt) return run_evt(c, h, args, d);
  if (h->gemm) {
    void *out = h->direct ? args[h->out_arg] : (void *)(uintptr_t)h->scratch;
    if (evtc_cuda_gemm_run(&h->g, c->lt_handle, args[h->a_arg], args[h->b_arg], out, (void *)(uintptr_t)c->workspace,
                           WORKSPACE_BYTES, c->dev.stream, h->name, d))
      return d->status;
    if (h->direct) return EVTC_OK;
  }
  launch_args la;
  launch_args_fill(c, h, args, &la);
  void *pv[] = {&la.params, &la.stepp, &la.err, scratch_of(c, h)};
  unsigned grid[3] = {h->grid, 1, 1}, block[3] = {h->block, 1, 1}, pgrid[3] = {h->pre_grid, 1, 1};
  unsigned pblock[3] = {h->pre_block, 1, 1};
  if (h->has_pre && evtc_cuda_launch(&c->dev, &h->pre, pgrid, pblock, h->pre_smem, pv, d)) return d->status;
  if (evtc_cuda_launch(&c->dev, &h->main, grid, block, h->smem, pv, d)) return d->status;
  return launch_fin(c, h, &la, d);
}

static void *cuda_alloc(const evtc_backend *be, size_t bytes) {
  cuda_ctx *c = ctx_of(be);
  evtc_diag d = {0};
  CUdeviceptr p = 0;
  char what[96];
  snprintf(what, sizeof what, "cuMemAlloc (%zu bytes)", bytes);
  if (evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(&p, bytes), what, EVTC_ERR_RUNTIME, &d) == EVTC_OK && bytes / 4)
    evtc_cuda_fill32(&c->dev, p, 0, bytes / 4, &d);
  if (p && bytes % 4) {
    unsigned char zeros[4] = {0};
    evtc_cuda_copy_htod(&c->dev, p + bytes / 4 * 4, zeros, bytes % 4, &d);
  }
  stick(c, &d);
  return (void *)(uintptr_t)p;
}

static void cuda_free(const evtc_backend *be, void *p) {
  cuda_ctx *c = ctx_of(be);
  evtc_cuda_sync(&c->dev, "freeing device memory", &c->sticky);
  c->dev.drv->cuMemFree((CUdeviceptr)(uintptr_t)p);
}

static void cuda_copy(const evtc_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_ctx *c = ctx_of(be);
  evtc_diag d = {0};
  evtc_cuda_copy_dtod(&c->dev, (CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, bytes, &d);
  stick(c, &d);
}

static void cuda_upload(const evtc_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_ctx *c = ctx_of(be);
  evtc_diag d = {0};
  if (bytes) evtc_cuda_copy_htod(&c->dev, (CUdeviceptr)(uintptr_t)dst, src, bytes, &d);
  stick(c, &d);
}

static void cuda_download(const evtc_backend *be, void *dst, const void *src, size_t bytes) {
  cuda_ctx *c = ctx_of(be);
  evtc_diag d = {0};
  if (bytes) evtc_cuda_copy_dtoh(&c->dev, dst, (CUdeviceptr)(uintptr_t)src, bytes, &d);
  if (d.status != EVTC_OK) memset(dst, 0xff, bytes);
  stick(c, &d);
}

static void cuda_synchronize(const evtc_backend *be) {
  cuda_ctx *c = ctx_of(be);
  evtc_cuda_sync(&c->dev, "synchronize", &c->sticky);
}

static evtc_status cuda_finish(const evtc_backend *be, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  evtc_cuda_sync(&c->dev, "running kernels", &c->sticky);
  if (c->sticky.status != EVTC_OK) {
    evtc_diag_set(d, c->sticky.status, "%s", c->sticky.msg);
    c->sticky = (evtc_diag){0};
    return d->status;
  }
  int flags[ERR_SLOTS];
  if (evtc_cuda_copy_dtoh(&c->dev, flags, c->errs, sizeof(int) * (size_t)c->max_err, d)) return d->status;
  for (int i = 0; i < c->max_err; i++)
    if (flags[i]) {
      evtc_cuda_fill32(&c->dev, c->errs, 0, ERR_SLOTS, d);
      return evtc_diag_set(d, EVTC_ERR_RUNTIME,
                           "kernel %s: an index or label is out of range, or an integer division by zero",
                           c->err_names[i]);
    }
  return EVTC_OK;
}

static evtc_status cuda_mark(const evtc_backend *be, int i, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  if (i >= c->n_marks) {
    const int n = i + 1 > 2 * c->n_marks ? i + 1 : 2 * c->n_marks;
    CUevent *m = realloc(c->marks, sizeof *m * (size_t)n);
    if (!m) return evtc_diag_set(d, EVTC_ERR_RUNTIME, "out of host memory for %d timing events", n);
    c->marks = m;
    for (; c->n_marks < n; c->n_marks++)
      if (evtc_cuda_event_new(&c->dev, &c->marks[c->n_marks], d) != EVTC_OK) return d->status;
  }
  return evtc_cuda_event_record(&c->dev, c->marks[i], d);
}

static evtc_status cuda_mark_intervals(const evtc_backend *be, int n, double *us, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  EVTC_ASSERT(n <= c->n_marks);
  for (int i = 0; i + 1 < n; i++) {
    float ms = 0;
    if (evtc_cuda_event_ms(&c->dev, c->marks[i], c->marks[i + 1], &ms, d) != EVTC_OK) return d->status;
    us[i] = 1e3 * (double)ms;
  }
  return EVTC_OK;
}

/* A run's launches as an instantiated CUDA graph, and the shared scratch and split-K workspace they were captured
 * with. */
typedef struct cuda_graph {
  CUgraphExec exec;
  CUdeviceptr zeroed, split_ws;
} cuda_graph;

static evtc_status cuda_graph_begin(const evtc_backend *be, evtc_diag *d) {
  return evtc_cuda_capture_begin(&ctx_of(be)->dev, d);
}

static void *cuda_graph_end(const evtc_backend *be, evtc_diag *d) {
  cuda_ctx *c = ctx_of(be);
  cuda_graph *g = calloc(1, sizeof *g);
  g->zeroed = c->zeroed;
  g->split_ws = c->split_ws;
  if (evtc_cuda_capture_end(&c->dev, &g->exec, d) != EVTC_OK) {
    free(g);
    return NULL;
  }
  return g;
}

/* Every other pointer a launch holds (arguments, a kernel's own scratch, the step slot, the error flags, the
 * cuBLASLt workspace) stays put for the life of its program; the shared zeroed scratch and the split-K workspace
 * move when a later program's kernel needs more of them (zeroed_scratch, split_workspace). */
static bool cuda_graph_current(const evtc_backend *be, const void *graph) {
  const cuda_graph *g = graph;
  return g->zeroed == ctx_of(be)->zeroed && g->split_ws == ctx_of(be)->split_ws;
}

static evtc_status cuda_graph_launch(const evtc_backend *be, void *graph, evtc_diag *d) {
  return evtc_cuda_graph_launch(&ctx_of(be)->dev, ((cuda_graph *)graph)->exec, d);
}

static void cuda_graph_free(const evtc_backend *be, void *graph) {
  cuda_graph *g = graph;
  if (!g) return;
  evtc_cuda_graph_free(&ctx_of(be)->dev, g->exec);
  free(g);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static evtc_diag open_diag;

static void open_backend(void) {
  cuda_ctx *c = &the_ctx;
  if (evtc_cuda_device_open(&c->dev, 0, &open_diag) != EVTC_OK) return;
  if (!evtc_cuda_nvrtc_get(&open_diag)) return;
  if (evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(&c->errs, sizeof(int) * ERR_SLOTS), "cuMemAlloc (error flags)",
                     EVTC_ERR_RUNTIME, &open_diag))
    return;
  if (evtc_cuda_fill32(&c->dev, c->errs, 0, ERR_SLOTS, &open_diag) != EVTC_OK) return;
  if (evtc_cuda_fail(c->dev.drv, c->dev.drv->cuMemAlloc(&c->step, sizeof(uint64_t)), "cuMemAlloc (the step slot)",
                     EVTC_ERR_RUNTIME, &open_diag) ||
      evtc_cuda_fill32(&c->dev, c->step, 0, 2, &open_diag))
    return;
  the_backend = (evtc_backend){
      .name = "cuda",
      .ctx = c,
      .module_per_kernel = true,
      .supports = cuda_supports,
      .emit = cuda_emit,
      .compile = cuda_compile,
      .load = cuda_load,
      .unload = cuda_unload,
      .alloc = cuda_alloc,
      .free = cuda_free,
      .copy = cuda_copy,
      .synchronize = cuda_synchronize,
      .kernel = cuda_kernel,
      .begin_run = cuda_begin_run,
      .run = cuda_run,
      .upload = cuda_upload,
      .download = cuda_download,
      .finish = cuda_finish,
      .mark = cuda_mark,
      .mark_intervals = cuda_mark_intervals,
  };
  if (!c->dev.launch_blocking) {
    the_backend.graph_begin = cuda_graph_begin;
    the_backend.graph_end = cuda_graph_end;
    the_backend.graph_current = cuda_graph_current;
    the_backend.graph_launch = cuda_graph_launch;
    the_backend.graph_free = cuda_graph_free;
  }
}

const evtc_backend *evtc_backend_cuda(evtc_diag *d) {
  pthread_once(&once, open_backend);
  if (open_diag.status != EVTC_OK) {
    evtc_diag_set(d, open_diag.status, "%s", open_diag.msg);
    return NULL;
  }
  return &the_backend;
}
