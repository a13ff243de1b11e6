/* conv_patchify.c -- the `conv-patchify` pass: a convolution whose windows
 * tile the image (ViT's patch embedding) becomes one GEMM.
 *
 * Matches conv2d(x[N,C,H,W], w[O,C,KH,KW]) with no padding, dilation 1,
 * groups 1 and, in each spatial dim, stride == kernel dividing the size
 * (or a kernel as large as the size, one window whatever the stride): the
 * windows are disjoint and cover x, so every output pixel is one row of
 * patches times w.  With OH = H/KH, OW = W/KW, M = N*OH*OW, K = C*KH*KW:
 *   patches = reshape(permute(reshape(x, [N,C,OH,KH,OW,KW]), [0,2,4,1,3,5]), [M,K])
 *   rows    = matmul(patches, reshape(w, [O,K])) {trans_b=1}          [M,O]
 *   conv    = permute(reshape(rows, [N,OH,OW,O]), [0,3,1,2])          [N,O,OH,OW]
 * The one permute of x is a data-movement kernel that makes the patch rows
 * contiguous; both GEMM operands are then row-major and contiguous (w
 * needs no movement: its [C,KH,KW] order is the patch order), and the
 * result rows are NHWC, the token layout a ViT wants.  Autodiff of this
 * is GEMMs (dw = rows' gradient^T x patches, dx = gradient x w) and data
 * movement, so the pass runs before autodiff (pipelines h200-forward and
 * cpu-forward, docs/passes.md).
 * Two consumers of the conv are rewritten with it, so that its NCHW
 * permute disappears where it can:
 *   add(conv, b) | add(b, conv)   b a per-channel bias ([O,1,1], [1,O,1,1],
 *                                 or one element), the conv's only consumer:
 *                                 the bias is added to rows (a GEMM epilogue)
 *                                 before the permute back to NCHW
 *   reshape(conv', [N,O,OH*OW])   conv' the conv or its bias add, whose only
 *                                 consumer this is (ViT's flatten(2)):
 *                                 permute(reshape(rows, [N,OH*OW,O]), [0,2,1]),
 *                                 which cancels against ViT's transpose(1, 2)
 *                                 in permute-fold
 * Exact: the same products and sums (the interpreter rounds each op's
 * result to its dtype, once per conv as once per matmul).  Any other conv
 * (strided windows that overlap or skip, padding, dilation, groups, a size
 * the kernel does not divide) is left as it is.
 */
#include "passes/pass.h"
#include "passes/pattern.h"

/* Attribute `name` of n (ints) into v[k], or `dflt` everywhere when it is empty. */
static bool ints_or(const evtc_node *n, const char *name, int k, int64_t dflt, int64_t *v) {
  const evtc_attr *a = evtc_node_attr(n, name);
  if (a->n != 0 && a->n != k) return false;
  for (int i = 0; i < k; i++) v[i] = a->n ? a->v.ints[i] : dflt;
  return true;
}

/* True when src node n is a conv2d whose windows tile its input exactly. */
static bool is_patchify(const evtc_node *n) {
  if (n->op != EVTC_OP_CONV2D || evtc_node_int(n, "groups") != 1) return false;
  int64_t stride[2], pad[4], dil[2];
  if (!ints_or(n, "stride", 2, 1, stride) || !ints_or(n, "padding", 4, 0, pad) || !ints_or(n, "dilation", 2, 1, dil))
    return false;
  const int64_t *x = n->inputs[0]->type.shape, *w = n->inputs[1]->type.shape;
  for (int i = 0; i < 4; i++)
    if (pad[i] != 0) return false;
  for (int i = 0; i < 2; i++) {   /* one window over the whole dim tiles it whatever the stride */
    bool tiles = x[2 + i] == w[2 + i] || (stride[i] == w[2 + i] && x[2 + i] % w[2 + i] == 0);
    if (dil[i] != 1 || !tiles) return false;
  }
  return true;
}

/* The GEMM rows [M,O] under a node this pass built for a conv's output,
 * permute(reshape(rows, [N,OH,OW,O]), [0,3,1,2]); NULL for any other node. */
static evtc_node *rows_of(evtc_node *nchw) {
  static const int64_t to_nchw[4] = {0, 3, 1, 2};
  if (nchw->op != EVTC_OP_PERMUTE || nchw->type.rank != 4) return NULL;
  int64_t p[4];
  evtc_pat_perm(nchw, p);
  for (int i = 0; i < 4; i++)
    if (p[i] != to_nchw[i]) return NULL;
  evtc_node *nhwc = nchw->inputs[0];
  if (nhwc->op != EVTC_OP_RESHAPE || nhwc->inputs[0]->type.rank != 2) return NULL;
  return nhwc->inputs[0];
}

/* rows [N*OH*OW,O] as the NCHW tensor of type t, the last node named `name`. */
static evtc_node *nchw_of(evtc_rewrite *rw, evtc_node *rows, const evtc_type *t, const char *name) {
  const int64_t *s = t->shape;
  static const int64_t to_nchw[4] = {0, 3, 1, 2};
  evtc_node *nhwc = evtc_pat_reshape(rw, rows, 4, (int64_t[]){s[0], s[2], s[3], s[1]}, name, "nhwc");
  return nhwc ? evtc_pat_permute(rw, nhwc, to_nchw, name, NULL) : NULL;
}

/* conv2d (is_patchify) -> patches x w^T, back to NCHW. */
static evtc_node *patchify(evtc_rewrite *rw, const evtc_node *n, evtc_node *x, evtc_node *w) {
  const int64_t *xs = x->type.shape, *ws = w->type.shape;
  int64_t N = xs[0], C = xs[1], KH = ws[2], KW = ws[3], OH = xs[2] / KH, OW = xs[3] / KW;
  static const int64_t to_patches[6] = {0, 2, 4, 1, 3, 5};
  evtc_node *split = evtc_pat_reshape(rw, x, 6, (int64_t[]){N, C, OH, KH, OW, KW}, n->name, "split");
  evtc_node *patches = split ? evtc_pat_permute(rw, split, to_patches, n->name, "patches") : NULL;
  evtc_node *lhs = patches ? evtc_pat_reshape(rw, patches, 2, (int64_t[]){N * OH * OW, C * KH * KW}, n->name, "rows")
                           : NULL;
  evtc_node *rhs = lhs ? evtc_pat_reshape(rw, w, 2, (int64_t[]){ws[0], C * KH * KW}, n->name, "w") : NULL;
  if (!rhs) return NULL;
  evtc_node *in[2] = {lhs, rhs};
  evtc_attr at[2] = {evtc_attr_int("trans_a", 0), evtc_attr_int("trans_b", 1)};
  evtc_node *rows = evtc_pat_op(rw, EVTC_OP_MATMUL, in, 2, at, 2, n->name, "gemm");
  return rows ? nchw_of(rw, rows, &n->type, n->name) : NULL;
}

/* True when type b, added to an NCHW tensor of type y, only varies along C
 * (or is one element): b right-aligned to rank 4 is [1,C|1,1,1]. */
static bool is_channel_bias(const evtc_type *b, const evtc_type *y) {
  if (b->rank > 4) return false;
  for (int d = 0; d < b->rank; d++) {
    int64_t s = b->shape[d];
    if (s != 1 && !(d == b->rank - 3 && s == y->shape[1])) return false;
  }
  return true;
}

/* add(conv, b) with the conv patchified: rows + b, back to NCHW. */
static evtc_node *bias_add(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  for (int j = 0; j < 2; j++) {
    evtc_node *rows = rows_of(in[j]), *b = in[1 - j];
    if (!rows || n->inputs[j]->op != EVTC_OP_CONV2D || !evtc_pat_single_use(rw, n, j) ||
        !evtc_pat_same_shape(&n->type, &in[j]->type) || !is_channel_bias(&b->type, &n->type))
      continue;
    int64_t numel = evtc_type_numel(&b->type);
    evtc_node *bias = evtc_pat_reshape(rw, b, 1, &numel, n->name, "bias");
    evtc_node *sum = bias ? evtc_pat_bin(rw, EVTC_OP_ADD, rows, bias, n->name, "rows") : NULL;
    return sum ? nchw_of(rw, sum, &n->type, n->name) : NULL;
  }
  return NULL;
}

/* reshape(conv', [N,O,OH*OW]) with conv' patchified: rows as [N,OH*OW,O], transposed. */
static evtc_node *flatten(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  const evtc_node *src = n->inputs[0];
  bool from_conv = src->op == EVTC_OP_CONV2D ||
                   (src->op == EVTC_OP_ADD && (src->inputs[0]->op == EVTC_OP_CONV2D ||
                                               src->inputs[1]->op == EVTC_OP_CONV2D));
  evtc_node *rows = from_conv ? rows_of(in[0]) : NULL;
  const int64_t *y = in[0]->type.shape, *s = n->type.shape;
  if (!rows || !evtc_pat_single_use(rw, n, 0) || n->type.rank != 3 || s[0] != y[0] || s[1] != y[1] ||
      s[2] != y[2] * y[3])
    return NULL;
  static const int64_t swap[3] = {0, 2, 1};
  evtc_node *tokens = evtc_pat_reshape(rw, rows, 3, (int64_t[]){s[0], s[2], s[1]}, n->name, "tokens");
  return tokens ? evtc_pat_permute(rw, tokens, swap, n->name, NULL) : NULL;
}

static evtc_node *rewrite(evtc_rewrite *rw, const evtc_node *n, evtc_node *const *in) {
  if (is_patchify(n)) return patchify(rw, n, in[0], in[1]);
  if (n->op == EVTC_OP_ADD) return bias_add(rw, n, in);
  if (n->op == EVTC_OP_RESHAPE) return flatten(rw, n, in);
  return NULL;
}

static evtc_graph *run(const evtc_graph *g, evtc_diag *d) { return evtc_pat_run(g, rewrite, d); }

const evtc_pass evtc_pass_conv_patchify = {
    .name = "conv-patchify",
    .summary = "conv2d with stride == kernel, no padding (ViT patch embedding) -> patch permute + one GEMM",
    .run = run,
};
