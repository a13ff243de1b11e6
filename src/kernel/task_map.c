/* task_map.c -- Hidet-style task mappings (task_map.h).
 *
 * A mapping is a list of levels, outermost first.  Level k has extent
 * P_k = prod(shape_k); a spatial level takes a digit of the worker index
 * (u_k = w / S_k % P_k, S_k the product of the spatial extents inside it),
 * a repeat level a loop variable i_k in [0, P_k).  That digit unravels
 * row-major over the level's shape, and task coordinate d is the sum over
 * the levels of digit_k[d] times the extent of dimension d of the levels
 * inside k.  The host enumeration and the emitted code compute exactly
 * this; the emitter drops factors of 1, a modulo that cannot wrap and
 * terms that are always 0, so simple mappings give the expressions one
 * would write by hand (c = lane + 32 * j).
 */
#include "kernel/task_map.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/diag.h"

static evtc_task_map one_level(evtc_tm_kind kind, int rank, const int64_t *shape) {
  EVTC_ASSERT(rank >= 1 && rank <= EVTC_TM_MAX_RANK);
  evtc_task_map m = {.rank = rank, .n_levels = 1};
  m.level[0].kind = kind;
  for (int d = 0; d < rank; d++) {
    EVTC_ASSERT(shape[d] >= 1);
    m.level[0].shape[d] = shape[d];
  }
  return m;
}

evtc_task_map evtc_tm_spatial(int rank, const int64_t *shape) { return one_level(EVTC_TM_SPATIAL, rank, shape); }
evtc_task_map evtc_tm_repeat(int rank, const int64_t *shape) { return one_level(EVTC_TM_REPEAT, rank, shape); }

evtc_task_map evtc_tm_spatial2(int64_t rows, int64_t cols) {
  int64_t s[2] = {rows, cols};
  return evtc_tm_spatial(2, s);
}

evtc_task_map evtc_tm_repeat2(int64_t rows, int64_t cols) {
  int64_t s[2] = {rows, cols};
  return evtc_tm_repeat(2, s);
}

bool evtc_tm_compose(const evtc_task_map *outer, const evtc_task_map *inner, evtc_task_map *out) {
  if (outer->rank != inner->rank || outer->n_levels + inner->n_levels > EVTC_TM_MAX_LEVELS) return false;
  evtc_task_map m = *outer;
  for (int k = 0; k < inner->n_levels; k++) m.level[m.n_levels++] = inner->level[k];
  *out = m;
  return true;
}

static int64_t level_extent(const evtc_task_map *m, int k) {
  int64_t p = 1;
  for (int d = 0; d < m->rank; d++) p *= m->level[k].shape[d];
  return p;
}

static int64_t product_of(const evtc_task_map *m, evtc_tm_kind kind) {
  int64_t p = 1;
  for (int k = 0; k < m->n_levels; k++)
    if (m->level[k].kind == kind) p *= level_extent(m, k);
  return p;
}

int64_t evtc_tm_workers(const evtc_task_map *m) { return product_of(m, EVTC_TM_SPATIAL); }
int64_t evtc_tm_tasks_per_worker(const evtc_task_map *m) { return product_of(m, EVTC_TM_REPEAT); }

void evtc_tm_task_shape(const evtc_task_map *m, int64_t *shape) {
  for (int d = 0; d < m->rank; d++) {
    shape[d] = 1;
    for (int k = 0; k < m->n_levels; k++) shape[d] *= m->level[k].shape[d];
  }
}

/* Product of the spatial extents of the levels inside level k. */
static int64_t worker_stride(const evtc_task_map *m, int k) {
  int64_t s = 1;
  for (int j = k + 1; j < m->n_levels; j++)
    if (m->level[j].kind == EVTC_TM_SPATIAL) s *= level_extent(m, j);
  return s;
}

/* Extent of dimension d of the levels inside level k. */
static int64_t inner_extent(const evtc_task_map *m, int k, int d) {
  int64_t e = 1;
  for (int j = k + 1; j < m->n_levels; j++) e *= m->level[j].shape[d];
  return e;
}

/* Product of level k's extents in the dimensions after d. */
static int64_t unravel_stride(const evtc_task_map *m, int k, int d) {
  int64_t s = 1;
  for (int e = d + 1; e < m->rank; e++) s *= m->level[k].shape[e];
  return s;
}

void evtc_tm_task(const evtc_task_map *m, int64_t w, int64_t k, int64_t *coord) {
  int64_t digit[EVTC_TM_MAX_LEVELS];
  for (int j = m->n_levels - 1; j >= 0; j--) {
    int64_t p = level_extent(m, j);
    if (m->level[j].kind == EVTC_TM_SPATIAL) {
      digit[j] = w / worker_stride(m, j) % p;
    } else {
      digit[j] = k % p;
      k /= p;
    }
  }
  for (int d = 0; d < m->rank; d++) {
    coord[d] = 0;
    for (int j = 0; j < m->n_levels; j++)
      coord[d] += digit[j] / unravel_stride(m, j, d) % m->level[j].shape[d] * inner_extent(m, j, d);
  }
}

/* Appends printf-style text to buf (cap bytes) at *len; false when it does not fit. */
static bool put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap - *len) return false;
  *len += (size_t)n;
  return true;
}

/* Whether level k's digit is below its extent without a modulo: the
 * outermost spatial level (w < workers) and every repeat level (its loop
 * bound is the extent). */
static bool digit_bounded(const evtc_task_map *m, int k) {
  if (m->level[k].kind == EVTC_TM_REPEAT) return true;
  for (int j = 0; j < k; j++)
    if (m->level[j].kind == EVTC_TM_SPATIAL && level_extent(m, j) > 1) return false;
  return true;
}

/* Appends " + " (when not first) and level k's term of coordinate d:
 * unravel(digit) * inner extent.  `digit` is the level's digit expression. */
static bool put_term(const evtc_task_map *m, int k, int d, const char *digit, char *buf, size_t *len, bool *first) {
  int64_t s = m->level[k].shape[d];
  if (s == 1) return true;
  int64_t div = unravel_stride(m, k, d), mul = inner_extent(m, k, d);
  bool wraps = level_extent(m, k) / div != s;     /* the digit is below the level's extent: no wrap in its first dim */
  if (!put(buf, EVTC_TM_EXPR, len, "%s", *first ? "" : " + ")) return false;
  *first = false;
  if (div == 1 && !wraps) return put(buf, EVTC_TM_EXPR, len, mul == 1 ? "%s" : "%s * %lld", digit, (long long)mul);
  char part[EVTC_TM_EXPR];
  size_t pl = 0;
  if (!put(part, sizeof part, &pl, div == 1 ? "%s" : "%s / %lld", digit, (long long)div)) return false;
  if (wraps && !put(part, sizeof part, &pl, " %% %lld", (long long)s)) return false;
  return put(buf, EVTC_TM_EXPR, len, mul == 1 ? "(%s)" : "(%s) * %lld", part, (long long)mul);
}

int evtc_tm_emit(const evtc_task_map *m, const char *worker, const char *var, bool unroll, const char *indent,
                 char *loops, size_t loops_cap, char coord[][EVTC_TM_EXPR]) {
  char digit[EVTC_TM_MAX_LEVELS][EVTC_TM_EXPR];
  size_t ll = 0;
  int opened = 0, n_levels = m->n_levels < EVTC_TM_MAX_LEVELS ? m->n_levels : EVTC_TM_MAX_LEVELS;
  if (loops_cap) loops[0] = 0;
  for (int k = 0; k < n_levels; k++) {
    int64_t p = level_extent(m, k);
    size_t dl = 0;
    digit[k][0] = 0;
    if (p == 1) continue;
    if (m->level[k].kind == EVTC_TM_REPEAT) {
      if (!put(digit[k], EVTC_TM_EXPR, &dl, "%s%d", var, opened)) return -1;
      if (unroll && !put(loops, loops_cap, &ll, "%s#pragma unroll\n", indent)) return -1;
      if (!put(loops, loops_cap, &ll, "%sfor (int64_t %s%d = 0; %s%d < %lld; %s%d++) {\n", indent, var, opened, var,
               opened, (long long)p, var, opened))
        return -1;
      opened++;
    } else {
      int64_t s = worker_stride(m, k);
      if (!put(digit[k], EVTC_TM_EXPR, &dl, s == 1 ? "(int64_t)(%s)" : "(int64_t)(%s) / %lld", worker, (long long)s))
        return -1;
      if (!digit_bounded(m, k)) {    /* the modulo belongs to the digit itself: parenthesise */
        char t[EVTC_TM_EXPR];
        if (snprintf(t, sizeof t, "(%s %% %lld)", digit[k], (long long)p) >= (int)sizeof t) return -1;
        strcpy(digit[k], t);
      }
    }
  }
  for (int d = 0; d < m->rank; d++) {
    size_t len = 0;
    bool first = true;
    coord[d][0] = 0;
    for (int k = 0; k < n_levels; k++)
      if (digit[k][0] && !put_term(m, k, d, digit[k], coord[d], &len, &first)) return -1;
    if (first && !put(coord[d], EVTC_TM_EXPR, &len, "0")) return -1;
  }
  return opened;
}
