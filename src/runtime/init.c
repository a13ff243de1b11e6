/* init.c -- deterministic PARAM/STATE initialisation (see init.h). */
#include "runtime/init.h"

#include <math.h>
#include <string.h>

#include "runtime/philox.h"
#include "runtime/precision.h"

static uint64_t name_hash64(const char *s) {
  uint64_t h = 14695981039346656037ull;   /* FNV-1a, 64 bit */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* 128 random bits for element i of the stream (seed, h). */
static void draw(uint64_t seed, uint64_t h, uint64_t i, uint32_t out[4]) {
  uint32_t ctr[4] = {(uint32_t)i, (uint32_t)(i >> 32), (uint32_t)h, (uint32_t)(h >> 32)};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  evtc_philox4x32_10(ctr, key, out);
}

/* Uniform in [0, 1) with 53 bits from two 32-bit words. */
static double unit53(uint32_t hi, uint32_t lo) {
  return (double)(((uint64_t)hi << 21) ^ (lo >> 11)) * 0x1p-53;
}

static double uniform_pm1(uint64_t seed, uint64_t h, uint64_t i) {
  uint32_t r[4];
  draw(seed, h, i, r);
  return 2.0 * unit53(r[0], r[1]) - 1.0;
}

/* Standard normal by Box-Muller from one Philox block. */
static double normal01(uint64_t seed, uint64_t h, uint64_t i) {
  uint32_t r[4];
  draw(seed, h, i, r);
  double u1 = 1.0 - unit53(r[0], r[1]);   /* (0, 1]: log is finite */
  double u2 = unit53(r[2], r[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fans(const evtc_type *t, double *fan_in, double *fan_out) {
  if (t->rank < 2) {
    *fan_in = *fan_out = (double)evtc_type_numel(t);
  } else if (t->rank == 2) {
    *fan_in = (double)t->shape[0];
    *fan_out = (double)t->shape[1];
  } else {
    double rec = 1.0;
    for (int i = 2; i < t->rank; i++) rec *= (double)t->shape[i];
    *fan_in = (double)t->shape[1] * rec;
    *fan_out = (double)t->shape[0] * rec;
  }
  if (*fan_in < 1.0) *fan_in = 1.0;     /* empty tensors: no values drawn anyway */
  if (*fan_out < 1.0) *fan_out = 1.0;
}

void evtc_init_leaf(const evtc_node *n, double *out, uint64_t seed) {
  EVTC_ASSERT(n->op == EVTC_OP_PARAM || n->op == EVTC_OP_STATE);
  const char *kind = evtc_node_str(n, "init");
  double scale = evtc_node_float(n, "scale");
  int64_t numel = evtc_type_numel(&n->type);
  uint64_t h = name_hash64(n->name);
  double fan_in, fan_out;
  fans(&n->type, &fan_in, &fan_out);
  if (strcmp(kind, "zeros") == 0 || strcmp(kind, "ones") == 0) {
    double v = kind[0] == 'z' ? 0.0 : scale;
    for (int64_t i = 0; i < numel; i++) out[i] = v;
  } else if (strcmp(kind, "uniform") == 0 || strcmp(kind, "glorot") == 0) {
    double lim = kind[0] == 'u' ? scale : scale * sqrt(6.0 / (fan_in + fan_out));
    for (int64_t i = 0; i < numel; i++) out[i] = lim * uniform_pm1(seed, h, (uint64_t)i);
  } else if (strcmp(kind, "normal") == 0 || strcmp(kind, "kaiming") == 0) {
    double sd = kind[0] == 'n' ? scale : scale * sqrt(2.0 / fan_in);
    for (int64_t i = 0; i < numel; i++) out[i] = sd * normal01(seed, h, (uint64_t)i);
  } else {
    EVTC_ASSERT(!"unknown init scheme (the verifier should have rejected it)");
  }
  for (int64_t i = 0; i < numel; i++) out[i] = evtc_round_to(n->type.dtype, out[i]);
}
