/* cuda_api.h -- the CUDA driver, NVRTC and cuBLASLt, opened with dlopen.
 *
 * evtc builds and runs on machines without CUDA: nothing here includes a
 * CUDA header or links a CUDA library.  The few types and constants evtc
 * uses are declared below with the values of CUDA's own headers (cuda.h,
 * nvrtc.h, cublasLt.h; checked against CUDA 13.0), and each library is
 * opened at first use.  Each loader fills a table holding exactly the entry
 * points evtc calls; the table is built once per process and never freed.
 *
 * Driver entry points are resolved by the versioned symbol that cuda.h maps
 * each name to (cuMemAlloc -> cuMemAlloc_v2, ...), so the table's members
 * carry CUDA's unversioned names but call the same functions a program
 * compiled against cuda.h would.
 */
#ifndef EVTC_CUDA_API_H
#define EVTC_CUDA_API_H

#include <stddef.h>

#include "util/diag.h"

/* ---- driver types (cuda.h) ---- */
typedef int CUresult;                   /* CUDA_SUCCESS == 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum {
  EVTC_CUDA_SUCCESS = 0,
  EVTC_CUDA_ERROR_NO_DEVICE = 100,
};

/* CUdevice_attribute values evtc reads. */
enum {
  EVTC_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
  EVTC_CU_ATTR_CLOCK_RATE_KHZ = 13,
  EVTC_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
  EVTC_CU_ATTR_MEMORY_CLOCK_RATE_KHZ = 36,
  EVTC_CU_ATTR_GLOBAL_MEMORY_BUS_WIDTH = 37,
  EVTC_CU_ATTR_L2_CACHE_SIZE = 38,
  EVTC_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
  EVTC_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
  EVTC_CU_ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  EVTC_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum { EVTC_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };
enum { EVTC_CU_STREAM_NON_BLOCKING = 1 };
enum { EVTC_CU_EVENT_DEFAULT = 0 };
/* CUstreamCaptureMode: only this thread is kept from calls that are unsafe while its stream captures. */
enum { EVTC_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };

/* cuLaunchKernelEx's configuration (CUlaunchConfig) with its attributes (CUlaunchAttribute: an id, then a 64-byte
 * value at offset 8); evtc sets one, programmatic stream serialization: the kernel may start before the one ahead
 * of it in the stream ends, and waits for it with griddepcontrol.wait. */
enum { EVTC_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct evtc_cu_launch_attr {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization;
    void *align;                          /* the driver's union holds pointers */
  } value;
} evtc_cu_launch_attr;
typedef struct evtc_cu_launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  evtc_cu_launch_attr *attrs;
  unsigned n_attrs;
} evtc_cu_launch_config;

/* The driver entry points evtc calls (symbol resolved in parentheses). */
typedef struct evtc_cuda_driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);                  /* _v2 */
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);                        /* _v2 */
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);                     /* _v2 */
  CUresult (*cuMemFree)(CUdeviceptr ptr);                                     /* _v2 */
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s); /* _v2 */
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);       /* _v2 */
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s); /* _v2 */
  CUresult (*cuMemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count, CUstream s);
  CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
  CUresult (*cuModuleUnload)(CUmodule mod);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction fn, int attribute, int value);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, CUstream s, void **params, void **extra);
  /* every block resident at once (or CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE): kernels with a grid-wide barrier */
  CUresult (*cuLaunchCooperativeKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shared_bytes, CUstream s, void **params);
  CUresult (*cuLaunchKernelEx)(const evtc_cu_launch_config *config, CUfunction fn, void **params, void **extra);
  /* clusters of fn (its compile-time cluster shape) that can run at once with config's block and shared memory */
  CUresult (*cuOccupancyMaxActiveClusters)(int *clusters, CUfunction fn, const evtc_cu_launch_config *config);
  CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
  CUresult (*cuStreamSynchronize)(CUstream s);
  CUresult (*cuStreamDestroy)(CUstream s);                                    /* _v2 */
  CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
  CUresult (*cuEventRecord)(CUevent e, CUstream s);
  CUresult (*cuEventSynchronize)(CUevent e);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);      /* _v2, else unversioned */
  CUresult (*cuEventDestroy)(CUevent e);                                      /* _v2 */
  /* CUDA graphs: a stream's launches captured, instantiated, replayed */
  CUresult (*cuStreamBeginCapture)(CUstream s, int mode);                     /* _v2 */
  CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *graph);
  CUresult (*cuGraphInstantiate)(CUgraphExec *exec, CUgraph graph, unsigned long long flags); /* WithFlags */
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuGetErrorName)(CUresult r, const char **name);
  CUresult (*cuGetErrorString)(CUresult r, const char **text);
  /* TMA descriptors (CUDA 12+): enum arguments as int; the map is 128 opaque bytes, 64-byte aligned */
  CUresult (*cuTensorMapEncodeTiled)(void *tensor_map, int data_type, unsigned rank, void *global_address,
                                     const unsigned long long *global_dim, const unsigned long long *global_strides,
                                     const unsigned *box_dim, const unsigned *element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill);
} evtc_cuda_driver;

/* ---- NVRTC (nvrtc.h) ---- */
typedef int nvrtcResult;                /* NVRTC_SUCCESS == 0 */
typedef struct _nvrtcProgram *nvrtcProgram;
enum { EVTC_NVRTC_ERROR_COMPILATION = 6 };

typedef struct evtc_cuda_nvrtc {
  nvrtcResult (*nvrtcVersion)(int *major, int *minor);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name, int n_headers,
                                    const char *const *headers, const char *const *include_names);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int n_options, const char *const *options);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
  const char *(*nvrtcGetErrorString)(nvrtcResult r);
  int major, minor;                     /* nvrtcVersion, read at load */
  char path[256];                       /* the library that was opened */
} evtc_cuda_nvrtc;

/* ---- cuBLASLt (cublasLt.h) ---- */
typedef int cublasStatus_t;             /* CUBLAS_STATUS_SUCCESS == 0 */
typedef struct cublasLtContext *cublasLtHandle_t;

typedef struct cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;
typedef struct {
  unsigned long long data[8];
} evtc_cublasLtMatmulAlgo;
typedef struct {                        /* cublasLtMatmulHeuristicResult_t */
  evtc_cublasLtMatmulAlgo algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} evtc_cublasLtHeuristic;

/* cudaDataType_t, cublasComputeType_t, cublasOperation_t and attribute ids. */
enum { EVTC_CUDA_R_32F = 0, EVTC_CUDA_R_64F = 1, EVTC_CUDA_R_16F = 2, EVTC_CUDA_R_16BF = 14 };
enum { EVTC_CUBLAS_COMPUTE_32F = 68, EVTC_CUBLAS_COMPUTE_64F = 70 };
enum { EVTC_CUBLAS_OP_N = 0, EVTC_CUBLAS_OP_T = 1 };
enum { EVTC_CUBLASLT_MATMUL_DESC_TRANSA = 3, EVTC_CUBLASLT_MATMUL_DESC_TRANSB = 4 };
enum { EVTC_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5, EVTC_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 };
enum { EVTC_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };
enum { EVTC_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, EVTC_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
       EVTC_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7, EVTC_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8 };

typedef struct evtc_cuda_cublaslt {
  size_t (*cublasLtGetVersion)(void);
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t *handle);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t handle);
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t *desc, int compute_type, int scale_type);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t desc);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, int attr, const void *buf, size_t size);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t *layout, int type, unsigned long long rows,
                                               unsigned long long cols, long long ld);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t layout);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t layout, int attr, const void *buf,
                                                     size_t size);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t *pref);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref, int attr, const void *buf,
                                                         size_t size);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                                   cublasLtMatmulPreference_t pref, int requested,
                                                   evtc_cublasLtHeuristic *results, int *returned);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                   const void *a, cublasLtMatrixLayout_t a_layout, const void *b,
                                   cublasLtMatrixLayout_t b_layout, const void *beta, const void *c,
                                   cublasLtMatrixLayout_t c_layout, void *dd, cublasLtMatrixLayout_t d_layout,
                                   const evtc_cublasLtMatmulAlgo *algo, void *workspace, size_t workspace_bytes,
                                   CUstream stream);
  char path[256];
} evtc_cuda_cublaslt;

/* Each loader opens its library on the first call (thread-safe) and returns
 * the same table afterwards.  When the library or one of its entry points is
 * missing it returns NULL and records EVTC_ERR_UNSUPPORTED in d, e.g.
 * "no CUDA driver (libcuda.so.1 not found)"; later calls report the same.
 *
 * libcuda.so.1 is searched by the dynamic loader only (the driver installs
 * it there).  NVRTC (libnvrtc.so.13, .so.12, .so) and cuBLASLt
 * (libcublasLt.so.13, .so.12, .so) are tried by soname, then in
 * $CUDA_HOME/lib64, $CUDA_HOME/lib, /usr/local/cuda/lib64, /usr/local/cuda/lib. */
const evtc_cuda_driver *evtc_cuda_driver_get(evtc_diag *d);
const evtc_cuda_nvrtc *evtc_cuda_nvrtc_get(evtc_diag *d);
const evtc_cuda_cublaslt *evtc_cuda_cublaslt_get(evtc_diag *d);

/* "<name>: <string>" of driver result r into buf, in CUDA's own words
 * (a stub libcuda cannot name its own errors: those are named here). */
void evtc_cuda_error_text(const evtc_cuda_driver *drv, CUresult r, char *buf, size_t cap);
/* Formats a failed driver call as "CUDA error in <what>: <name>: <string>"
 * into d with status s and returns s (EVTC_OK, leaving d alone, when r is 0). */
evtc_status evtc_cuda_fail(const evtc_cuda_driver *drv, CUresult r, const char *what, evtc_status s, evtc_diag *d);

#endif
