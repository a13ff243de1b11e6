/* onnx_ops_math.c -- ONNX elementwise math, logic, Cast, MatMul and Gemm.
 *
 * One-to-one ops go through small name tables; activations evtc has no op
 * for (LeakyRelu, Elu, HardSigmoid, Softplus, Clip, ...) are written with
 * evtc's elementwise primitives.  Binary ops broadcast as in NumPy, which is
 * what ONNX (opset >= 7) specifies.
 */
#include <math.h>
#include <string.h>

#include "frontend/onnx_internal.h"

static const struct {
  const char *onnx;
  evtc_op op;
} unary_ops[] = {
    {"Neg", EVTC_OP_NEG},   {"Abs", EVTC_OP_ABS},         {"Sign", EVTC_OP_SIGN},       {"Exp", EVTC_OP_EXP},
    {"Log", EVTC_OP_LOG},   {"Sqrt", EVTC_OP_SQRT},       {"Reciprocal", EVTC_OP_RECIPROCAL},
    {"Tanh", EVTC_OP_TANH}, {"Sigmoid", EVTC_OP_SIGMOID}, {"Relu", EVTC_OP_RELU},       {"Erf", EVTC_OP_ERF},
    {"Sin", EVTC_OP_SIN},   {"Cos", EVTC_OP_COS},
};

static const struct {
  const char *onnx;
  evtc_op op;
} binary_ops[] = {
    {"Add", EVTC_OP_ADD},  {"Sub", EVTC_OP_SUB},          {"Mul", EVTC_OP_MUL},
    {"Div", EVTC_OP_DIV},  {"Equal", EVTC_OP_EQ},         {"Less", EVTC_OP_LT},
    {"LessOrEqual", EVTC_OP_LE}, {"Greater", EVTC_OP_GT}, {"GreaterOrEqual", EVTC_OP_GE},
};

static const char *op_type(const evtc_onnx_ctx *c) { return c->node->op_type; }

/* A scalar CONST of x's dtype. */
static evtc_node *scalar_like(evtc_onnx_ctx *c, const evtc_node *x, double v) {
  return evtc_scalar(c->g, x->type.dtype, v);
}

static evtc_node *binary_named(evtc_onnx_ctx *c, evtc_op op, evtc_node *a, evtc_node *b, const char *name) {
  evtc_node *in[2] = {a, b};
  return evtc_node_add(c->g, op, in, 2, NULL, 0, name);
}

static evtc_node *cast_to(evtc_onnx_ctx *c, evtc_node *x, evtc_dtype dt, const char *name) {
  if (!x) return NULL;
  evtc_attr a = evtc_attr_dtype("dtype", dt);
  return evtc_node_add(c->g, EVTC_OP_CAST, &x, 1, &a, 1, name);
}

/* evtc's unary math takes floats: Neg, Abs and Sign of integers go through f64. */
static bool map_unary(evtc_onnx_ctx *c) {
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
    if (strcmp(unary_ops[i].onnx, op_type(c)) == 0) {
      evtc_node *x = evtc_onnx_in(c, 0);
      const char *name = evtc_onnx_out_name(c, 0);
      evtc_op op = unary_ops[i].op;
      if (!x) return false;
      if (evtc_dtype_is_int(x->type.dtype) && (op == EVTC_OP_NEG || op == EVTC_OP_ABS || op == EVTC_OP_SIGN)) {
        evtc_node *y = evtc_unary(c->g, op, cast_to(c, x, EVTC_F64, NULL));
        return evtc_onnx_out(c, 0, cast_to(c, y, x->type.dtype, name));
      }
      return evtc_onnx_out(c, 0, evtc_node_add(c->g, op, &x, 1, NULL, 0, name));
    }
  EVTC_ASSERT(!"unary table");
  return false;
}

/* Opsets < 7 broadcast B against A aligned at `axis` when broadcast=1:
 * B's dims are followed by ones up to A's rank. */
static evtc_node *legacy_broadcast(evtc_onnx_ctx *c, evtc_node *a, evtc_node *b) {
  if (!a || !b || c->opset >= 7 || !evtc_onnx_attr_int(c, "broadcast", 0) || !evtc_onnx_attr(c, "axis")) return b;
  int64_t axis = evtc_onnx_attr_int(c, "axis", 0), shape[EVTC_MAX_RANK];
  if (axis < 0) axis += a->type.rank;
  int r = 0;
  for (int d = 0; d < b->type.rank; d++) shape[r++] = b->type.shape[d];
  while (r < a->type.rank - axis && r < EVTC_MAX_RANK) shape[r++] = 1;
  evtc_attr at = evtc_attr_ints("shape", r, shape);
  return evtc_node_add(c->g, EVTC_OP_RESHAPE, &b, 1, &at, 1, NULL);
}

static bool map_binary(evtc_onnx_ctx *c) {
  for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
    if (strcmp(binary_ops[i].onnx, op_type(c)) == 0) {
      evtc_node *a = evtc_onnx_in(c, 0), *b = legacy_broadcast(c, a, evtc_onnx_in(c, 1));
      return evtc_onnx_out(c, 0, binary_named(c, binary_ops[i].op, a, b, evtc_onnx_out_name(c, 0)));
    }
  EVTC_ASSERT(!"binary table");
  return false;
}

/* Pow: the exponent is cast to the base's dtype; integer bases go through f64. */
static bool map_pow(evtc_onnx_ctx *c) {
  evtc_node *a = evtc_onnx_in(c, 0), *b = evtc_onnx_in(c, 1);
  if (!a || !b) return false;
  evtc_dtype dt = a->type.dtype;
  if (!evtc_dtype_is_float(dt)) {
    evtc_node *p = binary_named(c, EVTC_OP_POW, cast_to(c, a, EVTC_F64, NULL), cast_to(c, b, EVTC_F64, NULL), NULL);
    return evtc_onnx_out(c, 0, cast_to(c, p, dt, evtc_onnx_out_name(c, 0)));
  }
  if (b->type.dtype != dt) b = cast_to(c, b, dt, NULL);
  return evtc_onnx_out(c, 0, binary_named(c, EVTC_OP_POW, a, b, evtc_onnx_out_name(c, 0)));
}

/* Max, Min, Sum, Mean: variadic, folded left to right. */
static bool map_variadic(evtc_onnx_ctx *c) {
  const char *t = op_type(c);
  evtc_op op = strcmp(t, "Max") == 0 ? EVTC_OP_MAX : strcmp(t, "Min") == 0 ? EVTC_OP_MIN : EVTC_OP_ADD;
  bool mean = strcmp(t, "Mean") == 0;
  if (c->n_in < 1) return evtc_onnx_fail(c, EVTC_ERR_INVALID, "needs at least one input");
  evtc_node *acc = evtc_onnx_in(c, 0);
  if (c->n_in == 1 && !mean) {
    evtc_attr shape = evtc_attr_ints("shape", acc ? acc->type.rank : 0, acc ? acc->type.shape : NULL);
    return evtc_onnx_out(c, 0, acc ? evtc_node_add(c->g, EVTC_OP_RESHAPE, &acc, 1, &shape, 1, evtc_onnx_out_name(c, 0))
                                   : NULL);
  }
  for (int i = 1; i < c->n_in; i++)
    acc = binary_named(c, op, acc, evtc_onnx_in(c, i), i == c->n_in - 1 && !mean ? evtc_onnx_out_name(c, 0) : NULL);
  if (mean && acc) acc = binary_named(c, EVTC_OP_DIV, acc, scalar_like(c, acc, c->n_in), evtc_onnx_out_name(c, 0));
  return evtc_onnx_out(c, 0, acc);
}

static bool map_where(evtc_onnx_ctx *c) {
  evtc_node *in[3] = {evtc_onnx_in(c, 0), evtc_onnx_in(c, 1), evtc_onnx_in(c, 2)};
  if (!in[0] || !in[1] || !in[2]) return false;
  return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_WHERE, in, 3, NULL, 0, evtc_onnx_out_name(c, 0)));
}

/* Not, And, Or, Xor on bool tensors, written with where and ne. */
static bool map_logic(evtc_onnx_ctx *c) {
  const char *t = op_type(c);
  evtc_node *a = evtc_onnx_in(c, 0);
  if (!a) return false;
  if (a->type.dtype != EVTC_BOOL) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "input 0 must be bool");
  const char *name = evtc_onnx_out_name(c, 0);
  evtc_node *f = evtc_scalar(c->g, EVTC_BOOL, 0), *tr = evtc_scalar(c->g, EVTC_BOOL, 1);
  if (strcmp(t, "Not") == 0) {
    evtc_node *in[3] = {a, f, tr};
    return evtc_onnx_out(c, 0, evtc_node_add(c->g, EVTC_OP_WHERE, in, 3, NULL, 0, name));
  }
  evtc_node *b = evtc_onnx_in(c, 1);
  if (strcmp(t, "Xor") == 0) return evtc_onnx_out(c, 0, binary_named(c, EVTC_OP_NE, a, b, name));
  evtc_node *in[3] = {a, b, f};                        /* And: a ? b : false */
  if (strcmp(t, "Or") == 0) {                          /* Or: a ? true : b */
    in[1] = tr;
    in[2] = b;
  }
  return evtc_onnx_out(c, 0, b ? evtc_node_add(c->g, EVTC_OP_WHERE, in, 3, NULL, 0, name) : NULL);
}

static bool map_cast(evtc_onnx_ctx *c) {
  evtc_dtype dt;
  if (strcmp(op_type(c), "CastLike") == 0) {
    dt = evtc_onnx_type(c, 1)->dtype;
  } else {
    int64_t to = evtc_onnx_attr_int(c, "to", -1);
    if (!evtc_onnx_dtype((int32_t)to, &dt))
      return evtc_onnx_unsupported(c, "cast to ONNX data type %lld, which evtc does not support", (long long)to);
  }
  return evtc_onnx_out(c, 0, cast_to(c, evtc_onnx_in(c, 0), dt, evtc_onnx_out_name(c, 0)));
}

/* Reshape without a name (rank <= 6 checked by the builder). */
static evtc_node *reshape(evtc_onnx_ctx *c, evtc_node *x, int rank, const int64_t *shape, const char *name) {
  if (!x) return NULL;
  evtc_attr a = evtc_attr_ints("shape", rank, shape);
  return evtc_node_add(c->g, EVTC_OP_RESHAPE, &x, 1, &a, 1, name);
}

/* MatMul with NumPy semantics: 1-D operands are promoted and the added dim removed. */
static bool map_matmul(evtc_onnx_ctx *c) {
  evtc_node *a = evtc_onnx_in(c, 0), *b = evtc_onnx_in(c, 1);
  if (!a || !b) return false;
  int ra = a->type.rank, rb = b->type.rank;
  if (ra == 0 || rb == 0) return evtc_onnx_fail(c, EVTC_ERR_TYPE, "MatMul operands must have rank >= 1");
  int64_t sh[EVTC_MAX_RANK];
  if (ra == 1) a = reshape(c, a, 2, (int64_t[]){1, a->type.shape[0]}, NULL);
  if (rb == 1) b = reshape(c, b, 2, (int64_t[]){b->type.shape[0], 1}, NULL);
  if (!a || !b) return false;
  bool plain = a->type.rank == 2 && b->type.rank == 2, squeeze = ra == 1 || rb == 1;
  evtc_node *in[2] = {a, b};
  evtc_node *y = evtc_node_add(c->g, plain ? EVTC_OP_MATMUL : EVTC_OP_BATCH_MATMUL, in, 2, NULL, 0,
                               squeeze ? NULL : evtc_onnx_out_name(c, 0));
  if (!y || !squeeze) return evtc_onnx_out(c, 0, y);
  int r = 0;
  for (int d = 0; d < y->type.rank; d++) {
    if ((ra == 1 && d == y->type.rank - 2) || (rb == 1 && d == y->type.rank - 1)) continue;
    sh[r++] = y->type.shape[d];
  }
  return evtc_onnx_out(c, 0, reshape(c, y, r, sh, evtc_onnx_out_name(c, 0)));
}

/* Gemm: alpha * op(A) op(B) + beta * C. */
static bool map_gemm(evtc_onnx_ctx *c) {
  evtc_node *in[2] = {evtc_onnx_in(c, 0), evtc_onnx_in(c, 1)};
  if (!in[0] || !in[1]) return false;
  double alpha = evtc_onnx_attr_float(c, "alpha", 1.0), beta = evtc_onnx_attr_float(c, "beta", 1.0);
  evtc_attr t[2] = {evtc_attr_int("trans_a", evtc_onnx_attr_int(c, "transA", 0) != 0),
                    evtc_attr_int("trans_b", evtc_onnx_attr_int(c, "transB", 0) != 0)};
  bool bias = evtc_onnx_has(c, 2) && beta != 0;
  const char *name = evtc_onnx_out_name(c, 0);
  evtc_node *y = evtc_node_add(c->g, EVTC_OP_MATMUL, in, 2, t, 2, !bias && alpha == 1 ? name : NULL);
  if (y && alpha != 1) y = binary_named(c, EVTC_OP_MUL, y, scalar_like(c, y, alpha), bias ? NULL : name);
  if (y && bias) {
    evtc_node *cc = evtc_onnx_in(c, 2);
    if (cc && beta != 1) cc = binary_named(c, EVTC_OP_MUL, cc, scalar_like(c, cc, beta), NULL);
    y = binary_named(c, EVTC_OP_ADD, y, cc, name);
  }
  return evtc_onnx_out(c, 0, y);
}

/* Clip(x, min, max): inputs from opset 11, attributes before. */
static bool map_clip(evtc_onnx_ctx *c) {
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!x) return false;
  evtc_node *lo = NULL, *hi = NULL;
  if (c->opset >= 11) {
    if (evtc_onnx_has(c, 1) && !(lo = evtc_onnx_in(c, 1))) return false;
    if (evtc_onnx_has(c, 2) && !(hi = evtc_onnx_in(c, 2))) return false;
  } else {
    lo = scalar_like(c, x, evtc_onnx_attr_float(c, "min", -INFINITY));
    hi = scalar_like(c, x, evtc_onnx_attr_float(c, "max", INFINITY));
  }
  const char *name = evtc_onnx_out_name(c, 0);
  evtc_node *y = x;
  if (lo) y = binary_named(c, EVTC_OP_MAX, y, lo, hi ? NULL : name);
  if (hi) y = binary_named(c, EVTC_OP_MIN, y, hi, name);
  if (y == x) y = reshape(c, x, x->type.rank, x->type.shape, name);
  return evtc_onnx_out(c, 0, y);
}

/* Activations written with primitives; each ends in a node named after the output. */
static bool map_activation(evtc_onnx_ctx *c) {
  const char *t = op_type(c), *name = evtc_onnx_out_name(c, 0);
  evtc_node *x = evtc_onnx_in(c, 0);
  if (!x) return false;
  evtc_graph *g = c->g;
  evtc_node *zero = scalar_like(c, x, 0), *one = scalar_like(c, x, 1), *y;
  if (strcmp(t, "LeakyRelu") == 0 || strcmp(t, "PRelu") == 0) {          /* x >= 0 ? x : a x */
    evtc_node *a = t[0] == 'L' ? scalar_like(c, x, evtc_onnx_attr_float(c, "alpha", 0.01)) : evtc_onnx_in(c, 1);
    if (a && t[0] == 'P' && c->opset < 7 && a->type.rank == 1 && x->type.rank > 2 &&
        a->type.shape[0] == x->type.shape[1]) {          /* PRelu-6: one slope per channel */
      int64_t shape[EVTC_MAX_RANK] = {a->type.shape[0], 1, 1, 1, 1, 1};
      evtc_attr at = evtc_attr_ints("shape", x->type.rank - 1, shape);
      a = evtc_node_add(g, EVTC_OP_RESHAPE, &a, 1, &at, 1, NULL);
    }
    evtc_node *in[3] = {binary_named(c, EVTC_OP_GE, x, zero, NULL), x, binary_named(c, EVTC_OP_MUL, x, a, NULL)};
    y = evtc_node_add(g, EVTC_OP_WHERE, in, 3, NULL, 0, name);
  } else if (strcmp(t, "Elu") == 0 || strcmp(t, "Selu") == 0 || strcmp(t, "Celu") == 0) {
    bool selu = t[0] == 'S', celu = t[0] == 'C';
    double alpha = evtc_onnx_attr_float(c, "alpha", selu ? 1.67326319217681884765625 : 1.0);
    double gamma = selu ? evtc_onnx_attr_float(c, "gamma", 1.05070102214813232421875) : 1.0;
    evtc_node *xs = celu ? binary_named(c, EVTC_OP_DIV, x, scalar_like(c, x, alpha), NULL) : x;
    evtc_node *neg = binary_named(c, EVTC_OP_MUL, scalar_like(c, x, alpha),
                                  binary_named(c, EVTC_OP_SUB, evtc_unary(g, EVTC_OP_EXP, xs), one, NULL), NULL);
    evtc_node *in[3] = {binary_named(c, EVTC_OP_GT, x, zero, NULL), x, neg};
    y = evtc_node_add(g, EVTC_OP_WHERE, in, 3, NULL, 0, selu ? NULL : name);
    if (selu) y = binary_named(c, EVTC_OP_MUL, y, scalar_like(c, x, gamma), name);
  } else if (strcmp(t, "HardSigmoid") == 0 || strcmp(t, "HardSwish") == 0) {   /* max(0, min(1, a x + b)) */
    bool swish = strcmp(t, "HardSwish") == 0;
    double alpha = swish ? 1.0 / 6 : evtc_onnx_attr_float(c, "alpha", 0.2);
    double beta = swish ? 0.5 : evtc_onnx_attr_float(c, "beta", 0.5);
    evtc_node *l = binary_named(c, EVTC_OP_ADD, binary_named(c, EVTC_OP_MUL, x, scalar_like(c, x, alpha), NULL),
                                scalar_like(c, x, beta), NULL);
    y = binary_named(c, EVTC_OP_MAX, binary_named(c, EVTC_OP_MIN, l, one, NULL), zero, swish ? NULL : name);
    if (swish) y = binary_named(c, EVTC_OP_MUL, x, y, name);
  } else if (strcmp(t, "Softplus") == 0) {                                     /* log(exp(x) + 1) */
    y = evtc_node_add(g, EVTC_OP_LOG, (evtc_node *[]){binary_named(c, EVTC_OP_ADD, evtc_unary(g, EVTC_OP_EXP, x), one,
                                                                   NULL)}, 1, NULL, 0, name);
  } else if (strcmp(t, "Softsign") == 0) {                                     /* x / (1 + |x|) */
    y = binary_named(c, EVTC_OP_DIV, x, binary_named(c, EVTC_OP_ADD, one, evtc_unary(g, EVTC_OP_ABS, x), NULL), name);
  } else {                                                                     /* ThresholdedRelu */
    evtc_node *in[3] = {binary_named(c, EVTC_OP_GT, x, scalar_like(c, x, evtc_onnx_attr_float(c, "alpha", 1.0)), NULL),
                        x, zero};
    y = evtc_node_add(g, EVTC_OP_WHERE, in, 3, NULL, 0, name);
  }
  return evtc_onnx_out(c, 0, y);
}

const evtc_onnx_op evtc_onnx_ops_math[] = {
    {"Neg", map_unary},         {"Abs", map_unary},           {"Sign", map_unary},
    {"Exp", map_unary},         {"Log", map_unary},           {"Sqrt", map_unary},
    {"Reciprocal", map_unary},  {"Tanh", map_unary},          {"Sigmoid", map_unary},
    {"Relu", map_unary},        {"Erf", map_unary},           {"Sin", map_unary},
    {"Cos", map_unary},         {"Add", map_binary},          {"Sub", map_binary},
    {"Mul", map_binary},        {"Div", map_binary},          {"Equal", map_binary},
    {"Less", map_binary},       {"LessOrEqual", map_binary},  {"Greater", map_binary},
    {"GreaterOrEqual", map_binary}, {"Pow", map_pow},         {"Max", map_variadic},
    {"Min", map_variadic},      {"Sum", map_variadic},        {"Mean", map_variadic},
    {"Where", map_where},       {"Not", map_logic},           {"And", map_logic},
    {"Or", map_logic},          {"Xor", map_logic},           {"Cast", map_cast},
    {"CastLike", map_cast},     {"MatMul", map_matmul},       {"Gemm", map_gemm},
    {"Clip", map_clip},         {"LeakyRelu", map_activation}, {"PRelu", map_activation},
    {"Elu", map_activation},    {"Selu", map_activation},     {"Celu", map_activation},
    {"HardSigmoid", map_activation}, {"HardSwish", map_activation}, {"Softplus", map_activation},
    {"Softsign", map_activation}, {"ThresholdedRelu", map_activation},
    {NULL, NULL},
};
