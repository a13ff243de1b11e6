/* precision.h -- rounding float64 values to the precision of a dtype.
 *
 * The reference interpreter computes every op in float64 and then rounds
 * each output element to its node's dtype, so that an f16 or bf16 graph
 * sees exactly the values a real f16/bf16 tensor could hold.
 */
#ifndef EVTC_PRECISION_H
#define EVTC_PRECISION_H

#include "ir/ir.h"

/* x rounded to the nearest value of dtype t:
 *   f64: unchanged; f32: the float cast (round to nearest even);
 *   f16, bf16: round to nearest, ties to even, with subnormals, overflow to
 *   +-inf, NaN kept; i64, i32: truncated toward zero; bool: 1 if x != 0. */
double evtc_round_to(evtc_dtype t, double x);

#endif
