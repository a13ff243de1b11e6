/* precision.c -- float64 -> dtype rounding (see precision.h).
 *
 * f16 and bf16 are rounded arithmetically rather than by bit tricks: the
 * spacing of representable values around |x| is a power of two (fixed below
 * the smallest normal, which gives the subnormals), so x / spacing rounded
 * to the nearest even integer, times the spacing, is the answer; every
 * scaling is by a power of two and therefore exact.
 */
#include "runtime/precision.h"

#include <math.h>

/* x rounded to a binary format with `mant` explicit mantissa bits, smallest
 * normal exponent `emin` and largest finite value `max`. */
static double round_binary(double x, int mant, int emin, double max) {
  if (!isfinite(x) || x == 0.0) return x;
  double a = fabs(x);
  int e;
  frexp(a, &e);              /* a = f * 2^e, f in [0.5, 1): floor(log2 a) = e - 1 */
  int ex = e - 1 < emin ? emin : e - 1;
  int q = ex - mant;         /* exponent of the spacing at a */
  double r = ldexp(nearbyint(ldexp(a, -q)), q);  /* default mode: ties to even */
  if (r > max) r = INFINITY;
  return copysign(r, x);
}

double evtc_round_to(evtc_dtype t, double x) {
  switch (t) {
    case EVTC_F64: return x;
    case EVTC_F32: return (double)(float)x;
    case EVTC_F16: return round_binary(x, 10, -14, 65504.0);
    case EVTC_BF16: return round_binary(x, 7, -126, ldexp(255.0, 120));
    case EVTC_I64:
    case EVTC_I32: return trunc(x);
    case EVTC_BOOL: return x != 0.0 ? 1.0 : 0.0;
    case EVTC_DTYPE_COUNT: break;
  }
  EVTC_ASSERT(!"bad dtype");
  return x;
}
