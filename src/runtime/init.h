/* init.h -- initial values of PARAM and STATE leaves.
 *
 * Initialisation is a pure function of (seed, node name, attributes, type):
 * the same model file and seed give the same starting parameters on every
 * machine and in every backend, and renaming one parameter does not change
 * the others.
 */
#ifndef EVTC_INIT_H
#define EVTC_INIT_H

#include <stdint.h>

#include "ir/ir.h"

/* Fills out[0..numel) for PARAM/STATE node n from its attributes, each
 * value rounded to the node's dtype.  `scale` multiplies every scheme:
 *   zeros: 0;  ones: scale;  normal: N(0, scale^2);  uniform: U(-scale, scale);
 *   glorot: U(+-scale*sqrt(6/(fan_in+fan_out)));  kaiming: N(0, (scale*sqrt(2/fan_in))^2).
 * Fans: rank 2 [in,out]: fan_in = shape[0], fan_out = shape[1]; rank >= 3
 * (conv [O,C,KH,KW]): fan_in = shape[1]*receptive, fan_out = shape[0]*receptive
 * with receptive = prod(shape[2:]); rank < 2: both = numel.
 * The random stream is Philox keyed by seed with the 64-bit FNV-1a hash of
 * the node name in the counter.  An unknown init name is an internal error
 * (the verifier rejects it first). */
void evtc_init_leaf(const evtc_node *n, double *out, uint64_t seed);

#endif
