/* gpu_session.h -- the start and the skip that the GPU tests share.
 *
 * gpu_open opens device 0 and NVRTC; without them a test still emits its
 * kernels and, when NVRTC alone is there, compiles them for sm_90a (so a
 * staged CUBIN cache serves the GPU run), then gpu_skip ends it: the
 * failures found so far, else SKIPPED and exit 77 (a CTest skip, label
 * gpu).  Include after check.h.
 */
#ifndef EVTC_TEST_GPU_SESSION_H
#define EVTC_TEST_GPU_SESSION_H

#include <stdio.h>

#include "backend/cuda/cuda_compile.h"
#include "backend/cuda/cuda_device.h"

/* True when device 0 and NVRTC opened into dev (else why in d); *nvrtc: NVRTC is there, GPU or not. */
static inline bool gpu_open(evtc_cuda_device *dev, evtc_diag *d, bool *nvrtc) {
  bool open = evtc_cuda_device_open(dev, 0, d) == EVTC_OK && evtc_cuda_nvrtc_get(d) != NULL;
  *nvrtc = true;
  if (!open) {
    evtc_diag nd = {0};
    *nvrtc = evtc_cuda_nvrtc_get(&nd) != NULL;
    if (!*nvrtc) printf("no NVRTC (%s): the kernels are not compiled\n", nd.msg);
  }
  return open;
}

/* The exit status of a run without a GPU. */
static inline int gpu_skip(const char *why) {
  if (check_failed) return check_summary();
  printf("SKIPPED: %s\n", why);
  return 77;
}

#endif
