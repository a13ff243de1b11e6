/* cuda_compile.h -- CUDA C source to CUBIN through NVRTC, cached on disk.
 *
 * Kernels are compiled for one exact architecture (sm_90a on an H200, so
 * that wgmma, setmaxnreg and TMA are available), never as PTX for the
 * driver to finish.  Results live in $XDG_CACHE_HOME/evtc/cuda (default
 * ~/.cache/evtc/cuda) as evtc-<hash>.cubin, keyed by a 64-bit FNV-1a hash of
 * the source, the options, the NVRTC version and the architecture; the
 * source is written beside the entry (evtc-<hash>.cu) so that errors and
 * profilers can point at it, and a failed compile leaves its full log in
 * evtc-<hash>.log.  All files are written atomically.
 *
 * Compilation needs NVRTC only, not a GPU or a driver.
 */
#ifndef EVTC_CUDA_COMPILE_H
#define EVTC_CUDA_COMPILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/diag.h"

typedef struct evtc_cuda_cubin {
  char *data;      /* the CUBIN image (malloc'd) */
  size_t size;
  bool cache_hit;  /* read from the disk cache rather than compiled */
  char *path;      /* the cache entry (malloc'd) */
} evtc_cuda_cubin;

/* The NVRTC target for compute capability major.minor into buf: "sm_XYa"
 * for 9.0 and newer (the arch-specific features evtc's kernels use), "sm_XY"
 * before.  False when buf is too small. */
bool evtc_cuda_arch_name(int major, int minor, char *buf, size_t cap);

/* $XDG_CACHE_HOME/evtc/cuda, else $HOME/.cache/evtc/cuda, into buf; false
 * when neither variable is set or buf is too small. */
bool evtc_cuda_cache_dir(char *buf, size_t cap);

/* Compiles src for arch (e.g. "sm_90a") with the extra NVRTC options
 * opts[0..n_opts), or reads the cached CUBIN.  `name` names the kernel (or
 * kernel group) in messages.  On success fills *out (free with
 * evtc_cuda_cubin_free).  Errors: EVTC_ERR_UNSUPPORTED without NVRTC,
 * EVTC_ERR_IO for cache files, EVTC_ERR_INVALID when NVRTC rejects the
 * source: "NVRTC failed to compile kernel <name> (source <file>.cu, log
 * <file>.log): <log>", the log cut to fit the message. */
evtc_status evtc_cuda_compile(const char *src, const char *name, const char *arch, const char *const *opts, int n_opts,
                              evtc_cuda_cubin *out, evtc_diag *d);

void evtc_cuda_cubin_free(evtc_cuda_cubin *c);

#endif
