/* cuda_api.c -- opens libcuda, libnvrtc and libcublasLt at first use and
 * fills their function tables (see cuda_api.h).
 *
 * Each library has one loader state: a pthread_once flag, the table, and
 * the status and message of the load, so that every caller after a failed
 * load gets the same clean EVTC_ERR_UNSUPPORTED.  Handles stay open for the
 * life of the process.
 */
#include "backend/cuda/cuda_api.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry point: the symbol to resolve, an older one to fall back to
 * (or NULL), and where its pointer goes in the table. */
typedef struct sym_spec {
  const char *name, *fallback;
  size_t offset;
} sym_spec;

typedef struct loader {
  pthread_once_t once;
  evtc_status status;
  char msg[512];
} loader;

#define DRV(field, sym, alt) {sym, alt, offsetof(evtc_cuda_driver, field)}
static const sym_spec driver_syms[] = {
    DRV(cuInit, "cuInit", NULL),
    DRV(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    DRV(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    DRV(cuDeviceGet, "cuDeviceGet", NULL),
    DRV(cuDeviceGetName, "cuDeviceGetName", NULL),
    DRV(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    DRV(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
    DRV(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    DRV(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", NULL),
    DRV(cuCtxSetCurrent, "cuCtxSetCurrent", NULL),
    DRV(cuMemAlloc, "cuMemAlloc_v2", NULL),
    DRV(cuMemFree, "cuMemFree_v2", NULL),
    DRV(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL),
    DRV(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL),
    DRV(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL),
    DRV(cuMemsetD32Async, "cuMemsetD32Async", NULL),
    DRV(cuModuleLoadData, "cuModuleLoadData", NULL),
    DRV(cuModuleUnload, "cuModuleUnload", NULL),
    DRV(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    DRV(cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    DRV(cuLaunchKernel, "cuLaunchKernel", NULL),
    DRV(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", NULL),
    DRV(cuLaunchKernelEx, "cuLaunchKernelEx", NULL),
    DRV(cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", NULL),
    DRV(cuStreamCreate, "cuStreamCreate", NULL),
    DRV(cuStreamSynchronize, "cuStreamSynchronize", NULL),
    DRV(cuStreamDestroy, "cuStreamDestroy_v2", NULL),
    DRV(cuEventCreate, "cuEventCreate", NULL),
    DRV(cuEventRecord, "cuEventRecord", NULL),
    DRV(cuEventSynchronize, "cuEventSynchronize", NULL),
    DRV(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    DRV(cuEventDestroy, "cuEventDestroy_v2", NULL),
    DRV(cuStreamBeginCapture, "cuStreamBeginCapture_v2", NULL),
    DRV(cuStreamEndCapture, "cuStreamEndCapture", NULL),
    DRV(cuGraphInstantiate, "cuGraphInstantiateWithFlags", NULL),    /* not the older cuGraphInstantiate's 5 arguments */
    DRV(cuGraphLaunch, "cuGraphLaunch", NULL),
    DRV(cuGraphExecDestroy, "cuGraphExecDestroy", NULL),
    DRV(cuGraphDestroy, "cuGraphDestroy", NULL),
    DRV(cuGetErrorName, "cuGetErrorName", NULL),
    DRV(cuGetErrorString, "cuGetErrorString", NULL),
    DRV(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", NULL),
};
#undef DRV

#define NVRTC(field) {#field, NULL, offsetof(evtc_cuda_nvrtc, field)}
static const sym_spec nvrtc_syms[] = {
    NVRTC(nvrtcVersion),           NVRTC(nvrtcCreateProgram), NVRTC(nvrtcCompileProgram),
    NVRTC(nvrtcGetProgramLogSize), NVRTC(nvrtcGetProgramLog), NVRTC(nvrtcGetCUBINSize),
    NVRTC(nvrtcGetCUBIN),          NVRTC(nvrtcDestroyProgram), NVRTC(nvrtcGetErrorString),
};
#undef NVRTC

#define LT(field) {#field, NULL, offsetof(evtc_cuda_cublaslt, field)}
static const sym_spec cublaslt_syms[] = {
    LT(cublasLtGetVersion),
    LT(cublasLtCreate),
    LT(cublasLtDestroy),
    LT(cublasLtMatmulDescCreate),
    LT(cublasLtMatmulDescDestroy),
    LT(cublasLtMatmulDescSetAttribute),
    LT(cublasLtMatrixLayoutCreate),
    LT(cublasLtMatrixLayoutDestroy),
    LT(cublasLtMatrixLayoutSetAttribute),
    LT(cublasLtMatmulPreferenceCreate),
    LT(cublasLtMatmulPreferenceDestroy),
    LT(cublasLtMatmulPreferenceSetAttribute),
    LT(cublasLtMatmulAlgoGetHeuristic),
    LT(cublasLtMatmul),
};
#undef LT

static const char *const nvrtc_names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
static const char *const cublaslt_names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};

/* Resolves every symbol of specs into table; on a missing one records
 * "<what>: <lib> lacks <symbol>" in l and returns false. */
static bool resolve(void *lib, const char *lib_name, const sym_spec *specs, size_t n, void *table, loader *l,
                    const char *what) {
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(lib, specs[i].name);
    if (!p && specs[i].fallback) p = dlsym(lib, specs[i].fallback);
    if (!p) {
      l->status = EVTC_ERR_UNSUPPORTED;
      snprintf(l->msg, sizeof l->msg, "%s: %s lacks %s", what, lib_name, specs[i].name);
      return false;
    }
    memcpy((char *)table + specs[i].offset, &p, sizeof p); /* POSIX: data and function pointers agree */
  }
  return true;
}

/* Opens the first of names that the loader finds, by soname and then in the
 * usual CUDA install folders; the path used goes to path.  NULL if none. */
static void *open_cuda_library(const char *const *names, size_t n, char *path, size_t cap) {
  for (size_t i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      snprintf(path, cap, "%s", names[i]);
      return h;
    }
  }
  const char *home = getenv("CUDA_HOME");
  const char *dirs[] = {home && *home ? home : NULL, "/usr/local/cuda"};
  for (size_t k = 0; k < 2; k++) {
    if (!dirs[k]) continue;
    for (int sub = 0; sub < 2; sub++) {
      for (size_t i = 0; i < n; i++) {
        snprintf(path, cap, "%s/%s/%s", dirs[k], sub ? "lib" : "lib64", names[i]);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
      }
    }
  }
  path[0] = 0;
  return NULL;
}

static evtc_cuda_driver driver;
static loader driver_loader = {PTHREAD_ONCE_INIT, EVTC_OK, ""};

static void driver_load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    driver_loader.status = EVTC_ERR_UNSUPPORTED;
    snprintf(driver_loader.msg, sizeof driver_loader.msg, "no CUDA driver (libcuda.so.1 not found)");
    return;
  }
  if (!resolve(h, "libcuda.so.1", driver_syms, sizeof driver_syms / sizeof driver_syms[0], &driver, &driver_loader,
               "unusable CUDA driver"))
    dlclose(h);
}

static evtc_cuda_nvrtc nvrtc;
static loader nvrtc_loader = {PTHREAD_ONCE_INIT, EVTC_OK, ""};

static void nvrtc_load(void) {
  void *h = open_cuda_library(nvrtc_names, sizeof nvrtc_names / sizeof nvrtc_names[0], nvrtc.path, sizeof nvrtc.path);
  if (!h) {
    nvrtc_loader.status = EVTC_ERR_UNSUPPORTED;
    snprintf(nvrtc_loader.msg, sizeof nvrtc_loader.msg,
             "no NVRTC (libnvrtc.so.13/.12 not found; set CUDA_HOME to the CUDA toolkit)");
    return;
  }
  if (!resolve(h, nvrtc.path, nvrtc_syms, sizeof nvrtc_syms / sizeof nvrtc_syms[0], &nvrtc, &nvrtc_loader,
               "unusable NVRTC")) {
    dlclose(h);
    return;
  }
  if (nvrtc.nvrtcVersion(&nvrtc.major, &nvrtc.minor) != 0) {
    nvrtc_loader.status = EVTC_ERR_UNSUPPORTED;
    snprintf(nvrtc_loader.msg, sizeof nvrtc_loader.msg, "unusable NVRTC: nvrtcVersion failed in %s", nvrtc.path);
  }
}

static evtc_cuda_cublaslt cublaslt;
static loader cublaslt_loader = {PTHREAD_ONCE_INIT, EVTC_OK, ""};

static void cublaslt_load(void) {
  void *h = open_cuda_library(cublaslt_names, sizeof cublaslt_names / sizeof cublaslt_names[0], cublaslt.path,
                              sizeof cublaslt.path);
  if (!h) {
    cublaslt_loader.status = EVTC_ERR_UNSUPPORTED;
    snprintf(cublaslt_loader.msg, sizeof cublaslt_loader.msg,
             "no cuBLASLt (libcublasLt.so.13/.12 not found; set CUDA_HOME to the CUDA toolkit)");
    return;
  }
  if (!resolve(h, cublaslt.path, cublaslt_syms, sizeof cublaslt_syms / sizeof cublaslt_syms[0], &cublaslt,
               &cublaslt_loader, "unusable cuBLASLt"))
    dlclose(h);
}

/* The table if the load succeeded, else NULL with the load's message in d. */
static const void *loaded(const loader *l, const void *table, evtc_diag *d) {
  if (l->status == EVTC_OK) return table;
  evtc_diag_set(d, l->status, "%s", l->msg);
  return NULL;
}

const evtc_cuda_driver *evtc_cuda_driver_get(evtc_diag *d) {
  pthread_once(&driver_loader.once, driver_load);
  return loaded(&driver_loader, &driver, d);
}

const evtc_cuda_nvrtc *evtc_cuda_nvrtc_get(evtc_diag *d) {
  pthread_once(&nvrtc_loader.once, nvrtc_load);
  return loaded(&nvrtc_loader, &nvrtc, d);
}

const evtc_cuda_cublaslt *evtc_cuda_cublaslt_get(evtc_diag *d) {
  pthread_once(&cublaslt_loader.once, cublaslt_load);
  return loaded(&cublaslt_loader, &cublaslt, d);
}

void evtc_cuda_error_text(const evtc_cuda_driver *drv, CUresult r, char *buf, size_t cap) {
  const char *name = NULL, *text = NULL;
  if (drv->cuGetErrorName(r, &name) != 0) name = NULL;
  if (drv->cuGetErrorString(r, &text) != 0) text = NULL;
  if (name) snprintf(buf, cap, "%s: %s", name, text ? text : "no description");
  else if (r == 34) snprintf(buf, cap, "CUDA_ERROR_STUB_LIBRARY: libcuda.so.1 is the toolkit's stub, not a driver");
  else if (r == 35) snprintf(buf, cap, "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than the runtime");
  else snprintf(buf, cap, "CUDA error %d: unknown to this driver", r);
}

evtc_status evtc_cuda_fail(const evtc_cuda_driver *drv, CUresult r, const char *what, evtc_status s, evtc_diag *d) {
  if (r == EVTC_CUDA_SUCCESS) return EVTC_OK;
  char text[256];
  evtc_cuda_error_text(drv, r, text, sizeof text);
  return evtc_diag_set(d, s, "CUDA error in %s: %s", what, text);
}
