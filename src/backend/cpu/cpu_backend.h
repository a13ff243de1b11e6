/* cpu_backend.h -- what the CPU backend shows beyond its vtable (backend.h).
 *
 * The kernel cache: where it lives and how often it was hit in this
 * process (tests check hits and misses; `evtc train` may report them).
 */
#ifndef EVTC_CPU_BACKEND_H
#define EVTC_CPU_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

typedef struct evtc_cpu_cache_stats {
  int hits, misses;         /* compiles answered from the cache / run through cc */
} evtc_cpu_cache_stats;

evtc_cpu_cache_stats evtc_cpu_cache_get_stats(void);
/* $XDG_CACHE_HOME/evtc, else $HOME/.cache/evtc, into buf; false when neither is set. */
bool evtc_cpu_cache_dir(char *buf, size_t cap);

#endif
