/* philox.h -- the Philox4x32-10 counter-based random number generator.
 *
 * Philox (Salmon et al., SC'11; Random123) maps a 128-bit counter and a
 * 64-bit key to 128 random bits with no state, so element i of a dropout
 * mask can be drawn independently by any thread or kernel: the interpreter
 * and generated kernels must agree bit for bit.
 */
#ifndef EVTC_PHILOX_H
#define EVTC_PHILOX_H

#include <stdint.h>

/* Ten rounds of Philox4x32 (multipliers 0xD2511F53, 0xCD9E8D57; Weyl key
 * increments 0x9E3779B9, 0xBB67AE85) on ctr under key, into out. */
void evtc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* A uniform value in [0, 1) with 24 random bits: one Philox block serves
 * four consecutive indices (as in cuRAND and PyTorch), counter = {b lo,
 * b hi, offset lo, offset hi} with b = index / 4, key = {seed lo, seed hi},
 * u = (out[index % 4] >> 8) * 2^-24.  Dropout keeps element i at step s
 * iff evtc_philox_uniform(seed, s, i) >= p. */
double evtc_philox_uniform(uint64_t seed, uint64_t offset, uint64_t index);

#endif
