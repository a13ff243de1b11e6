/* hash.h -- 64-bit FNV-1a, the hash of evtc's cache keys and fingerprints
 * (CUBIN cache entries, tuned-config fingerprints, kernel-source
 * deduplication).  Not cryptographic: equal keys are still compared where
 * a collision would matter.
 */
#ifndef EVTC_HASH_H
#define EVTC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define EVTC_FNV1A_BASIS 0xcbf29ce484222325ull

/* h extended by the n bytes at p (start from EVTC_FNV1A_BASIS). */
static inline uint64_t evtc_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}

#endif
