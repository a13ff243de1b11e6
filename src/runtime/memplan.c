/* memplan.c -- first-fit placement of values by liveness (memplan.h).
 *
 * The live set is kept as an array of value indices sorted by offset; a
 * new value goes into the first gap between live values that holds it, or
 * after the last one.  Quadratic in the number of values, which is a few
 * hundred for a training step.
 */
#include "runtime/memplan.h"

#include <stdlib.h>
#include <string.h>

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t evtc_memplan(evtc_memplan_value *v, int n, int n_kernels) {
  int *live = malloc(sizeof(int) * ((size_t)n + 1));
  int n_live = 0;
  size_t peak = 0;
  for (int t = 0; t < n_kernels; t++) {
    for (int i = 0; i < n; i++) {
      if (v[i].first != t) continue;
      size_t need = align64(v[i].bytes ? v[i].bytes : 1), at = 0;
      int pos = 0;
      for (; pos < n_live; pos++) {
        const evtc_memplan_value *o = &v[live[pos]];
        if (o->offset >= at + need) break;
        size_t end = align64(o->offset + o->bytes);
        if (end > at) at = end;
      }
      v[i].offset = at;
      memmove(live + pos + 1, live + pos, sizeof(int) * (size_t)(n_live - pos));
      live[pos] = i;
      n_live++;
      if (at + need > peak) peak = at + need;
    }
    for (int pos = 0; pos < n_live;) {
      if (v[live[pos]].last <= t) {
        memmove(live + pos, live + pos + 1, sizeof(int) * (size_t)(n_live - pos - 1));
        n_live--;
      } else {
        pos++;
      }
    }
  }
  free(live);
  return peak;
}
