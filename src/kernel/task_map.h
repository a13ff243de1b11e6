/* task_map.h -- Hidet-style task mappings: which worker owns which tasks.
 *
 * A schedule says which thread (worker) computes which elements (tasks) of
 * a tile.  Instead of ad-hoc index arithmetic in every template, evtc
 * states it as a task mapping (Hidet, ASPLOS 2023; research/related.md):
 *
 *   spatial(s0, s1, ..)  prod(s) workers, one task each: worker w owns the
 *                        task at the row-major unravel of w over s;
 *   repeat(s0, s1, ..)   one worker, all prod(s) tasks in row-major order;
 *   outer * inner        workers multiply (worker w is outer worker
 *                        w / inner.workers, inner worker w % inner.workers)
 *                        and each outer task expands into an inner block:
 *                        task = outer_task * inner.shape + inner_task.
 *
 * So "a warp per row, 8 rows per block, each lane 4 runs of 4 contiguous
 * columns, 128 apart" is spatial(8, 1) * repeat(1, 4) * spatial(1, 32) *
 * repeat(1, 4) over a task shape of (8, 512), and a Hopper wgmma
 * accumulator fragment of a warpgroup is spatial(4, 1) * repeat(2, N/8) *
 * spatial(8, 4) * repeat(1, 2) over (64, N).  The emitters ask a mapping
 * for its worker count and tasks per worker and have it write the loops
 * and coordinate expressions (evtc_tm_emit); evtc_tm_task enumerates the
 * same tasks on the host, in the order the emitted loops visit them.
 */
#ifndef EVTC_TASK_MAP_H
#define EVTC_TASK_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVTC_TM_MAX_RANK 4
#define EVTC_TM_MAX_LEVELS 8

typedef enum evtc_tm_kind { EVTC_TM_SPATIAL, EVTC_TM_REPEAT } evtc_tm_kind;

typedef struct evtc_tm_level {
  evtc_tm_kind kind;
  int64_t shape[EVTC_TM_MAX_RANK];
} evtc_tm_level;

/* Levels outermost first; every level has the mapping's rank. */
typedef struct evtc_task_map {
  int rank, n_levels;
  evtc_tm_level level[EVTC_TM_MAX_LEVELS];
} evtc_task_map;

/* One-level mappings over shape[0..rank) (every extent >= 1). */
evtc_task_map evtc_tm_spatial(int rank, const int64_t *shape);
evtc_task_map evtc_tm_repeat(int rank, const int64_t *shape);
/* The 2-D forms the row and tile templates use. */
evtc_task_map evtc_tm_spatial2(int64_t rows, int64_t cols);
evtc_task_map evtc_tm_repeat2(int64_t rows, int64_t cols);

/* outer * inner into *out; false when the ranks differ or the result would
 * have more than EVTC_TM_MAX_LEVELS levels. */
bool evtc_tm_compose(const evtc_task_map *outer, const evtc_task_map *inner, evtc_task_map *out);

int64_t evtc_tm_workers(const evtc_task_map *m);
int64_t evtc_tm_tasks_per_worker(const evtc_task_map *m);
/* shape[d] = the product of every level's extent in dimension d. */
void evtc_tm_task_shape(const evtc_task_map *m, int64_t *shape);

/* The k-th task (0 <= k < tasks per worker) of worker w (0 <= w < workers)
 * into coord[0..rank): k counts the repeat levels' iterations, the
 * outermost slowest, as the loops of evtc_tm_emit run. */
void evtc_tm_task(const evtc_task_map *m, int64_t w, int64_t k, int64_t *coord);

/* Writes C (also CUDA C) that visits the tasks of the worker whose index
 * is the expression `worker`: into `loops`, one `for` header per repeat
 * level with more than one iteration (variables <var>0, <var>1, ..., each
 * line `indent`, "#pragma unroll" before each when `unroll`), opened but
 * not closed; into coord[d] (EVTC_TM_EXPR bytes each) the expression of
 * task coordinate d in the worker expression and the loop variables (64-bit
 * integer arithmetic).  Returns the number of loops opened (the caller
 * closes them), or -1 when `loops` (loops_cap bytes) or an expression is
 * too small. */
#define EVTC_TM_EXPR 512
int evtc_tm_emit(const evtc_task_map *m, const char *worker, const char *var, bool unroll, const char *indent,
                 char *loops, size_t loops_cap, char coord[][EVTC_TM_EXPR]);

#endif
