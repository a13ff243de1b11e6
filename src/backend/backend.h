/* backend.h -- the backend vtable: how kernels become running code.
 *
 * A backend is a table of function pointers beside a `ctx` (CONVENTIONS.md
 * #6), filled with designated initializers; optional entries are NULL.  The
 * program builder (runtime/program.c) asks supports() for every kernel,
 * emits all supported kernels into one module source, compiles and loads it
 * once, looks each kernel's entry point up and launches it -- or, for a
 * backend with module_per_kernel, gives each kernel a module of its own
 * (kernels with the same source share one; distinct ones compile in
 * parallel, so compile() must be thread-safe there).  Buffers come
 * from alloc/free/copy, so a device backend can keep them in its memory.
 *
 * Kernel calling convention (host backends): an entry point takes the
 * kernel's argument buffers in evtc_kernel.args order, the step (the
 * dropout offset) and an error flag the kernel sets to nonzero on a
 * run-time input error (an index out of range); see evtc_backend_fn.  A
 * device backend's kernels read the step from its own memory instead,
 * where begin_run() puts it before a run's launches.
 */
#ifndef EVTC_BACKEND_H
#define EVTC_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel/kernel.h"

typedef void (*evtc_backend_fn)(void *const *args, uint64_t step, int *err);

typedef struct evtc_backend evtc_backend;
struct evtc_backend {
  const char *name;
  void *ctx;
  /* Compile every kernel as its own module (see above) instead of all in one. */
  bool module_per_kernel;
  /* Whether this backend can run k; when not, a short reason in why (cap bytes). Required. */
  bool (*supports)(const evtc_backend *be, const evtc_kernel *k, char *why, size_t cap);
  /* Appends the source of kernel k, entry point k->name, to *src (malloc'd,
   * grown with realloc; *len its length).  Required. */
  void (*emit)(const evtc_backend *be, const evtc_kernel *k, char **src, size_t *len);
  /* Compiles a whole module source into a loadable artifact; returns its
   * path (malloc'd) or NULL with the cause in d.  `kernels` names the
   * kernels in source order so an error can name the kernel at fault. */
  char *(*compile)(const evtc_backend *be, const char *src, const evtc_kernel *const *kernels, int n_kernels,
                   evtc_diag *d);
  /* Loads an artifact; returns a module handle or NULL with d set. */
  void *(*load)(const evtc_backend *be, const char *path, evtc_diag *d);
  /* The entry point `name` of a loaded module, or NULL. */
  evtc_backend_fn (*lookup)(const evtc_backend *be, void *module, const char *name);
  void (*unload)(const evtc_backend *be, void *module);
  /* Runs one kernel; EVTC_OK or EVTC_ERR_RUNTIME when it raised its error flag.  Optional (NULL: call fn). */
  evtc_status (*launch)(const evtc_backend *be, evtc_backend_fn fn, void *const *args, uint64_t step);
  /* Buffers: optional (NULL: host malloc/free/memcpy). */
  void *(*alloc)(const evtc_backend *be, size_t bytes);
  void (*free)(const evtc_backend *be, void *p);
  void (*copy)(const evtc_backend *be, void *dst, const void *src, size_t bytes);
  /* Waits for launched work; optional (NULL: launches are synchronous). */
  void (*synchronize)(const evtc_backend *be);
  /* ---- device backends (all NULL for a host backend) ----
   * A device backend's buffers live in its own memory (alloc gives zeroed
   * bytes, copy is device to device) and its kernels are not host
   * functions: kernel() replaces lookup() and gives an opaque launchable
   * handle for k, whose entry point in module is `entry` (the name k was
   * emitted under; k->name names it in messages), freed by unload of its
   * module; begin_run() queues the write of a run's step where the kernels
   * read it (stream-ordered, before the run's launches); run() queues one launch
   * of it, upload()/download() move bytes between host and device memory
   * (complete on return), and finish() waits for queued work and reports
   * the first failure since the last finish -- a CUDA error, a failed copy,
   * or a kernel's raised error flag -- naming the kernel. */
  void *(*kernel)(const evtc_backend *be, void *module, const char *entry, const evtc_kernel *k, evtc_diag *d);
  evtc_status (*begin_run)(const evtc_backend *be, uint64_t step, evtc_diag *d);
  evtc_status (*run)(const evtc_backend *be, void *kernel, void *const *args, evtc_diag *d);
  void (*upload)(const evtc_backend *be, void *dst, const void *src, size_t bytes);
  void (*download)(const evtc_backend *be, void *dst, const void *src, size_t bytes);
  evtc_status (*finish)(const evtc_backend *be, evtc_diag *d);
  /* Device timing (optional): mark() queues timestamp i (0, 1, 2, ... in order) behind the launched work,
   * mark_intervals() waits for the last of n marks and writes the device time between mark i and i + 1 into
   * us[i] (n - 1 values, microseconds), so a profile needs no wait between kernels. */
  evtc_status (*mark)(const evtc_backend *be, int i, evtc_diag *d);
  evtc_status (*mark_intervals)(const evtc_backend *be, int n, double *us, evtc_diag *d);
  /* Device graphs (optional: all five or none): graph_begin() starts capturing the launches run() queues,
   * which are then recorded instead of run; graph_end() ends the capture and gives them instantiated as one
   * graph (an opaque handle), or NULL with the cause in d -- something between the two could not be captured,
   * or the graph does not instantiate; the capture is over either way and nothing captured has run.
   * graph_current() says whether a graph's launches still point at valid memory (the backend may move what
   * they read, e.g. a scratch shared with kernels of later programs); graph_launch() queues one replay;
   * graph_free() frees a graph (a queued replay completes first).  Only run() calls go between graph_begin and
   * graph_end: no begin_run, copy, alloc, free, finish or mark. */
  evtc_status (*graph_begin)(const evtc_backend *be, evtc_diag *d);
  void *(*graph_end)(const evtc_backend *be, evtc_diag *d);
  bool (*graph_current)(const evtc_backend *be, const void *graph);
  evtc_status (*graph_launch)(const evtc_backend *be, void *graph, evtc_diag *d);
  void (*graph_free)(const evtc_backend *be, void *graph);
};

/* The CPU backend (backend/cpu): C compiled with the system compiler. */
const evtc_backend *evtc_backend_cpu(void);
/* The CUDA backend (backend/cuda) on GPU 0, opened at the first call; NULL
 * with EVTC_ERR_UNSUPPORTED in d when there is no driver, GPU or NVRTC. */
const evtc_backend *evtc_backend_cuda(evtc_diag *d);
/* "cpu", "cuda" or "auto" (CUDA when usable, else CPU); NULL with the cause in d. */
const evtc_backend *evtc_backend_by_name(const char *name, evtc_diag *d);

#endif
