/* cuda_emit_opaque.c -- the CUDA templates of the OPAQUE ops that move
 * data: gather, embedding, scatter_add (their backward), pad and concat.
 *
 * Geometry is baked into each kernel as constants, as on the CPU
 * (cpu_emit_opaque.c).  Gather, embedding, pad and concat only move
 * elements, so they run on every dtype as bytes: each thread of a
 * grid-stride loop moves one word of 16, 8, 4, 2 or 1 bytes, the widest
 * that the contiguous runs of the op (a gathered row, a concatenated
 * slab, the unpadded trailing dims, or a padded last dim whose pads and
 * extent are whole words) are made of; pad's fill value is the element's
 * bits repeated over a word.  Index arithmetic is 32-bit when every word
 * count fits.
 *
 * scatter_add (the adjoint of gather and embedding: an embedding table's
 * gradient) accumulates in a zero-initialised scratch of accumulators:
 * f32 for f32 / f16 / bf16 updates (one rounding to the output's dtype at
 * the end), f64 for f64, i32 / i64 for integers.  The main kernel gives a
 * warp to each index row: 16-byte loads of the updates, widened to f32,
 * added with one vector reduction (red.global.add.v4.f32, sm_90) per four
 * floats, and it marks the output row as hit; NAME_fin gives a warp to
 * each output row: a hit row's accumulators are rounded, stored and
 * zeroed again (so the scratch is ready for the next run), every other row
 * is stored as zeros -- the output is written once, and only rows that
 * indices touch are read back.  With a base (the simplify pass's form of
 * an embedding table's gradient added to a tied weight's: GPT-2's wte), a
 * hit row is its accumulators plus the base row, rounded once, and every
 * other row is the base row; written over its dead base (the program's
 * in-place write, program.c), only the hit rows are read and written.
 * Rows too narrow to feed a warp use one
 * thread per element instead (scalar atomics; NAME_fin converts and zeroes
 * the whole scratch).  The atomics make the order of the f32 additions
 * vary from run to run: results are not bitwise deterministic, but each
 * is one rounding of an f32 sum (the interpreter: of a float64 sum).
 *
 * Index checks: an index outside [-size, size) (embedding: [0, V)) raises
 * the kernel's error flag, which the backend's finish() reports naming the
 * kernel and its node; gather and embedding leave that index's rows
 * unwritten, scatter_add's NAME_fin then writes no output at all.
 * Every kernel runs blocks of EVTC_CUDA_OPAQUE_THREADS threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "runtime/elements.h"

#define BLOCKS_PER_SM 8            /* grid-stride loops: enough blocks to fill every SM (2048 threads each) */
#define WARPS (EVTC_CUDA_OPAQUE_THREADS / 32)

bool evtc_cuda_opaque_op(evtc_op op) {
  return op == EVTC_OP_GATHER || op == EVTC_OP_EMBEDDING || op == EVTC_OP_SCATTER_ADD || op == EVTC_OP_PAD ||
         op == EVTC_OP_CONCAT;
}

static int64_t prod(const int64_t *s, int lo, int hi) {
  int64_t p = 1;
  for (int i = lo; i < hi; i++) p *= s[i];
  return p;
}

/* The widest word (16, 8, 4, 2 or 1 bytes) that divides `bytes` (0: any). */
static int widest(int64_t bytes) {
  int w = 16;
  while (w > 1 && bytes % w) w /= 2;
  return w;
}

static const char *word_type(int w) {
  switch (w) {
    case 16: return "evtc_w16";
    case 8: return "evtc_w8";
    case 4: return "uint32_t";
    case 2: return "uint16_t";
    default: return "uint8_t";
  }
}

/* ---- geometry: shared by fits, launch and emit ---- */

/* gather / embedding: y[o, j, c] = x[o, idx[j], c] in words of w bytes (wi per row). */
typedef struct gather_geo {
  int64_t outer, size, m, wi;
  int w;
  bool negative_ok;            /* gather: indices in [-size, size); embedding: [0, size) */
} gather_geo;

static gather_geo gather_geometry(const evtc_node *n) {
  const evtc_type *x = &n->inputs[0]->type;
  int ax = n->op == EVTC_OP_EMBEDDING ? 0 : evtc_axis_norm(evtc_node_int(n, "axis"), x->rank);
  int64_t row = prod(x->shape, ax + 1, x->rank) * (int64_t)evtc_dtype_size(x->dtype);
  gather_geo g = {.outer = prod(x->shape, 0, ax), .size = x->shape[ax], .m = evtc_type_numel(&n->inputs[1]->type),
                  .w = widest(row), .negative_ok = n->op == EVTC_OP_GATHER};
  g.wi = row / g.w;
  return g;
}

/* pad: the output as [osh[0..k), wu] words of w bytes; the trailing dims without padding fold into units of wu
 * words, and a last padded dim without interior counts in words. */
typedef struct pad_geo {
  int k, w;
  int64_t osh[EVTC_MAX_RANK], ish[EVTC_MAX_RANK], lo[EVTC_MAX_RANK], st[EVTC_MAX_RANK], wu;
} pad_geo;

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static pad_geo pad_geometry(const evtc_node *n) {
  const evtc_type *t = &n->inputs[0]->type;
  const evtc_attr *pads = evtc_node_attr(n, "pads"), *interior = evtc_node_attr(n, "interior");
  pad_geo g = {.k = t->rank};
  for (int d = 0; d < t->rank; d++) {
    g.osh[d] = n->type.shape[d];
    g.ish[d] = t->shape[d];
    g.lo[d] = pads->v.ints[d];
    g.st[d] = 1 + (interior->n ? interior->v.ints[d] : 0);
  }
  int64_t unit = (int64_t)evtc_dtype_size(t->dtype);
  while (g.k > 0 && g.osh[g.k - 1] == g.ish[g.k - 1] && g.st[g.k - 1] == 1) unit *= g.ish[--g.k];
  g.w = widest(unit);
  g.wu = unit / g.w;
  if (g.k > 0 && g.st[g.k - 1] == 1) {
    int d = g.k - 1;
    g.w = widest(gcd64(gcd64(unit * g.lo[d], unit * g.ish[d]), unit * g.osh[d]));
    g.osh[d] = unit * g.osh[d] / g.w;
    g.ish[d] = unit * g.ish[d] / g.w;
    g.lo[d] = unit * g.lo[d] / g.w;
    g.wu = 1;
  }
  return g;
}

/* concat: output rows of `row` words (w bytes), input j's slab of row_j words at column at_j. */
static int concat_word(const evtc_node *n, int ax, int64_t inner) {
  int64_t g = 0;
  for (int j = 0; j < n->n_inputs; j++) g = gcd64(g, n->inputs[j]->type.shape[ax] * inner);
  return widest(g * (int64_t)evtc_dtype_size(n->type.dtype));
}

/* scatter_add: upd [outer, m, inner] into y [outer, out_rows, inner] through accumulators [outer, size, inner]: the
 * indices run over [-size, size), a base's rows from size on are copied. */
typedef struct scatter_geo {
  int64_t outer, size, out_rows, m, inner;
  int ve;                      /* elements per lane access (rows scheme) */
  bool rows;                   /* a warp per row; else a thread per element */
  const char *acc;             /* accumulator type */
  size_t acc_bytes, scratch;   /* accumulators (16-byte multiple), then a hit flag per output row (rows) */
} scatter_geo;

static scatter_geo scatter_geometry(const evtc_node *n) {
  const evtc_type *o = &n->type;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), o->rank);
  evtc_dtype t = o->dtype;
  size_t es = evtc_dtype_size(t), as = t == EVTC_F64 || t == EVTC_I64 ? 8 : 4;
  scatter_geo g = {.outer = prod(o->shape, 0, ax), .size = evtc_node_int(n, "size"), .out_rows = o->shape[ax],
                   .inner = prod(o->shape, ax + 1, o->rank),
                   .m = evtc_type_numel(&n->inputs[1]->type),
                   .acc = t == EVTC_F64 ? "double" : t == EVTC_I64 ? "long long" : t == EVTC_I32 ? "int" : "float"};
  g.ve = 8;
  while (g.ve > 1 && (g.inner % g.ve || (size_t)g.ve * es > 16 || (size_t)g.ve * as > 32)) g.ve /= 2;
  g.rows = g.inner / g.ve >= 16;
  g.acc_bytes = ((size_t)(g.outer * g.size * g.inner) * as + 15) / 16 * 16;
  g.scratch = g.acc_bytes + (g.rows ? ((size_t)(g.outer * g.size) * 4 + 15) / 16 * 16 : 0);
  return g;
}

/* Whether counts up to `n` (and a grid's stride beyond) fit 32-bit index arithmetic. */
static bool narrow(int64_t n) { return n < ((int64_t)1 << 30); }

bool evtc_cuda_opaque_fits(const evtc_kernel *k, char *why, size_t cap) {
  const evtc_node *n = k->main;
  const char *op = evtc_op_get(n->op)->name;
  if (!evtc_cuda_opaque_op(n->op)) {
    snprintf(why, cap, "no CUDA template for %s", op);
    return false;
  }
  if (evtc_type_numel(&n->type) == 0) {
    snprintf(why, cap, "%s of an empty tensor", op);
    return false;
  }
  if (k->n_args > EVTC_CUDA_MAX_ARGS) {
    snprintf(why, cap, "%s with more than %d arguments", op, EVTC_CUDA_MAX_ARGS);
    return false;
  }
  if (n->op == EVTC_OP_SCATTER_ADD && n->type.dtype == EVTC_BOOL) {
    snprintf(why, cap, "bool scatter_add (the CUDA template adds numbers)");
    return false;
  }
  return true;
}

static unsigned grid_of(int64_t work, int64_t per_block, int sm_count) {
  int64_t g = (work + per_block - 1) / per_block, cap = (int64_t)(sm_count > 0 ? sm_count : 132) * BLOCKS_PER_SM;
  return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

evtc_cuda_opaque_launch evtc_cuda_opaque_launch_of(const evtc_kernel *k, int sm_count) {
  const evtc_node *n = k->main;
  evtc_cuda_opaque_launch L = {.block = EVTC_CUDA_OPAQUE_THREADS};
  const int64_t T = EVTC_CUDA_OPAQUE_THREADS;
  switch (n->op) {
    case EVTC_OP_GATHER: case EVTC_OP_EMBEDDING: {
      gather_geo g = gather_geometry(n);
      L.grid = grid_of(g.outer * g.m * g.wi, T, sm_count);
      break;
    }
    case EVTC_OP_PAD: {
      pad_geo g = pad_geometry(n);
      L.grid = grid_of(prod(g.osh, 0, g.k) * g.wu, T, sm_count);
      break;
    }
    case EVTC_OP_CONCAT: {
      int64_t bytes = evtc_type_numel(&n->type) * (int64_t)evtc_dtype_size(n->type.dtype);
      int ax = evtc_axis_norm(evtc_node_int(n, "axis"), n->type.rank);
      L.grid = grid_of(bytes / concat_word(n, ax, prod(n->type.shape, ax + 1, n->type.rank)), T, sm_count);
      break;
    }
    default: {   /* scatter_add */
      scatter_geo g = scatter_geometry(n);
      L.has_fin = true;
      L.scratch_bytes = g.scratch;
      L.grid = g.rows ? grid_of(g.outer * g.m, WARPS, sm_count) : grid_of(g.outer * g.m * g.inner, T, sm_count);
      L.fin_grid = g.rows ? grid_of(g.outer * g.out_rows, WARPS, sm_count)
                          : grid_of(g.outer * g.out_rows * g.inner, T, sm_count);
      break;
    }
  }
  return L;
}

/* ---- emission ---- */

static const char opaque_lib[] =
    "#ifndef EVTC_OPAQUE_LIB\n"
    "#define EVTC_OPAQUE_LIB\n"
    "/* evtc data movement: words of 8 and 16 bytes, and additions into global accumulators */\n"
    "struct alignas(8) evtc_w8 { uint32_t v[2]; };\n"
    "struct alignas(16) evtc_w16 { uint32_t v[4]; };\n"
    "/* p[0..4) += a..d: one vector reduction on sm_90 */\n"
    "__device__ __forceinline__ void evtc_red4(float *p, float a, float b, float c, float d) {\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "  asm volatile(\"red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\" :: \"l\"(p), \"f\"(a), \"f\"(b), \"f\"(c), \"f\"(d)\n"
    "               : \"memory\");\n"
    "#else\n"
    "  atomicAdd(p, a); atomicAdd(p + 1, b); atomicAdd(p + 2, c); atomicAdd(p + 3, d);\n"
    "#endif\n"
    "}\n"
    "__device__ __forceinline__ void evtc_red1(float *p, float v) { atomicAdd(p, v); }\n"
    "__device__ __forceinline__ void evtc_red1(double *p, double v) { atomicAdd(p, v); }\n"
    "__device__ __forceinline__ void evtc_red1(int *p, int v) { atomicAdd(p, v); }\n"
    "__device__ __forceinline__ void evtc_red1(long long *p, long long v) {\n"
    "  atomicAdd((unsigned long long *)p, (unsigned long long)v);\n"
    "}\n"
    "#endif\n";

/* The kernel's first line: NAME<suffix> with the common signature (cuda_emit.h), and the index type I: int when
 * every count of the kernel fits (its geometry constants, declared as const I, then fold into 32-bit arithmetic). */
static void emit_head(evtc_sb *b, const evtc_kernel *k, const char *suffix, bool wide) {
  evtc_sb_printf(b,
                 "extern \"C\" __global__ void __launch_bounds__(%d) %s%s(evtc_params P, const uint64_t *stepp, int *err, "
                 "void *scratch) {\n  const uint64_t step = *stepp;\n  (void)step; (void)err; (void)scratch;\n"
                 "  typedef %s I;\n",
                 EVTC_CUDA_OPAQUE_THREADS, k->name, suffix, wide ? "long long" : "int");
}

/* "const I NAME = value;" */
static void emit_const(evtc_sb *b, const char *name, int64_t value) {
  evtc_sb_printf(b, "  const I %s = %lld;\n", name, (long long)value);
}

/* "for (I i = <first>; i < N; i += <stride>) {" over threads (warp: over warps, `lane` in scope). */
static void emit_loop(evtc_sb *b, const char *var, const char *n, bool warp) {
  if (warp)
    evtc_sb_printf(b, "  const int lane = threadIdx.x & 31;\n"
                      "  for (I %s = ((I)blockIdx.x * %d + threadIdx.x) >> 5; %s < %s; %s += (I)gridDim.x * %d) {\n",
                   var, EVTC_CUDA_OPAQUE_THREADS, var, n, var, WARPS);
  else
    evtc_sb_printf(b, "  for (I %s = (I)blockIdx.x * %d + threadIdx.x; %s < %s; %s += (I)gridDim.x * %d) {\n", var,
                   EVTC_CUDA_OPAQUE_THREADS, var, n, var, EVTC_CUDA_OPAQUE_THREADS);
}

/* Loads index j into v and checks it against [-SIZE, SIZE) (or [0, SIZE)): out of range raises the error flag and
 * `on_bad` runs. */
static void emit_index(evtc_sb *b, const char *ind, bool negative_ok, const char *on_bad) {
  evtc_sb_printf(b, "%slong long v = (long long)ix[j];\n%sif (v < %s || v >= SIZE) { %s }\n", ind, ind,
                 negative_ok ? "-SIZE" : "0", on_bad);
  if (negative_ok) evtc_sb_printf(b, "%sif (v < 0) v += SIZE;\n", ind);
}

static void emit_ptr(evtc_sb *b, const char *name, const char *type, int arg, bool out) {
  evtc_sb_printf(b, "  %s%s *restrict %s = (%s%s *)P.a[%d];\n", out ? "" : "const ", type, name, out ? "" : "const ",
                 type, arg);
}

static void emit_gather(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  gather_geo g = gather_geometry(n);
  emit_head(b, k, "", !narrow(g.outer * g.m * g.wi) || !narrow(g.outer * g.size * g.wi));
  const char *w = word_type(g.w);
  emit_ptr(b, "x", w, evtc_kernel_input_arg(k, 0), false);
  emit_ptr(b, "ix", evtc_cpu_storage_ctype(n->inputs[1]->type.dtype), evtc_kernel_input_arg(k, 1), false);
  emit_ptr(b, "y", w, evtc_kernel_output_arg(k), true);
  evtc_sb_printf(b, "  /* y[o, j, c] = x[o, ix[j], c]: rows of WI words of %d bytes */\n", g.w);
  emit_const(b, "N", g.outer * g.m * g.wi);
  emit_const(b, "WI", g.wi);
  emit_const(b, "M", g.m);
  emit_const(b, "SIZE", g.size);
  emit_loop(b, "i", "N", false);
  evtc_sb_printf(b, "    const I row = i / WI, c = i - row * WI, j = row %% M, o = row / M;\n");
  emit_index(b, "    ", g.negative_ok, "*err = 1; continue;");
  evtc_sb_printf(b, "    y[i] = x[(o * SIZE + (I)v) * WI + c];\n  }\n}\n");
}

/* The fill value's bits repeated over a word of w bytes, as a C initialiser of word_type(w). */
static void emit_fill(evtc_sb *b, const evtc_node *n, int w) {
  unsigned char elem[8] = {0}, word[16];
  double value = evtc_node_float(n, "value");
  evtc_elements_encode(n->type.dtype, &value, 1, elem);
  size_t es = evtc_dtype_size(n->type.dtype);
  for (int i = 0; i < w; i++) word[i] = elem[(size_t)i % es];
  uint32_t u[4] = {0};
  for (int i = 0; i < w; i++) u[i / 4] |= (uint32_t)word[i] << (8 * (i % 4));
  if (w == 16) evtc_sb_printf(b, "  const evtc_w16 FILL = {{0x%xu, 0x%xu, 0x%xu, 0x%xu}};\n", u[0], u[1], u[2], u[3]);
  else if (w == 8) evtc_sb_printf(b, "  const evtc_w8 FILL = {{0x%xu, 0x%xu}};\n", u[0], u[1]);
  else evtc_sb_printf(b, "  const %s FILL = (%s)0x%xu;\n", word_type(w), word_type(w), u[0]);
}

static void emit_pad(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  pad_geo g = pad_geometry(n);
  int64_t words = prod(g.osh, 0, g.k) * g.wu;
  emit_head(b, k, "", !narrow(words) || !narrow(prod(g.ish, 0, g.k) * g.wu));
  const char *w = word_type(g.w);
  emit_ptr(b, "x", w, evtc_kernel_input_arg(k, 0), false);
  emit_ptr(b, "y", w, evtc_kernel_output_arg(k), true);
  evtc_sb_printf(b, "  /* %d padded dims over units of WU words of %d bytes */\n", g.k, g.w);
  emit_fill(b, n, g.w);
  emit_const(b, "N", words);
  emit_const(b, "WU", g.wu);
  emit_loop(b, "i", "N", false);
  evtc_sb_printf(b, "    I rest = i / WU, src = i - rest * WU;\n    bool in = true;\n");
  int64_t stride = g.wu;
  for (int d = g.k - 1; d >= 0; d--) {   /* output coordinate q + lo of dim d; the input's is q / st when q % st == 0 */
    evtc_sb_printf(b, "    {\n      const I q = rest %% %lld - %lld;\n", (long long)g.osh[d], (long long)g.lo[d]);
    if (d > 0) evtc_sb_printf(b, "      rest /= %lld;\n", (long long)g.osh[d]);
    if (g.st[d] == 1)
      evtc_sb_printf(b, "      if (q < 0 || q >= %lld) in = false;\n      else src += q * %lld;\n    }\n",
                     (long long)g.ish[d], (long long)stride);
    else
      evtc_sb_printf(b, "      if (q < 0 || q %% %lld || q / %lld >= %lld) in = false;\n"
                        "      else src += q / %lld * %lld;\n    }\n",
                     (long long)g.st[d], (long long)g.st[d], (long long)g.ish[d], (long long)g.st[d],
                     (long long)stride);
    stride *= g.ish[d];
  }
  evtc_sb_printf(b, "    y[i] = in ? x[src] : FILL;\n  }\n}\n");
}

static void emit_concat(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), n->type.rank);
  int64_t inner = prod(n->type.shape, ax + 1, n->type.rank), es = (int64_t)evtc_dtype_size(n->type.dtype);
  int w = concat_word(n, ax, inner);
  int64_t row = n->type.shape[ax] * inner * es / w, words = prod(n->type.shape, 0, ax) * row;
  emit_head(b, k, "", !narrow(words));
  const char *wt = word_type(w);
  emit_ptr(b, "y", wt, evtc_kernel_output_arg(k), true);
  evtc_sb_printf(b, "  /* output rows of ROW words of %d bytes, input j's slab at its column */\n", w);
  emit_const(b, "N", words);
  emit_const(b, "ROW", row);
  emit_loop(b, "i", "N", false);
  evtc_sb_printf(b, "    const I r = i / ROW, c = i - r * ROW;\n    ");
  int64_t at = 0;
  for (int j = 0; j < n->n_inputs; j++) {
    int64_t rj = n->inputs[j]->type.shape[ax] * inner * es / w;
    if (rj == 0) continue;
    bool last = at + rj == row;
    if (!last) evtc_sb_printf(b, "if (c < %lld) ", (long long)(at + rj));
    evtc_sb_printf(b, "y[i] = ((const %s *)P.a[%d])[r * %lld + c - %lld];\n", wt, evtc_kernel_input_arg(k, j),
                   (long long)rj, (long long)at);
    if (!last) evtc_sb_printf(b, "    else ");
    at += rj;
  }
  evtc_sb_printf(b, "  }\n}\n");
}

/* The accumulator value of stored update element `s` of dtype t, and a stored element of accumulator `a`. */
static void emit_widen(evtc_sb *b, evtc_dtype t, const char *acc, const char *s) {
  if (t == EVTC_BF16) evtc_sb_printf(b, "evtc_bf2f(%s)", s);
  else if (t == EVTC_F16) evtc_sb_printf(b, "evtc_h2f(%s)", s);
  else evtc_sb_printf(b, "(%s)%s", acc, s);
}

static void emit_narrow(evtc_sb *b, evtc_dtype t, const char *a) {
  if (t == EVTC_BF16) evtc_sb_printf(b, "evtc_f2bf(%s)", a);
  else if (t == EVTC_F16) evtc_sb_printf(b, "evtc_f2h(%s)", a);
  else evtc_sb_printf(b, "%s", a);
}

/* scatter_add's pointers and geometry constants (main kernel and NAME_fin alike). */
static void emit_scatter_top(evtc_sb *b, const scatter_geo *g) {
  evtc_sb_printf(b, "  %s *restrict acc = (%s *)scratch;\n", g->acc, g->acc);
  if (g->rows) evtc_sb_printf(b, "  unsigned *restrict hit = (unsigned *)((char *)scratch + %zu);\n", g->acc_bytes);
  emit_const(b, "OUTER", g->outer);
  emit_const(b, "M", g->m);
  emit_const(b, "SIZE", g->size);
  emit_const(b, "ROWS", g->out_rows);
  emit_const(b, "INNER", g->inner);
}

/* scatter_add's main kernel: the updates added into the accumulators. */
static void emit_scatter_main(evtc_sb *b, const evtc_kernel *k, const scatter_geo *g, bool wide) {
  const evtc_node *n = k->main;
  evtc_dtype t = n->type.dtype;
  const char *st = evtc_cpu_storage_ctype(t);
  emit_head(b, k, "", wide);
  emit_ptr(b, "u", st, evtc_kernel_input_arg(k, 0), false);
  emit_ptr(b, "ix", evtc_cpu_storage_ctype(n->inputs[1]->type.dtype), evtc_kernel_input_arg(k, 1), false);
  emit_scatter_top(b, g);
  if (!g->rows) {
    evtc_sb_printf(b, "  /* a thread per update element */\n");
    emit_loop(b, "i", "OUTER * M * INNER", false);
    evtc_sb_printf(b, "    const I row = i / INNER, c = i - row * INNER, j = row %% M, p = row / M;\n");
    emit_index(b, "    ", true, "*err = 1; continue;");
    evtc_sb_printf(b, "    evtc_red1(acc + (p * SIZE + (I)v) * INNER + c, ");
    emit_widen(b, t, g->acc, "u[i]");
    evtc_sb_printf(b, ");\n  }\n}\n");
    return;
  }
  evtc_sb_printf(b, "  /* a warp per update row: %d elements per lane access */\n", g->ve);
  emit_loop(b, "row", "OUTER * M", true);
  evtc_sb_printf(b, "    const I j = row %% M, p = row / M;\n");
  emit_index(b, "    ", true, "if (lane == 0) *err = 1; continue;");
  evtc_sb_printf(b, "    const I orow = p * SIZE + (I)v;\n    if (lane == 0) hit[orow] = 1u;\n"
                    "    const %s *s = u + row * INNER;\n    %s *d = acc + orow * INNER;\n"
                    "    for (I c = lane * %d; c < INNER; c += %d) {\n"
                    "      const evtc_vec<%s, %d> x = *(const evtc_vec<%s, %d> *)(s + c);\n",
                 st, g->acc, g->ve, 32 * g->ve, st, g->ve, st, g->ve);
  for (int e = 0; e < g->ve; e++) {
    char s[32];
    snprintf(s, sizeof s, "x.v[%d]", e);
    evtc_sb_printf(b, "      const %s f%d = ", g->acc, e);
    emit_widen(b, t, g->acc, s);
    evtc_sb_printf(b, ";\n");
  }
  bool vec4 = strcmp(g->acc, "float") == 0 && g->ve % 4 == 0;
  for (int e = 0; e < g->ve; e += vec4 ? 4 : 1) {
    if (vec4) evtc_sb_printf(b, "      evtc_red4(d + c + %d, f%d, f%d, f%d, f%d);\n", e, e, e + 1, e + 2, e + 3);
    else evtc_sb_printf(b, "      evtc_red1(d + c + %d, f%d);\n", e, e);
  }
  evtc_sb_printf(b, "    }\n  }\n}\n");
}

/* scatter_add's NAME_fin: the accumulators, plus the base where there is one, rounded into the output (unless an
 * index failed) and zeroed.  Over its dead base (the program's in-place write) only the hit rows are written. */
static void emit_scatter_fin(evtc_sb *b, const evtc_kernel *k, const scatter_geo *g, bool wide) {
  evtc_dtype t = k->main->type.dtype;
  const char *st = evtc_cpu_storage_ctype(t);
  const bool base = k->main->n_inputs == 3, in_place = base && k->args[evtc_kernel_output_arg(k)].shared;
  const char *bp = in_place ? "y" : "x";     /* the base's elements */
  emit_head(b, k, "_fin", wide);
  evtc_sb_printf(b, "  const int bad = *(volatile int *)err;\n");
  emit_ptr(b, "y", st, evtc_kernel_output_arg(k), true);
  if (base && !in_place) emit_ptr(b, "x", st, evtc_kernel_input_arg(k, 2), false);
  emit_scatter_top(b, g);
  if (!g->rows) {
    emit_loop(b, "i", "OUTER * ROWS * INNER", false);
    evtc_sb_printf(b, "    const I row = i / INNER, c = i - row * INNER, p = row / ROWS, rr = row - p * ROWS;\n"
                      "    %s a = 0;\n    if (rr < SIZE) {\n      const I ai = (p * SIZE + rr) * INNER + c;\n"
                      "      a = acc[ai];\n      acc[ai] = 0;\n    }\n", g->acc);
    if (base) {
      char s[16];
      snprintf(s, sizeof s, "%s[i]", bp);
      evtc_sb_printf(b, "    a += ");
      emit_widen(b, t, g->acc, s);
      evtc_sb_printf(b, ";\n");
    }
    evtc_sb_printf(b, "    if (!bad) y[i] = ");
    emit_narrow(b, t, "a");
    evtc_sb_printf(b, ";\n  }\n}\n");
    return;
  }
  emit_loop(b, "orow", "OUTER * ROWS", true);
  evtc_sb_printf(b, "    const I p = orow / ROWS, rr = orow - p * ROWS, arow = p * SIZE + rr;\n"
                    "    const unsigned h = rr < SIZE ? hit[arow] : 0u;\n"
                    "    %s *o = y + orow * INNER;\n    %s *a = acc + arow * INNER;\n"
                    "    if (h) {\n      for (I c = lane * %d; c < INNER; c += %d) {\n"
                    "        const evtc_vec<%s, %d> s = *(const evtc_vec<%s, %d> *)(a + c);\n"
                    "        *(evtc_vec<%s, %d> *)(a + c) = evtc_vec<%s, %d>{};\n"
                    "        evtc_vec<%s, %d> r;\n",
                 st, g->acc, g->ve, 32 * g->ve, g->acc, g->ve, g->acc, g->ve, g->acc, g->ve, g->acc, g->ve, st, g->ve);
  if (base)
    evtc_sb_printf(b, "        const evtc_vec<%s, %d> q = *(const evtc_vec<%s, %d> *)(%s + orow * INNER + c);\n", st,
                   g->ve, st, g->ve, bp);
  for (int e = 0; e < g->ve; e++) {
    char s[48], q[16];
    snprintf(q, sizeof q, "q.v[%d]", e);
    evtc_sb w = {0};
    if (base) emit_widen(&w, t, g->acc, q);
    snprintf(s, sizeof s, "s.v[%d]%s%s", e, base ? " + " : "", base ? w.s : "");
    free(w.s);
    evtc_sb_printf(b, "        r.v[%d] = ", e);
    emit_narrow(b, t, s);
    evtc_sb_printf(b, ";\n");
  }
  evtc_sb_printf(b, "        if (!bad) *(evtc_vec<%s, %d> *)(o + c) = r;\n      }\n"
                    "      __syncwarp();\n      if (lane == 0) hit[arow] = 0u;\n    }", st, g->ve);
  if (in_place) {                  /* a row no index hit keeps its base */
    evtc_sb_printf(b, "\n  }\n}\n");
    return;
  }
  evtc_sb_printf(b, " else if (!bad) {\n      for (I c = lane * %d; c < INNER; c += %d) *(evtc_vec<%s, %d> *)(o + c) = ",
                 g->ve, 32 * g->ve, st, g->ve);
  if (base) evtc_sb_printf(b, "*(const evtc_vec<%s, %d> *)(x + orow * INNER + c);\n", st, g->ve);
  else evtc_sb_printf(b, "evtc_vec<%s, %d>{};\n", st, g->ve);
  evtc_sb_printf(b, "    }\n  }\n}\n");
}

void evtc_cuda_emit_opaque(evtc_sb *b, const evtc_kernel *k) {
  evtc_sb_printf(b, "%s", opaque_lib);
  switch (k->main->op) {
    case EVTC_OP_GATHER: case EVTC_OP_EMBEDDING: emit_gather(b, k); break;
    case EVTC_OP_PAD: emit_pad(b, k); break;
    case EVTC_OP_CONCAT: emit_concat(b, k); break;
    default: {   /* scatter_add */
      scatter_geo g = scatter_geometry(k->main);
      bool wide = !narrow(g.outer * g.out_rows * g.inner) || !narrow(g.outer * g.m * g.inner);
      evtc_cuda_emit_vec_helpers(b);
      emit_scatter_main(b, k, &g, wide);
      emit_scatter_fin(b, k, &g, wide);
      break;
    }
  }
  evtc_sb_printf(b, "\n");
}
