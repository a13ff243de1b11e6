/* backend_select.c -- a backend by its command-line name (backend.h).
 *
 * "cpu" and "cuda" name their backends; "auto" is CUDA when a GPU, its
 * driver and NVRTC are present, else the CPU backend.  An unusable
 * "cuda" is an error naming the cause ("no CUDA driver (...)").
 */
#include <string.h>

#include "backend/backend.h"

const evtc_backend *evtc_backend_by_name(const char *name, evtc_diag *d) {
  if (strcmp(name, "cpu") == 0) return evtc_backend_cpu();
  if (strcmp(name, "auto") == 0) {
    evtc_diag probe = {0};
    const evtc_backend *be = evtc_backend_cuda(&probe);
    return be ? be : evtc_backend_cpu();
  }
  if (strcmp(name, "cuda") == 0) {
    evtc_diag why = {0};
    const evtc_backend *be = evtc_backend_cuda(&why);
    if (!be) evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "--backend cuda: %s", why.msg);
    return be;
  }
  evtc_diag_set(d, EVTC_ERR_INVALID, "--backend: '%s' is not cpu, cuda, auto or interp", name);
  return NULL;
}
