/* interp_elementwise.c -- unary math, cast, broadcasting binary ops and
 * comparisons, and where.
 *
 * Each kernel switches on the op once and then runs a tight loop (over the
 * whole tensor for unary ops, over output rows for broadcasting ones), so
 * there is no per-element dispatch.
 */
#include <math.h>

#include "runtime/interp_kernels.h"

#define SQRT1_2 0.70710678118654752440   /* 1/sqrt(2) */
#define SQRT_2_OVER_PI 0.79788456080286535588

static double sigmoid(double x) {
  /* never exponentiates a large positive number */
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

static double sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }  /* +-0 and NaN kept */

/* Applies EXPR (in x) to every element: a loop per op, not a switch per element. */
#define UNARY(EXPR)                                     \
  for (int64_t i = 0; i < n; i++) {                     \
    double x = a[i];                                    \
    out[i] = (EXPR);                                    \
  }                                                     \
  break

evtc_status evtc_kernel_unary(const evtc_kernel_args *k) {
  const double *a = k->in[0];
  double *out = k->out;
  int64_t n = evtc_type_numel(&k->node->type);
  switch (k->node->op) {
    case EVTC_OP_NEG: UNARY(-x);
    case EVTC_OP_ABS: UNARY(fabs(x));
    case EVTC_OP_SIGN: UNARY(sign(x));
    case EVTC_OP_EXP: UNARY(exp(x));
    case EVTC_OP_LOG: UNARY(log(x));
    case EVTC_OP_SQRT: UNARY(sqrt(x));
    case EVTC_OP_RSQRT: UNARY(1.0 / sqrt(x));
    case EVTC_OP_RECIPROCAL: UNARY(1.0 / x);
    case EVTC_OP_TANH: UNARY(tanh(x));
    case EVTC_OP_SIGMOID: UNARY(sigmoid(x));
    case EVTC_OP_RELU: UNARY(x > 0 ? x : 0.0);
    case EVTC_OP_GELU: UNARY(0.5 * x * (1.0 + erf(x * SQRT1_2)));
    case EVTC_OP_GELU_TANH: UNARY(0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))));
    case EVTC_OP_ERF: UNARY(erf(x));
    case EVTC_OP_SIN: UNARY(sin(x));
    case EVTC_OP_COS: UNARY(cos(x));
    case EVTC_OP_CAST: UNARY(x);        /* the driver rounds to the target dtype */
    default: EVTC_ASSERT(!"not a unary op");
  }
  return EVTC_OK;
}

/* NumPy maximum/minimum: a NaN on either side wins. */
static double max_nan(double x, double y) { return (x != x || x > y) ? x : (y != y || y > x) ? y : x; }
static double min_nan(double x, double y) { return (x != x || x < y) ? x : (y != y || y < x) ? y : x; }

#define BINARY(EXPR)                                    \
  for (int64_t i = 0; i < n; i++) {                     \
    double x = a[i * sa], y = b[i * sb];                \
    out[i] = (EXPR);                                    \
  }                                                     \
  break

/* One output row of n elements of a binary op; a, b step by sa, sb. */
static void binary_row(evtc_op op, const double *a, int64_t sa, const double *b, int64_t sb, double *out,
                       int64_t n, bool int_div) {
  switch (op) {
    case EVTC_OP_ADD: BINARY(x + y);
    case EVTC_OP_SUB: BINARY(x - y);
    case EVTC_OP_MUL: BINARY(x * y);
    case EVTC_OP_DIV:
      if (int_div) {
        BINARY(trunc(x / y));           /* divisors were checked to be nonzero */
      }
      BINARY(x / y);
    case EVTC_OP_POW: BINARY(pow(x, y));
    case EVTC_OP_MAX: BINARY(max_nan(x, y));
    case EVTC_OP_MIN: BINARY(min_nan(x, y));
    case EVTC_OP_EQ: BINARY(x == y);
    case EVTC_OP_NE: BINARY(x != y);
    case EVTC_OP_LT: BINARY(x < y);
    case EVTC_OP_LE: BINARY(x <= y);
    case EVTC_OP_GT: BINARY(x > y);
    case EVTC_OP_GE: BINARY(x >= y);
    default: EVTC_ASSERT(!"not a binary op");
  }
}

evtc_status evtc_kernel_binary(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  bool int_div = n->op == EVTC_OP_DIV && evtc_dtype_is_int(evtc_kernel_in_type(k, 0)->dtype);
  if (int_div) {
    int64_t nb = evtc_type_numel(evtc_kernel_in_type(k, 1));
    for (int64_t i = 0; i < nb; i++)
      if (k->in[1][i] == 0) return evtc_interp_fail(k, "integer division by zero (divisor element %lld)", (long long)i);
  }
  const evtc_type *ins[2] = {evtc_kernel_in_type(k, 0), evtc_kernel_in_type(k, 1)};
  evtc_bcast it;
  evtc_bcast_init(&it, n->type.rank, n->type.shape, 2, ins);
  for (int64_t r = 0; r < it.rows; r++, evtc_bcast_next(&it))
    binary_row(n->op, k->in[0] + it.off[0], it.inner_stride[0], k->in[1] + it.off[1], it.inner_stride[1],
               k->out + r * it.inner, it.inner, int_div);
  return EVTC_OK;
}

evtc_status evtc_kernel_where(const evtc_kernel_args *k) {
  const evtc_node *n = k->node;
  const evtc_type *ins[3] = {evtc_kernel_in_type(k, 0), evtc_kernel_in_type(k, 1), evtc_kernel_in_type(k, 2)};
  evtc_bcast it;
  evtc_bcast_init(&it, n->type.rank, n->type.shape, 3, ins);
  for (int64_t r = 0; r < it.rows; r++, evtc_bcast_next(&it)) {
    const double *c = k->in[0] + it.off[0], *a = k->in[1] + it.off[1], *b = k->in[2] + it.off[2];
    double *out = k->out + r * it.inner;
    for (int64_t i = 0; i < it.inner; i++)
      out[i] = c[i * it.inner_stride[0]] != 0 ? a[i * it.inner_stride[1]] : b[i * it.inner_stride[2]];
  }
  return EVTC_OK;
}
