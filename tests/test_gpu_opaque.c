/* test_gpu_opaque.c -- the CUDA templates of the OPAQUE ops that move data
 * (cuda_emit_opaque.c: gather, embedding, scatter_add, pad, concat) against
 * the float64 interpreter.
 *
 * Every op runs on every dtype its template takes (f32, f16, bf16, f64,
 * i64, i32, and bool for the pure moves; embedding's table is a float) in
 * several geometries: 16-byte words (rows of 768), odd rows (words of one
 * element), gathers and scatters over the middle and the last axis, i32 and
 * i64 indices with negative ones and many repeats (scatter_add: 205 index
 * rows into 37 output rows), pad with interior padding, pads of whole
 * words on the last dim, pads only on a leading dim and no pads at all,
 * concat with an empty and a repeated input.  Each case's node runs alone as
 * the backend runs it (the kernel evtc_kernel_build gives, the backend's
 * acceptance, emitter, launch shape and zeroed scratch) on the
 * interpreter's input values into an output poisoned with 0xff bytes: the
 * moves must equal the interpreter's values bit for bit, scatter_add within
 * one rounding of an f32 sum to the output's dtype (exact for integers).
 * scatter_add runs twice, so the scratch it leaves must be zero again.
 * Out-of-range indices (gather: = size, embedding: -1, scatter_add:
 * -size-1) must raise the error flag, and scatter_add must then write
 * nothing.  Programs on the CUDA backend (cpu_oracle.h) then run a bf16
 * graph of all five ops and an f32 one with no node left to the
 * interpreter, and graphs with an out-of-range index must fail with an
 * error naming the node, and run correctly with good indices afterwards.
 * Last, the GPT-2 sizes: gather and scatter_add of 8192 bf16 rows of 768
 * from / into a 50257-row table, timed with events (bandwidth printed).
 *
 * Without a GPU every case's module is emitted as on the GPU and compiled
 * through NVRTC for sm_90a (CUBINs into the usual disk cache, so a staged
 * cache serves the GPU run), the refusals are checked, and the test prints
 * SKIPPED and exits 77.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_compile.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit.h"
#include "cpu_oracle.h"
#include "gpu_session.h"
#include "kernel/kernel.h"
#include "runtime/elements.h"
#include "runtime/precision.h"

typedef struct op_case {
  const char *name;
  const char *body;   /* graph body; "T" is the data dtype; the node under test is %y, indices %i */
  unsigned dtypes;    /* bitmask of 1 << evtc_dtype */
} op_case;

#define MOVES ((1u << EVTC_F32) | (1u << EVTC_F16) | (1u << EVTC_BF16) | (1u << EVTC_F64) | (1u << EVTC_I64) | \
               (1u << EVTC_I32) | (1u << EVTC_BOOL))
#define FLOATS ((1u << EVTC_F32) | (1u << EVTC_F16) | (1u << EVTC_BF16) | (1u << EVTC_F64))
#define NUMBERS (FLOATS | (1u << EVTC_I64) | (1u << EVTC_I32))

static const op_case cases[] = {
    {"gather_rows", "%x = input() : T[37,768]\n%i = input() : i64[5,41]\n%y = gather(%x, %i) : T[5,41,768]", MOVES},
    {"gather_mid", "%x = input() : T[3,7,5]\n%i = input() : i32[4]\n%y = gather(%x, %i) {axis=1} : T[3,4,5]", MOVES},
    {"gather_last", "%x = input() : T[6,9]\n%i = input() : i64[11]\n%y = gather(%x, %i) {axis=-1} : T[6,11]", MOVES},
    {"embedding_rows", "%x = input() : T[50,24]\n%i = input() : i64[3,17]\n%y = embedding(%x, %i) : T[3,17,24]", FLOATS},
    {"embedding_odd", "%x = input() : T[13,7]\n%i = input() : i32[9]\n%y = embedding(%x, %i) : T[9,7]", FLOATS},
    {"scatter_rows", "%u = input() : T[205,768]\n%i = input() : i64[205]\n%y = scatter_add(%u, %i) {size=37} : T[37,768]",
     NUMBERS},
    {"scatter_mid100",
     "%u = input() : T[3,50,100]\n%i = input() : i32[50]\n%y = scatter_add(%u, %i) {axis=1, size=20} : T[3,20,100]",
     NUMBERS},
    {"scatter_flat", "%u = input() : T[3,4,5]\n%i = input() : i64[4]\n%y = scatter_add(%u, %i) {axis=1, size=7} : T[3,7,5]",
     NUMBERS},
    {"scatter_last", "%u = input() : T[6,11]\n%i = input() : i64[11]\n%y = scatter_add(%u, %i) {axis=-1, size=9} : T[6,9]",
     NUMBERS},
    {"scatter_base_rows",
     "%u = input() : T[205,768]\n%i = input() : i64[205]\n%b = input() : T[40,768]\n"
     "%y = scatter_add(%u, %i, %b) {size=37} : T[40,768]",
     NUMBERS},
    {"scatter_base_flat",
     "%u = input() : T[3,4,5]\n%i = input() : i64[4]\n%b = input() : T[3,9,5]\n"
     "%y = scatter_add(%u, %i, %b) {axis=1, size=7} : T[3,9,5]",
     NUMBERS},
    {"pad_interior",
     "%x = input() : T[2,3,7,9]\n%y = pad(%x) {pads=[0,1,2,0,0,0,1,3], interior=[0,0,1,0], value=0.5} : T[2,4,16,12]",
     MOVES},
    {"pad_last_words", "%x = input() : T[4,5,64]\n%y = pad(%x) {pads=[1,0,8,0,2,8], value=-2} : T[5,7,80]", MOVES},
    {"pad_lead", "%x = input() : T[3,10]\n%y = pad(%x) {pads=[2,0,1,0], value=3} : T[6,10]", MOVES},
    {"pad_none", "%x = input() : T[5,33]\n%y = pad(%x) {pads=[0,0,0,0]} : T[5,33]", MOVES},
    {"concat_mid", "%a = input() : T[2,3,7,9]\n%b = input() : T[2,2,7,9]\n%y = concat(%a, %b) {axis=1} : T[2,5,7,9]",
     MOVES},
    {"concat_cls", "%a = input() : T[4,1,768]\n%b = input() : T[4,196,768]\n%y = concat(%a, %b) {axis=1} : T[4,197,768]",
     MOVES},
    {"concat_last",
     "%a = input() : T[4,3]\n%b = input() : T[4,0]\n%c = input() : T[4,8]\n%y = concat(%a, %b, %c, %a) {axis=-1} : T[4,14]",
     MOVES},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const char *const nvrtc_opts[] = {"--std=c++17", "-lineinfo", "--diag-suppress=177,550"};

/* The graph of case c on dtype t (body with each "T" replaced). */
static evtc_graph *case_graph(const char *name, const char *body, evtc_dtype t) {
  char text[2048];
  size_t n = (size_t)snprintf(text, sizeof text, "graph %s {\n", name);
  for (const char *s = body; *s && n + 8 < sizeof text; s++) {
    if (*s == 'T' && s[1] == '[') n += (size_t)snprintf(text + n, sizeof text - n, "%s", evtc_dtype_name(t));
    else text[n++] = *s;
  }
  snprintf(text + n, sizeof text - n, "\noutput %%y\n}\n");
  return oracle_parse(text, name);
}

/* The one-node kernel of %y, named kname, accepted by the template; its module source in *src. */
static evtc_kernel *case_kernel(const evtc_graph *g, const char *kname, char **src) {
  const evtc_node *y = evtc_graph_find(g, "y");
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, &y->id, 1, &d);
  CHECK(k && k->kind == EVTC_ML_OPAQUE, "%s: kernel build: %s", kname, d.msg);
  if (!k) return NULL;
  char why[200];
  bool fits = evtc_cuda_opaque_op(k->main->op) && evtc_cuda_opaque_fits(k, why, sizeof why);
  CHECK(fits, "%s: the CUDA template refuses it: %s", kname, why);
  if (!fits) {
    evtc_kernel_free(k);
    return NULL;
  }
  snprintf(k->name, sizeof k->name, "%s", kname);
  evtc_sb b = {0};
  evtc_cuda_emit_prelude(&b);
  evtc_cuda_emit_opaque(&b, k);
  *src = b.s;
  return k;
}

/* Fresh leaf values: floats in [-1, 1) exact in their dtype, integers in [-1000, 1000), bools; indices of a
 * gather / scatter_add in [-size, size) (embedding: [0, size)), then `bad` written to index 0 unless it is 0. */
static double **case_inputs(const evtc_graph *g, int64_t bad) {
  double **v = calloc((size_t)g->n_nodes + 1, sizeof(double *));
  const evtc_node *y = evtc_graph_find(g, "y");
  int64_t lo = 0, hi = 0;
  if (y->op == EVTC_OP_SCATTER_ADD) {
    hi = evtc_node_int(y, "size");
    lo = -hi;
  } else if (y->op == EVTC_OP_GATHER || y->op == EVTC_OP_EMBEDDING) {
    const evtc_type *x = &y->inputs[0]->type;
    hi = x->shape[y->op == EVTC_OP_GATHER ? evtc_axis_norm(evtc_node_int(y, "axis"), x->rank) : 0];
    lo = y->op == EVTC_OP_GATHER ? -hi : 0;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT) continue;
    int64_t m = evtc_type_numel(&n->type);
    v[i] = malloc(sizeof(double) * (size_t)(m > 0 ? m : 1));
    bool index = strcmp(n->name, "i") == 0;
    for (int64_t e = 0; e < m; e++) {
      double u = check_urand();
      if (index) v[i][e] = (double)(lo + (int64_t)(u * (double)(hi - lo)));
      else if (n->type.dtype == EVTC_BOOL) v[i][e] = u < 0.5;
      else if (evtc_dtype_is_int(n->type.dtype)) v[i][e] = floor(u * 2000) - 1000;
      else v[i][e] = evtc_round_to(n->type.dtype, 2 * u - 1);
    }
    if (index && bad && m > 0) v[i][0] = (double)bad;
  }
  return v;
}

static void free_inputs(const evtc_graph *g, double **v) {
  for (int32_t i = 0; i < g->n_nodes; i++) free(v[i]);
  free(v);
}

typedef struct gpu {
  evtc_cuda_device dev;
  bool open;
  CUdeviceptr err;             /* the error flag of the kernel under test */
  CUdeviceptr step;            /* the step the kernels read (zero), as the backend's step slot */
} gpu;

/* One case loaded on the GPU: its module, entry points, argument buffers and scratch. */
typedef struct loaded {
  CUmodule mod;
  evtc_cuda_kernel main, fin;
  CUdeviceptr ptr[EVTC_CUDA_MAX_ARGS], scratch;
  evtc_cuda_opaque_launch L;
  bool ok;
} loaded;

static void unload(gpu *G, const evtc_kernel *k, loaded *l) {
  for (int a = 0; a < k->n_args; a++)
    if (l->ptr[a]) G->dev.drv->cuMemFree(l->ptr[a]);
  if (l->scratch) G->dev.drv->cuMemFree(l->scratch);
  if (l->mod) evtc_cuda_module_unload(&G->dev, l->mod);
}

/* Compiles and loads k's module, allocates its arguments (inputs from v, by node id) and its zeroed scratch. */
static loaded load(gpu *G, const evtc_kernel *k, const char *src, double **v, const char *what) {
  loaded l = {0};
  evtc_diag d = {0};
  evtc_cuda_cubin cubin = {0};
  if (evtc_cuda_compile(src, k->name, G->dev.arch, nvrtc_opts, 3, &cubin, &d) != EVTC_OK) {
    CHECK(false, "%s: NVRTC: %s", what, d.msg);
    return l;
  }
  evtc_status st = evtc_cuda_module_load(&G->dev, &cubin, k->name, &l.mod, &d);
  evtc_cuda_cubin_free(&cubin);
  l.L = evtc_cuda_opaque_launch_of(k, G->dev.sm_count);
  char fin[80];
  snprintf(fin, sizeof fin, "%s_fin", k->name);
  if (st == EVTC_OK) evtc_cuda_kernel_get(&G->dev, l.mod, k->name, &l.main, &d);
  if (d.status == EVTC_OK && l.L.has_fin) evtc_cuda_kernel_get(&G->dev, l.mod, fin, &l.fin, &d);
  if (d.status == EVTC_OK && l.L.scratch_bytes) {
    if (G->dev.drv->cuMemAlloc(&l.scratch, l.L.scratch_bytes) != 0)
      evtc_diag_set(&d, EVTC_ERR_RUNTIME, "cuMemAlloc of %zu scratch bytes", l.L.scratch_bytes);
    else evtc_cuda_fill32(&G->dev, l.scratch, 0, l.L.scratch_bytes / 4, &d);
  }
  for (int a = 0; a < k->n_args && d.status == EVTC_OK; a++) {
    const evtc_node *n = k->args[a].node;
    int64_t m = evtc_type_numel(&n->type);
    size_t bytes = (size_t)m * evtc_dtype_size(n->type.dtype);
    if (G->dev.drv->cuMemAlloc(&l.ptr[a], bytes ? bytes : 16) != 0) {
      evtc_diag_set(&d, EVTC_ERR_RUNTIME, "cuMemAlloc of %zu bytes", bytes);
      break;
    }
    if (k->args[a].output || !bytes) continue;
    unsigned char *buf = malloc(bytes);
    evtc_elements_encode(n->type.dtype, v[n->id], m, buf);
    evtc_cuda_copy_htod(&G->dev, l.ptr[a], buf, bytes, &d);
    free(buf);
  }
  CHECK(d.status == EVTC_OK, "%s: %s", what, d.msg);
  l.ok = d.status == EVTC_OK;
  return l;
}

/* Queues the kernel (and NAME_fin) as the backend does. */
static evtc_status launch(gpu *G, const evtc_kernel *k, loaded *l, evtc_diag *d) {
  struct {
    void *a[EVTC_CUDA_MAX_ARGS];
  } params = {{0}};
  for (int a = 0; a < k->n_args; a++) params.a[a] = (void *)(uintptr_t)l->ptr[a];
  void *pv[] = {&params, &G->step, &G->err, &l->scratch};
  unsigned grid[3] = {l->L.grid, 1, 1}, block[3] = {l->L.block, 1, 1};
  if (evtc_cuda_launch(&G->dev, &l->main, grid, block, 0, pv, d)) return d->status;
  if (!l->L.has_fin) return EVTC_OK;
  unsigned fgrid[3] = {l->L.fin_grid, 1, 1}, fblock[3] = {256, 1, 1};
  return evtc_cuda_launch(&G->dev, &l->fin, fgrid, fblock, 0, pv, d);
}

/* Poisons the output (0xff bytes), runs, returns the error flag (-1: a CUDA failure) and the output's bytes. */
static int run_once(gpu *G, const evtc_kernel *k, loaded *l, unsigned char *out, size_t bytes, const char *what) {
  evtc_diag d = {0};
  int out_arg = evtc_kernel_output_arg(k), flag = -1;
  evtc_cuda_fill32(&G->dev, G->err, 0, 1, &d);
  if (bytes / 4) evtc_cuda_fill32(&G->dev, l->ptr[out_arg], 0xFFFFFFFFu, bytes / 4, &d);
  if (bytes % 4) {
    unsigned char ff[4] = {0xff, 0xff, 0xff, 0xff};
    evtc_cuda_copy_htod(&G->dev, l->ptr[out_arg] + bytes / 4 * 4, ff, bytes % 4, &d);
  }
  if (d.status == EVTC_OK) launch(G, k, l, &d);
  if (d.status == EVTC_OK) evtc_cuda_sync(&G->dev, what, &d);
  if (d.status == EVTC_OK) evtc_cuda_copy_dtoh(&G->dev, out, l->ptr[out_arg], bytes, &d);
  if (d.status == EVTC_OK) evtc_cuda_copy_dtoh(&G->dev, &flag, G->err, sizeof flag, &d);
  CHECK(d.status == EVTC_OK, "%s: %s", what, d.msg);
  return d.status == EVTC_OK ? flag : -1;
}

/* Tolerance of a scatter_add element: one rounding to dtype t of an f32 sum (exact for f64 and integers). */
static double scatter_tol(evtc_dtype t) {
  return t == EVTC_BF16 ? 0x1p-7 : t == EVTC_F16 ? 0x1p-10 : t == EVTC_F32 ? 2e-5 : t == EVTC_F64 ? 1e-13 : 0;
}

/* Compares the GPU's output bytes with the interpreter's value: bitwise for the moves. */
static bool compare(const evtc_node *y, const unsigned char *got, const double *want, const char *what) {
  int64_t m = evtc_type_numel(&y->type);
  size_t es = evtc_dtype_size(y->type.dtype);
  unsigned char *wb = malloc((size_t)m * es);
  evtc_elements_encode(y->type.dtype, want, m, wb);
  bool ok = true;
  if (y->op != EVTC_OP_SCATTER_ADD) {
    for (int64_t e = 0; e < m && ok; e++)
      if (memcmp(got + e * (int64_t)es, wb + e * (int64_t)es, es)) {
        fprintf(stderr, "  %s: element %lld differs from the interpreter's (want %.9g)\n", what, (long long)e, want[e]);
        ok = false;
      }
  } else {
    double *gv = malloc(sizeof(double) * (size_t)m), tol = scatter_tol(y->type.dtype);
    evtc_elements_decode(y->type.dtype, got, m, gv);
    for (int64_t e = 0; e < m && ok; e++)
      if (!(fabs(gv[e] - want[e]) <= tol * (1 + fabs(want[e])))) {
        fprintf(stderr, "  %s: element %lld: got %.9g, want %.9g\n", what, (long long)e, gv[e], want[e]);
        ok = false;
      }
    free(gv);
  }
  free(wb);
  return ok;
}

/* Case ci on dtype t: emitted and compiled; on a GPU run against the interpreter, then with a bad index. */
static void run_case(gpu *G, int ci, evtc_dtype t, bool nvrtc, int *n_run) {
  const op_case *c = &cases[ci];
  char kname[64], what[96];
  snprintf(kname, sizeof kname, "opq_%s_%s", c->name, evtc_dtype_name(t));
  snprintf(what, sizeof what, "%s %s", c->name, evtc_dtype_name(t));
  evtc_graph *g = case_graph(c->name, c->body, t);
  if (!g) return;
  char *src = NULL;
  evtc_kernel *k = case_kernel(g, kname, &src);
  if (!k) {
    evtc_graph_free(g);
    return;
  }
  if (!G->open) {
    if (nvrtc) {
      evtc_cuda_cubin cubin = {0};
      evtc_diag cd = {0};
      CHECK(evtc_cuda_compile(src, kname, "sm_90a", nvrtc_opts, 3, &cubin, &cd) == EVTC_OK && cubin.size > 0,
            "%s: NVRTC: %s", what, cd.msg);
      evtc_cuda_cubin_free(&cubin);
    }
    free(src);
    evtc_kernel_free(k);
    evtc_graph_free(g);
    return;
  }
  const evtc_node *y = evtc_graph_find(g, "y");
  double **v = case_inputs(g, 0);
  evtc_interp *it = evtc_interp_new(g);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (v[i]) evtc_interp_set(it, g->nodes[i], v[i]);
  evtc_diag d = {0};
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "%s: interpreter: %s", what, d.msg);
  loaded l = load(G, k, src, v, what);
  size_t bytes = (size_t)evtc_type_numel(&y->type) * evtc_dtype_size(y->type.dtype);
  unsigned char *out = malloc(bytes);
  if (l.ok && d.status == EVTC_OK) {
    for (int pass = 0; pass < (y->op == EVTC_OP_SCATTER_ADD ? 2 : 1); pass++) {   /* twice: the scratch is zero again */
      int flag = run_once(G, k, &l, out, bytes, what);
      CHECK(flag == 0, "%s (run %d): error flag %d with indices in range", what, pass + 1, flag);
      CHECK(flag != 0 || compare(y, out, evtc_interp_value(it, y), what), "%s (run %d): differs from the interpreter",
            what, pass + 1);
    }
    (*n_run)++;
  }
  /* an out-of-range index: the flag, and scatter_add writes nothing */
  const evtc_node *ix = y->op == EVTC_OP_PAD || y->op == EVTC_OP_CONCAT ? NULL : y->inputs[1];
  if (l.ok && ix) {
    int64_t size = y->op == EVTC_OP_SCATTER_ADD ? evtc_node_int(y, "size")
                 : y->inputs[0]->type.shape[y->op == EVTC_OP_GATHER
                                                 ? evtc_axis_norm(evtc_node_int(y, "axis"), y->inputs[0]->type.rank) : 0];
    int64_t bad = y->op == EVTC_OP_GATHER ? size : y->op == EVTC_OP_EMBEDDING ? -1 : -size - 1;
    double *saved = v[ix->id];
    double **vb = case_inputs(g, bad);
    size_t ib = (size_t)evtc_type_numel(&ix->type) * evtc_dtype_size(ix->type.dtype);
    unsigned char *buf = malloc(ib);
    evtc_elements_encode(ix->type.dtype, vb[ix->id], evtc_type_numel(&ix->type), buf);
    evtc_cuda_copy_htod(&G->dev, l.ptr[evtc_kernel_input_arg(k, 1)], buf, ib, &d);
    int flag = run_once(G, k, &l, out, bytes, what);
    CHECK(flag == 1, "%s: index %lld (size %lld) did not raise the error flag (%d)", what, (long long)bad,
          (long long)size, flag);
    bool untouched = true;
    for (size_t e = 0; e < bytes && y->op == EVTC_OP_SCATTER_ADD; e++) untouched = untouched && out[e] == 0xff;
    CHECK(untouched, "%s: scatter_add wrote its output despite a bad index", what);
    if (y->op == EVTC_OP_SCATTER_ADD) {   /* and the next good run is right: the scratch was cleaned */
      evtc_elements_encode(ix->type.dtype, saved, evtc_type_numel(&ix->type), buf);
      evtc_cuda_copy_htod(&G->dev, l.ptr[evtc_kernel_input_arg(k, 1)], buf, ib, &d);
      flag = run_once(G, k, &l, out, bytes, what);
      CHECK(flag == 0 && compare(y, out, evtc_interp_value(it, y), what), "%s: wrong after a failed run", what);
    }
    free(buf);
    free_inputs(g, vb);
  }
  free(out);
  unload(G, k, &l);
  evtc_interp_free(it);
  free_inputs(g, v);
  free(src);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* Without a GPU: scatter_add written over its base (the program's in-place write: only the hit rows), emitted and
 * compiled for sm_90a on the rows scheme and the element one; run_programs runs one on a GPU. */
static void compile_in_place(void) {
  static const char *const names[2] = {"scatter_base_rows", "scatter_base_flat"};
  for (int i = 0; i < 2; i++) {
    const char *body = NULL;
    for (int c = 0; c < N_CASES; c++)
      if (strcmp(cases[c].name, names[i]) == 0) body = cases[c].body;
    evtc_graph *g = case_graph("in_place", body, EVTC_BF16);
    char *src = NULL, kname[32];
    snprintf(kname, sizeof kname, "opq_in_place_%d", i);
    evtc_kernel *k = g ? case_kernel(g, kname, &src) : NULL;
    if (k) {
      free(src);
      k->args[evtc_kernel_output_arg(k)].shared = k->args[evtc_kernel_input_arg(k, 2)].shared = true;
      evtc_sb b = {0};
      evtc_cuda_emit_prelude(&b);
      evtc_cuda_emit_opaque(&b, k);
      evtc_cuda_cubin cubin = {0};
      evtc_diag cd = {0};
      CHECK(evtc_cuda_compile(b.s, kname, "sm_90a", nvrtc_opts, 3, &cubin, &cd) == EVTC_OK,
            "%s over its base: NVRTC: %s", names[i], cd.msg);
      evtc_cuda_cubin_free(&cubin);
      free(b.s);
    }
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

/* What the templates refuse, with the reason the backend reports. */
static void check_refusals(void) {
  static const char *const texts[] = {
      "graph r {\n  %u = input() : bool[4,3]\n  %i = input() : i64[4]\n"
      "  %y = scatter_add(%u, %i) {size=5} : bool[5,3]\n  output %y\n}\n",
      "graph r {\n  %x = input() : f32[0,3]\n  %y = pad(%x) {pads=[0,0,0,0]} : f32[0,3]\n  output %y\n}\n",
      "graph r {\n  %x = input() : f32[4,3]\n  %y = maxpool2d(%x) {kernel=[1,1]} : f32[4,3]\n  output %y\n}\n"};
  static const char *const want[] = {"bool scatter_add", "empty tensor", "no CUDA template for"};
  for (int i = 0; i < 3; i++) {
    evtc_graph *g = evtc_graph_parse_string(texts[i], "refusal", NULL, 0);
    if (!g) continue;    /* a graph the IR itself rejects needs no template */
    evtc_diag d = {0};
    const evtc_node *y = evtc_graph_find(g, "y");
    evtc_kernel *k = evtc_kernel_build(g, &y->id, 1, &d);
    char why[200] = "";
    CHECK(k && !evtc_cuda_opaque_fits(k, why, sizeof why) && strstr(why, want[i]), "refusal %d: \"%s\"", i, why);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

/* Programs on the CUDA backend: no node interpreted, values near the interpreter's. */
static void run_programs(void) {
  static const char prog_bf16[] =
      "graph pb {\n  %tab = input() : bf16[37,64]\n  %ids = input() : i64[6,11]\n"
      "  %e = embedding(%tab, %ids) : bf16[6,11,64]\n  %g = gather(%tab, %ids) : bf16[6,11,64]\n"
      "  %c = concat(%e, %g) {axis=1} : bf16[6,22,64]\n  %p = pad(%c) {pads=[0,1,0,0,0,8], value=0} : bf16[6,23,72]\n"
      "  %s = scatter_add(%e, %ids) {size=37} : bf16[37,64]\n  output %p\n  output %s\n}\n";
  static const char prog_f32[] =
      "graph pf {\n  %x = input() : f32[3,7,5]\n  %i = input() : i32[4]\n"
      "  %y = gather(%x, %i) {axis=1} : f32[3,4,5]\n  %s = scatter_add(%y, %i) {axis=1, size=7} : f32[3,7,5]\n"
      "  output %y\n  output %s\n}\n";
  /* an embedding's gradient scattered over its dead base, which has rows beyond the indices' range (program.c) */
  static const char prog_base[] =
      "graph pbase {\n  %tab = input() : bf16[37,64]\n  %ids = input() : i64[6,11]\n"
      "  %e = embedding(%tab, %ids) : bf16[6,11,64]\n  %x = input() : bf16[40,64]\n  %two = const() {value=2} : bf16[]\n"
      "  %b = mul(%x, %two) : bf16[40,64]\n  %s = scatter_add(%e, %ids, %b) {size=37} : bf16[40,64]\n"
      "  %z = mul(%s, %two) : bf16[40,64]\n  output %z\n}\n";
  const char *texts[3] = {prog_bf16, prog_f32, prog_base};
  const double tols[3] = {0x1p-7, 2e-5, 0x1p-7};
  const int64_t int_hi[3] = {37, 7, 37};
  for (int i = 0; i < 3; i++) {
    evtc_graph *g = oracle_parse(texts[i], "program");
    if (!g) continue;
    static const char *const what[3] = {"bf16 program", "f32 program", "bf16 scatter over its base"};
    evtc_program *p = cpu_compare(g, NULL, 0, tols[i], int_hi[i], what[i]);
    if (p) {
      evtc_program_stats st = evtc_program_get_stats(p);
      CHECK(st.interpreted == 0, "program %d: %d kernels in the interpreter", i, st.interpreted);
      CHECK(i < 2 || st.in_place_outputs == 1, "program %d: %d values written over their dead input, want 1 (the scatter)",
            i, st.in_place_outputs);
      printf("program %s: %d kernels on the CUDA backend, %d interpreted\n", g->name, st.compiled, st.interpreted);
    }
    evtc_program_free(p);
    evtc_graph_free(g);
  }
}

/* A program whose index is out of range fails naming the node; with good indices it runs right afterwards. */
static void program_errors(void) {
  static const char *const texts[] = {
      "graph e1 {\n  %t = input() : f32[4,3]\n  %i = input() : i64[5]\n  %y = gather(%t, %i) : f32[5,3]\n  output %y\n}\n",
      "graph e2 {\n  %t = input() : bf16[4,32]\n  %i = input() : i64[5]\n  %y = embedding(%t, %i) : bf16[5,32]\n"
      "  output %y\n}\n",
      "graph e3 {\n  %u = input() : bf16[5,256]\n  %i = input() : i64[5]\n"
      "  %y = scatter_add(%u, %i) {size=4} : bf16[4,256]\n  output %y\n}\n"};
  for (int t = 0; t < 3; t++) {
    evtc_graph *g = oracle_parse(texts[t], "index error");
    if (!g) continue;
    evtc_diag d = {0};
    evtc_program *p = evtc_program_new(g, NULL, 0, oracle_be, NULL, &d);
    CHECK(p != NULL, "%s: program: %s", g->name, d.msg);
    if (p) {
      const evtc_node *in0 = g->nodes[0], *ix = evtc_graph_find(g, "i");
      int64_t n0 = evtc_type_numel(&in0->type);
      double *x = malloc(sizeof(double) * (size_t)n0), idx[5] = {1, 0, 3, 9, 2};
      for (int64_t e = 0; e < n0; e++) x[e] = evtc_round_to(in0->type.dtype, 2 * check_urand() - 1);
      evtc_program_set(p, in0, x);
      evtc_program_set(p, ix, idx);
      evtc_status s = evtc_program_run(p, 0, &d);
      printf("%s with index 9: %s\n", g->name, d.msg);
      CHECK(s != EVTC_OK && strstr(d.msg, "(node %y)") && strstr(d.msg, "out of range"),
            "%s: an out-of-range index gave \"%s\"", g->name, s == EVTC_OK ? "no error" : d.msg);
      idx[3] = 1;
      evtc_program_set(p, ix, idx);
      d = (evtc_diag){0};
      CHECK(evtc_program_run(p, 1, &d) == EVTC_OK, "%s: good indices after a failed run: %s", g->name, d.msg);
      evtc_interp *it = evtc_interp_new(g);
      evtc_interp_set(it, in0, x);
      evtc_interp_set(it, ix, idx);
      evtc_diag di = {0};
      const evtc_node *y = evtc_graph_find(g, "y");
      int64_t m = evtc_type_numel(&y->type);
      double *got = malloc(sizeof(double) * (size_t)m);
      if (evtc_interp_run(it, 1, &di) == EVTC_OK && evtc_program_get(p, y, got))
        CHECK(oracle_check_value(g->name, y, got, evtc_interp_value(it, y), 0x1p-7, NULL) == 0,
              "%s: wrong after a failed run", g->name);
      free(got);
      evtc_interp_free(it);
      free(x);
    }
    evtc_program_free(p);
    evtc_graph_free(g);
  }
}

/* The GPT-2 token embedding's sizes: gather and scatter_add of 8192 bf16 rows of 768 from / into 50257 rows. */
static const char bench_gather[] =
    "%x = input() : T[50257,768]\n%i = input() : i64[8192]\n%y = gather(%x, %i) : T[8192,768]";
static const char bench_scatter[] =
    "%u = input() : T[8192,768]\n%i = input() : i64[8192]\n%y = scatter_add(%u, %i) {size=50257} : T[50257,768]";

static void bench(gpu *G, bool nvrtc) {
  const char *bodies[2] = {bench_gather, bench_scatter}, *names[2] = {"bench_gather", "bench_scatter"};
  for (int i = 0; i < 2; i++) {
    char kname[64];
    snprintf(kname, sizeof kname, "opq_%s", names[i]);
    evtc_graph *g = case_graph(names[i], bodies[i], EVTC_BF16);
    if (!g) continue;
    char *src = NULL;
    evtc_kernel *k = case_kernel(g, kname, &src);
    if (k && !G->open && nvrtc) {
      evtc_cuda_cubin cubin = {0};
      evtc_diag cd = {0};
      CHECK(evtc_cuda_compile(src, kname, "sm_90a", nvrtc_opts, 3, &cubin, &cd) == EVTC_OK, "%s: NVRTC: %s", names[i],
            cd.msg);
      evtc_cuda_cubin_free(&cubin);
    }
    if (k && G->open) {
      /* token ids with a text's skew: a quarter of them one of 8 frequent tokens */
      double **v = calloc((size_t)g->n_nodes + 1, sizeof(double *));
      for (int32_t n = 0; n < g->n_nodes; n++) {
        const evtc_node *nd = g->nodes[n];
        if (nd->op != EVTC_OP_INPUT) continue;
        int64_t m = evtc_type_numel(&nd->type);
        v[n] = malloc(sizeof(double) * (size_t)m);
        bool index = strcmp(nd->name, "i") == 0;
        for (int64_t e = 0; e < m; e++) {
          double u = check_urand();
          v[n][e] = !index ? evtc_round_to(EVTC_BF16, 2 * u - 1) : u < 0.25 ? (double)(13 * (e % 8)) : floor(u * 50257);
        }
      }
      loaded l = load(G, k, src, v, names[i]);
      evtc_diag d = {0};
      CUevent e0, e1;
      float ms = 0;
      const int reps = 20;
      if (l.ok && evtc_cuda_event_new(&G->dev, &e0, &d) == EVTC_OK && evtc_cuda_event_new(&G->dev, &e1, &d) == EVTC_OK) {
        launch(G, k, &l, &d);    /* warm-up */
        evtc_cuda_event_record(&G->dev, e0, &d);
        for (int r = 0; r < reps && d.status == EVTC_OK; r++) launch(G, k, &l, &d);
        evtc_cuda_event_record(&G->dev, e1, &d);
        if (d.status == EVTC_OK) evtc_cuda_event_ms(&G->dev, e0, e1, &ms, &d);
        evtc_cuda_event_free(&G->dev, e0);
        evtc_cuda_event_free(&G->dev, e1);
        double us = 1000.0 * ms / reps;
        double mb = i == 0 ? 2.0 * 8192 * 768 * 2 / 1e6 : (8192.0 * 768 * 2 + 50257.0 * 768 * 2) / 1e6;
        printf("%s: %.1f us per run (%.0f MB moved at least: %.0f GB/s)\n", names[i], us, mb, 1000 * mb / us);
      }
      CHECK(d.status == EVTC_OK, "%s: %s", names[i], d.msg);
      unload(G, k, &l);
      free_inputs(g, v);
    }
    free(src);
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

int main(void) {
  check_rng = 0x0FA9E5EEDull;
  check_refusals();
  gpu G = {0};
  evtc_diag d = {0};
  bool nvrtc;
  G.open = gpu_open(&G.dev, &d, &nvrtc);
  if (G.open && (G.dev.drv->cuMemAlloc(&G.err, sizeof(int)) != 0 || G.dev.drv->cuMemAlloc(&G.step, sizeof(uint64_t)) != 0 ||
                 evtc_cuda_fill32(&G.dev, G.step, 0, 2, &d) != EVTC_OK)) {
    CHECK(false, "cuMemAlloc of the error flag and the step: %s", d.msg);
    return check_summary();
  }
  int n_cases = 0, n_run = 0;
  for (int i = 0; i < N_CASES; i++)
    for (int t = 0; t < EVTC_DTYPE_COUNT; t++)
      if (cases[i].dtypes & (1u << t)) {
        run_case(&G, i, (evtc_dtype)t, nvrtc, &n_run);
        n_cases++;
      }
  printf("%d op x dtype cases %s\n", n_cases, G.open ? "run on the GPU" : nvrtc ? "compiled for sm_90a" : "emitted");
  bench(&G, nvrtc);
  if (!G.open && nvrtc) compile_in_place();
  if (!G.open) return gpu_skip(d.msg);
  CHECK(n_run == n_cases, "%d of %d cases ran", n_run, n_cases);
  evtc_diag bd = {0};
  oracle_be = evtc_backend_cuda(&bd);
  CHECK(oracle_be != NULL, "CUDA backend: %s", bd.msg);
  if (oracle_be) {
    run_programs();
    program_errors();
  }
  G.dev.drv->cuMemFree(G.err);
  G.dev.drv->cuMemFree(G.step);
  evtc_cuda_device_close(&G.dev);
  return check_summary();
}
