/* cuda_compile.c -- NVRTC compilation with an on-disk CUBIN cache (see
 * cuda_compile.h for the cache layout and the error contract).
 */
#include "backend/cuda/cuda_compile.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cuda/cuda_api.h"
#include "runtime/atomic_file.h"
#include "util/fs.h"
#include "util/hash.h"

bool evtc_cuda_arch_name(int major, int minor, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "sm_%d%d%s", major, minor, major >= 9 ? "a" : "");
  return n > 0 && (size_t)n < cap;
}

bool evtc_cuda_cache_dir(char *buf, size_t cap) { return evtc_cache_dir("cuda", buf, cap); }

void evtc_cuda_cubin_free(evtc_cuda_cubin *c) {
  free(c->data);
  free(c->path);
  memset(c, 0, sizeof *c);
}

/* Hashes a string and its terminating NUL, so that ("ab","c") != ("a","bc"). */
static uint64_t fnv1a_str(uint64_t h, const char *s) { return evtc_fnv1a(h, s, strlen(s) + 1); }

/* Reads a cached CUBIN (an ELF image) into out; false when absent or not ELF. */
static bool read_cubin(const char *path, evtc_cuda_cubin *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  bool ok = false;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n > 4 && fseek(f, 0, SEEK_SET) == 0) {
      out->data = malloc((size_t)n);
      ok = fread(out->data, 1, (size_t)n, f) == (size_t)n && memcmp(out->data, "\177ELF", 4) == 0;
      if (ok) out->size = (size_t)n;
      else {
        free(out->data);
        out->data = NULL;
      }
    }
  }
  fclose(f);
  return ok;
}

static evtc_status write_file(const char *path, const void *data, size_t n, evtc_diag *d) {
  evtc_atomic_file af;
  if (!evtc_atomic_open(&af, path, d)) return d->status;
  fwrite(data, 1, n, af.f);
  return evtc_atomic_commit(&af, d);
}

/* NVRTC's log for prog (malloc'd, trailing whitespace trimmed; "" if none). */
static char *program_log(const evtc_cuda_nvrtc *nv, nvrtcProgram prog) {
  size_t n = 0;
  if (nv->nvrtcGetProgramLogSize(prog, &n) != 0 || n == 0) return calloc(1, 1);
  char *log = calloc(1, n + 1);
  if (nv->nvrtcGetProgramLog(prog, log) != 0) log[0] = 0;
  size_t len = strlen(log);
  while (len > 0 && (log[len - 1] == '\n' || log[len - 1] == ' ' || log[len - 1] == '\r')) log[--len] = 0;
  return log;
}

/* Runs NVRTC on src (named by its cache path cu_path in the log) and fills
 * out->data/size; on a rejected source writes the log to log_path and
 * records the EVTC_ERR_INVALID message of cuda_compile.h. */
static evtc_status nvrtc_build(const evtc_cuda_nvrtc *nv, const char *src, const char *name, const char *arch,
                               const char *const *opts, int n_opts, const char *cu_path, const char *log_path,
                               evtc_cuda_cubin *out, evtc_diag *d) {
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  const char **all = malloc(sizeof *all * (size_t)(n_opts + 1));
  all[0] = arch_opt;
  for (int i = 0; i < n_opts; i++) all[i + 1] = opts[i];
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv->nvrtcCreateProgram(&prog, src, cu_path, 0, NULL, NULL);
  if (r != 0) {
    free(all);
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "NVRTC cannot create a program for kernel %s: %s", name,
                         nv->nvrtcGetErrorString(r));
  }
  r = nv->nvrtcCompileProgram(prog, n_opts + 1, all);
  free(all);
  if (r != 0) {
    char *log = program_log(nv, prog);
    if (write_file(log_path, log, strlen(log), d) == EVTC_OK)
      evtc_diag_set(d, EVTC_ERR_INVALID, "NVRTC failed to compile kernel %s (source %s, log %s): %s: %s", name,
                    cu_path, log_path, nv->nvrtcGetErrorString(r), log[0] ? log : "no log");
    free(log);
    nv->nvrtcDestroyProgram(&prog);
    return d->status;
  }
  size_t n = 0;
  r = nv->nvrtcGetCUBINSize(prog, &n);
  if (r == 0 && n > 0) {
    out->data = malloc(n);
    r = nv->nvrtcGetCUBIN(prog, out->data);
    out->size = n;
  }
  nv->nvrtcDestroyProgram(&prog);
  if (r != 0 || n == 0) {
    free(out->data);
    out->data = NULL;
    out->size = 0;
    return evtc_diag_set(d, EVTC_ERR_RUNTIME, "NVRTC produced no CUBIN for kernel %s (arch %s): %s", name, arch,
                         r ? nv->nvrtcGetErrorString(r) : "empty image");
  }
  return EVTC_OK;
}

evtc_status evtc_cuda_compile(const char *src, const char *name, const char *arch, const char *const *opts, int n_opts,
                              evtc_cuda_cubin *out, evtc_diag *d) {
  memset(out, 0, sizeof *out);
  const evtc_cuda_nvrtc *nv = evtc_cuda_nvrtc_get(d);
  if (!nv) return d->status;
  char dir[4096];
  if (!evtc_cuda_cache_dir(dir, sizeof dir - 64))
    return evtc_diag_set(d, EVTC_ERR_IO, "no CUDA kernel cache directory: set XDG_CACHE_HOME or HOME");
  if (!evtc_mkdirs(dir))
    return evtc_diag_set(d, EVTC_ERR_IO, "cannot create the CUDA kernel cache %s: %s", dir, strerror(errno));

  char version[32];
  snprintf(version, sizeof version, "nvrtc %d.%d", nv->major, nv->minor);
  uint64_t h = fnv1a_str(EVTC_FNV1A_BASIS, "evtc-cuda-cubin 1");
  h = fnv1a_str(h, version);
  h = fnv1a_str(h, arch);
  for (int i = 0; i < n_opts; i++) h = fnv1a_str(h, opts[i]);
  h = fnv1a_str(h, src);

  size_t cap = strlen(dir) + 48;
  char *cu_path = malloc(cap), *log_path = malloc(cap);
  out->path = malloc(cap);
  snprintf(out->path, cap, "%s/evtc-%016llx.cubin", dir, (unsigned long long)h);
  snprintf(cu_path, cap, "%s/evtc-%016llx.cu", dir, (unsigned long long)h);
  snprintf(log_path, cap, "%s/evtc-%016llx.log", dir, (unsigned long long)h);

  evtc_status s = EVTC_OK;
  if (read_cubin(out->path, out)) {
    out->cache_hit = true;
  } else {
    s = write_file(cu_path, src, strlen(src), d);
    if (s == EVTC_OK) s = nvrtc_build(nv, src, name, arch, opts, n_opts, cu_path, log_path, out, d);
    if (s == EVTC_OK) s = write_file(out->path, out->data, out->size, d);
  }
  free(cu_path);
  free(log_path);
  if (s != EVTC_OK) evtc_cuda_cubin_free(out);
  return s;
}
