/* interp_pool.c -- pooling over NCHW: maxpool2d and avgpool2d with their
 * backward ops, and global_avgpool.
 *
 * Windows may hang over the padding (padding = [top, left, bottom, right]).
 * For max pooling padding positions count as -inf and the winner of a window
 * is its first maximum in row-major order, so forward and backward agree on
 * ties; for average pooling the divisor counts the padding positions iff
 * count_include_pad.
 */
#include <math.h>
#include <string.h>

#include "runtime/interp_kernels.h"

typedef struct pool_geom {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, pt, pl;
  bool include_pad;
} pool_geom;

/* x: the [N,C,H,W] input shape; y: the output shape. */
static pool_geom pool_geometry(const evtc_node *node, const int64_t *x, const int64_t *y) {
  const evtc_attr *kern = evtc_node_attr(node, "kernel"), *s = evtc_node_attr(node, "stride"),
                  *p = evtc_node_attr(node, "padding");
  pool_geom g = {.planes = x[0] * x[1], .h = x[2], .w = x[3], .oh = y[2], .ow = y[3],
                 .kh = kern->v.ints[0], .kw = kern->v.ints[1]};
  g.sh = s->n ? s->v.ints[0] : g.kh;
  g.sw = s->n ? s->v.ints[1] : g.kw;
  if (p->n) g.pt = p->v.ints[0], g.pl = p->v.ints[1];
  if (node->op == EVTC_OP_AVGPOOL2D || node->op == EVTC_OP_AVGPOOL2D_BACKWARD)
    g.include_pad = evtc_node_int(node, "count_include_pad") != 0;
  return g;
}

/* The first maximum of window (r, c) of plane xp: its value in *best and
 * its offset in the plane, or -1 when that maximum is a padding position. */
static int64_t window_argmax(const pool_geom *g, const double *xp, int64_t r, int64_t c, double *best) {
  int64_t at = -1;
  bool have = false;
  for (int64_t i = 0; i < g->kh; i++)
    for (int64_t j = 0; j < g->kw; j++) {
      int64_t ih = r * g->sh - g->pt + i, iw = c * g->sw - g->pl + j;
      bool inside = ih >= 0 && ih < g->h && iw >= 0 && iw < g->w;
      double v = inside ? xp[ih * g->w + iw] : -INFINITY;
      if (!have || v > *best) {
        *best = v;
        at = inside ? ih * g->w + iw : -1;
        have = true;
      }
    }
  return at;
}

evtc_status evtc_kernel_maxpool2d(const evtc_kernel_args *k) {
  pool_geom g = pool_geometry(k->node, evtc_kernel_in_type(k, 0)->shape, k->node->type.shape);
  for (int64_t p = 0; p < g.planes; p++)
    for (int64_t r = 0; r < g.oh; r++)
      for (int64_t c = 0; c < g.ow; c++)
        window_argmax(&g, k->in[0] + p * g.h * g.w, r, c, &k->out[(p * g.oh + r) * g.ow + c]);
  return EVTC_OK;
}

evtc_status evtc_kernel_maxpool2d_backward(const evtc_kernel_args *k) {
  pool_geom g = pool_geometry(k->node, evtc_kernel_in_type(k, 1)->shape, evtc_kernel_in_type(k, 0)->shape);
  memset(k->out, 0, sizeof(double) * (size_t)evtc_type_numel(&k->node->type));
  for (int64_t p = 0; p < g.planes; p++)
    for (int64_t r = 0; r < g.oh; r++)
      for (int64_t c = 0; c < g.ow; c++) {
        double best;
        int64_t at = window_argmax(&g, k->in[1] + p * g.h * g.w, r, c, &best);
        if (at >= 0) k->out[p * g.h * g.w + at] += k->in[0][(p * g.oh + r) * g.ow + c];
      }
  return EVTC_OK;
}

/* The clipped rows/cols of window (r, c) and its divisor. */
static double window_clip(const pool_geom *g, int64_t r, int64_t c, int64_t *h0, int64_t *h1, int64_t *w0,
                          int64_t *w1) {
  int64_t a = r * g->sh - g->pt, b = c * g->sw - g->pl;
  *h0 = a < 0 ? 0 : a;
  *h1 = a + g->kh < g->h ? a + g->kh : g->h;
  *w0 = b < 0 ? 0 : b;
  *w1 = b + g->kw < g->w ? b + g->kw : g->w;
  if (g->include_pad) return (double)(g->kh * g->kw);
  int64_t n = (*h1 - *h0) * (*w1 - *w0);
  return n > 0 ? (double)n : 1.0;    /* a window of padding only averages nothing: 0 */
}

evtc_status evtc_kernel_avgpool2d(const evtc_kernel_args *k) {
  pool_geom g = pool_geometry(k->node, evtc_kernel_in_type(k, 0)->shape, k->node->type.shape);
  for (int64_t p = 0; p < g.planes; p++) {
    const double *xp = k->in[0] + p * g.h * g.w;
    for (int64_t r = 0; r < g.oh; r++)
      for (int64_t c = 0; c < g.ow; c++) {
        int64_t h0, h1, w0, w1;
        double div = window_clip(&g, r, c, &h0, &h1, &w0, &w1), sum = 0.0;
        for (int64_t i = h0; i < h1; i++)
          for (int64_t j = w0; j < w1; j++) sum += xp[i * g.w + j];
        k->out[(p * g.oh + r) * g.ow + c] = sum / div;
      }
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_avgpool2d_backward(const evtc_kernel_args *k) {
  pool_geom g = pool_geometry(k->node, k->node->type.shape, evtc_kernel_in_type(k, 0)->shape);
  memset(k->out, 0, sizeof(double) * (size_t)evtc_type_numel(&k->node->type));
  for (int64_t p = 0; p < g.planes; p++) {
    double *dxp = k->out + p * g.h * g.w;
    for (int64_t r = 0; r < g.oh; r++)
      for (int64_t c = 0; c < g.ow; c++) {
        int64_t h0, h1, w0, w1;
        double div = window_clip(&g, r, c, &h0, &h1, &w0, &w1);
        double v = k->in[0][(p * g.oh + r) * g.ow + c] / div;
        for (int64_t i = h0; i < h1; i++)
          for (int64_t j = w0; j < w1; j++) dxp[i * g.w + j] += v;
      }
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_global_avgpool(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  int64_t planes = t->shape[0] * t->shape[1], hw = t->shape[2] * t->shape[3];
  for (int64_t p = 0; p < planes; p++) {
    double sum = 0.0;
    for (int64_t i = 0; i < hw; i++) sum += k->in[0][p * hw + i];
    k->out[p] = sum / (double)hw;
  }
  return EVTC_OK;
}
