/* weights.c -- the name -> values table of weights.h: a growable array of
 * entries plus an open-addressing index on the names. */
#include <stdlib.h>
#include <string.h>

#include "frontend/weights.h"
#include "util/diag.h"

typedef struct weights_entry {
  char *name;
  double *data;
  int64_t numel;
} weights_entry;

struct evtc_weights {
  weights_entry *entries;
  int n, cap;
  int *index;        /* slot -> entry + 1 (0: empty); index_cap is a power of two */
  int index_cap;
};

static uint32_t weights_hash(const char *s) {
  uint32_t h = 2166136261u;                  /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  EVTC_ASSERT(q != NULL);
  return q;
}

evtc_weights *evtc_weights_new(void) {
  evtc_weights *w = calloc(1, sizeof *w);
  EVTC_ASSERT(w != NULL);
  return w;
}

void evtc_weights_free(evtc_weights *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) {
    free(w->entries[i].name);
    free(w->entries[i].data);
  }
  free(w->entries);
  free(w->index);
  free(w);
}

/* The index slot holding name, or the empty slot where it would go. */
static int weights_slot(const evtc_weights *w, const char *name) {
  uint32_t mask = (uint32_t)w->index_cap - 1;
  for (uint32_t i = weights_hash(name) & mask;; i = (i + 1) & mask) {
    int e = w->index[i];
    if (e == 0 || strcmp(w->entries[e - 1].name, name) == 0) return (int)i;
  }
}

static void weights_reindex(evtc_weights *w) {
  int cap = w->index_cap ? w->index_cap * 2 : 64;
  free(w->index);
  w->index = calloc((size_t)cap, sizeof *w->index);
  EVTC_ASSERT(w->index != NULL);
  w->index_cap = cap;
  for (int e = 0; e < w->n; e++) w->index[weights_slot(w, w->entries[e].name)] = e + 1;
}

void evtc_weights_add(evtc_weights *w, const char *name, const double *data, int64_t numel) {
  if ((w->n + 1) * 2 > w->index_cap) weights_reindex(w);
  int slot = weights_slot(w, name);
  double *copy = xrealloc(NULL, sizeof(double) * (size_t)numel);
  if (numel) memcpy(copy, data, sizeof(double) * (size_t)numel);
  if (w->index[slot]) {
    weights_entry *e = &w->entries[w->index[slot] - 1];
    free(e->data);
    e->data = copy;
    e->numel = numel;
    return;
  }
  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 16;
    w->entries = xrealloc(w->entries, sizeof *w->entries * (size_t)w->cap);
  }
  size_t len = strlen(name) + 1;
  w->entries[w->n] = (weights_entry){.name = memcpy(xrealloc(NULL, len), name, len), .data = copy, .numel = numel};
  w->index[slot] = ++w->n;
}

const double *evtc_weights_find(const evtc_weights *w, const char *name, int64_t *numel) {
  if (!w || w->n == 0) return NULL;
  int e = w->index[weights_slot(w, name)];
  if (!e) return NULL;
  if (numel) *numel = w->entries[e - 1].numel;
  return w->entries[e - 1].data;
}
