/* onnx_ops_nn.c -- ONNX neural-network ops: Conv, ConvTranspose, MaxPool,
 * AveragePool, GlobalAveragePool, GlobalMaxPool, BatchNormalization
 * (inference form, and training form with batch statistics),
 * LayerNormalization and Dropout (inference: identity).
 *
 * evtc's convolutions and pools are 2-D over NCHW; 1-D ones are imported as
 * 2-D with a height of 1.  ONNX pads list all begins then all ends, which
 * for 2-D is evtc's [top, left, bottom, right].
 */
#include <math.h>
#include <string.h>

#include "frontend/onnx_internal.h"

static evtc_node *reshape(evtc_onnx_ctx *c, evtc_node *x, int rank, const int64_t *shape, const char *name) {
  if (!x) return NULL;
  evtc_attr a = evtc_attr_ints("shape", rank, shape);
  return evtc_node_add(c->g, EVTC_OP_RESHAPE, &x, 1, &a, 1, name);
}

/* Spatial geometry of a conv or pool node, always as 2-D. */
typedef struct window {
  int dims;                   /* 1 or 2 spatial dims in the ONNX node */
  int64_t kernel[2], stride[2], pad[4], dil[2];
} window;

/* Reads kernel (from kernel_shape or the weight), strides, dilations and
 * pads (explicit or auto_pad) for spatial input sizes in[dims]; 1-D values
 * are widened to 2-D with a unit first dim.  ceil_mode adds end padding so
 * that the floor formula gives the ceil-mode size.  outpad (ConvTranspose's
 * output_padding, else NULL) selects the transposed SAME padding. */
static bool window_read(evtc_onnx_ctx *c, int dims, const int64_t *in, const int64_t *wkernel, const int64_t *outpad,
                        window *w) {
  int64_t k[2], s[2] = {1, 1}, d[2] = {1, 1}, p[4] = {0, 0, 0, 0};
  w->dims = dims;
  int n = evtc_onnx_attr_ints(c, "kernel_shape", k, 2);
  if (n == -2) return false;
  if (n < 0 && !wkernel) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "kernel_shape is required");
  if (n < 0) memcpy(k, wkernel, sizeof(int64_t) * (size_t)dims);
  else if (n != dims) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "kernel_shape has %d values for %d dims", n, dims);
  if ((n = evtc_onnx_attr_ints(c, "strides", s, 2)) == -2 || (n >= 0 && n != dims)) return n == -2 ? false :
      evtc_onnx_fail(c, EVTC_ERR_INVALID, "strides has %d values for %d dims", n, dims);
  if ((n = evtc_onnx_attr_ints(c, "dilations", d, 2)) == -2 || (n >= 0 && n != dims)) return n == -2 ? false :
      evtc_onnx_fail(c, EVTC_ERR_INVALID, "dilations has %d values for %d dims", n, dims);
  if ((n = evtc_onnx_attr_ints(c, "pads", p, 4)) == -2 || (n >= 0 && n != 2 * dims)) return n == -2 ? false :
      evtc_onnx_fail(c, EVTC_ERR_INVALID, "pads has %d values for %d dims", n, dims);
  const char *auto_pad = evtc_onnx_attr_str(c, "auto_pad", "NOTSET");
  bool ceil_mode = evtc_onnx_attr_int(c, "ceil_mode", 0) != 0;
  for (int i = 0; i < dims; i++) {
    if (s[i] < 1 || d[i] < 1 || k[i] < 1) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "bad kernel, stride or dilation");
    int64_t span = d[i] * (k[i] - 1) + 1;
    if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
      int64_t out = (in[i] + s[i] - 1) / s[i], total = (out - 1) * s[i] + span - in[i];
      if (outpad) total = s[i] * (in[i] - 1) + outpad[i] + span - in[i] * s[i];   /* ConvTranspose: out = in s */
      if (total < 0) total = 0;
      bool upper = auto_pad[5] == 'U';
      p[i] = upper ? total / 2 : total - total / 2;
      p[i + dims] = total - p[i];
    } else if (strcmp(auto_pad, "VALID") == 0) {
      p[i] = p[i + dims] = 0;
    } else if (strcmp(auto_pad, "NOTSET") != 0) {
      return evtc_onnx_unsupported(c, "auto_pad '%s'", auto_pad);
    }
    if (ceil_mode) {
      int64_t room = in[i] + p[i] + p[i + dims] - span;
      if (room >= 0 && room % s[i]) p[i + dims] += s[i] - room % s[i];
    }
  }
  int o = 2 - dims;                               /* 1-D: the height dim is unit */
  w->kernel[0] = w->stride[0] = w->dil[0] = 1;
  w->pad[0] = w->pad[2] = 0;
  for (int i = 0; i < dims; i++) {
    w->kernel[o + i] = k[i];
    w->stride[o + i] = s[i];
    w->dil[o + i] = d[i];
    w->pad[o + i] = p[i];
    w->pad[2 + o + i] = p[dims + i];
  }
  return true;
}

/* x as 4-D NCHW (1-D inputs get H = 1); spatial sizes into in[]. */
static evtc_node *as_4d(evtc_onnx_ctx *c, evtc_node *x, int *dims, int64_t *in) {
  if (!x) return NULL;
  int r = x->type.rank;
  if (r != 3 && r != 4) {
    evtc_onnx_unsupported(c, "input of rank %d: evtc supports 1-D and 2-D windows (rank 3 or 4)", r);
    return NULL;
  }
  *dims = r - 2;
  for (int i = 0; i < *dims; i++) in[i] = x->type.shape[2 + i];
  if (r == 4) return x;
  return reshape(c, x, 4, (int64_t[]){x->type.shape[0], x->type.shape[1], 1, x->type.shape[2]}, NULL);
}

/* Back from 4-D to the node's rank, named after output 0. */
static bool out_from_4d(evtc_onnx_ctx *c, evtc_node *y, int dims) {
  if (!y) return false;
  if (dims == 2) return evtc_onnx_out(c, 0, y);
  return evtc_onnx_out(c, 0, reshape(c, y, 3, (int64_t[]){y->type.shape[0], y->type.shape[1], y->type.shape[3]},
                                     evtc_onnx_out_name(c, 0)));
}

/* y + bias[C] broadcast over NCHW. */
static evtc_node *add_channel_bias(evtc_onnx_ctx *c, evtc_node *y, int bias_input, const char *name) {
  evtc_node *b = evtc_onnx_in(c, bias_input);
  if (!y || !b) return NULL;
  b = reshape(c, b, 3, (int64_t[]){evtc_type_numel(&b->type), 1, 1}, NULL);
  evtc_node *in[2] = {y, b};
  return evtc_node_add(c->g, EVTC_OP_ADD, in, 2, NULL, 0, name);
}

static bool map_conv(evtc_onnx_ctx *c) {
  bool transpose = strcmp(c->node->op_type, "ConvTranspose") == 0;
  int dims, wdims;
  int64_t in[2], win[2];
  evtc_node *x = as_4d(c, evtc_onnx_in(c, 0), &dims, in), *w = x ? as_4d(c, evtc_onnx_in(c, 1), &wdims, win) : NULL;
  window g;
  int64_t op[2] = {0, 0};
  if (!x || !w || evtc_onnx_attr_ints(c, "output_padding", op, 2) == -2) return false;
  if (!window_read(c, dims, in, win, transpose ? op : NULL, &g)) return false;
  if (wdims != dims) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "weight and input have different ranks");
  bool bias = evtc_onnx_has(c, 2), last = dims == 2 && !bias;
  const char *name = last ? evtc_onnx_out_name(c, 0) : NULL;
  int64_t groups = evtc_onnx_attr_int(c, "group", 1);
  evtc_attr a[5] = {evtc_attr_ints("stride", 2, g.stride), evtc_attr_ints("padding", 4, g.pad),
                    evtc_attr_ints("dilation", 2, g.dil), evtc_attr_int("groups", groups)};
  evtc_node *io[2] = {x, w}, *y;
  if (!transpose) {
    y = evtc_node_add(c->g, EVTC_OP_CONV2D, io, 2, a, 4, name);
  } else {                         /* the gradient of a conv whose weight is w[C_in, C_out/g, ...] */
    if (evtc_onnx_attr(c, "output_shape")) return evtc_onnx_unsupported(c, "ConvTranspose with output_shape");
    int64_t shape[4] = {x->type.shape[0], w->type.shape[1] * groups, 0, 0}, op4[2] = {0, 0};
    for (int i = 0; i < dims; i++) op4[2 - dims + i] = op[i];
    for (int i = 0; i < 2; i++)
      shape[2 + i] = g.stride[i] * (x->type.shape[2 + i] - 1) + op4[i] + g.dil[i] * (g.kernel[i] - 1) + 1 - g.pad[i] -
                     g.pad[2 + i];
    a[4] = evtc_attr_ints("shape", 4, shape);
    y = evtc_node_add(c->g, EVTC_OP_CONV2D_BACKWARD_INPUT, io, 2, a, 5, name);
  }
  if (bias) y = add_channel_bias(c, y, 2, dims == 2 ? evtc_onnx_out_name(c, 0) : NULL);
  return out_from_4d(c, y, dims);
}

static bool map_pool(evtc_onnx_ctx *c) {
  bool max = strcmp(c->node->op_type, "MaxPool") == 0;
  if (max && c->n_out > 1 && c->out[1]) return evtc_onnx_unsupported(c, "MaxPool's Indices output");
  int dims;
  int64_t in[2];
  evtc_node *x = as_4d(c, evtc_onnx_in(c, 0), &dims, in);
  window g;
  if (!x || !window_read(c, dims, in, NULL, NULL, &g)) return false;
  if (g.dil[0] != 1 || g.dil[1] != 1) return evtc_onnx_unsupported(c, "pooling with dilations");
  bool include = evtc_onnx_attr_int(c, "count_include_pad", 0) != 0;
  if (!max && include && evtc_onnx_attr_int(c, "ceil_mode", 0))
    return evtc_onnx_unsupported(c, "AveragePool with both ceil_mode and count_include_pad");
  evtc_attr a[4] = {evtc_attr_ints("kernel", 2, g.kernel), evtc_attr_ints("stride", 2, g.stride),
                    evtc_attr_ints("padding", 4, g.pad), evtc_attr_int("count_include_pad", include)};
  evtc_node *y = evtc_node_add(c->g, max ? EVTC_OP_MAXPOOL2D : EVTC_OP_AVGPOOL2D, &x, 1, a, max ? 3 : 4,
                               dims == 2 ? evtc_onnx_out_name(c, 0) : NULL);
  return out_from_4d(c, y, dims);
}

static bool map_global_pool(evtc_onnx_ctx *c) {
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!x) return false;
  bool avg = strcmp(c->node->op_type, "GlobalAveragePool") == 0;
  const char *name = evtc_onnx_out_name(c, 0);
  if (avg && x->type.rank == 4)
    return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_GLOBAL_AVGPOOL, &x, 1, NULL, 0, name));
  if (x->type.rank < 3) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "input must have rank >= 3");
  int64_t axes[EVTC_MAX_RANK];
  for (int d = 2; d < x->type.rank; d++) axes[d - 2] = d;
  evtc_attr a[2] = {evtc_attr_ints("axes", x->type.rank - 2, axes), evtc_attr_int("keepdims", 1)};
  return evtc_onnx_out(c, 0, evtc_node_add(c->g, avg ? EVTC_OP_REDUCE_MEAN : EVTC_OP_REDUCE_MAX, &x, 1, a, 2, name));
}

/* y = (x - mean) * scale / sqrt(var + eps) + B, per channel (dim 1). */
/* BatchNormalization with training_mode=1 (opset 14+): normalised with the
 * batch statistics (evtc's batchnorm), and, when a later node or the graph
 * uses them, the running statistics as the spec defines them:
 * running = input * momentum + batch * (1 - momentum), with the population
 * (biased) batch variance. */
static bool map_batchnorm_training(evtc_onnx_ctx *c) {
  evtc_node *x = evtc_onnx_in(c, 0), *scale = evtc_onnx_in(c, 1), *b = evtc_onnx_in(c, 2);
  if (!x || !scale || !b) return false;
  if (x->type.rank < 2) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "input must have rank >= 2");
  evtc_graph *g = c->g;
  evtc_attr eps = evtc_attr_float("eps", evtc_onnx_attr_float(c, "epsilon", 1e-5));
  evtc_node *in[3] = {x, scale, b};
  if (!evtc_onnx_out(c, 0, evtc_node_add(g, EVTC_OP_BATCHNORM, in, 3, &eps, 1, evtc_onnx_out_name(c, 0))))
    return false;
  bool want_mean = c->n_out > 1 && evtc_onnx_output_used(c, 1);
  bool want_var = c->n_out > 2 && evtc_onnx_output_used(c, 2);
  if (!want_mean && !want_var) return true;
  int64_t axes[EVTC_MAX_RANK], shape[EVTC_MAX_RANK];
  int n_axes = 0;
  for (int d = 0; d < x->type.rank; d++)
    if (d != 1) axes[n_axes++] = d;
  shape[0] = x->type.shape[1];
  for (int d = 1; d < x->type.rank - 1; d++) shape[d] = 1;
  evtc_attr ax = evtc_attr_ints("axes", n_axes, axes);
  double momentum = evtc_onnx_attr_float(c, "momentum", 0.9);
  evtc_node *mean = evtc_node_add(g, EVTC_OP_REDUCE_MEAN, &x, 1, &ax, 1, NULL);
  evtc_node *centred = evtc_binary(g, EVTC_OP_SUB, x, reshape(c, mean, x->type.rank - 1, shape, NULL));
  evtc_node *sq = evtc_binary(g, EVTC_OP_MUL, centred, centred);
  evtc_node *var = sq ? evtc_node_add(g, EVTC_OP_REDUCE_MEAN, &sq, 1, &ax, 1, NULL) : NULL;
  evtc_node *batch[2] = {mean, var};
  for (int k = 0; k < 2; k++) {
    if (!(k == 0 ? want_mean : want_var)) continue;
    evtc_node *running = evtc_onnx_in_state(c, 3 + k);
    if (!running || !batch[k]) return false;
    evtc_node *m = evtc_scalar(g, running->type.dtype, momentum);
    evtc_node *rest = evtc_scalar(g, running->type.dtype, 1 - momentum);
    evtc_node *sum[2] = {evtc_binary(g, EVTC_OP_MUL, running, m), evtc_binary(g, EVTC_OP_MUL, batch[k], rest)};
    if (!sum[0] || !sum[1] || !evtc_onnx_out(c, 1 + k, evtc_node_add(g, EVTC_OP_ADD, sum, 2, NULL, 0,
                                                                      evtc_onnx_out_name(c, 1 + k))))
      return false;
  }
  return true;
}

static bool map_batchnorm(evtc_onnx_ctx *c) {
  if (c->opset >= 14 && evtc_onnx_attr_int(c, "training_mode", 0)) return map_batchnorm_training(c);
  if (c->opset < 9 && !evtc_onnx_attr_int(c, "spatial", 1)) return evtc_onnx_unsupported(c, "spatial=0");
  for (int i = 1; i < c->n_out; i++)
    if (c->out[i]) return evtc_onnx_unsupported(c, "the running statistics outputs");
  evtc_node *x = evtc_onnx_in(c, 0), *scale = evtc_onnx_in(c, 1), *b = evtc_onnx_in(c, 2),
            *mean = evtc_onnx_in_state(c, 3), *var = evtc_onnx_in_state(c, 4);
  if (!x || !scale || !b || !mean || !var) return false;
  if (x->type.rank < 2) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "input must have rank >= 2");
  int64_t shape[EVTC_MAX_RANK];
  shape[0] = x->type.shape[1];
  for (int d = 1; d < x->type.rank - 1; d++) shape[d] = 1;
  evtc_graph *g = c->g;
  evtc_node *eps = evtc_scalar(g, var->type.dtype, evtc_onnx_attr_float(c, "epsilon", 1e-5));
  evtc_node *inv = evtc_binary(g, EVTC_OP_MUL, scale, evtc_unary(g, EVTC_OP_RSQRT, evtc_binary(g, EVTC_OP_ADD, var,
                                                                                            eps)));
  evtc_node *centred = evtc_binary(g, EVTC_OP_SUB, x, reshape(c, mean, x->type.rank - 1, shape, NULL));
  evtc_node *y = evtc_binary(g, EVTC_OP_MUL, centred, reshape(c, inv, x->type.rank - 1, shape, NULL));
  evtc_node *in[2] = {y, reshape(c, b, x->type.rank - 1, shape, NULL)};
  return evtc_onnx_out(c, 0, y && in[1] ? evtc_node_add(g, EVTC_OP_ADD, in, 2, NULL, 0, evtc_onnx_out_name(c, 0))
                                        : NULL);
}

static bool map_layernorm(evtc_onnx_ctx *c) {
  for (int i = 1; i < c->n_out; i++)
    if (c->out[i]) return evtc_onnx_unsupported(c, "the Mean and InvStdDev outputs");
  evtc_node *x = evtc_onnx_in(c, 0), *scale = evtc_onnx_in(c, 1);
  if (!x || !scale) return false;
  int64_t axis = evtc_onnx_attr_int(c, "axis", -1);
  int ax = evtc_axis_norm(axis, x->type.rank);
  if (ax < 0) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "axis %lld is out of range", (long long)axis);
  int r = x->type.rank - ax;
  const int64_t *norm = x->type.shape + ax;
  evtc_attr to = evtc_attr_ints("shape", r, norm);
  evtc_node *b = evtc_onnx_has(c, 2) ? evtc_onnx_in(c, 2) : evtc_onnx_const(c, evtc_type_make(x->type.dtype, r, norm),
                                                                           NULL, 0.0);
  if (!b) return false;
  evtc_type want = evtc_type_make(x->type.dtype, r, norm);
  if (!evtc_type_equal(&scale->type, &want)) scale = evtc_node_add(c->g, EVTC_OP_EXPAND, &scale, 1, &to, 1, NULL);
  if (b && !evtc_type_equal(&b->type, &want)) b = evtc_node_add(c->g, EVTC_OP_EXPAND, &b, 1, &to, 1, NULL);
  evtc_node *in[3] = {x, scale, b};
  if (!scale || !b) return false;
  evtc_attr a[2] = {evtc_attr_int("axis", ax), evtc_attr_float("eps", evtc_onnx_attr_float(c, "epsilon", 1e-5))};
  return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_LAYERNORM, in, 3, a, 2, evtc_onnx_out_name(c, 0)));
}

/* Dropout at inference is the identity; its mask, when asked for, is all true. */
static bool map_dropout(evtc_onnx_ctx *c) {
  const double *training = evtc_onnx_data(c, 2);
  if (evtc_onnx_has(c, 2) && (!training || training[0] != 0))
    return evtc_onnx_unsupported(c, "Dropout in training mode");
  if (c->opset < 7 && !evtc_onnx_attr_int(c, "is_test", 0) && evtc_onnx_attr_float(c, "ratio", 0.5) != 0)
    return evtc_onnx_unsupported(c, "Dropout in training mode (is_test=0)");
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!evtc_onnx_out(c, 0, x)) return false;
  if (c->n_out > 1 && c->out[1]) {
    evtc_type t = evtc_type_make(EVTC_BOOL, x->type.rank, x->type.shape);
    return evtc_onnx_out(c, 1, evtc_onnx_const(c, t, NULL, 1.0));
  }
  return true;
}

const evtc_onnx_op evtc_onnx_ops_nn[] = {
    {"Conv", map_conv},
    {"ConvTranspose", map_conv},
    {"MaxPool", map_pool},
    {"AveragePool", map_pool},
    {"GlobalAveragePool", map_global_pool},
    {"GlobalMaxPool", map_global_pool},
    {"BatchNormalization", map_batchnorm},
    {"LayerNormalization", map_layernorm},
    {"Dropout", map_dropout},
    {NULL, NULL},
};
