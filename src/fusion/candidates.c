/* candidates.c -- candidate kernels of one component, for the ILP.
 *
 * Every connected, convex node set of the component (connected through
 * producer-consumer edges and sibling links -- nodes reading one tensor
 * over the same iteration space, fusion_internal.h; convex: no path leaves
 * it and returns) that is admissible (template.c) is a candidate, priced
 * by the cost model.  Only convex sets can be kernels, so only they are
 * generated: breadth first from the single nodes, a set S grows by one
 * neighbour u (an input, consumer or sibling of a member) to the convex
 * hull of S + u (S + u + every node on a path between them), and a hash
 * table drops sets met before.  This reaches every convex connected set T:
 * T always has a source or sink t whose removal leaves a convex connected
 * set (the first or last node, in topological order, of a leaf block of T
 * that is not its cut vertex: all its links stay inside the block, so it
 * has no producer or no consumer in T), and the hull of (T - t) + t is T.
 * Sets for which evtc_fusion_hopeless proves that no superset is
 * admissible are not grown.  After max_cand candidates (or 20 times as
 * many sets seen) enumeration stops and the set is marked truncated: the
 * ILP is then optimal over the candidates it has, which always include
 * every single node.
 */
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion_internal.h"

/* Appends set s without looking for a copy; returns its index. */
static int32_t cand_push(evtc_cand_set *cs, const int32_t *s, int n, double cost) {
  if (cs->n + 1 >= cs->cap) {
    cs->cap = cs->cap ? 2 * cs->cap : 256;
    cs->start = realloc(cs->start, sizeof(int32_t) * (size_t)(cs->cap + 1));
    cs->cost = realloc(cs->cost, sizeof(double) * (size_t)cs->cap);
    EVTC_ASSERT(cs->start && cs->cost);
    if (cs->n == 0) cs->start[0] = 0;
  }
  int64_t at = cs->start[cs->n];
  if (at + n > cs->nodes_cap) {
    cs->nodes_cap = 2 * (at + n) + 1024;
    cs->nodes = realloc(cs->nodes, sizeof(int32_t) * (size_t)cs->nodes_cap);
    EVTC_ASSERT(cs->nodes != NULL);
  }
  memcpy(cs->nodes + at, s, sizeof(int32_t) * (size_t)n);
  cs->cost[cs->n] = cost;
  cs->start[cs->n + 1] = (int32_t)(at + n);
  return cs->n++;
}

int32_t evtc_cand_add(evtc_cand_set *cs, const int32_t *s, int n, double cost) {
  for (int32_t i = 0; i < cs->n; i++)
    if (cs->start[i + 1] - cs->start[i] == n && cs->nodes[cs->start[i]] == s[0] &&
        memcmp(cs->nodes + cs->start[i], s, sizeof(int32_t) * (size_t)n) == 0)
      return i;
  return cand_push(cs, s, n, cost);
}

void evtc_cand_free(evtc_cand_set *cs) {
  free(cs->start);
  free(cs->nodes);
  free(cs->cost);
  memset(cs, 0, sizeof *cs);
}

/* Open-addressing table of set indices, keyed by the sets' contents. */
typedef struct set_table {
  int32_t *slot;          /* -1 empty */
  int64_t cap;            /* power of two */
} set_table;

static uint64_t set_hash(const int32_t *s, int n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < n; i++) h = (h ^ (uint32_t)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static bool same_set(const evtc_cand_set *cs, int32_t i, const int32_t *s, int n) {
  return cs->start[i + 1] - cs->start[i] == n && memcmp(cs->nodes + cs->start[i], s, sizeof(int32_t) * (size_t)n) == 0;
}

/* Index of set s in cs, or -1; with insert, pushes it when absent (*added). */
static int32_t table_find(set_table *t, evtc_cand_set *cs, const int32_t *s, int n, bool insert, bool *added) {
  if (insert && 2 * (int64_t)(cs->n + 1) > t->cap) {      /* grow and rehash */
    int64_t cap = t->cap ? 2 * t->cap : 1024;
    int32_t *slot = malloc(sizeof(int32_t) * (size_t)cap);
    EVTC_ASSERT(slot != NULL);
    for (int64_t i = 0; i < cap; i++) slot[i] = -1;
    for (int32_t i = 0; i < cs->n; i++) {
      int64_t h = (int64_t)(set_hash(cs->nodes + cs->start[i], cs->start[i + 1] - cs->start[i]) & (uint64_t)(cap - 1));
      while (slot[h] >= 0) h = (h + 1) & (cap - 1);
      slot[h] = i;
    }
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
  }
  *added = false;
  if (t->cap == 0) return -1;
  int64_t h = (int64_t)(set_hash(s, n) & (uint64_t)(t->cap - 1));
  for (; t->slot[h] >= 0; h = (h + 1) & (t->cap - 1))
    if (same_set(cs, t->slot[h], s, n)) return t->slot[h];
  if (!insert) return -1;
  t->slot[h] = cand_push(cs, s, n, 0);
  *added = true;
  return t->slot[h];
}

/* The convex hull of set s plus node u, sorted, into out (capacity
 * max_nodes + 1); returns its size, or -1 when it is larger than max_nodes
 * or holds a node that is not fusible. */
static int hull(evtc_fusion_ctx *c, const int32_t *s, int n, int32_t u, uint64_t *bits, int32_t *out) {
  size_t w = (size_t)c->words;
  memset(bits, 0, sizeof(uint64_t) * w);
  for (size_t i = 0; i < w; i++) {
    uint64_t d = c->desc[(size_t)u * w + i], a = c->anc[(size_t)u * w + i];
    for (int k = 0; k < n; k++) {
      d |= c->desc[(size_t)s[k] * w + i];
      a |= c->anc[(size_t)s[k] * w + i];
    }
    bits[i] = d & a;
  }
  for (int k = 0; k < n; k++) bits[s[k] >> 6] |= 1ull << (s[k] & 63);
  bits[u >> 6] |= 1ull << (u & 63);
  int m = 0;
  for (size_t i = 0; i < w; i++)
    for (uint64_t x = bits[i]; x; x &= x - 1) {
      int32_t v = (int32_t)(i * 64 + (size_t)__builtin_ctzll(x));
      if (m == c->dev->max_nodes || c->cls[v] != EVTC_CLASS_FUSIBLE) return -1;
      out[m++] = v;
    }
  return m;
}

void evtc_fusion_enumerate(evtc_fusion_ctx *c, const int32_t *comp, int32_t m, long max_cand, evtc_cand_set *out) {
  memset(out, 0, sizeof *out);
  for (int32_t i = 0; i < m; i++) cand_push(out, comp + i, 1, evtc_fusion_cost(c, comp + i, 1, NULL, NULL, NULL));
  if (m < 2) return;
  evtc_cand_set seen = {0};
  set_table table = {0};
  bool added;
  for (int32_t i = 0; i < m; i++) table_find(&table, &seen, comp + i, 1, true, &added);
  int maxn = c->dev->max_nodes;
  uint64_t *bits = malloc(sizeof(uint64_t) * (size_t)c->words);
  int32_t *set = malloc(sizeof(int32_t) * (size_t)(maxn + 1)), *grown = malloc(sizeof(int32_t) * (size_t)(maxn + 1));
  int32_t *tried = calloc((size_t)c->n, sizeof(int32_t));
  EVTC_ASSERT(bits && set && grown && tried);
  long max_seen = 20 * max_cand;
  for (int32_t idx = 0; idx < seen.n && !out->truncated; idx++) {
    int n = seen.start[idx + 1] - seen.start[idx];
    if (n >= maxn) continue;
    memcpy(set, seen.nodes + seen.start[idx], sizeof(int32_t) * (size_t)n);
    if (n > 1 && evtc_fusion_hopeless(c, set, n)) continue;
    int32_t cur = evtc_fusion_mark(c, set, n);
    for (int k = 0; k < n && !out->truncated; k++) {
      const evtc_node *nd = c->g->nodes[set[k]];
      int32_t n_in = nd->n_inputs, n_users = c->user_start[set[k] + 1] - c->user_start[set[k]];
      int32_t n_nb = n_in + n_users + c->sib_start[set[k] + 1] - c->sib_start[set[k]];
      for (int32_t j = 0; j < n_nb && !out->truncated; j++) {
        int32_t u = j < n_in ? nd->inputs[j]->id
                    : j < n_in + n_users ? c->users[c->user_start[set[k]] + j - n_in]
                    : c->sibs[c->sib_start[set[k]] + j - n_in - n_users];
        if (c->cls[u] != EVTC_CLASS_FUSIBLE || c->stamp[u] == cur || tried[u] == idx + 1) continue;
        tried[u] = idx + 1;
        int g = hull(c, set, n, u, bits, grown);
        if (g < 0) continue;
        table_find(&table, &seen, grown, g, true, &added);
        if (!added) continue;
        double t;
        if (evtc_fusion_admissible(c, grown, g, NULL, &t)) cand_push(out, grown, g, t);
        if (out->n >= max_cand || seen.n >= max_seen) out->truncated = true;
        cur = evtc_fusion_mark(c, set, n);          /* admission marked other nodes */
      }
    }
  }
  free(bits);
  free(set);
  free(grown);
  free(tried);
  free(table.slot);
  evtc_cand_free(&seen);
}
