/* elements.c -- little-endian element encoding for every evtc dtype.
 *
 * Values go through fixed-width unsigned integers assembled byte by byte,
 * so the output is the same on any host byte order.  f16 and bf16 are
 * rounded from double directly (one rounding, nearest even).
 */
#include "runtime/elements.h"

#include <math.h>
#include <string.h>

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

double evtc_f16_to_double(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v;
  if (exp == 0) v = ldexp(frac, -24);                         /* zero or subnormal */
  else if (exp == 31) v = frac ? NAN : INFINITY;
  else v = ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}

/* Rounds |x| to a format with `mant` explicit mantissa bits, exponent bias
 * `bias` and `ebits` exponent bits; returns the bit pattern without sign. */
static uint32_t round_small_float(double ax, int mant, int ebits, int bias) {
  uint32_t exp_max = (1u << ebits) - 1;
  if (isnan(ax)) return (exp_max << mant) | (1u << (mant - 1));
  if (isinf(ax)) return exp_max << mant;
  int e;
  frexp(ax, &e);                       /* ax = f * 2^e, f in [0.5, 1) */
  int min_e = 1 - bias;                /* exponent of the smallest normal, as 2^min_e */
  int unbiased = e - 1;
  if (ax == 0.0) return 0;
  /* quantum: 2^(unbiased - mant) for normals, 2^(min_e - mant) for subnormals */
  int q = (unbiased < min_e ? min_e : unbiased) - mant;
  double scaled = ldexp(ax, -q);       /* integer significand, exact in double for our sizes */
  double r = nearbyint(scaled);        /* default rounding mode: nearest even */
  uint64_t sig = (uint64_t)r;
  int qexp = q + mant;                 /* exponent of the leading bit position */
  if (sig >> (mant + 1)) {             /* rounding carried into a new binade */
    sig >>= 1;
    qexp++;
  }
  if (sig < (1ull << mant)) return (uint32_t)sig;             /* subnormal (or zero) */
  int biased = qexp + bias;
  if (biased >= (int)exp_max) return exp_max << mant;        /* overflow: infinity */
  return ((uint32_t)biased << mant) | (uint32_t)(sig & ((1ull << mant) - 1));
}

uint16_t evtc_double_to_f16(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  return sign | (uint16_t)round_small_float(fabs(x), 10, 5, 15);
}

double evtc_bf16_to_double(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t evtc_double_to_bf16(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  return sign | (uint16_t)round_small_float(fabs(x), 7, 8, 127);
}

/* double -> integer of `bits` bits: truncation toward zero, saturating. */
static int64_t to_int(double x, int bits) {
  double hi = ldexp(1.0, bits - 1);
  if (isnan(x)) return 0;
  if (x >= hi) return bits == 64 ? INT64_MAX : (int64_t)hi - 1;
  if (x < -hi) return bits == 64 ? INT64_MIN : -(int64_t)hi;
  return (int64_t)x;
}

void evtc_elements_encode(evtc_dtype t, const double *src, int64_t n, unsigned char *dst) {
  int size = (int)evtc_dtype_size(t);
  for (int64_t i = 0; i < n; i++, dst += size) {
    double x = src[i];
    uint64_t bits = 0;
    switch (t) {
      case EVTC_F64: memcpy(&bits, &x, 8); break;
      case EVTC_F32: {
        float f = (float)x;
        uint32_t b;
        memcpy(&b, &f, 4);
        bits = b;
        break;
      }
      case EVTC_F16: bits = evtc_double_to_f16(x); break;
      case EVTC_BF16: bits = evtc_double_to_bf16(x); break;
      case EVTC_I64: bits = (uint64_t)to_int(x, 64); break;
      case EVTC_I32: bits = (uint32_t)(int32_t)to_int(x, 32); break;
      case EVTC_BOOL: bits = x != 0.0; break;
      case EVTC_DTYPE_COUNT: EVTC_ASSERT(!"bad dtype");
    }
    put_le(dst, bits, size);
  }
}

void evtc_elements_decode(evtc_dtype t, const unsigned char *src, int64_t n, double *dst) {
  int size = (int)evtc_dtype_size(t);
  for (int64_t i = 0; i < n; i++, src += size) {
    uint64_t bits = get_le(src, size);
    switch (t) {
      case EVTC_F64: memcpy(&dst[i], &bits, 8); break;
      case EVTC_F32: {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, 4);
        dst[i] = f;
        break;
      }
      case EVTC_F16: dst[i] = evtc_f16_to_double((uint16_t)bits); break;
      case EVTC_BF16: dst[i] = evtc_bf16_to_double((uint16_t)bits); break;
      case EVTC_I64: dst[i] = (double)(int64_t)bits; break;
      case EVTC_I32: dst[i] = (double)(int32_t)(uint32_t)bits; break;
      case EVTC_BOOL: dst[i] = bits != 0; break;
      case EVTC_DTYPE_COUNT: EVTC_ASSERT(!"bad dtype");
    }
  }
}
