/* check.h -- the tiny assertion kit of evtc's C tests.
 *
 * CHECK(cond, fmt, ...) counts a passed or failed check and prints the
 * failing ones with file and line; check_summary() prints the closing line
 * "N passed, N failed" and returns the exit status (nonzero on failure).
 * check_urand() is the tests' random source: xorshift64* on check_rng,
 * which a test seeds (any nonzero value) for reproducible inputs.
 */
#ifndef EVTC_CHECK_H
#define EVTC_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (cond) {                                                              \
      check_passed++;                                                        \
    } else {                                                                 \
      check_failed++;                                                        \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
    }                                                                        \
  } while (0)

static uint64_t check_rng = 0x9E3779B97F4A7C15ull;

/* A uniform double in [0, 1) from check_rng (53 random bits). */
static inline double check_urand(void) {
  check_rng ^= check_rng >> 12;
  check_rng ^= check_rng << 25;
  check_rng ^= check_rng >> 27;
  return (double)((check_rng * 2685821657736338717ull) >> 11) * 0x1.0p-53;
}

static inline int check_summary(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
