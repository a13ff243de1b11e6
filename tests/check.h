/* check.h -- the tiny assertion kit of evtc's C tests.
 *
 * CHECK(cond, fmt, ...) counts a passed or failed check and prints the
 * failing ones with file and line; check_summary() prints the closing line
 * "N passed, N failed" and returns the exit status (nonzero on failure).
 */
#ifndef EVTC_CHECK_H
#define EVTC_CHECK_H

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

static inline int check_summary(void) {
  printf("%d passed, %d failed\n", check_passed, check_failed);
  return check_failed ? 1 : 0;
}

#endif
