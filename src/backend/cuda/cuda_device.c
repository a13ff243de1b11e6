/* cuda_device.c -- the device context, arena, copies, modules, launches,
 * CUDA graphs and events of cuda_device.h, each a thin checked layer over
 * the driver.
 */
#include "backend/cuda/cuda_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Checks a driver call made for `what`; a failure becomes EVTC_ERR_RUNTIME. */
#define CU_TRY(dev, call, what, d)                                                        \
  do {                                                                                   \
    CUresult r_ = (call);                                                                \
    if (r_ != EVTC_CUDA_SUCCESS) return evtc_cuda_fail((dev)->drv, r_, what, EVTC_ERR_RUNTIME, d); \
  } while (0)

static evtc_status read_attributes(evtc_cuda_device *dev, evtc_diag *d) {
  const evtc_cuda_driver *drv = dev->drv;
  struct {
    int *field, attribute;
  } attrs[] = {
      {&dev->cc_major, EVTC_CU_ATTR_COMPUTE_CAPABILITY_MAJOR},
      {&dev->cc_minor, EVTC_CU_ATTR_COMPUTE_CAPABILITY_MINOR},
      {&dev->sm_count, EVTC_CU_ATTR_MULTIPROCESSOR_COUNT},
      {&dev->smem_per_block_optin, EVTC_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
      {&dev->smem_per_sm, EVTC_CU_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
      {&dev->l2_bytes, EVTC_CU_ATTR_L2_CACHE_SIZE},
      {&dev->max_threads_per_block, EVTC_CU_ATTR_MAX_THREADS_PER_BLOCK},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
    CU_TRY(dev, drv->cuDeviceGetAttribute(attrs[i].field, attrs[i].attribute, dev->dev), "cuDeviceGetAttribute", d);
  CU_TRY(dev, drv->cuDeviceGetName(dev->name, (int)sizeof dev->name, dev->dev), "cuDeviceGetName", d);
  CU_TRY(dev, drv->cuDeviceTotalMem(&dev->total_mem, dev->dev), "cuDeviceTotalMem", d);
  CU_TRY(dev, drv->cuDriverGetVersion(&dev->driver_version), "cuDriverGetVersion", d);
  if (!evtc_cuda_arch_name(dev->cc_major, dev->cc_minor, dev->arch, sizeof dev->arch))
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "CUDA device %s: odd compute capability %d.%d", dev->name,
                         dev->cc_major, dev->cc_minor);
  return EVTC_OK;
}

evtc_status evtc_cuda_device_open(evtc_cuda_device *dev, int ordinal, evtc_diag *d) {
  memset(dev, 0, sizeof *dev);
  dev->ordinal = ordinal;
  dev->drv = evtc_cuda_driver_get(d);
  if (!dev->drv) return d->status;
  const evtc_cuda_driver *drv = dev->drv;
  char text[256];
  CUresult r = drv->cuInit(0);
  if (r != EVTC_CUDA_SUCCESS) {
    evtc_cuda_error_text(drv, r, text, sizeof text);
    return evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "no CUDA device (cuInit: %s)", text);
  }
  int count = 0;
  r = drv->cuDeviceGetCount(&count);
  if (r != EVTC_CUDA_SUCCESS) {
    evtc_cuda_error_text(drv, r, text, sizeof text);
    return evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "no CUDA device (cuDeviceGetCount: %s)", text);
  }
  if (count == 0) return evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "no CUDA device (the driver reports none)");
  if (ordinal < 0 || ordinal >= count)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "no CUDA device %d: the driver reports %d device%s", ordinal, count,
                         count == 1 ? "" : "s");
  CU_TRY(dev, drv->cuDeviceGet(&dev->dev, ordinal), "cuDeviceGet", d);
  CU_TRY(dev, drv->cuDevicePrimaryCtxRetain(&dev->ctx, dev->dev), "cuDevicePrimaryCtxRetain", d);
  evtc_status s = evtc_cuda_fail(drv, drv->cuCtxSetCurrent(dev->ctx), "cuCtxSetCurrent", EVTC_ERR_RUNTIME, d);
  if (s == EVTC_OK)
    s = evtc_cuda_fail(drv, drv->cuStreamCreate(&dev->stream, EVTC_CU_STREAM_NON_BLOCKING), "cuStreamCreate",
                       EVTC_ERR_RUNTIME, d);
  if (s == EVTC_OK) s = read_attributes(dev, d);
  if (s != EVTC_OK) {
    if (dev->stream) drv->cuStreamDestroy(dev->stream);
    drv->cuDevicePrimaryCtxRelease(dev->dev);
    dev->ctx = NULL;
    return s;
  }
  const char *blocking = getenv("EVTC_CUDA_LAUNCH_BLOCKING");
  dev->launch_blocking = blocking && strcmp(blocking, "1") == 0;
  return EVTC_OK;
}

void evtc_cuda_device_close(evtc_cuda_device *dev) {
  if (!dev->ctx) return;
  dev->drv->cuStreamSynchronize(dev->stream);
  dev->drv->cuStreamDestroy(dev->stream);
  dev->drv->cuDevicePrimaryCtxRelease(dev->dev);
  dev->ctx = NULL;
  dev->stream = NULL;
}

evtc_status evtc_cuda_sync(evtc_cuda_device *dev, const char *what, evtc_diag *d) {
  CUresult r = dev->drv->cuStreamSynchronize(dev->stream);
  if (r == EVTC_CUDA_SUCCESS) return EVTC_OK;
  char where[256];
  snprintf(where, sizeof where, "%s (last kernel launched: %s)", what, dev->last_kernel ? dev->last_kernel : "none");
  return evtc_cuda_fail(dev->drv, r, where, EVTC_ERR_RUNTIME, d);
}

/* ---- arena ---- */

evtc_status evtc_cuda_arena_init(evtc_cuda_arena *a, evtc_cuda_device *dev, size_t bytes, evtc_diag *d) {
  memset(a, 0, sizeof *a);
  a->dev = dev;
  char what[96];
  snprintf(what, sizeof what, "cuMemAlloc (device arena of %zu bytes)", bytes);
  CU_TRY(dev, dev->drv->cuMemAlloc(&a->base, bytes ? bytes : 1), what, d);
  a->size = bytes;
  return EVTC_OK;
}

CUdeviceptr evtc_cuda_arena_at(const evtc_cuda_arena *a, size_t offset, size_t bytes) {
  EVTC_ASSERT(offset <= a->size && bytes <= a->size - offset);
  return a->base + offset;
}

evtc_status evtc_cuda_arena_alloc(evtc_cuda_arena *a, size_t bytes, size_t align, CUdeviceptr *out, evtc_diag *d) {
  EVTC_ASSERT(align && (align & (align - 1)) == 0);
  size_t at = (a->top + align - 1) & ~(align - 1);
  if (at < a->top || at > a->size || bytes > a->size - at)
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "device arena exhausted: %zu bytes asked, %zu of %zu in use", bytes,
                         a->top, a->size);
  a->top = at + bytes;
  *out = a->base + at;
  return EVTC_OK;
}

void evtc_cuda_arena_free(evtc_cuda_arena *a) {
  if (a->base) a->dev->drv->cuMemFree(a->base);
  memset(a, 0, sizeof *a);
}

/* ---- copies ---- */

evtc_status evtc_cuda_copy_htod(evtc_cuda_device *dev, CUdeviceptr dst, const void *src, size_t bytes, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuMemcpyHtoDAsync(dst, src, bytes, dev->stream), "cuMemcpyHtoDAsync", d);
  return evtc_cuda_sync(dev, "host-to-device copy", d);
}

evtc_status evtc_cuda_copy_dtoh(evtc_cuda_device *dev, void *dst, CUdeviceptr src, size_t bytes, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuMemcpyDtoHAsync(dst, src, bytes, dev->stream), "cuMemcpyDtoHAsync", d);
  return evtc_cuda_sync(dev, "device-to-host copy", d);
}

evtc_status evtc_cuda_copy_dtod(evtc_cuda_device *dev, CUdeviceptr dst, CUdeviceptr src, size_t bytes, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuMemcpyDtoDAsync(dst, src, bytes, dev->stream), "cuMemcpyDtoDAsync", d);
  return EVTC_OK;
}

evtc_status evtc_cuda_fill32(evtc_cuda_device *dev, CUdeviceptr dst, unsigned value, size_t count, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuMemsetD32Async(dst, value, count, dev->stream), "cuMemsetD32Async", d);
  return EVTC_OK;
}

/* ---- modules and kernels ---- */

evtc_status evtc_cuda_module_load(evtc_cuda_device *dev, const evtc_cuda_cubin *cubin, const char *what,
                                  CUmodule *mod, evtc_diag *d) {
  char where[256];
  snprintf(where, sizeof where, "cuModuleLoadData (%s, %s)", what, cubin->path ? cubin->path : "in memory");
  *mod = NULL;
  CU_TRY(dev, dev->drv->cuModuleLoadData(mod, cubin->data), where, d);
  return EVTC_OK;
}

void evtc_cuda_module_unload(evtc_cuda_device *dev, CUmodule mod) {
  if (mod) dev->drv->cuModuleUnload(mod);
}

evtc_status evtc_cuda_kernel_get(evtc_cuda_device *dev, CUmodule mod, const char *name, evtc_cuda_kernel *k,
                                 evtc_diag *d) {
  memset(k, 0, sizeof *k);
  k->name = name;
  char where[192];
  snprintf(where, sizeof where, "cuModuleGetFunction (kernel %s)", name);
  CU_TRY(dev, dev->drv->cuModuleGetFunction(&k->fn, mod, name), where, d);
  return EVTC_OK;
}

/* k opted in to `smem` dynamic shared bytes when that is above the default 48 KiB. */
static evtc_status opt_in_smem(evtc_cuda_device *dev, evtc_cuda_kernel *k, unsigned smem, evtc_diag *d) {
  char where[192];
  if (smem > 48 * 1024 && (int)smem > k->smem_optin) {
    snprintf(where, sizeof where, "kernel %s (opting in to %u bytes of shared memory)", k->name, smem);
    CU_TRY(dev, dev->drv->cuFuncSetAttribute(k->fn, EVTC_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem),
           where, d);
    k->smem_optin = (int)smem;
  }
  return EVTC_OK;
}

evtc_status evtc_cuda_max_clusters(evtc_cuda_device *dev, evtc_cuda_kernel *k, const unsigned grid[3],
                                   const unsigned block[3], unsigned smem, int *clusters, evtc_diag *d) {
  *clusters = 0;
  if (opt_in_smem(dev, k, smem, d)) return d->status;
  char where[192];
  snprintf(where, sizeof where, "cuOccupancyMaxActiveClusters (kernel %s)", k->name);
  const evtc_cu_launch_config cfg = {grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, dev->stream, NULL, 0};
  CU_TRY(dev, dev->drv->cuOccupancyMaxActiveClusters(clusters, k->fn, &cfg), where, d);
  return EVTC_OK;
}

evtc_status evtc_cuda_launch(evtc_cuda_device *dev, evtc_cuda_kernel *k, const unsigned grid[3],
                             const unsigned block[3], unsigned smem, void **params, evtc_diag *d) {
  char where[192];
  if (opt_in_smem(dev, k, smem, d)) return d->status;
  snprintf(where, sizeof where, "kernel %s", k->name);
  dev->last_kernel = k->name;
  if (k->cooperative)
    CU_TRY(dev,
           dev->drv->cuLaunchCooperativeKernel(k->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                                               dev->stream, params),
           where, d);
  else if (k->dependent) {
    evtc_cu_launch_attr attr = {.id = EVTC_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                .value.programmatic_stream_serialization = 1};
    evtc_cu_launch_config cfg = {grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, dev->stream, &attr, 1};
    CU_TRY(dev, dev->drv->cuLaunchKernelEx(&cfg, k->fn, params, NULL), where, d);
  } else
    CU_TRY(dev,
           dev->drv->cuLaunchKernel(k->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, dev->stream,
                                    params, NULL),
           where, d);
  if (dev->launch_blocking) {
    CUresult r = dev->drv->cuStreamSynchronize(dev->stream);
    if (r != EVTC_CUDA_SUCCESS) return evtc_cuda_fail(dev->drv, r, where, EVTC_ERR_RUNTIME, d);
  }
  return EVTC_OK;
}

/* ---- CUDA graphs ---- */

evtc_status evtc_cuda_capture_begin(evtc_cuda_device *dev, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuStreamBeginCapture(dev->stream, EVTC_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
         "cuStreamBeginCapture", d);
  return EVTC_OK;
}

evtc_status evtc_cuda_capture_end(evtc_cuda_device *dev, CUgraphExec *exec, evtc_diag *d) {
  *exec = NULL;
  CUgraph graph = NULL;
  CUresult r = dev->drv->cuStreamEndCapture(dev->stream, &graph);
  if (r != EVTC_CUDA_SUCCESS) {
    if (graph) dev->drv->cuGraphDestroy(graph);
    return evtc_cuda_fail(dev->drv, r, "cuStreamEndCapture", EVTC_ERR_RUNTIME, d);
  }
  r = dev->drv->cuGraphInstantiate(exec, graph, 0);
  dev->drv->cuGraphDestroy(graph);
  if (r != EVTC_CUDA_SUCCESS) *exec = NULL;
  return evtc_cuda_fail(dev->drv, r, "cuGraphInstantiateWithFlags", EVTC_ERR_RUNTIME, d);
}

evtc_status evtc_cuda_graph_launch(evtc_cuda_device *dev, CUgraphExec exec, evtc_diag *d) {
  dev->last_kernel = "a replayed CUDA graph (EVTC_CUDA_GRAPH=0 launches its kernels one by one, so a fault names one)";
  CU_TRY(dev, dev->drv->cuGraphLaunch(exec, dev->stream), "cuGraphLaunch", d);
  return EVTC_OK;
}

void evtc_cuda_graph_free(evtc_cuda_device *dev, CUgraphExec exec) {
  if (exec) dev->drv->cuGraphExecDestroy(exec);
}

/* ---- events ---- */

evtc_status evtc_cuda_event_new(evtc_cuda_device *dev, CUevent *e, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuEventCreate(e, EVTC_CU_EVENT_DEFAULT), "cuEventCreate", d);
  return EVTC_OK;
}

evtc_status evtc_cuda_event_record(evtc_cuda_device *dev, CUevent e, evtc_diag *d) {
  CU_TRY(dev, dev->drv->cuEventRecord(e, dev->stream), "cuEventRecord", d);
  return EVTC_OK;
}

evtc_status evtc_cuda_event_ms(evtc_cuda_device *dev, CUevent start, CUevent end, float *ms, evtc_diag *d) {
  CUresult r = dev->drv->cuEventSynchronize(end);
  if (r != EVTC_CUDA_SUCCESS) {
    char where[192];
    snprintf(where, sizeof where, "cuEventSynchronize (last kernel launched: %s)",
             dev->last_kernel ? dev->last_kernel : "none");
    return evtc_cuda_fail(dev->drv, r, where, EVTC_ERR_RUNTIME, d);
  }
  CU_TRY(dev, dev->drv->cuEventElapsedTime(ms, start, end), "cuEventElapsedTime", d);
  return EVTC_OK;
}

void evtc_cuda_event_free(evtc_cuda_device *dev, CUevent e) {
  if (e) dev->drv->cuEventDestroy(e);
}
