/* rules_elementwise.c -- gradients of the elementwise unary and binary ops.
 *
 * Unary rules multiply dy by the local derivative, written with the forward
 * input x and, where cheaper, the forward output y.  Binary rules build the
 * gradient in the (broadcast) output shape and sum it back to each input's
 * shape (evtc_vjp_set_bcast).  max/min route dy by one comparison, so a tie
 * sends the whole gradient to the first input.
 */
#include "autodiff/rules.h"

#define SQRT1_2 0.70710678118654752440      /* 1/sqrt(2) */
#define TWO_SQRTPI 1.12837916709551257390   /* 2/sqrt(pi) */
#define SQRT_2_PI 0.79788456080286535588    /* sqrt(2/pi) */

static evtc_node *un(evtc_vjp *v, evtc_op op, evtc_node *a) { return evtc_unary(v->g, op, a); }
static evtc_node *bin(evtc_vjp *v, evtc_op op, evtc_node *a, evtc_node *b) { return evtc_binary(v->g, op, a, b); }
static evtc_node *k(evtc_vjp *v, double c) { return evtc_vjp_const(v, c); }
static evtc_node *X(evtc_vjp *v, int i) { return v->n->inputs[i]; }

/* dx[i] = a * b (broadcast back to input i). */
static void out_mul(evtc_vjp *v, int i, evtc_node *a, evtc_node *b) {
  evtc_node *in[2] = {a, b};
  evtc_vjp_set_bcast(v, i, EVTC_OP_MUL, in, 2);
}

/* dx[i] = where(cond, a, b) (broadcast back to input i). */
static void out_where(evtc_vjp *v, int i, evtc_node *cond, evtc_node *a, evtc_node *b) {
  evtc_node *in[3] = {cond, a, b};
  evtc_vjp_set_bcast(v, i, EVTC_OP_WHERE, in, 3);
}

void evtc_vjp_neg(evtc_vjp *v) { evtc_vjp_set(v, 0, EVTC_OP_NEG, &v->dy, 1, NULL, 0); }

void evtc_vjp_abs(evtc_vjp *v) { out_mul(v, 0, v->dy, un(v, EVTC_OP_SIGN, X(v, 0))); }

void evtc_vjp_exp(evtc_vjp *v) { out_mul(v, 0, v->dy, v->n); }

void evtc_vjp_log(evtc_vjp *v) {
  evtc_node *in[2] = {v->dy, X(v, 0)};
  evtc_vjp_set_bcast(v, 0, EVTC_OP_DIV, in, 2);
}

/* d sqrt(x) = 1 / (2 y) */
void evtc_vjp_sqrt(evtc_vjp *v) {
  evtc_node *in[2] = {bin(v, EVTC_OP_MUL, v->dy, k(v, 0.5)), v->n};
  evtc_vjp_set_bcast(v, 0, EVTC_OP_DIV, in, 2);
}

/* d x^-1/2 = -1/2 x^-3/2 = -1/2 y / x */
void evtc_vjp_rsqrt(evtc_vjp *v) {
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_MUL, bin(v, EVTC_OP_DIV, v->n, X(v, 0)), k(v, -0.5)));
}

/* d 1/x = -y^2 */
void evtc_vjp_reciprocal(evtc_vjp *v) { out_mul(v, 0, un(v, EVTC_OP_NEG, v->dy), bin(v, EVTC_OP_MUL, v->n, v->n)); }

/* d tanh = 1 - y^2 */
void evtc_vjp_tanh(evtc_vjp *v) {
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_SUB, k(v, 1.0), bin(v, EVTC_OP_MUL, v->n, v->n)));
}

/* d sigmoid = y (1 - y) */
void evtc_vjp_sigmoid(evtc_vjp *v) {
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_MUL, v->n, bin(v, EVTC_OP_SUB, k(v, 1.0), v->n)));
}

void evtc_vjp_relu(evtc_vjp *v) {
  out_where(v, 0, bin(v, EVTC_OP_GT, X(v, 0), k(v, 0.0)), v->dy, k(v, 0.0));
}

/* d [x Phi(x)] = Phi(x) + x phi(x), Phi = (1 + erf(x/sqrt 2)) / 2, phi = exp(-x^2/2) / sqrt(2 pi) */
void evtc_vjp_gelu(evtc_vjp *v) {
  evtc_node *x = X(v, 0);
  evtc_node *cdf = bin(v, EVTC_OP_MUL, bin(v, EVTC_OP_ADD, un(v, EVTC_OP_ERF, bin(v, EVTC_OP_MUL, x, k(v, SQRT1_2))),
                                        k(v, 1.0)), k(v, 0.5));
  evtc_node *pdf = bin(v, EVTC_OP_MUL, un(v, EVTC_OP_EXP, bin(v, EVTC_OP_MUL, bin(v, EVTC_OP_MUL, x, x), k(v, -0.5))),
                       k(v, 0.5 * TWO_SQRTPI * SQRT1_2));
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_ADD, cdf, bin(v, EVTC_OP_MUL, x, pdf)));
}

/* y = x/2 (1 + t), t = tanh(u), u = c (x + a x^3):
 * dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3 a x^2) */
void evtc_vjp_gelu_tanh(evtc_vjp *v) {
  const double c = SQRT_2_PI, a = 0.044715;
  evtc_node *x = X(v, 0), *x2 = bin(v, EVTC_OP_MUL, x, x);
  evtc_node *u = bin(v, EVTC_OP_MUL, x, bin(v, EVTC_OP_ADD, bin(v, EVTC_OP_MUL, x2, k(v, c * a)), k(v, c)));
  evtc_node *t = un(v, EVTC_OP_TANH, u);
  evtc_node *du = bin(v, EVTC_OP_ADD, bin(v, EVTC_OP_MUL, x2, k(v, 3 * c * a)), k(v, c));
  evtc_node *sech2 = bin(v, EVTC_OP_SUB, k(v, 1.0), bin(v, EVTC_OP_MUL, t, t));
  evtc_node *sum = bin(v, EVTC_OP_ADD, bin(v, EVTC_OP_ADD, t, k(v, 1.0)),
                       bin(v, EVTC_OP_MUL, bin(v, EVTC_OP_MUL, x, sech2), du));
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_MUL, sum, k(v, 0.5)));
}

/* d erf = 2/sqrt(pi) exp(-x^2) */
void evtc_vjp_erf(evtc_vjp *v) {
  evtc_node *x = X(v, 0);
  out_mul(v, 0, v->dy, bin(v, EVTC_OP_MUL, un(v, EVTC_OP_EXP, un(v, EVTC_OP_NEG, bin(v, EVTC_OP_MUL, x, x))),
                           k(v, TWO_SQRTPI)));
}

void evtc_vjp_sin(evtc_vjp *v) { out_mul(v, 0, v->dy, un(v, EVTC_OP_COS, X(v, 0))); }

void evtc_vjp_cos(evtc_vjp *v) { out_mul(v, 0, un(v, EVTC_OP_NEG, v->dy), un(v, EVTC_OP_SIN, X(v, 0))); }

/* float -> float: cast the gradient back (an integer input has no gradient). */
void evtc_vjp_cast(evtc_vjp *v) {
  evtc_attr at = evtc_attr_dtype("dtype", X(v, 0)->type.dtype);
  if (v->need[0]) evtc_vjp_set(v, 0, EVTC_OP_CAST, &v->dy, 1, &at, 1);
}

void evtc_vjp_add(evtc_vjp *v) {
  if (v->need[0]) evtc_vjp_pass(v, 0, v->dy);
  if (v->need[1]) evtc_vjp_pass(v, 1, v->dy);
}

void evtc_vjp_sub(evtc_vjp *v) {
  if (v->need[0]) evtc_vjp_pass(v, 0, v->dy);
  if (v->need[1]) evtc_vjp_set_bcast(v, 1, EVTC_OP_NEG, &v->dy, 1);
}

void evtc_vjp_mul(evtc_vjp *v) {
  if (v->need[0]) out_mul(v, 0, v->dy, X(v, 1));
  if (v->need[1]) out_mul(v, 1, v->dy, X(v, 0));
}

/* y = a / b: da = dy / b, db = -(dy / b) y */
void evtc_vjp_div(evtc_vjp *v) {
  evtc_node *in[2] = {v->dy, X(v, 1)};
  if (!v->need[1]) {
    evtc_vjp_set_bcast(v, 0, EVTC_OP_DIV, in, 2);
    return;
  }
  evtc_node *q = bin(v, EVTC_OP_DIV, v->dy, X(v, 1));
  if (v->need[0]) evtc_vjp_pass(v, 0, q);
  out_mul(v, 1, q, un(v, EVTC_OP_NEG, v->n));
}

/* y = a^b: da = dy b a^(b-1), db = dy y log(a) (needs a > 0) */
void evtc_vjp_pow(evtc_vjp *v) {
  evtc_node *a = X(v, 0), *b = X(v, 1);
  if (v->need[0])
    out_mul(v, 0, v->dy, bin(v, EVTC_OP_MUL, b, bin(v, EVTC_OP_POW, a, bin(v, EVTC_OP_SUB, b, k(v, 1.0)))));
  if (v->need[1]) out_mul(v, 1, v->dy, bin(v, EVTC_OP_MUL, v->n, un(v, EVTC_OP_LOG, a)));
}

/* Routes dy to input 0 where `first` holds, else to input 1. */
static void route(evtc_vjp *v, evtc_op first) {
  evtc_node *m = bin(v, first, X(v, 0), X(v, 1)), *zero = k(v, 0.0);
  if (v->need[0]) out_where(v, 0, m, v->dy, zero);
  if (v->need[1]) out_where(v, 1, m, zero, v->dy);
}

void evtc_vjp_max(evtc_vjp *v) { route(v, EVTC_OP_GE); }

void evtc_vjp_min(evtc_vjp *v) { route(v, EVTC_OP_LE); }

/* where(c, a, b): the gradient goes to a where c holds, to b elsewhere. */
void evtc_vjp_where(evtc_vjp *v) {
  evtc_node *c = X(v, 0), *zero = k(v, 0.0);
  if (v->need[1]) out_where(v, 1, c, v->dy, zero);
  if (v->need[2]) out_where(v, 2, c, zero, v->dy);
}
