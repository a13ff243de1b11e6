/* test_grad.c -- every gradient rule against central finite differences.
 *
 * For each differentiable op (several attribute variants each) a small f64
 * graph computes y = op(inputs) and loss = reduce_sum(y * C) with C a random
 * CONST, so every element of y matters.  evtc_autodiff differentiates with
 * respect to every float INPUT; the interpreter runs the joint graph for the
 * analytic gradients and the forward graph for central differences
 * (h = 1e-6 relative).  The relative error ||analytic - fd|| / ||fd|| must be
 * below 1e-6; one line per case reports it.  Integer inputs (indices,
 * labels) and bool conditions are random CONSTs.  Also: the loss.c
 * variants, gradient naming, error reports, and a deliberately wrong
 * gradient that the comparison must reject.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "autodiff/rules.h"
#include "check.h"
#include "runtime/interp.h"

/* ---- graph building shorthands ---- */

#define NI(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define SHAPE(...) NI(__VA_ARGS__), (int64_t[]){__VA_ARGS__}
#define L(nm, ...) evtc_attr_ints(nm, NI(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define I(nm, v) evtc_attr_int(nm, v)
#define INS(...) (evtc_node *[]){__VA_ARGS__}, (int)(sizeof((evtc_node *[]){__VA_ARGS__}) / sizeof(evtc_node *))
#define ATTRS(...) (evtc_attr[]){__VA_ARGS__}, (int)(sizeof((evtc_attr[]){__VA_ARGS__}) / sizeof(evtc_attr))
#define OP(op, ins, attrs) evtc_node_add(g, EVTC_OP_##op, ins, attrs, NULL)
#define OP0(op, ins) evtc_node_add(g, EVTC_OP_##op, ins, NULL, 0, NULL)

/* A float64 INPUT (differentiated). */
static evtc_node *in(evtc_graph *g, const char *name, int rank, const int64_t *shape) {
  return evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_F64, rank, shape), NULL, 0, name);
}

/* A CONST of dtype dt with random values in [0, hi) (floored for ints and
 * bools) or uniform in [-1, 1) when hi == 0. */
static evtc_node *rconst(evtc_graph *g, evtc_dtype dt, int64_t hi, int rank, const int64_t *shape) {
  evtc_type t = evtc_type_make(dt, rank, shape);
  int64_t n = evtc_type_numel(&t);
  double *data = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) data[i] = hi ? floor(check_urand() * (double)hi) : 2 * check_urand() - 1;
  evtc_attr at = evtc_attr_floats("data", (int)n, data);
  evtc_node *c = evtc_leaf_add(g, EVTC_OP_CONST, t, &at, 1, NULL);
  free(data);
  return c;
}

/* ---- the cases ---- */

typedef enum { ANY, POSITIVE, AWAY } input_range;   /* [-1,1), [0.5,2), |x| in [0.2,1) */

typedef struct gcase {
  const char *name;
  evtc_node *(*build)(evtc_graph *g);   /* returns y, or the loss when own_loss */
  input_range range;
  bool own_loss;
} gcase;

#define UNARY(fn, op) \
  static evtc_node *fn(evtc_graph *g) { return evtc_unary(g, EVTC_OP_##op, in(g, "x", SHAPE(3, 5))); }
UNARY(c_neg, NEG)
UNARY(c_abs, ABS)
UNARY(c_exp, EXP)
UNARY(c_log, LOG)
UNARY(c_sqrt, SQRT)
UNARY(c_rsqrt, RSQRT)
UNARY(c_reciprocal, RECIPROCAL)
UNARY(c_tanh, TANH)
UNARY(c_sigmoid, SIGMOID)
UNARY(c_relu, RELU)
UNARY(c_gelu, GELU)
UNARY(c_gelu_tanh, GELU_TANH)
UNARY(c_erf, ERF)
UNARY(c_sin, SIN)
UNARY(c_cos, COS)

static evtc_node *c_cast(evtc_graph *g) {
  return OP(CAST, INS(in(g, "x", SHAPE(2, 3))), ATTRS(evtc_attr_dtype("dtype", EVTC_F64)));
}

#define BINARY(fn, op, sa, sb) \
  static evtc_node *fn(evtc_graph *g) { return evtc_binary(g, EVTC_OP_##op, in(g, "a", SHAPE sa), in(g, "b", SHAPE sb)); }
BINARY(c_add, ADD, (3, 5), (5))
BINARY(c_add_same, ADD, (2, 3), (2, 3))
BINARY(c_sub, SUB, (4, 1, 3), (2, 1))
BINARY(c_mul, MUL, (3, 1), (1, 4))
BINARY(c_div, DIV, (3, 4), (3, 1))
BINARY(c_pow, POW, (2, 3), (3))
BINARY(c_max, MAX, (3, 4), (4))
BINARY(c_min, MIN, (2, 1, 4), (3, 1))

static evtc_node *c_where(evtc_graph *g) {
  evtc_node *c = rconst(g, EVTC_BOOL, 2, SHAPE(3, 5));
  return OP0(WHERE, INS(c, in(g, "a", SHAPE(3, 1)), in(g, "b", SHAPE(5))));
}

static evtc_node *c_self(evtc_graph *g) {      /* x used four times: x*x + tanh(x) - x */
  evtc_node *x = in(g, "x", SHAPE(3, 4));
  evtc_node *s = evtc_binary(g, EVTC_OP_ADD, evtc_binary(g, EVTC_OP_MUL, x, x), evtc_unary(g, EVTC_OP_TANH, x));
  return evtc_binary(g, EVTC_OP_SUB, s, x);
}

#define REDUCE(fn, op, axes, keep) \
  static evtc_node *fn(evtc_graph *g) { \
    return OP(op, INS(in(g, "x", SHAPE(3, 4, 5))), ATTRS(L axes, I("keepdims", keep))); \
  }
REDUCE(c_rsum, REDUCE_SUM, ("axes", 1), 0)
REDUCE(c_rsum_keep, REDUCE_SUM, ("axes", -1, 0), 1)
REDUCE(c_rmean, REDUCE_MEAN, ("axes", 0, 2), 0)
REDUCE(c_rmean_keep, REDUCE_MEAN, ("axes", -2), 1)
REDUCE(c_rmax, REDUCE_MAX, ("axes", 1), 0)
REDUCE(c_rmax_keep, REDUCE_MAX, ("axes", -1, 0), 1)
REDUCE(c_rmin, REDUCE_MIN, ("axes", 2), 0)

static evtc_node *c_rsum_all(evtc_graph *g) { return OP0(REDUCE_SUM, INS(in(g, "x", SHAPE(2, 3)))); }
static evtc_node *c_rmin_all(evtc_graph *g) {
  return OP(REDUCE_MIN, INS(in(g, "x", SHAPE(2, 3))), ATTRS(I("keepdims", 1)));
}

static evtc_node *c_reshape(evtc_graph *g) {
  return OP(RESHAPE, INS(in(g, "x", SHAPE(3, 4, 5))), ATTRS(L("shape", 5, -1)));
}
static evtc_node *c_permute(evtc_graph *g) {
  return OP(PERMUTE, INS(in(g, "x", SHAPE(3, 4, 5))), ATTRS(L("perm", 2, 0, 1)));
}
static evtc_node *c_expand(evtc_graph *g) {
  return OP(EXPAND, INS(in(g, "x", SHAPE(3, 1))), ATTRS(L("shape", 2, 3, 4)));
}
static evtc_node *c_slice(evtc_graph *g) {
  return OP(SLICE, INS(in(g, "x", SHAPE(3, 7, 5))),
            ATTRS(L("axes", 1, -1), L("starts", 1, -4), L("ends", 100, 4), L("steps", 2, 1)));
}
static evtc_node *c_slice_all(evtc_graph *g) {
  return OP(SLICE, INS(in(g, "x", SHAPE(5, 6))), ATTRS(L("starts", 0, 1), L("ends", 5, -1), L("steps", 3, 2)));
}
static evtc_node *c_concat(evtc_graph *g) {
  return OP(CONCAT, INS(in(g, "a", SHAPE(2, 3)), in(g, "b", SHAPE(2, 1)), in(g, "c", SHAPE(2, 4))),
            ATTRS(I("axis", -1)));
}
static evtc_node *c_pad(evtc_graph *g) {
  return OP(PAD, INS(in(g, "x", SHAPE(3, 4))),
            ATTRS(L("pads", 1, 0, 2, 1), L("interior", 1, 2), evtc_attr_float("value", 0.5)));
}
static evtc_node *c_gather(evtc_graph *g) {
  evtc_node *idx = rconst(g, EVTC_I64, 4, SHAPE(2, 3));
  return OP(GATHER, INS(in(g, "x", SHAPE(3, 4, 2)), idx), ATTRS(I("axis", -2)));
}
static evtc_node *c_scatter_add(evtc_graph *g) {
  evtc_node *idx = rconst(g, EVTC_I32, 5, SHAPE(4));
  return OP(SCATTER_ADD, INS(in(g, "u", SHAPE(2, 4, 3)), idx), ATTRS(I("axis", 1), I("size", 5)));
}
static evtc_node *c_scatter_base(evtc_graph *g) {   /* into a base with rows beyond size: its gradient passes */
  evtc_node *idx = rconst(g, EVTC_I32, 5, SHAPE(4));
  return OP(SCATTER_ADD, INS(in(g, "u", SHAPE(2, 4, 3)), idx, in(g, "base", SHAPE(2, 7, 3))),
            ATTRS(I("axis", 1), I("size", 5)));
}
static evtc_node *c_embedding(evtc_graph *g) {
  evtc_node *ids = rconst(g, EVTC_I64, 6, SHAPE(2, 3));
  return OP0(EMBEDDING, INS(in(g, "table", SHAPE(6, 4)), ids));
}

#define MATMUL(fn, op, sa, sb, ta, tb) \
  static evtc_node *fn(evtc_graph *g) { \
    return OP(op, INS(in(g, "a", SHAPE sa), in(g, "b", SHAPE sb)), ATTRS(I("trans_a", ta), I("trans_b", tb))); \
  }
MATMUL(c_mm, MATMUL, (3, 4), (4, 5), 0, 0)
MATMUL(c_mm_tb, MATMUL, (3, 4), (5, 4), 0, 1)
MATMUL(c_mm_ta, MATMUL, (4, 3), (4, 5), 1, 0)
MATMUL(c_mm_tab, MATMUL, (4, 3), (5, 4), 1, 1)
MATMUL(c_bmm, BATCH_MATMUL, (2, 3, 4), (4, 5), 0, 0)
MATMUL(c_bmm_bcast, BATCH_MATMUL, (2, 1, 4, 3), (3, 5, 4), 1, 1)
MATMUL(c_bmm_tb, BATCH_MATMUL, (1, 3, 4), (2, 5, 4), 0, 1)
MATMUL(c_bmm_ta, BATCH_MATMUL, (2, 4, 3), (2, 4, 5), 1, 0)
MATMUL(c_bmm_shared, BATCH_MATMUL, (2, 3, 4), (1, 5, 4), 0, 1)   /* b shared by the batch: dB one folded matmul */

static evtc_node *c_conv(evtc_graph *g) {
  return OP0(CONV2D, INS(in(g, "x", SHAPE(1, 3, 5, 5)), in(g, "w", SHAPE(2, 3, 3, 3))));
}
static evtc_node *c_conv_geom(evtc_graph *g) {
  return OP(CONV2D, INS(in(g, "x", SHAPE(2, 4, 7, 6)), in(g, "w", SHAPE(6, 2, 3, 2))),
            ATTRS(L("stride", 2, 1), L("padding", 1, 0, 2, 1), L("dilation", 1, 2), I("groups", 2)));
}
static evtc_node *c_conv_bi(evtc_graph *g) {   /* dy of a [2,4,7,6] x [6,2,3,2] conv: [2,6,4,5] */
  return OP(CONV2D_BACKWARD_INPUT, INS(in(g, "dy", SHAPE(2, 6, 4, 5)), in(g, "w", SHAPE(6, 2, 3, 2))),
            ATTRS(L("stride", 2, 1), L("padding", 1, 0, 2, 1), L("dilation", 1, 2), I("groups", 2),
                  L("shape", 2, 4, 7, 6)));
}
static evtc_node *c_conv_bw(evtc_graph *g) {
  return OP(CONV2D_BACKWARD_WEIGHT, INS(in(g, "x", SHAPE(2, 4, 7, 6)), in(g, "dy", SHAPE(2, 6, 4, 5))),
            ATTRS(L("stride", 2, 1), L("padding", 1, 0, 2, 1), L("dilation", 1, 2), I("groups", 2),
                  L("shape", 6, 2, 3, 2)));
}
static evtc_node *c_maxpool(evtc_graph *g) {
  return OP(MAXPOOL2D, INS(in(g, "x", SHAPE(2, 3, 6, 5))),
            ATTRS(L("kernel", 3, 2), L("stride", 2, 2), L("padding", 1, 0, 1, 1)));
}
static evtc_node *c_maxpool_overlap(evtc_graph *g) {
  return OP(MAXPOOL2D, INS(in(g, "x", SHAPE(1, 2, 5, 5))), ATTRS(L("kernel", 3, 3), L("stride", 1, 2)));
}
static evtc_node *c_avgpool(evtc_graph *g) {
  return OP(AVGPOOL2D, INS(in(g, "x", SHAPE(2, 3, 6, 5))),
            ATTRS(L("kernel", 3, 2), L("stride", 2, 1), L("padding", 1, 0, 1, 1)));
}
static evtc_node *c_avgpool_incl(evtc_graph *g) {
  return OP(AVGPOOL2D, INS(in(g, "x", SHAPE(1, 2, 5, 5))),
            ATTRS(L("kernel", 2, 3), L("padding", 1, 1, 0, 1), I("count_include_pad", 1)));
}
static evtc_node *c_avgpool_back(evtc_graph *g) {   /* dy of the c_avgpool geometry: [2,3,3,5] */
  return OP(AVGPOOL2D_BACKWARD, INS(in(g, "dy", SHAPE(2, 3, 3, 5))),
            ATTRS(L("kernel", 3, 2), L("stride", 2, 1), L("padding", 1, 0, 1, 1), L("shape", 2, 3, 6, 5)));
}
static evtc_node *c_gap(evtc_graph *g) { return OP0(GLOBAL_AVGPOOL, INS(in(g, "x", SHAPE(2, 3, 4, 5)))); }

static evtc_node *c_softmax(evtc_graph *g) {
  return OP(SOFTMAX, INS(in(g, "x", SHAPE(3, 4, 5))), ATTRS(I("axis", 1)));
}
static evtc_node *c_log_softmax(evtc_graph *g) { return OP0(LOG_SOFTMAX, INS(in(g, "x", SHAPE(3, 5)))); }
static evtc_node *c_layernorm(evtc_graph *g) {
  return OP(LAYERNORM, INS(in(g, "x", SHAPE(3, 4, 5)), in(g, "gamma", SHAPE(4, 5)), in(g, "beta", SHAPE(4, 5))),
            ATTRS(I("axis", 1)));
}
static evtc_node *c_layernorm_last(evtc_graph *g) {
  return OP0(LAYERNORM, INS(in(g, "x", SHAPE(4, 6)), in(g, "gamma", SHAPE(6)), in(g, "beta", SHAPE(6))));
}
static evtc_node *c_batchnorm(evtc_graph *g) {
  return OP0(BATCHNORM, INS(in(g, "x", SHAPE(4, 3, 2, 3)), in(g, "gamma", SHAPE(3)), in(g, "beta", SHAPE(3))));
}
static evtc_node *c_batchnorm2(evtc_graph *g) {
  return OP(BATCHNORM, INS(in(g, "x", SHAPE(5, 3)), in(g, "gamma", SHAPE(3)), in(g, "beta", SHAPE(3))),
            ATTRS(evtc_attr_float("eps", 1e-3)));
}
static evtc_node *c_dropout(evtc_graph *g) {
  return OP(DROPOUT, INS(in(g, "x", SHAPE(4, 5))), ATTRS(evtc_attr_float("p", 0.3), I("seed", 7)));
}
static evtc_node *c_cross_entropy(evtc_graph *g) {
  evtc_node *labels = rconst(g, EVTC_I64, 5, SHAPE(4));
  return OP0(CROSS_ENTROPY, INS(in(g, "logits", SHAPE(4, 5)), labels));
}
static evtc_node *c_mse(evtc_graph *g) { return OP0(MSE, INS(in(g, "a", SHAPE(3, 4)), in(g, "b", SHAPE(3, 4)))); }
static evtc_node *c_attention(evtc_graph *g) {   /* causal, S < T, Dv != D (tests/test_attention.c has more) */
  return OP(ATTENTION, INS(in(g, "q", SHAPE(1, 2, 3, 4)), in(g, "k", SHAPE(1, 2, 5, 4)), in(g, "v", SHAPE(1, 2, 5, 3))),
            ATTRS(evtc_attr_float("scale", 0.7), I("causal", 1)));
}

/* A two-layer MLP with the loss attached by loss.c (kind in the name). */
static evtc_node *mlp(evtc_graph *g, const char *kind) {
  evtc_node *x = in(g, "x", SHAPE(4, 3)), *w1 = in(g, "w1", SHAPE(3, 5)), *b1 = in(g, "b1", SHAPE(5));
  evtc_node *h = evtc_unary(g, EVTC_OP_TANH, evtc_binary(g, EVTC_OP_ADD, OP0(MATMUL, INS(x, w1)), b1));
  evtc_node *pred = OP0(MATMUL, INS(h, in(g, "w2", SHAPE(5, 3))));
  evtc_node *labels = strcmp(kind, "cross_entropy") == 0 ? rconst(g, EVTC_I64, 3, SHAPE(4))
                      : strcmp(kind, "mse") == 0       ? rconst(g, EVTC_F64, 0, SHAPE(4, 3))
                                                       : NULL;
  evtc_diag d = {0};
  evtc_node *loss = evtc_loss_attach(g, kind, pred, labels, &d);
  CHECK(loss && d.status == EVTC_OK, "loss_attach %s: %s", kind, d.msg);
  return loss;
}
static evtc_node *c_loss_ce(evtc_graph *g) { return mlp(g, "cross_entropy"); }
static evtc_node *c_loss_mse(evtc_graph *g) { return mlp(g, "mse"); }
static evtc_node *c_loss_ms(evtc_graph *g) { return mlp(g, "mean_square"); }

static const gcase cases[] = {
    {"neg", c_neg, ANY, false}, {"abs", c_abs, AWAY, false}, {"exp", c_exp, ANY, false},
    {"log", c_log, POSITIVE, false}, {"sqrt", c_sqrt, POSITIVE, false}, {"rsqrt", c_rsqrt, POSITIVE, false},
    {"reciprocal", c_reciprocal, POSITIVE, false}, {"tanh", c_tanh, ANY, false}, {"sigmoid", c_sigmoid, ANY, false},
    {"relu", c_relu, AWAY, false}, {"gelu", c_gelu, ANY, false}, {"gelu_tanh", c_gelu_tanh, ANY, false},
    {"erf", c_erf, ANY, false}, {"sin", c_sin, ANY, false}, {"cos", c_cos, ANY, false},
    {"cast f64->f64", c_cast, ANY, false},
    {"add [3,5]+[5]", c_add, ANY, false}, {"add same shape", c_add_same, ANY, false},
    {"sub [4,1,3]-[2,1]", c_sub, ANY, false}, {"mul [3,1]*[1,4]", c_mul, ANY, false},
    {"div [3,4]/[3,1]", c_div, AWAY, false}, {"pow [2,3]^[3]", c_pow, POSITIVE, false},
    {"max [3,4],[4]", c_max, ANY, false}, {"min [2,1,4],[3,1]", c_min, ANY, false},
    {"where", c_where, ANY, false}, {"x*x+tanh(x)-x (accumulation)", c_self, ANY, false},
    {"reduce_sum axes=[1]", c_rsum, ANY, false}, {"reduce_sum axes=[-1,0] keepdims", c_rsum_keep, ANY, false},
    {"reduce_sum all", c_rsum_all, ANY, false}, {"reduce_mean axes=[0,2]", c_rmean, ANY, false},
    {"reduce_mean axes=[-2] keepdims", c_rmean_keep, ANY, false}, {"reduce_max axes=[1]", c_rmax, ANY, false},
    {"reduce_max axes=[-1,0] keepdims", c_rmax_keep, ANY, false}, {"reduce_min axes=[2]", c_rmin, ANY, false},
    {"reduce_min all keepdims", c_rmin_all, ANY, false}, {"reshape", c_reshape, ANY, false},
    {"permute", c_permute, ANY, false}, {"expand [3,1]->[2,3,4]", c_expand, ANY, false},
    {"slice axes=[1,-1] steps=[2,1]", c_slice, ANY, false}, {"slice all axes steps=[3,2]", c_slice_all, ANY, false},
    {"concat axis=-1", c_concat, ANY, false}, {"pad interior", c_pad, ANY, false},
    {"gather axis=-2", c_gather, ANY, false}, {"scatter_add axis=1", c_scatter_add, ANY, false},
    {"scatter_add into a base", c_scatter_base, ANY, false},
    {"embedding", c_embedding, ANY, false}, {"matmul", c_mm, ANY, false}, {"matmul trans_b", c_mm_tb, ANY, false},
    {"matmul trans_a", c_mm_ta, ANY, false}, {"matmul trans_a trans_b", c_mm_tab, ANY, false},
    {"batch_matmul [2,3,4]x[4,5]", c_bmm, ANY, false},
    {"batch_matmul [2,1,4,3]^T x [3,5,4]^T", c_bmm_bcast, ANY, false},
    {"batch_matmul [1,3,4] x [2,5,4]^T", c_bmm_tb, ANY, false}, {"batch_matmul trans_a", c_bmm_ta, ANY, false},
    {"batch_matmul [2,3,4] x [1,5,4]^T", c_bmm_shared, ANY, false},
    {"conv2d", c_conv, ANY, false}, {"conv2d stride/pad/dilation/groups", c_conv_geom, ANY, false},
    {"conv2d_backward_input", c_conv_bi, ANY, false}, {"conv2d_backward_weight", c_conv_bw, ANY, false},
    {"maxpool2d padded", c_maxpool, ANY, false}, {"maxpool2d overlapping", c_maxpool_overlap, ANY, false},
    {"avgpool2d padded", c_avgpool, ANY, false}, {"avgpool2d count_include_pad", c_avgpool_incl, ANY, false},
    {"avgpool2d_backward", c_avgpool_back, ANY, false}, {"global_avgpool", c_gap, ANY, false},
    {"softmax axis=1", c_softmax, ANY, false}, {"log_softmax", c_log_softmax, ANY, false},
    {"layernorm axis=1", c_layernorm, ANY, false}, {"layernorm axis=-1", c_layernorm_last, ANY, false},
    {"batchnorm [4,3,2,3]", c_batchnorm, ANY, false}, {"batchnorm [5,3] eps=1e-3", c_batchnorm2, ANY, false},
    {"dropout p=0.3", c_dropout, ANY, false}, {"cross_entropy", c_cross_entropy, ANY, false},
    {"mse", c_mse, ANY, false}, {"attention causal", c_attention, ANY, false}, {"loss_attach cross_entropy", c_loss_ce, ANY, true},
    {"loss_attach mse", c_loss_mse, ANY, true}, {"loss_attach mean_square", c_loss_ms, ANY, true},
};

/* ---- the comparison ---- */

/* ||a - b|| / ||b|| (absolute when ||b|| is 0). */
static double rel_error(const double *a, const double *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct leafdata {
  evtc_node *leaf;
  double *x;
  int64_t n;
} leafdata;

static double run_loss(evtc_interp *it, const evtc_graph *g) {
  evtc_diag d = {0};
  evtc_status st = evtc_interp_run(it, 0, &d);
  CHECK(st == EVTC_OK, "forward run: %s", d.msg);
  return evtc_interp_value(it, g->loss)[0];
}

static double worst = 0;
static const char *worst_case = "";
static int tested_ops[EVTC_OP_COUNT];

/* Builds case c, checks every input's gradient; returns the largest relative error. */
static double check_case(const gcase *c) {
  evtc_graph *g = evtc_graph_new("grad");
  evtc_node *y = c->build(g);
  CHECK(y != NULL, "%s: build: %s", c->name, g->diag.msg);
  if (!y) {
    evtc_graph_free(g);
    return INFINITY;
  }
  if (!c->own_loss) {
    tested_ops[y->op]++;
    evtc_node *prod = evtc_binary(g, EVTC_OP_MUL, y, rconst(g, EVTC_F64, 0, y->type.rank, y->type.shape));
    g->loss = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &prod, 1, NULL, 0, "loss");
    evtc_graph_add_output(g, g->loss, NULL);
  }
  leafdata in[8];
  const char *names[8];
  int n_in = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    evtc_node *x = g->nodes[i];
    if (x->op != EVTC_OP_INPUT) continue;
    EVTC_ASSERT(n_in < 8);
    leafdata *l = &in[n_in];
    l->leaf = x;
    l->n = evtc_type_numel(&x->type);
    l->x = malloc(sizeof(double) * (size_t)l->n);
    for (int64_t k = 0; k < l->n; k++) {
      double u = check_urand();
      l->x[k] = c->range == POSITIVE ? 0.5 + 1.5 * u
                : c->range == AWAY   ? (u < 0.5 ? -1 : 1) * (0.2 + 0.8 * check_urand())
                                     : 2 * u - 1;
    }
    names[n_in++] = x->name;
  }
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(g, names, n_in, NULL, &d);
  CHECK(joint != NULL, "%s: autodiff: %s", c->name, d.msg);
  double err = INFINITY;
  if (joint) {
    evtc_interp *jt = evtc_interp_new(joint), *ft = evtc_interp_new(g);
    for (int k = 0; k < n_in; k++) {
      evtc_interp_set(jt, evtc_graph_find(joint, names[k]), in[k].x);
      evtc_interp_set(ft, in[k].leaf, in[k].x);
    }
    evtc_diag rd = {0};
    CHECK(evtc_interp_run(jt, 0, &rd) == EVTC_OK, "%s: joint run: %s", c->name, rd.msg);
    err = 0;
    for (int k = 0; k < n_in && rd.status == EVTC_OK; k++) {
      char gname[64];
      snprintf(gname, sizeof gname, "grad.%s", names[k]);
      evtc_node *gn = evtc_graph_find(joint, gname);
      CHECK(gn && joint->outputs[joint->n_outputs - n_in + k].node == gn, "%s: no output %%%s", c->name, gname);
      if (!gn) continue;
      const double *ga = evtc_interp_value(jt, gn);
      double *fd = malloc(sizeof(double) * (size_t)in[k].n);
      for (int64_t e = 0; e < in[k].n; e++) {
        double x0 = in[k].x[e], h = 1e-6 * fmax(1.0, fabs(x0));
        in[k].x[e] = x0 + h;
        double lp = run_loss(ft, g);
        in[k].x[e] = x0 - h;
        double lm = run_loss(ft, g);
        in[k].x[e] = x0;
        fd[e] = (lp - lm) / (2 * h);
      }
      double e = rel_error(ga, fd, in[k].n);
      if (e > err) err = e;
      free(fd);
    }
    evtc_interp_free(jt);
    evtc_interp_free(ft);
    evtc_graph_free(joint);
  }
  for (int k = 0; k < n_in; k++) free(in[k].x);
  evtc_graph_free(g);
  return err;
}

/* The comparison must reject a gradient that is slightly wrong. */
static void check_detects_wrong_gradient(void) {
  double fd[6] = {0.3, -1.2, 0.7, 2.0, -0.1, 0.05}, ga[6];
  memcpy(ga, fd, sizeof ga);
  CHECK(rel_error(ga, fd, 6) < 1e-6, "identical gradients must pass");
  ga[4] *= 1.0001;    /* one element off by 1e-4 relative: error 1e-5 / 2.7 */
  CHECK(rel_error(ga, fd, 6) > 1e-6, "a perturbed gradient must fail (error %.2e)", rel_error(ga, fd, 6));
  ga[4] = fd[4] + 1e-9;
  CHECK(rel_error(ga, fd, 6) < 1e-6, "a perturbation at rounding level must pass");
}

/* ---- naming, zero gradients, dtypes and errors ---- */

static evtc_node *param(evtc_graph *g, const char *name, evtc_dtype dt, int rank, const int64_t *shape) {
  return evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(dt, rank, shape), NULL, 0, name);
}

/* loss = sum((x w + b) * (x w + b)) + 0 * sum(cast(u)); q unused. */
static evtc_graph *small_model(evtc_dtype dt) {
  evtc_graph *g = evtc_graph_new("small");
  evtc_node *x = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(dt, 2, (int64_t[]){2, 3}), NULL, 0, "x");
  evtc_node *w = param(g, "w", dt, SHAPE(3, 2)), *b = param(g, "b", dt, SHAPE(2, 2));
  param(g, "q", dt, SHAPE(4));
  evtc_node *h = evtc_binary(g, EVTC_OP_ADD, OP0(MATMUL, INS(x, w)), b);
  evtc_node *sq = evtc_binary(g, EVTC_OP_MUL, h, h);
  evtc_node *c = OP(CAST, INS(sq), ATTRS(evtc_attr_dtype("dtype", EVTC_F64)));
  g->loss = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &c, 1, NULL, 0, "loss");
  evtc_graph_add_output(g, g->loss, NULL);
  return g;
}

static void expect_error(evtc_graph *j, const evtc_diag *d, evtc_status st, const char *part, const char *what) {
  CHECK(j == NULL && d->status == st && strstr(d->msg, part) != NULL, "%s: got status %d, message '%s'", what,
        (int)d->status, d->msg);
  evtc_graph_free(j);
}

static void check_extra(void) {
  /* all params by default; names; the zero gradient of an unused param;
   * the pass-through add gradient gets a named copy; f32 through a cast */
  evtc_graph *g = small_model(EVTC_F32);
  evtc_diag d = {0};
  evtc_graph *j = evtc_autodiff(g, NULL, 0, NULL, &d);
  CHECK(j != NULL, "autodiff small: %s", d.msg);
  if (j) {
    CHECK(j->n_outputs == 4, "outputs: loss + 3 gradients, got %d", (int)j->n_outputs);
    const char *want[3] = {"grad.w", "grad.b", "grad.q"};
    for (int k = 0; k < 3 && k + 1 < j->n_outputs; k++) {
      evtc_node *o = j->outputs[k + 1].node;
      CHECK(strcmp(o->name, want[k]) == 0 && o->type.dtype == EVTC_F32, "output %d is %%%s", k + 1, o->name);
    }
    evtc_node *q = evtc_graph_find(j, "grad.q");
    CHECK(q && q->op == EVTC_OP_CONST && q->type.rank == 1, "unused param: zero CONST gradient");
    CHECK(j->loss && strcmp(j->loss->name, "loss") == 0, "loss kept");
    CHECK(evtc_graph_verify(j) == EVTC_OK, "joint graph verifies: %s", j->diag.msg);
  }
  evtc_graph_free(j);

  /* errors */
  memset(&d, 0, sizeof d);
  expect_error(evtc_autodiff(g, (const char *[]){"nope"}, 1, NULL, &d), &d, EVTC_ERR_INVALID, "%nope", "unknown wrt");
  memset(&d, 0, sizeof d);
  evtc_optim_config sgd = evtc_optim_default(EVTC_OPTIM_SGD);
  expect_error(evtc_autodiff(g, (const char *[]){"x"}, 1, &sgd, &d), &d, EVTC_ERR_INVALID, "param",
               "optimizer on an input");
  memset(&d, 0, sizeof d);
  expect_error(evtc_autodiff(g, (const char *[]){"w", "w"}, 2, NULL, &d), &d, EVTC_ERR_INVALID, "twice",
               "wrt twice");
  memset(&d, 0, sizeof d);
  sgd.lr = -1;
  expect_error(evtc_autodiff(g, NULL, 0, &sgd, &d), &d, EVTC_ERR_INVALID, "out of range", "negative lr");
  memset(&d, 0, sizeof d);
  evtc_node *loss = g->loss;
  g->loss = NULL;
  expect_error(evtc_autodiff(g, NULL, 0, NULL, &d), &d, EVTC_ERR_INVALID, "no loss", "no loss");
  g->loss = loss;
  memset(&d, 0, sizeof d);
  CHECK(evtc_loss_attach(g, "mse", g->nodes[0], g->nodes[0], &d) == NULL && strstr(d.msg, "already has a loss"),
        "second loss: %s", d.msg);
  evtc_graph_free(g);

  g = evtc_graph_new("bad");
  evtc_node *x = in(g, "x", SHAPE(2, 3));
  memset(&d, 0, sizeof d);
  CHECK(evtc_loss_attach(g, "hinge", x, NULL, &d) == NULL && strstr(d.msg, "unknown loss"), "unknown loss kind");
  memset(&d, 0, sizeof d);
  CHECK(evtc_loss_attach(g, "mse", x, NULL, &d) == NULL && strstr(d.msg, "needs labels"), "mse without labels");
  memset(&d, 0, sizeof d);
  CHECK(evtc_loss_attach(g, "cross_entropy", x, x, &d) == NULL && d.status == EVTC_ERR_TYPE,
        "cross_entropy with float labels: %s", d.msg);
  evtc_graph_free(g);

  /* a gradient name that is already taken */
  g = evtc_graph_new("taken");
  x = in(g, "x", SHAPE(2));
  evtc_node *gx = evtc_node_add(g, EVTC_OP_NEG, &x, 1, NULL, 0, "grad.x");
  g->loss = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &gx, 1, NULL, 0, "loss");
  memset(&d, 0, sizeof d);
  expect_error(evtc_autodiff(g, (const char *[]){"x"}, 1, NULL, &d), &d, EVTC_ERR_INVALID, "taken", "name taken");
  evtc_graph_free(g);

  /* second derivative through maxpool2d is reported, not silently zero */
  g = evtc_graph_new("mp2");
  x = in(g, "x", SHAPE(1, 1, 4, 4));
  evtc_node *dy = in(g, "dy", SHAPE(1, 1, 2, 2));
  evtc_node *mb = OP(MAXPOOL2D_BACKWARD, INS(dy, x), ATTRS(L("kernel", 2, 2)));
  g->loss = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &mb, 1, NULL, 0, "loss");
  memset(&d, 0, sizeof d);
  expect_error(evtc_autodiff(g, (const char *[]){"dy"}, 1, NULL, &d), &d, EVTC_ERR_UNSUPPORTED, "maxpool2d",
               "maxpool2d_backward");
  evtc_graph_free(g);
}

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double e = check_case(&cases[i]);
    printf("%-42s rel err %.2e\n", cases[i].name, e);
    CHECK(e < 1e-6, "%s: relative error %.3e", cases[i].name, e);
    if (e > worst) {
      worst = e;
      worst_case = cases[i].name;
    }
  }
  printf("largest relative error: %.2e (%s)\n", worst, worst_case);
  /* every op with a rule has a finite-difference case, except
   * maxpool2d_backward whose rule reports "unsupported" (checked below) */
  for (int op = 0; op < EVTC_OP_COUNT; op++)
    if (evtc_vjp_rules[op] != NULL && op != EVTC_OP_MAXPOOL2D_BACKWARD)
      CHECK(tested_ops[op] > 0, "op %s has a gradient rule but no finite-difference case", evtc_op_get((evtc_op)op)->name);
  check_detects_wrong_gradient();
  check_extra();
  return check_summary();
}
