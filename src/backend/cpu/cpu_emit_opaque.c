/* cpu_emit_opaque.c -- the CPU templates of ops the visitor DAG does not
 * express: one node per kernel (an OPAQUE kernel), run whole.
 *
 * Each op gets a loop nest with its geometry baked in as constants:
 * layout ops that move data (pad, concat, gather, embedding, scatter_add),
 * pooling (max / avg and their backward ops), the two conv2d backward ops
 * (direct loops, each output plane owned by one thread, so no atomics),
 * training-mode batchnorm and its running statistics, and a strided
 * reduction over any set of axes (for reductions the row/column templates
 * cannot take, e.g. over the middle axes of NCHW); the attention family
 * comes from cpu_emit_attention.c.  Sums and statistics
 * accumulate in double.  Index checks (gather, embedding, scatter_add) run
 * before anything is written and raise the kernel's error flag, as the
 * interpreter fails naming the node.  Pad, concat, gather and embedding
 * only move values, so they run on f16 / bf16 too, as 2-byte storage
 * (pad's fill value as its rounded bits); scatter_add (the embedding's
 * gradient) sums f16 / bf16 in f32 and rounds each sum once.
 */
#include <string.h>

#include "backend/cpu/cpu_emit.h"
#include "runtime/elements.h"


bool evtc_cpu_opaque_takes_half(evtc_op op) {
  return op == EVTC_OP_PAD || op == EVTC_OP_CONCAT || op == EVTC_OP_GATHER || op == EVTC_OP_EMBEDDING ||
         op == EVTC_OP_SCATTER_ADD;
}

bool evtc_cpu_opaque_supported(const evtc_node *n) {
  switch (n->op) {
    case EVTC_OP_PAD: case EVTC_OP_CONCAT: case EVTC_OP_GATHER: case EVTC_OP_EMBEDDING: case EVTC_OP_SCATTER_ADD:
    case EVTC_OP_MAXPOOL2D: case EVTC_OP_MAXPOOL2D_BACKWARD: case EVTC_OP_AVGPOOL2D: case EVTC_OP_AVGPOOL2D_BACKWARD:
    case EVTC_OP_CONV2D_BACKWARD_INPUT: case EVTC_OP_CONV2D_BACKWARD_WEIGHT:
    case EVTC_OP_BATCHNORM: case EVTC_OP_BATCHNORM_RUNNING_MEAN: case EVTC_OP_BATCHNORM_RUNNING_VAR:
    case EVTC_OP_REDUCE_SUM: case EVTC_OP_REDUCE_MEAN: case EVTC_OP_REDUCE_MAX: case EVTC_OP_REDUCE_MIN:
      return true;
    default: return evtc_op_is_attention(n->op);
  }
}

/* "const int64_t NAME[] = {v0, ..., 0};" (a trailing 0 keeps rank 0 legal). */
static void emit_array(evtc_sb *b, const char *name, const int64_t *v, int n) {
  evtc_sb_printf(b, "  static const int64_t %s[] = {", name);
  for (int i = 0; i < n; i++) evtc_sb_printf(b, "%lldLL, ", (long long)v[i]);
  evtc_sb_printf(b, "0};\n");
}

static int64_t prod(const int64_t *s, int lo, int hi) {
  int64_t p = 1;
  for (int i = lo; i < hi; i++) p *= s[i];
  return p;
}

static void emit_pad(evtc_sb *b, const evtc_node *n) {
  const evtc_type *t = &n->inputs[0]->type;
  const evtc_attr *pads = evtc_node_attr(n, "pads"), *interior = evtc_node_attr(n, "interior");
  int64_t lo[EVTC_MAX_RANK], st[EVTC_MAX_RANK], is[EVTC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) {
    lo[d] = pads->v.ints[d];
    st[d] = 1 + (interior->n ? interior->v.ints[d] : 0);
    is[d] = prod(t->shape, d + 1, t->rank);
  }
  emit_array(b, "osh", n->type.shape, t->rank);
  emit_array(b, "ish", t->shape, t->rank);
  emit_array(b, "istr", is, t->rank);
  emit_array(b, "lo", lo, t->rank);
  emit_array(b, "st", st, t->rank);
  evtc_sb_printf(b, "  const int64_t NO = %lldLL;\n  #pragma omp parallel for schedule(static) if (NO > 32768)\n"
                    "  for (int64_t i = 0; i < NO; i++) {\n    int64_t rest = i, src = 0; int ok = 1;\n"
                    "    for (int d = %d; d >= 0; d--) {\n      const int64_t q = rest %% osh[d] - lo[d];\n"
                    "      rest /= osh[d];\n      if (q < 0 || q %% st[d] || q / st[d] >= ish[d]) ok = 0;\n"
                    "      else src += q / st[d] * istr[d];\n    }\n    y[i] = ok ? x0[src] : ",
                 (long long)evtc_type_numel(&n->type), t->rank - 1);
  const double fill = evtc_node_float(n, "value");
  if (n->type.dtype == EVTC_BF16 || n->type.dtype == EVTC_F16)   /* T is the 2-byte storage: the value's bits */
    evtc_sb_printf(b, "(T)0x%04x;\n  }\n", n->type.dtype == EVTC_BF16 ? evtc_double_to_bf16(fill) : evtc_double_to_f16(fill));
  else
    evtc_sb_printf(b, "(T)%.17g;\n  }\n", fill);
}

static void emit_concat(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), n->type.rank);
  int64_t outer = prod(n->type.shape, 0, ax), inner = prod(n->type.shape, ax + 1, n->type.rank);
  evtc_sb_printf(b, "  #pragma omp parallel for schedule(static) if (%lldLL > 32768)\n"
                    "  for (int64_t r = 0; r < %lldLL; r++) {\n",
                 (long long)evtc_type_numel(&n->type), (long long)outer);
  int64_t at = 0;
  for (int j = 0; j < n->n_inputs; j++) {
    int64_t row = n->inputs[j]->type.shape[ax] * inner;
    evtc_sb_printf(b, "    memcpy(y + r * %lldLL + %lldLL, a%d + r * %lldLL, sizeof(T) * %lldLL);\n",
                   (long long)(n->type.shape[ax] * inner), (long long)at, evtc_kernel_input_arg(k, j), (long long)row,
                   (long long)row);
    at += row;
  }
  evtc_sb_printf(b, "  }\n");
}

/* Checks the M indices in idx against [lo, SIZE) (lo = -SIZE or 0). */
static void emit_index_check(evtc_sb *b, int64_t m, int64_t size, bool negative_ok) {
  evtc_sb_printf(b, "  for (int64_t j = 0; j < %lldLL; j++) {\n    const double v = (double)x1[j];\n"
                    "    if (!(v >= %lld.0 && v < %lld.0)) { *err = 1; return; }\n  }\n",
                 (long long)m, negative_ok ? -(long long)size : 0LL, (long long)size);
}

static void emit_gather(evtc_sb *b, const evtc_node *n) {
  const evtc_type *x = &n->inputs[0]->type;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), x->rank);
  int64_t outer = prod(x->shape, 0, ax), inner = prod(x->shape, ax + 1, x->rank), size = x->shape[ax];
  int64_t m = evtc_type_numel(&n->inputs[1]->type);
  emit_index_check(b, m, size, true);
  evtc_sb_printf(b, "  #pragma omp parallel for collapse(2) schedule(static) if (%lldLL > 32768)\n"
                    "  for (int64_t o = 0; o < %lldLL; o++)\n    for (int64_t j = 0; j < %lldLL; j++) {\n"
                    "      int64_t v = (int64_t)x1[j];\n      if (v < 0) v += %lldLL;\n"
                    "      memcpy(y + (o * %lldLL + j) * %lldLL, x0 + (o * %lldLL + v) * %lldLL, sizeof(T) * %lldLL);\n    }\n",
                 (long long)evtc_type_numel(&n->type), (long long)outer, (long long)m, (long long)size, (long long)m,
                 (long long)inner, (long long)size, (long long)inner, (long long)inner);
}

static void emit_embedding(evtc_sb *b, const evtc_node *n) {
  int64_t v = n->inputs[0]->type.shape[0], d = n->inputs[0]->type.shape[1], m = evtc_type_numel(&n->inputs[1]->type);
  emit_index_check(b, m, v, false);
  evtc_sb_printf(b, "  #pragma omp parallel for schedule(static) if (%lldLL > 32768)\n"
                    "  for (int64_t j = 0; j < %lldLL; j++)\n"
                    "    memcpy(y + j * %lldLL, x0 + (int64_t)x1[j] * %lldLL, sizeof(T) * %lldLL);\n",
                 (long long)(m * d), (long long)m, (long long)d, (long long)d, (long long)d);
}

/* scatter_add; f16 / bf16 sums accumulate in an f32 scratch and are rounded once when stored, with the base x2
 * (when given) added before that rounding.  y may be x2's buffer (the program writing it over its dead base). */
static void emit_scatter_add(evtc_sb *b, const evtc_node *n) {
  const evtc_type *o = &n->type;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), o->rank);
  /* indices in [-size, size); the output's rows (a base's) may run beyond size */
  int64_t outer = prod(o->shape, 0, ax), inner = prod(o->shape, ax + 1, o->rank), size = evtc_node_int(n, "size");
  int64_t m = evtc_type_numel(&n->inputs[1]->type), numel = evtc_type_numel(o), rows = o->shape[ax];
  const bool half = o->dtype == EVTC_F16 || o->dtype == EVTC_BF16;
  const char *widen = o->dtype == EVTC_F16 ? "evtc_h2f" : o->dtype == EVTC_BF16 ? "evtc_bf2f" : "";
  emit_index_check(b, m, size, true);
  const bool base = n->n_inputs == 3;
  if (half) evtc_sb_printf(b, "  float *acc = calloc(%lldLL, sizeof(float));\n", (long long)numel);
  else if (base) evtc_sb_printf(b, "  T *acc = y;\n  if (y != x2) memcpy(y, x2, sizeof(T) * %lldLL);\n", (long long)numel);
  else evtc_sb_printf(b, "  T *acc = y;\n  memset(y, 0, sizeof(T) * %lldLL);\n", (long long)numel);
  /* threads own (outer, inner-chunk) pairs; each walks the indices in order */
  int64_t chunk = inner < 256 ? inner : 256, nchunk = (inner + chunk - 1) / chunk;
  evtc_sb_printf(b, "  #pragma omp parallel for collapse(2) schedule(static) if (%lldLL > 32768)\n"
                    "  for (int64_t p = 0; p < %lldLL; p++)\n    for (int64_t ch = 0; ch < %lldLL; ch++) {\n"
                    "      const int64_t i0 = ch * %lldLL, i1 = i0 + %lldLL < %lldLL ? i0 + %lldLL : %lldLL;\n"
                    "      for (int64_t j = 0; j < %lldLL; j++) {\n        int64_t v = (int64_t)x1[j];\n"
                    "        if (v < 0) v += %lldLL;\n        %s *dst = acc + (p * %lldLL + v) * %lldLL;\n"
                    "        const T *src = x0 + (p * %lldLL + j) * %lldLL;\n"
                    "        for (int64_t i = i0; i < i1; i++) dst[i] += %s(src[i]);\n      }\n    }\n",
                 (long long)(outer * m * inner), (long long)outer, (long long)nchunk, (long long)chunk,
                 (long long)chunk, (long long)inner, (long long)chunk, (long long)inner, (long long)m, (long long)size,
                 half ? "float" : "T", (long long)rows, (long long)inner, (long long)m, (long long)inner, widen);
  if (half)
    evtc_sb_printf(b, "  for (int64_t e = 0; e < %lldLL; e++) y[e] = %s(acc[e]%s%s%s);\n  free(acc);\n",
                   (long long)numel, o->dtype == EVTC_F16 ? "evtc_f2h" : "evtc_f2bf", base ? " + " : "",
                   base ? widen : "", base ? "(x2[e])" : "");
}

/* Pool / conv geometry constants: x [N,C,H,W] plane sizes, y [.,.,OH,OW], window, stride, pads. */
static void emit_window(evtc_sb *b, const evtc_node *n, const int64_t *x, const int64_t *y, int64_t kh, int64_t kw) {
  const evtc_attr *s = evtc_node_attr(n, "stride"), *p = evtc_node_attr(n, "padding");
  bool pool = n->op != EVTC_OP_CONV2D_BACKWARD_INPUT && n->op != EVTC_OP_CONV2D_BACKWARD_WEIGHT;
  int64_t sh = s->n ? s->v.ints[0] : pool ? kh : 1, sw = s->n ? s->v.ints[1] : pool ? kw : 1;
  evtc_sb_printf(b, "  const int64_t NB = %lldLL, CH = %lldLL, H = %lldLL, W = %lldLL, OH = %lldLL, OW = %lldLL;\n"
                    "  const int64_t KH = %lldLL, KW = %lldLL, SH = %lldLL, SW = %lldLL, PT = %lldLL, PL = %lldLL;\n"
                    "  (void)NB; (void)CH;\n",
                 (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)y[2], (long long)y[3],
                 (long long)kh, (long long)kw, (long long)sh, (long long)sw, p->n ? (long long)p->v.ints[0] : 0LL,
                 p->n ? (long long)p->v.ints[1] : 0LL);
}

/* The first maximum of window (r, c) of plane xp: value in best, offset in at (-1: padding). */
static const char argmax_body[] =
    "        double best = 0; int64_t at = -1; int have = 0;\n"
    "        for (int64_t i = 0; i < KH; i++)\n          for (int64_t j = 0; j < KW; j++) {\n"
    "            const int64_t ih = r * SH - PT + i, iw = c * SW - PL + j;\n"
    "            const int inside = ih >= 0 && ih < H && iw >= 0 && iw < W;\n"
    "            const double v = inside ? (double)xp[ih * W + iw] : -INFINITY;\n"
    "            if (!have || v > best) { best = v; at = inside ? ih * W + iw : -1; have = 1; }\n"
    "          }\n";

static void emit_maxpool(evtc_sb *b, const evtc_node *n) {
  const evtc_attr *kern = evtc_node_attr(n, "kernel");
  bool back = n->op == EVTC_OP_MAXPOOL2D_BACKWARD;
  const evtc_type *xt = &n->inputs[back ? 1 : 0]->type, *yt = back ? &n->inputs[0]->type : &n->type;
  emit_window(b, n, xt->shape, yt->shape, kern->v.ints[0], kern->v.ints[1]);
  evtc_sb_printf(b, "  #pragma omp parallel for schedule(static) if (NB * CH * H * W > 16384)\n"
                    "  for (int64_t p = 0; p < NB * CH; p++) {\n    const T *xp = %s + p * H * W;\n", back ? "x1" : "x0");
  if (back) evtc_sb_printf(b, "    T *dxp = y + p * H * W;\n    memset(dxp, 0, sizeof(T) * (size_t)(H * W));\n");
  evtc_sb_printf(b, "    for (int64_t r = 0; r < OH; r++)\n      for (int64_t c = 0; c < OW; c++) {\n%s", argmax_body);
  if (back) evtc_sb_printf(b, "        if (at >= 0) dxp[at] += x0[(p * OH + r) * OW + c];\n      }\n  }\n");
  else evtc_sb_printf(b, "        (void)at;\n        y[(p * OH + r) * OW + c] = (T)best;\n      }\n  }\n");
}

static void emit_avgpool(evtc_sb *b, const evtc_node *n) {
  const evtc_attr *kern = evtc_node_attr(n, "kernel");
  bool back = n->op == EVTC_OP_AVGPOOL2D_BACKWARD;
  const evtc_type *xt = back ? &n->type : &n->inputs[0]->type, *yt = back ? &n->inputs[0]->type : &n->type;
  emit_window(b, n, xt->shape, yt->shape, kern->v.ints[0], kern->v.ints[1]);
  evtc_sb_printf(b, "  #pragma omp parallel for schedule(static) if (NB * CH * H * W > 16384)\n"
                    "  for (int64_t p = 0; p < NB * CH; p++) {\n");
  if (back) evtc_sb_printf(b, "    T *dxp = y + p * H * W;\n    memset(dxp, 0, sizeof(T) * (size_t)(H * W));\n");
  else evtc_sb_printf(b, "    const T *xp = x0 + p * H * W;\n");
  evtc_sb_printf(b, "    for (int64_t r = 0; r < OH; r++)\n      for (int64_t c = 0; c < OW; c++) {\n"
                    "        const int64_t a = r * SH - PT, bb = c * SW - PL;\n"
                    "        const int64_t h0 = a < 0 ? 0 : a, h1 = a + KH < H ? a + KH : H;\n"
                    "        const int64_t w0 = bb < 0 ? 0 : bb, w1 = bb + KW < W ? bb + KW : W;\n"
                    "        const int64_t cnt = (h1 - h0) * (w1 - w0);\n"
                    "        const double div = %s;\n",
                 evtc_node_int(n, "count_include_pad") ? "(double)(KH * KW)" : "cnt > 0 ? (double)cnt : 1.0");
  if (back)
    evtc_sb_printf(b, "        const double v = (double)x0[(p * OH + r) * OW + c] / div;\n"
                      "        for (int64_t i = h0; i < h1; i++)\n          for (int64_t j = w0; j < w1; j++) dxp[i * W + j] += (T)v;\n"
                      "      }\n  }\n");
  else
    evtc_sb_printf(b, "        double sum = 0.0;\n        for (int64_t i = h0; i < h1; i++)\n"
                      "          for (int64_t j = w0; j < w1; j++) sum += xp[i * W + j];\n"
                      "        y[(p * OH + r) * OW + c] = (T)(sum / div);\n      }\n  }\n");
}

/* conv2d_backward_input (dy, w) -> dx and conv2d_backward_weight (x, dy) -> dw. */
static void emit_conv_back(evtc_sb *b, const evtc_node *n) {
  bool input = n->op == EVTC_OP_CONV2D_BACKWARD_INPUT;
  const evtc_type *xt = input ? &n->type : &n->inputs[0]->type, *wt = input ? &n->inputs[1]->type : &n->type,
                  *dyt = input ? &n->inputs[0]->type : &n->inputs[1]->type;
  emit_window(b, n, xt->shape, dyt->shape, wt->shape[2], wt->shape[3]);
  const evtc_attr *dil = evtc_node_attr(n, "dilation");
  int64_t groups = evtc_node_int(n, "groups");
  evtc_sb_printf(b, "  const int64_t DH = %lldLL, DW = %lldLL, O = %lldLL, CG = %lldLL, OG = %lldLL;\n",
                 dil->n ? (long long)dil->v.ints[0] : 1LL, dil->n ? (long long)dil->v.ints[1] : 1LL,
                 (long long)wt->shape[0], (long long)(xt->shape[1] / groups), (long long)(wt->shape[0] / groups));
  /* valid output range [lo, hi) for window offset `start` (0 <= o*stride + start < in) */
  evtc_sb_printf(b, "#define EVTC_VR(out, in, s, start, lo, hi) do { lo = (start) >= 0 ? 0 : (-(start) + (s) - 1) / (s); "
                    "hi = (in) - (start) <= 0 ? 0 : ((in) - (start) + (s) - 1) / (s); if (hi > (out)) hi = (out); } while (0)\n");
  if (input) {
    evtc_sb_printf(b, "  const T *dy = x0, *w = x1;\n"
                      "  #pragma omp parallel for schedule(dynamic) if (NB * CH * H * W * OG * KH * KW > 32768)\n"
                      "  for (int64_t pl = 0; pl < NB * CH; pl++) {\n"
                      "    const int64_t nb = pl / CH, ch = pl %% CH, grp = ch / CG, ci = ch %% CG;\n"
                      "    T *dxp = y + pl * H * W;\n    memset(dxp, 0, sizeof(T) * (size_t)(H * W));\n"
                      "    for (int64_t o = grp * OG; o < (grp + 1) * OG; o++) {\n"
                      "      const T *dyp = dy + (nb * O + o) * OH * OW, *wp = w + (o * CG + ci) * KH * KW;\n"
                      "      for (int64_t i = 0; i < KH; i++) {\n        int64_t rlo, rhi;\n"
                      "        EVTC_VR(OH, H, SH, i * DH - PT, rlo, rhi);\n"
                      "        for (int64_t j = 0; j < KW; j++) {\n          int64_t clo, chi;\n"
                      "          EVTC_VR(OW, W, SW, j * DW - PL, clo, chi);\n          const T wv = wp[i * KW + j];\n"
                      "          for (int64_t r = rlo; r < rhi; r++) {\n"
                      "            T *dxr = dxp + (r * SH + i * DH - PT) * W + j * DW - PL;\n"
                      "            const T *dyr = dyp + r * OW;\n"
                      "            for (int64_t c = clo; c < chi; c++) dxr[c * SW] += wv * dyr[c];\n"
                      "          }\n        }\n      }\n    }\n  }\n#undef EVTC_VR\n");
  } else {
    evtc_sb_printf(b, "  const T *x = x0, *dy = x1;\n"
                      "  #pragma omp parallel for schedule(dynamic) if (NB * O * OH * OW * CG * KH * KW > 32768)\n"
                      "  for (int64_t oc = 0; oc < O * CG; oc++) {\n"
                      "    const int64_t o = oc / CG, ci = oc %% CG, grp = o / OG;\n"
                      "    for (int64_t i = 0; i < KH; i++) {\n      int64_t rlo, rhi;\n"
                      "      EVTC_VR(OH, H, SH, i * DH - PT, rlo, rhi);\n"
                      "      for (int64_t j = 0; j < KW; j++) {\n        int64_t clo, chi;\n"
                      "        EVTC_VR(OW, W, SW, j * DW - PL, clo, chi);\n        double acc = 0.0;\n"
                      "        for (int64_t nb = 0; nb < NB; nb++) {\n"
                      "          const T *xp = x + (nb * CH + grp * CG + ci) * H * W, *dyp = dy + (nb * O + o) * OH * OW;\n"
                      "          for (int64_t r = rlo; r < rhi; r++) {\n"
                      "            const T *xr = xp + (r * SH + i * DH - PT) * W + j * DW - PL, *dyr = dyp + r * OW;\n"
                      "            T part = 0;\n"
                      "            for (int64_t c = clo; c < chi; c++) part += xr[c * SW] * dyr[c];\n"
                      "            acc += (double)part;\n          }\n        }\n"
                      "        y[(oc * KH + i) * KW + j] = (T)acc;\n      }\n    }\n  }\n#undef EVTC_VR\n");
  }
}

/* batchnorm (x, gamma, beta) and its running statistics (x, r). */
static void emit_batchnorm(evtc_sb *b, const evtc_node *n) {
  const evtc_type *t = &n->inputs[0]->type;
  int64_t sp = prod(t->shape, 2, t->rank);
  evtc_sb_printf(b, "  const int64_t NB = %lldLL, CH = %lldLL, SP = %lldLL, CNT = NB * SP;\n"
                    "  int bad = 0;\n"
                    "  #pragma omp parallel for schedule(static) if (NB * CH * SP > 16384)\n"
                    "  for (int64_t ch = 0; ch < CH; ch++) {\n    double m = 0.0, s = 0.0;\n"
                    "    for (int64_t nb = 0; nb < NB; nb++)\n      for (int64_t i = 0; i < SP; i++) m += x0[(nb * CH + ch) * SP + i];\n"
                    "    m /= (double)CNT;\n"
                    "    for (int64_t nb = 0; nb < NB; nb++)\n      for (int64_t i = 0; i < SP; i++) {\n"
                    "        const double dv = x0[(nb * CH + ch) * SP + i] - m;\n        s += dv * dv;\n      }\n",
                 (long long)t->shape[0], (long long)t->shape[1], (long long)sp);
  if (n->op == EVTC_OP_BATCHNORM) {
    evtc_sb_printf(b, "    const double scale = (double)x1[ch] / sqrt(s / (double)CNT + %.17g), shift = x2[ch];\n"
                      "    for (int64_t nb = 0; nb < NB; nb++)\n      for (int64_t i = 0; i < SP; i++) {\n"
                      "        const int64_t at = (nb * CH + ch) * SP + i;\n"
                      "        y[at] = (T)((x0[at] - m) * scale + shift);\n      }\n  }\n  (void)bad;\n",
                   evtc_node_float(n, "eps"));
    return;
  }
  bool var = n->op == EVTC_OP_BATCHNORM_RUNNING_VAR;
  if (var) evtc_sb_printf(b, "    if (CNT < 2) bad = 1;\n");
  evtc_sb_printf(b, "    const double stat = %s;\n    y[ch] = (T)((1.0 - %.17g) * x1[ch] + %.17g * stat);\n  }\n"
                    "  if (bad) *err = 1;\n",
                 var ? "CNT < 2 ? 0.0 : s / (double)(CNT - 1)" : "m", evtc_node_float(n, "momentum"),
                 evtc_node_float(n, "momentum"));
}

/* A reduction over any axes: per output element, a loop over the reduced
 * sub-space (its last dim innermost). */
static void emit_reduce(evtc_sb *b, const evtc_node *n) {
  const evtc_type *t = &n->inputs[0]->type;
  const evtc_attr *axes = evtc_node_attr(n, "axes");
  bool red[EVTC_MAX_RANK] = {0};
  for (int d = 0; d < t->rank; d++) red[d] = axes->n == 0;
  for (int i = 0; i < axes->n; i++) red[evtc_axis_norm(axes->v.ints[i], t->rank)] = true;
  int64_t ks[EVTC_MAX_RANK], kst[EVTC_MAX_RANK], rs[EVTC_MAX_RANK], rst[EVTC_MAX_RANK], cnt = 1;
  int nk = 0, nr = 0;
  for (int d = 0; d < t->rank; d++) {
    int64_t st = prod(t->shape, d + 1, t->rank);
    if (red[d]) rs[nr] = t->shape[d], rst[nr++] = st, cnt *= t->shape[d];
    else ks[nk] = t->shape[d], kst[nk++] = st;
  }
  if (nr == 0) rs[nr] = 1, rst[nr++] = 0;
  emit_array(b, "ks", ks, nk);
  emit_array(b, "kst", kst, nk);
  emit_array(b, "rs", rs, nr - 1);
  emit_array(b, "rst", rst, nr - 1);
  const char *init = n->op == EVTC_OP_REDUCE_MAX ? "-INFINITY" : n->op == EVTC_OP_REDUCE_MIN ? "INFINITY" : "0.0";
  const char *acc = n->op == EVTC_OP_REDUCE_MAX ? "acc = EVTC_MAXN(acc, (double)xl[q * LST]);"
                  : n->op == EVTC_OP_REDUCE_MIN ? "acc = EVTC_MINN(acc, (double)xl[q * LST]);" : "acc += xl[q * LST];";
  evtc_sb_printf(b, "  const int64_t NO = %lldLL, OUTERR = %lldLL, LAST = %lldLL, LST = %lldLL;\n"
                    "  #pragma omp parallel for schedule(static) if (NO * OUTERR * LAST > 32768)\n"
                    "  for (int64_t o = 0; o < NO; o++) {\n    int64_t rest = o, base = 0;\n"
                    "    for (int d = %d; d >= 0; d--) { base += rest %% ks[d] * kst[d]; rest /= ks[d]; }\n"
                    "    double acc = %s;\n    for (int64_t s = 0; s < OUTERR; s++) {\n"
                    "      int64_t r2 = s, off = base;\n"
                    "      for (int d = %d; d >= 0; d--) { off += r2 %% rs[d] * rst[d]; r2 /= rs[d]; }\n"
                    "      const T *xl = x0 + off;\n      for (int64_t q = 0; q < LAST; q++) %s\n    }\n"
                    "    y[o] = (T)(acc%s);\n  }\n",
                 (long long)evtc_type_numel(&n->type), (long long)(cnt / rs[nr - 1]), (long long)rs[nr - 1],
                 (long long)rst[nr - 1], nk - 1, init, nr - 2, acc,
                 n->op == EVTC_OP_REDUCE_MEAN ? " / (double)(OUTERR * LAST)" : "");
}

void evtc_cpu_emit_opaque(evtc_sb *b, const evtc_kernel *k) {
  const evtc_node *n = k->main;
  evtc_sb_printf(b, "void %s(void *const *args, uint64_t step, int *err) {\n", k->name);
  evtc_cpu_emit_args(b, k);
  /* ops that take f16 / bf16 see the storage type (moves keep the bits, scatter_add widens them itself); the
   * others compute in their C type */
  const bool stored = evtc_cpu_opaque_takes_half(n->op);
  const char *(*ctype)(evtc_dtype) = stored ? evtc_cpu_storage_ctype : evtc_cpu_ctype;
  evtc_sb_printf(b, "  typedef %s T;\n  T *y = a%d;\n  (void)step; (void)err;\n", ctype(n->type.dtype),
                 evtc_kernel_output_arg(k));
  for (int j = 0; j < n->n_inputs && n->op != EVTC_OP_CONCAT; j++)
    evtc_sb_printf(b, "  const %s *x%d = a%d;\n", ctype(n->inputs[j]->type.dtype), j, evtc_kernel_input_arg(k, j));
  switch (n->op) {
    case EVTC_OP_PAD: emit_pad(b, n); break;
    case EVTC_OP_CONCAT: emit_concat(b, k); break;
    case EVTC_OP_GATHER: emit_gather(b, n); break;
    case EVTC_OP_EMBEDDING: emit_embedding(b, n); break;
    case EVTC_OP_SCATTER_ADD: emit_scatter_add(b, n); break;
    case EVTC_OP_MAXPOOL2D: case EVTC_OP_MAXPOOL2D_BACKWARD: emit_maxpool(b, n); break;
    case EVTC_OP_AVGPOOL2D: case EVTC_OP_AVGPOOL2D_BACKWARD: emit_avgpool(b, n); break;
    case EVTC_OP_CONV2D_BACKWARD_INPUT: case EVTC_OP_CONV2D_BACKWARD_WEIGHT: emit_conv_back(b, n); break;
    case EVTC_OP_BATCHNORM: case EVTC_OP_BATCHNORM_RUNNING_MEAN: case EVTC_OP_BATCHNORM_RUNNING_VAR:
      emit_batchnorm(b, n);
      break;
    case EVTC_OP_ATTENTION: case EVTC_OP_ATTENTION_LSE: case EVTC_OP_ATTENTION_BACKWARD_Q:
    case EVTC_OP_ATTENTION_BACKWARD_KV:
      evtc_cpu_emit_attention(b, k);
      break;
    default: emit_reduce(b, n); break;
  }
  evtc_sb_printf(b, "}\n\n");
}
