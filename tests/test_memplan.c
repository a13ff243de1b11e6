/* test_memplan.c -- the memory planner (runtime/memplan.h).
 *
 * On random lifetimes and sizes (empty values among them): no two values
 * live at the same kernel share a byte, offsets are 64-byte aligned, every
 * value lies within the arena, and the arena is at least the largest live
 * set (a bound no placement beats).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "runtime/memplan.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The largest sum of aligned sizes live at one kernel (an empty value takes no bytes). */
static size_t live_bound(const evtc_memplan_value *v, int n, int n_kernels) {
  size_t best = 0;
  for (int t = 0; t < n_kernels; t++) {
    size_t sum = 0;
    for (int i = 0; i < n; i++)
      if (v[i].first <= t && t <= v[i].last) sum += align64(v[i].bytes);
    if (sum > best) best = sum;
  }
  return best;
}

/* Checks the placement of v: alignment, no two values live at one kernel share a byte, within the arena. */
static void check_placement(const evtc_memplan_value *v, int n, size_t arena, const char *what) {
  for (int i = 0; i < n; i++) {
    CHECK(v[i].offset % 64 == 0, "%s: value %d at offset %zu", what, i, v[i].offset);
    CHECK(v[i].offset + v[i].bytes <= arena, "%s: value %d ends past the arena", what, i);
    for (int j = i + 1; j < n; j++) {
      bool same_time = v[i].first <= v[j].last && v[j].first <= v[i].last;
      bool same_bytes = v[i].offset < v[j].offset + v[j].bytes && v[j].offset < v[i].offset + v[i].bytes;
      CHECK(!(same_time && same_bytes), "%s: values %d and %d overlap", what, i, j);
    }
  }
}

int main(void) {
  check_rng = 0x3E3B1A9ull;
  for (int trial = 0; trial < 200; trial++) {
    int n = 1 + (int)(check_urand() * 60), nk = 1 + (int)(check_urand() * 30);
    evtc_memplan_value *v = calloc((size_t)n, sizeof *v);
    for (int i = 0; i < n; i++) {
      v[i].first = (int)(check_urand() * nk);
      v[i].last = v[i].first + (int)(check_urand() * (nk - v[i].first));
      v[i].bytes = check_urand() < 0.1 ? 0 : (size_t)(check_urand() * (check_urand() < 0.2 ? 1e7 : 1e4));
    }
    char what[32];
    snprintf(what, sizeof what, "trial %d", trial);
    size_t arena = evtc_memplan(v, n, nk);
    check_placement(v, n, arena, what);
    CHECK(arena >= live_bound(v, n, nk), "%s: arena below the live bound", what);
    free(v);
  }
  return check_summary();
}
