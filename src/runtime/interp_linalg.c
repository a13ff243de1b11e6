/* interp_linalg.c -- main loops: matmul, batch_matmul, conv2d and its two
 * backward ops (the exact adjoints of conv2d with respect to x and w).
 *
 * The GEMM runs in i-k-j order so that the innermost loop walks a row of B
 * and a row of C contiguously; a transposed B is first copied into a
 * scratch buffer (one allocation per node, not per element).  Rows of C,
 * and output channels or images of a convolution, are independent and are
 * spread over OpenMP threads.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/interp_kernels.h"

/* C[M,N] = A * B with A(m,k) = a[m*am + k*ak] and B row-major [K,N]. */
static void gemm(int64_t M, int64_t N, int64_t K, const double *a, int64_t am, int64_t ak, const double *b,
                 double *c) {
#pragma omp parallel for schedule(static) if (M * N * K > 32768)
  for (int64_t m = 0; m < M; m++) {
    double *crow = c + m * N;
    for (int64_t n = 0; n < N; n++) crow[n] = 0.0;
    for (int64_t kk = 0; kk < K; kk++) {
      double av = a[m * am + kk * ak];
      const double *brow = b + kk * N;
      for (int64_t n = 0; n < N; n++) crow[n] += av * brow[n];
    }
  }
}

/* Offset of batch element `flat` (row-major over the output batch dims
 * out_shape[0..nb)) in an operand of type t, whose own batch dims are
 * right-aligned and broadcast; the last two dims form one matrix. */
static int64_t batch_offset(const evtc_type *t, int nb, const int64_t *out_shape, int64_t flat) {
  int64_t off = 0, mat = t->shape[t->rank - 2] * t->shape[t->rank - 1], stride = mat;
  int tb = t->rank - 2;
  for (int d = nb - 1; d >= 0; d--) {
    int64_t i = flat % out_shape[d];
    flat /= out_shape[d];
    int td = d - (nb - tb);
    if (td < 0) continue;
    if (t->shape[td] != 1) off += i * stride;
    stride *= t->shape[td];
  }
  return off;
}

evtc_status evtc_kernel_matmul(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *ta = evtc_kernel_in_type(k, 0), *tb = evtc_kernel_in_type(k, 1), *o = &n->type;
  bool trans_a = evtc_node_int(n, "trans_a") != 0, trans_b = evtc_node_int(n, "trans_b") != 0;
  int64_t M = o->shape[o->rank - 2], N = o->shape[o->rank - 1];
  int64_t K = ta->shape[ta->rank - (trans_a ? 2 : 1)];
  int64_t am = trans_a ? 1 : K, ak = trans_a ? M : 1;
  int nb = o->rank - 2;
  int64_t batches = 1;
  for (int d = 0; d < nb; d++) batches *= o->shape[d];
  double *bt = NULL;
  if (trans_b) {
    bt = malloc(sizeof(double) * (size_t)(K * N > 0 ? K * N : 1));
    EVTC_ASSERT(bt != NULL);
  }
  for (int64_t bi = 0; bi < batches; bi++) {
    const double *a = k->in[0] + batch_offset(ta, nb, o->shape, bi);
    const double *b = k->in[1] + batch_offset(tb, nb, o->shape, bi);
    if (trans_b) {                       /* b is [N,K]: make it [K,N] */
      for (int64_t j = 0; j < N; j++)
        for (int64_t kk = 0; kk < K; kk++) bt[kk * N + j] = b[j * K + kk];
      b = bt;
    }
    gemm(M, N, K, a, am, ak, b, k->out + bi * M * N);
  }
  free(bt);
  return EVTC_OK;
}

/* Convolution geometry, read from a conv node's attributes (shape.c has
 * checked them): x[N,C,H,W], w[O,C/groups,KH,KW], y[N,O,OH,OW]. */
typedef struct conv_geom {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups, cg, og;
  int64_t sh, sw, pt, pl, dh, dw;
} conv_geom;

static conv_geom conv_geometry(const evtc_node *node, const int64_t *x, const int64_t *w, const int64_t *y) {
  conv_geom g = {.n = x[0], .c = x[1], .h = x[2], .w = x[3], .o = w[0], .kh = w[2], .kw = w[3],
                 .oh = y[2], .ow = y[3], .sh = 1, .sw = 1, .dh = 1, .dw = 1};
  g.groups = evtc_node_int(node, "groups");
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  const evtc_attr *s = evtc_node_attr(node, "stride"), *p = evtc_node_attr(node, "padding"),
                  *d = evtc_node_attr(node, "dilation");
  if (s->n) g.sh = s->v.ints[0], g.sw = s->v.ints[1];
  if (p->n) g.pt = p->v.ints[0], g.pl = p->v.ints[1];
  if (d->n) g.dh = d->v.ints[0], g.dw = d->v.ints[1];
  return g;
}

/* The output columns ow in [lo, hi) whose input column ow*sw - pl + kw*dw
 * lies inside [0, W): clipping once per (kh, kw) keeps the inner loop free
 * of bounds tests. */
static void valid_range(int64_t out, int64_t in, int64_t stride, int64_t start, int64_t *lo, int64_t *hi) {
  /* need 0 <= o*stride + start < in */
  int64_t l = start >= 0 ? 0 : (-start + stride - 1) / stride;
  int64_t h = in - start <= 0 ? 0 : (in - start + stride - 1) / stride;
  *lo = l;
  *hi = h < out ? h : out;
}

evtc_status evtc_kernel_conv2d(const evtc_kernel_args *k) {
  const evtc_type *tx = evtc_kernel_in_type(k, 0), *tw = evtc_kernel_in_type(k, 1);
  conv_geom g = conv_geometry(k->node, tx->shape, tw->shape, k->node->type.shape);
  const double *x = k->in[0], *w = k->in[1];
  double *y = k->out;
#pragma omp parallel for schedule(static) if (g.n * g.o * g.oh * g.ow * g.cg * g.kh * g.kw > 32768)
  for (int64_t no = 0; no < g.n * g.o; no++) {
    int64_t n = no / g.o, o = no % g.o, grp = o / g.og;
    double *yp = y + no * g.oh * g.ow;
    memset(yp, 0, sizeof(double) * (size_t)(g.oh * g.ow));
    for (int64_t ci = 0; ci < g.cg; ci++) {
      const double *xp = x + (n * g.c + grp * g.cg + ci) * g.h * g.w;
      const double *wp = w + (o * g.cg + ci) * g.kh * g.kw;
      for (int64_t i = 0; i < g.kh; i++) {
        int64_t rlo, rhi;
        valid_range(g.oh, g.h, g.sh, i * g.dh - g.pt, &rlo, &rhi);
        for (int64_t j = 0; j < g.kw; j++) {
          int64_t clo, chi;
          valid_range(g.ow, g.w, g.sw, j * g.dw - g.pl, &clo, &chi);
          double wv = wp[i * g.kw + j];
          for (int64_t r = rlo; r < rhi; r++) {
            int64_t xb = (r * g.sh + i * g.dh - g.pt) * g.w + j * g.dw - g.pl;
            double *yrow = yp + r * g.ow;
            for (int64_t c = clo; c < chi; c++) yrow[c] += wv * xp[xb + c * g.sw];
          }
        }
      }
    }
  }
  return EVTC_OK;
}

/* dx[n,c,:,:] = sum over o, kh, kw of w[o,c,kh,kw] * dy scattered back: the
 * transpose of conv2d's linear map in x.  Images are independent. */
evtc_status evtc_kernel_conv2d_backward_input(const evtc_kernel_args *k) {
  const evtc_type *tdy = evtc_kernel_in_type(k, 0), *tw = evtc_kernel_in_type(k, 1);
  conv_geom g = conv_geometry(k->node, k->node->type.shape, tw->shape, tdy->shape);
  const double *dy = k->in[0], *w = k->in[1];
  double *dx = k->out;
  memset(dx, 0, sizeof(double) * (size_t)evtc_type_numel(&k->node->type));
#pragma omp parallel for schedule(static) if (g.n * g.o * g.oh * g.ow * g.cg * g.kh * g.kw > 32768)
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t o = 0; o < g.o; o++) {
      int64_t grp = o / g.og;
      const double *dyp = dy + (n * g.o + o) * g.oh * g.ow;
      for (int64_t ci = 0; ci < g.cg; ci++) {
        double *dxp = dx + (n * g.c + grp * g.cg + ci) * g.h * g.w;
        const double *wp = w + (o * g.cg + ci) * g.kh * g.kw;
        for (int64_t i = 0; i < g.kh; i++) {
          int64_t rlo, rhi;
          valid_range(g.oh, g.h, g.sh, i * g.dh - g.pt, &rlo, &rhi);
          for (int64_t j = 0; j < g.kw; j++) {
            int64_t clo, chi;
            valid_range(g.ow, g.w, g.sw, j * g.dw - g.pl, &clo, &chi);
            double wv = wp[i * g.kw + j];
            for (int64_t r = rlo; r < rhi; r++) {
              int64_t xb = (r * g.sh + i * g.dh - g.pt) * g.w + j * g.dw - g.pl;
              const double *dyrow = dyp + r * g.ow;
              for (int64_t c = clo; c < chi; c++) dxp[xb + c * g.sw] += wv * dyrow[c];
            }
          }
        }
      }
    }
  return EVTC_OK;
}

/* dw[o,c,kh,kw] = sum over n, oh, ow of x[...] * dy[n,o,oh,ow]: the
 * transpose of conv2d's linear map in w.  Output channels are independent. */
evtc_status evtc_kernel_conv2d_backward_weight(const evtc_kernel_args *k) {
  const evtc_type *tx = evtc_kernel_in_type(k, 0), *tdy = evtc_kernel_in_type(k, 1);
  conv_geom g = conv_geometry(k->node, tx->shape, k->node->type.shape, tdy->shape);
  const double *x = k->in[0], *dy = k->in[1];
  double *dw = k->out;
#pragma omp parallel for schedule(static) if (g.n * g.o * g.oh * g.ow * g.cg * g.kh * g.kw > 32768)
  for (int64_t o = 0; o < g.o; o++) {
    int64_t grp = o / g.og;
    for (int64_t ci = 0; ci < g.cg; ci++)
      for (int64_t i = 0; i < g.kh; i++) {
        int64_t rlo, rhi;
        valid_range(g.oh, g.h, g.sh, i * g.dh - g.pt, &rlo, &rhi);
        for (int64_t j = 0; j < g.kw; j++) {
          int64_t clo, chi;
          valid_range(g.ow, g.w, g.sw, j * g.dw - g.pl, &clo, &chi);
          double acc = 0.0;
          for (int64_t n = 0; n < g.n; n++) {
            const double *xp = x + (n * g.c + grp * g.cg + ci) * g.h * g.w;
            const double *dyp = dy + (n * g.o + o) * g.oh * g.ow;
            for (int64_t r = rlo; r < rhi; r++) {
              int64_t xb = (r * g.sh + i * g.dh - g.pt) * g.w + j * g.dw - g.pl;
              const double *dyrow = dyp + r * g.ow;
              for (int64_t c = clo; c < chi; c++) acc += xp[xb + c * g.sw] * dyrow[c];
            }
          }
          dw[((o * g.cg + ci) * g.kh + i) * g.kw + j] = acc;
        }
      }
  }
  return EVTC_OK;
}
