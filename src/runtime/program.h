/* program.h -- a compiled graph: kernels + buffers + a launch list.
 *
 * evtc_program_new takes a graph and a plan (kernel_of_node, kernel.h),
 * builds every kernel, asks the backend which it supports, emits all of
 * those into one module, compiles and loads it (the CPU backend caches the
 * object on disk) -- or, on the CUDA backend, one module per distinct
 * kernel source, compiled in parallel (a model's repeated layers compile
 * once).  A kernel the backend cannot run -- or a plan group that
 * does not build -- is split into single nodes; a node still without a
 * template runs through the float64 interpreter, and the program prints a
 * loud warning naming those nodes (never silently) and counts them.
 *
 * Buffers hold values in their dtype's native C type (f16/bf16 as float,
 * rounded; only interpreter-run kernels touch those), in the backend's
 * device memory for a device backend (backend.h), where set/get copy
 * through the host.  INPUT, PARAM and
 * STATE leaves and the graph's outputs have buffers of their own for the
 * whole life of the program; every other value passed between kernels
 * lives in one arena placed by the memory planner (memplan.h).
 */
#ifndef EVTC_PROGRAM_H
#define EVTC_PROGRAM_H

#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "ir/ir.h"

typedef struct evtc_program evtc_program;

/* Builds the program of g (borrowed: it must outlive the program) under
 * plan kernel_of_node (n_kernels kernels; NULL: the built-in greedy plan).
 * Warnings (interpreter fallbacks, split groups) go to `warn` (NULL: stderr).
 * NULL on failure with the cause in d (a compiler error names the file and kernel). */
evtc_program *evtc_program_new(const evtc_graph *g, const int32_t *kernel_of_node, int n_kernels,
                               const evtc_backend *be, FILE *warn, evtc_diag *d);
void evtc_program_free(evtc_program *p);

/* Copies numel doubles into the buffer of an INPUT, PARAM or STATE leaf,
 * converted to its dtype. */
void evtc_program_set(evtc_program *p, const evtc_node *leaf, const double *data);
/* A table of n_rows rows for INPUT leaf of p, whose dim 0 counts rows:
 * `values` (n_rows * the leaf's per-row count) converted once to the leaf's
 * buffer format.  A device program keeps a table of at most
 * EVTC_DEVICE_TABLE_MAX bytes in device memory, so that a batch is
 * gathered there by row copies rather than on the host and uploaded (ViT's
 * image batch: 77 MB per step); a larger one stays on the host.
 * evtc_program_set_rows then feeds rows of it (a training batch) without
 * converting anything per step.  Free it before p. */
typedef struct evtc_rows_table evtc_rows_table;
#define EVTC_DEVICE_TABLE_MAX ((size_t)2 << 30)
evtc_rows_table *evtc_program_rows_table(evtc_program *p, const evtc_node *leaf, const double *values,
                                         int64_t n_rows);
void evtc_program_rows_table_free(evtc_program *p, evtc_rows_table *t);
/* The leaf's buffer from rows[0..n) of table t (n: the leaf's dim 0). */
void evtc_program_set_rows(evtc_program *p, const evtc_node *leaf, const evtc_rows_table *t, const int64_t *rows,
                           int64_t n);
/* Copies the value of n (a leaf, a graph output or any value passed
 * between kernels) as doubles into out; false when n has no buffer of its
 * own (a value inside a kernel, or one attention kernels read or write in
 * another value's buffer: never an output). */
bool evtc_program_get(const evtc_program *p, const evtc_node *n, double *out);
/* Runs every kernel once; step is the dropout offset.  A kernel's run-time
 * error (label or index out of range, integer division by zero) gives
 * EVTC_ERR_RUNTIME naming the kernel and its nodes.  On a backend with
 * graphs (CUDA), the first run launches the kernels one by one, the second
 * captures its launches as a graph and launches that, and later runs
 * replay it (stats.graph says whether they do, no_graph why not; a failed
 * capture warns on stderr and the runs go on launching one by one). */
evtc_status evtc_program_run(evtc_program *p, uint64_t step, evtc_diag *d);
/* evtc_program_run in two halves, so that the host can queue more work -- the next batch's rows -- while a device
 * runs: start queues the run (a host backend runs it), wait waits for it and reports its errors. */
evtc_status evtc_program_start(evtc_program *p, uint64_t step, evtc_diag *d);
evtc_status evtc_program_wait(evtc_program *p, evtc_diag *d);
/* Fills every buffer that is not a leaf -- the planned arena and the
 * graph outputs -- with 0xff bytes (NaN for floats), so a test sees any
 * element a kernel fails to write. */
void evtc_program_poison(evtc_program *p);
/* Copies every `updates` output of the last run into its PARAM / STATE (those computed in place need
 * nothing). */
void evtc_program_update(evtc_program *p);

typedef struct evtc_program_stats {
  int kernels;              /* kernels launched per run */
  int compiled;             /* of which compiled by the backend */
  int interpreted;          /* of which run by the interpreter (no template) */
  int splits;               /* planned kernels that did not build or run as one and were split into nodes */
  int aliases;              /* lone reshapes that share their input's buffer instead of running as a copy */
  int in_place;             /* updates written over the parameter or state they replace */
  int by_products;          /* values an earlier kernel writes too (attention's log-sum-exp), not run on their own */
  int views;                /* layout copies not run: attention kernels read or write those values in place */
  int in_place_outputs;     /* values written over an input whose last use their kernel is (one buffer, not two) */
  int modules;              /* distinct modules compiled (per-kernel modules: kernels of one source share one) */
  size_t arena_bytes;       /* peak bytes of the planned intermediate arena */
  size_t unplanned_bytes;   /* the bytes the same values would take without reuse */
  size_t owned_bytes;       /* the buffers of their own: leaves (parameters, state, inputs, constants) and outputs */
  bool graph;               /* runs after the first replay one captured graph of their launches (a CUDA graph) */
  int graph_captures;       /* graphs captured so far (more than one when the backend moved memory they read) */
  char no_graph[160];       /* when not graph: why (no graphs on the backend, EVTC_CUDA_GRAPH=0, ...) */
} evtc_program_stats;

evtc_program_stats evtc_program_get_stats(const evtc_program *p);
/* Where the arena's memory goes: the kernel during which the most arena bytes are live (*at, run order;
 * *live_bytes: their sum), and the node ids of the values live then, largest first, into ids (at most cap).
 * Returns how many values are live then. */
int evtc_program_peak_values(const evtc_program *p, int32_t *ids, int cap, int *at, size_t *live_bytes);

/* The program's kernels in run order (compiled ones and interpreter fallbacks): how many, and kernel t's
 * first node id (ascending within a kernel: where a plan's kernel went). */
int evtc_program_kernel_count(const evtc_program *p);
int32_t evtc_program_kernel_first_node(const evtc_program *p, int t);
/* Whether kernel t writes node `node`'s value: one of its own nodes, or another kernel's value it writes as a
 * by-product (attention's log-sum-exp or dq). */
bool evtc_program_kernel_writes(const evtc_program *p, int t, int32_t node);
/* Per-kernel time: runs the program `runs` times (steps step, step + 1, ...) and writes each kernel's mean
 * microseconds into us[t] (kernel_count entries).  On a backend with marks (a GPU) *device_clock is set and
 * the time is the device's between a kernel's launch and the next one's, with no waits (an interpreter
 * fallback's copies and host work count in its kernel); elsewhere the host clock with a wait after every
 * kernel. */
evtc_status evtc_program_profile(evtc_program *p, int runs, uint64_t step, double *us, bool *device_clock,
                                 evtc_diag *d);
/* Prints every kernel of the program (evtc_kernel_print) to out. */
void evtc_program_dump(const evtc_program *p, FILE *out);

#endif
