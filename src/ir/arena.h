/* arena.h -- bump allocation for everything a graph owns.
 *
 * An arena hands out memory from a chain of blocks and frees it all at once
 * (evtc_arena_free) or keeps the blocks for reuse (evtc_arena_reset).  Out
 * of memory is treated as fatal: allocation never returns NULL.
 */
#ifndef EVTC_ARENA_H
#define EVTC_ARENA_H

#include <stddef.h>

typedef struct evtc_arena evtc_arena;

evtc_arena *evtc_arena_new(void);
void evtc_arena_free(evtc_arena *a);
/* Forgets every allocation but keeps the first block. */
void evtc_arena_reset(evtc_arena *a);
/* Zeroed memory of n bytes, aligned to 16. */
void *evtc_arena_alloc(evtc_arena *a, size_t n);
/* A copy of s (len bytes, NUL added). */
char *evtc_arena_strndup(evtc_arena *a, const char *s, size_t len);
char *evtc_arena_strdup(evtc_arena *a, const char *s);
void *evtc_arena_memdup(evtc_arena *a, const void *p, size_t n);
/* Bytes handed out since creation or the last reset. */
size_t evtc_arena_used(const evtc_arena *a);

#endif
