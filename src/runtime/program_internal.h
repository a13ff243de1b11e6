/* program_internal.h -- pieces of the program executor (internal to src/runtime).
 *
 * program.c builds and runs programs; program_fallback.c runs a node that
 * no backend template covers through the float64 interpreter, converting
 * its buffers to doubles and back; program_views.c finds the layout copies
 * that attention kernels make unnecessary; program_replay.c replays a
 * run's launches as one captured device graph.
 */
#ifndef EVTC_PROGRAM_INTERNAL_H
#define EVTC_PROGRAM_INTERNAL_H

#include "backend/backend.h"
#include "ir/ir.h"
#include "runtime/interp.h"

/* Bytes per element of a buffer of dtype t (its dtype size: f16 and bf16 take 2). */
size_t evtc_buffer_elem_size(evtc_dtype t);
/* Buffer <-> doubles for n elements of dtype t. */
void evtc_buffer_to_double(evtc_dtype t, const void *src, int64_t n, double *dst);
void evtc_buffer_from_double(evtc_dtype t, const double *src, int64_t n, void *dst);

/* One node run by the interpreter: a one-node graph with INPUT leaves. */
typedef struct evtc_fallback {
  evtc_graph *sub;
  evtc_interp *it;
  double **in;              /* per input of the node: numel doubles */
  const evtc_node *node;    /* in the original graph */
  const evtc_node *copy;    /* in sub */
} evtc_fallback;

/* Prepares node n of its graph; false with d set when it cannot be copied. */
bool evtc_fallback_init(evtc_fallback *f, const evtc_node *n, evtc_diag *d);
/* Runs it on buffers in[] (one per input) into out. */
evtc_status evtc_fallback_run(evtc_fallback *f, void *const *in, void *out, uint64_t step, evtc_diag *d);
void evtc_fallback_free(evtc_fallback *f);

/* Where a value lives when it is not in a buffer of its own from element 0: element i of it is at offset +
 * sum_d i[d] strides[d] of node `base`'s buffer.  base -1: its own (row-major).  second_half (attention's dK
 * with dV only): the second half of the last dim lies that many elements after the first, not right after it. */
typedef struct evtc_value_view {
  int32_t base;
  int64_t offset;
  int64_t strides[EVTC_MAX_RANK];
  int64_t second_half;
} evtc_value_view;

/* The layout copies of plan kernel_of_node (n_kernels kernel indices) that need not run on backend be because
 * attention kernels read their input or write their output in place (program_views.c): skip[k] set for those
 * kernel indices, views[id] (by node id, g->n_nodes of them) for the values that then live in another's
 * buffer.  Returns how many kernels it drops. */
int evtc_program_plan_views(const evtc_graph *g, const int32_t *kernel_of_node, int n_kernels, const evtc_backend *be,
                            unsigned char *skip, evtc_value_view *views);

/* How a program's runs reach a device (program_replay.c): launched kernel by kernel, or the first plainly, the
 * second captured as a graph of the backend (backend.h: graph_begin ..) and launched, every later one replayed. */
typedef struct evtc_replay {
  const evtc_backend *be;
  bool on;                  /* runs may replay a graph */
  bool ran_plain;           /* a run queued its launches plainly: the backend's lazy state is made */
  void *graph;              /* the backend's graph of a run's launches, or NULL */
  int captures;             /* graphs captured so far (again after the backend moved memory they read) */
  char off[160];            /* when not on: why */
} evtc_replay;

/* Queues every launch of one run (the backend's run() calls only); EVTC_OK or the first failure in d. */
typedef evtc_status (*evtc_replay_launch_fn)(void *ctx, evtc_diag *d);

/* Replay on when backend be offers graphs, no kernel of the program runs in the interpreter (`interpreted`
 * of them: their host copies cannot be captured) and the environment has no EVTC_CUDA_GRAPH=0; else r->off
 * says why. */
void evtc_replay_init(evtc_replay *r, const evtc_backend *be, int interpreted);
/* Queues one run's launches: launch_all(ctx) plainly, or captured and launched, or the graph replayed (see
 * above).  A capture that fails warns once on stderr, turns replay off and runs launch_all plainly. */
evtc_status evtc_replay_run(evtc_replay *r, evtc_replay_launch_fn launch_all, void *ctx, evtc_diag *d);
/* Frees the graph (before the program's modules go). */
void evtc_replay_free(evtc_replay *r);

#endif
