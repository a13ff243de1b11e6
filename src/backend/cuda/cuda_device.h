/* cuda_device.h -- one GPU as evtc uses it: context, properties, a device
 * arena, a stream, events, modules, kernel launches and CUDA graphs of them.
 *
 * A device holds the primary context of one GPU and one non-blocking
 * stream; all copies and launches go to that stream in order.  Device
 * memory for a Program is one arena (a single cuMemAlloc): the memory
 * planner hands out offsets into it, and a bump allocator serves callers
 * that have no plan.  Every failed driver call is reported as
 * "CUDA error in <kernel or call>: <name>: <string>" (cuda_api.h).
 *
 * Launch errors surface at the launch; faults inside a kernel surface at
 * the next synchronisation, which names the last kernel launched.  With
 * EVTC_CUDA_LAUNCH_BLOCKING=1 in the environment every launch is followed
 * by a synchronisation, so a fault names its own kernel.
 */
#ifndef EVTC_CUDA_DEVICE_H
#define EVTC_CUDA_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_compile.h"

typedef struct evtc_cuda_device {
  const evtc_cuda_driver *drv;
  int ordinal;
  CUdevice dev;
  CUcontext ctx;                 /* the device's primary context (retained) */
  CUstream stream;
  char name[128];
  int cc_major, cc_minor;
  char arch[16];                 /* NVRTC target, e.g. "sm_90a" */
  int sm_count;
  int smem_per_block_optin;      /* bytes a block may opt in to */
  int smem_per_sm;
  int l2_bytes;
  int max_threads_per_block;
  int driver_version;            /* e.g. 13000 */
  size_t total_mem;
  bool launch_blocking;          /* EVTC_CUDA_LAUNCH_BLOCKING=1 */
  const char *last_kernel;       /* name of the last kernel launched (borrowed) */
} evtc_cuda_device;

/* Opens GPU `ordinal`: loads the driver, cuInit, retains the primary
 * context, makes it current on this thread, creates the stream and reads
 * the properties.  No driver or no GPU: EVTC_ERR_UNSUPPORTED with
 * "no CUDA driver (...)" or "no CUDA device (...)"; an ordinal past the
 * count: EVTC_ERR_INVALID.  On failure nothing stays open. */
evtc_status evtc_cuda_device_open(evtc_cuda_device *dev, int ordinal, evtc_diag *d);
/* Waits for the stream, destroys it and releases the context. */
void evtc_cuda_device_close(evtc_cuda_device *dev);
/* Waits for everything queued on the stream; `what` names the wait in errors. */
evtc_status evtc_cuda_sync(evtc_cuda_device *dev, const char *what, evtc_diag *d);

/* ---- device arena ---- */
typedef struct evtc_cuda_arena {
  evtc_cuda_device *dev;
  CUdeviceptr base;              /* 256-byte aligned (cuMemAlloc) */
  size_t size, top;              /* bytes in all, bytes handed out by the bump allocator */
} evtc_cuda_arena;

/* One cuMemAlloc of `bytes`; out of memory is EVTC_ERR_RUNTIME. */
evtc_status evtc_cuda_arena_init(evtc_cuda_arena *a, evtc_cuda_device *dev, size_t bytes, evtc_diag *d);
/* Device address of [offset, offset+bytes) of a planned arena; asserts the range fits. */
CUdeviceptr evtc_cuda_arena_at(const evtc_cuda_arena *a, size_t offset, size_t bytes);
/* Bump allocation aligned to `align` (a power of two); EVTC_ERR_RUNTIME
 * naming the sizes when the arena is full. */
evtc_status evtc_cuda_arena_alloc(evtc_cuda_arena *a, size_t bytes, size_t align, CUdeviceptr *out, evtc_diag *d);
static inline void evtc_cuda_arena_reset(evtc_cuda_arena *a) { a->top = 0; }
void evtc_cuda_arena_free(evtc_cuda_arena *a);

/* ---- copies and fills, queued on the device stream ---- */
/* Host <-> device copies return once the copy is complete (host memory may be pageable). */
evtc_status evtc_cuda_copy_htod(evtc_cuda_device *dev, CUdeviceptr dst, const void *src, size_t bytes, evtc_diag *d);
evtc_status evtc_cuda_copy_dtoh(evtc_cuda_device *dev, void *dst, CUdeviceptr src, size_t bytes, evtc_diag *d);
/* Device-to-device copy and 32-bit fill: queued, not waited for. */
evtc_status evtc_cuda_copy_dtod(evtc_cuda_device *dev, CUdeviceptr dst, CUdeviceptr src, size_t bytes, evtc_diag *d);
evtc_status evtc_cuda_fill32(evtc_cuda_device *dev, CUdeviceptr dst, unsigned value, size_t count, evtc_diag *d);

/* ---- modules and kernels ---- */
typedef struct evtc_cuda_kernel {
  CUfunction fn;
  const char *name;              /* borrowed: the caller keeps it alive */
  int smem_optin;                /* dynamic shared bytes the function was opened up to */
  bool cooperative;              /* launched cooperatively: it waits at a grid-wide barrier */
  bool dependent;                /* launched with programmatic stream serialization: it may start before the kernel
                                    ahead of it in the stream ends, and waits for it (griddepcontrol.wait) before
                                    touching what that kernel writes; sm_90 and later */
} evtc_cuda_kernel;

/* Loads a CUBIN; `what` names the module in errors. */
evtc_status evtc_cuda_module_load(evtc_cuda_device *dev, const evtc_cuda_cubin *cubin, const char *what,
                                  CUmodule *mod, evtc_diag *d);
void evtc_cuda_module_unload(evtc_cuda_device *dev, CUmodule mod);
/* Looks up entry point `name` (an extern "C" __global__ function). */
evtc_status evtc_cuda_kernel_get(evtc_cuda_device *dev, CUmodule mod, const char *name, evtc_cuda_kernel *k,
                                 evtc_diag *d);
/* Launches k on the device stream with a grid[3] x block[3] shape, `smem`
 * dynamic shared bytes (opting the function in above 48 KiB) and the
 * kernel's parameters as an array of pointers to each value. */
evtc_status evtc_cuda_launch(evtc_cuda_device *dev, evtc_cuda_kernel *k, const unsigned grid[3],
                             const unsigned block[3], unsigned smem, void **params, evtc_diag *d);
/* How many clusters of k (its compile-time cluster shape) of a grid[3] x block[3] launch with `smem` dynamic shared
 * bytes (opting the function in above 48 KiB, as a launch does) run at once, into *clusters.  The grid must be a
 * multiple of the cluster's shape (CUDA_ERROR_INVALID_CLUSTER_SIZE otherwise). */
evtc_status evtc_cuda_max_clusters(evtc_cuda_device *dev, evtc_cuda_kernel *k, const unsigned grid[3],
                                   const unsigned block[3], unsigned smem, int *clusters, evtc_diag *d);

/* ---- CUDA graphs: the stream's launches captured once, replayed as one ---- */
/* Starts capturing the stream (thread-local mode: only this thread is kept from calls unsafe during a capture):
 * launches queued on it from now on are recorded, not run. */
evtc_status evtc_cuda_capture_begin(evtc_cuda_device *dev, evtc_diag *d);
/* Ends the capture and instantiates what it recorded into *exec.  On failure -- something queued could not be
 * recorded, or the graph does not instantiate -- the capture is over all the same, *exec is NULL, and nothing
 * that was queued during it has run. */
evtc_status evtc_cuda_capture_end(evtc_cuda_device *dev, CUgraphExec *exec, evtc_diag *d);
/* Queues one replay of exec on the stream; a fault inside it names the graph, not one of its kernels. */
evtc_status evtc_cuda_graph_launch(evtc_cuda_device *dev, CUgraphExec exec, evtc_diag *d);
/* Frees exec (a replay still queued completes first). */
void evtc_cuda_graph_free(evtc_cuda_device *dev, CUgraphExec exec);

/* ---- events (for timing) ---- */
evtc_status evtc_cuda_event_new(evtc_cuda_device *dev, CUevent *e, evtc_diag *d);
evtc_status evtc_cuda_event_record(evtc_cuda_device *dev, CUevent e, evtc_diag *d);
/* Milliseconds between two recorded events, waiting for `end`. */
evtc_status evtc_cuda_event_ms(evtc_cuda_device *dev, CUevent start, CUevent end, float *ms, evtc_diag *d);
void evtc_cuda_event_free(evtc_cuda_device *dev, CUevent e);

#endif
