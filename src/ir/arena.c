/* arena.c -- a chain of blocks with bump allocation (see arena.h). */
#include "ir/arena.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct block {
  struct block *next;
  size_t cap, used;
  _Alignas(16) unsigned char data[];
} block;

struct evtc_arena {
  block *head;     /* current block; older ones follow through next */
  size_t used;     /* bytes handed out */
};

enum { BLOCK_MIN = 64 * 1024 };

static block *block_new(size_t cap) {
  block *b = malloc(sizeof *b + cap);
  if (!b) {
    fprintf(stderr, "evtc: out of memory (arena block of %zu bytes)\n", cap);
    abort();
  }
  b->next = NULL;
  b->cap = cap;
  b->used = 0;
  return b;
}

evtc_arena *evtc_arena_new(void) {
  evtc_arena *a = calloc(1, sizeof *a);
  if (!a) abort();
  a->head = block_new(BLOCK_MIN);
  return a;
}

void evtc_arena_free(evtc_arena *a) {
  if (!a) return;
  for (block *b = a->head; b;) {
    block *n = b->next;
    free(b);
    b = n;
  }
  free(a);
}

void evtc_arena_reset(evtc_arena *a) {
  block *b = a->head;
  while (b->next) {      /* keep only the oldest block */
    block *n = b->next;
    free(b);
    b = n;
  }
  b->used = 0;
  a->head = b;
  a->used = 0;
}

void *evtc_arena_alloc(evtc_arena *a, size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  if (need == 0) need = 16;
  block *b = a->head;
  if (b->used + need > b->cap) {
    b = block_new(need > BLOCK_MIN ? need : BLOCK_MIN);
    b->next = a->head;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += need;
  a->used += need;
  memset(p, 0, n);
  return p;
}

char *evtc_arena_strndup(evtc_arena *a, const char *s, size_t len) {
  char *p = evtc_arena_alloc(a, len + 1);
  memcpy(p, s, len);
  p[len] = 0;
  return p;
}

char *evtc_arena_strdup(evtc_arena *a, const char *s) { return evtc_arena_strndup(a, s, strlen(s)); }

void *evtc_arena_memdup(evtc_arena *a, const void *p, size_t n) {
  void *q = evtc_arena_alloc(a, n);
  if (n) memcpy(q, p, n);
  return q;
}

size_t evtc_arena_used(const evtc_arena *a) { return a->used; }
