/* elements.h -- tensor elements as little-endian bytes, and back.
 *
 * Files evtc writes and reads (.npy, safetensors) store elements in their
 * own dtype, little-endian; in memory evtc keeps every value as a double.
 * These functions convert between the two for every evtc dtype (f16 and
 * bf16 by bit manipulation, round-to-nearest-even), independent of the
 * host's byte order.
 */
#ifndef EVTC_ELEMENTS_H
#define EVTC_ELEMENTS_H

#include <stdint.h>

#include "ir/ir.h"

/* IEEE half and bfloat16 bit patterns <-> double (round to nearest even,
 * overflow to infinity, NaN kept). */
double evtc_f16_to_double(uint16_t h);
uint16_t evtc_double_to_f16(double x);
double evtc_bf16_to_double(uint16_t h);
uint16_t evtc_double_to_bf16(double x);

/* Writes n values of `src` to `dst` as dtype t, little-endian
 * (n * evtc_dtype_size(t) bytes).  Integers are truncated toward zero and
 * saturate at the type's range (NaN gives 0); bool is value != 0. */
void evtc_elements_encode(evtc_dtype t, const double *src, int64_t n, unsigned char *dst);
/* Reads n little-endian values of dtype t from `src` into doubles. */
void evtc_elements_decode(evtc_dtype t, const unsigned char *src, int64_t n, double *dst);

#endif
