/* cuda_gemm_tune.h -- the tuner of evtc's GEMM templates: which
 * evtc_cuda_gemm_config to use, measured once per device and kernel family.
 *
 * The search space is hardware-centric and independent of the problem size
 * (Hidet's approach).  For the sm_90a template: output tiles of 64, 128 or
 * 256 rows and columns, 2 to 7 stages, 1 or 2 consumer warpgroups,
 * cooperative or pingpong; for the sm_80 template (mma.sync, cp.async: any
 * GPU from sm_80 on): the same tiles, 2 to 6 stages, 1 or 2 warpgroups,
 * within the device's shared memory; for both a grouped raster of 4, 8 or
 * 16 tile rows, each config kept only when evtc_cuda_gemm_config_check
 * accepts it (mma shapes, TMA boxes, accumulator registers, shared
 * memory).  A kernel family is what the kernel's code depends on besides
 * the config: the template, input type, operand majorness and the kind of
 * epilogue (the built-in store, or a visitor epilogue with direct stores;
 * the tuner measures the latter with a row broadcast + GELU + bf16/f16
 * store, the commonest visitor).
 *
 * Tuning (cuda_gemm_tune.c) compiles every candidate through NVRTC (in
 * parallel, each kernel its own program; the CUBIN cache makes a second
 * run free) and times it on a fixed set of representative problems (not
 * the user's sizes), each candidate's output first checked element by
 * element against the default config's output (itself checked against a
 * float64 host reference), so a wrong config is never chosen.  The score
 * is the geometric mean over the problems of the speed-up over the
 * default config; group_m is searched around the best few tile shapes, and
 * a challenger must beat the default by 1 % in a longer final timing.
 *
 * The winner is cached on disk (cuda_gemm_tune_cache.c), one small text
 * file per device and family under $XDG_CACHE_HOME/evtc/tune (else
 * ~/.cache/evtc/tune), written atomically; a device is its name, SM count
 * and compute capability.  The file also records a fingerprint of the
 * template (a hash of the family's default kernel source), so a changed
 * template reads as "not tuned" instead of a stale answer.  Later runs,
 * for any problem size, only read it: evtc_cuda_gemm_tuned_config.
 */
#ifndef EVTC_CUDA_GEMM_TUNE_H
#define EVTC_CUDA_GEMM_TUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_emit_gemm.h"

/* A kernel family: the tuned config is kept per family and device. */
typedef struct evtc_cuda_gemm_family {
  evtc_dtype in;             /* EVTC_BF16 or EVTC_F16 */
  bool a_kmajor, b_kmajor;   /* as in evtc_cuda_gemm_variant */
  bool visitor;              /* a visitor epilogue (direct stores) rather than the built-in staged store */
  bool sm80;                 /* the sm_80 template (config.sm80) rather than the sm_90a one */
} evtc_cuda_gemm_family;

/* The family of a kernel of variant v (v->out does not matter) on the sm_80 template or the sm_90a one. */
evtc_cuda_gemm_family evtc_cuda_gemm_family_of(const evtc_cuda_gemm_variant *v, bool visitor, bool sm80);
/* The variant the tuner builds, checks and measures family f's kernels as: f's layouts, output in the input type. */
evtc_cuda_gemm_variant evtc_cuda_gemm_family_variant(const evtc_cuda_gemm_family *f);
/* "bf16-mk-nk-store", "f16-km-kn-visitor-sm80", ...: the type, A as stored
 * (mk: M x K, km: K x M), B as stored (nk: N x K, kn: K x N; "mk-nk" is a
 * linear layer's forward pass), the epilogue, then "-sm80" for the sm_80
 * template. */
void evtc_cuda_gemm_family_name(const evtc_cuda_gemm_family *f, char *buf, size_t cap);
/* The inverse of family_name; false on anything else. */
bool evtc_cuda_gemm_family_parse(const char *s, evtc_cuda_gemm_family *f);

/* What identifies a device in the cache. */
typedef struct evtc_cuda_tune_device {
  char name[128];
  int sm_count, cc_major, cc_minor;
} evtc_cuda_tune_device;

evtc_cuda_tune_device evtc_cuda_tune_device_of(const evtc_cuda_device *dev);

/* The default config of family f on a device whose blocks may opt in to smem_optin bytes of shared memory (the
 * sm_80 template's default depends on it): what tuning measures the candidates against, and what code
 * generation uses where the family is not tuned. */
evtc_cuda_gemm_config evtc_cuda_gemm_family_default(const evtc_cuda_gemm_family *f, int smem_optin);

/* The candidates of family f with raster group_m (search order, no
 * duplicates, each accepted by config_check and, with smem_limit > 0, within
 * that many bytes of shared memory), at most cap of them into out; returns
 * how many there are.  reduced: a handful only (tests). */
int evtc_cuda_gemm_tune_space(const evtc_cuda_gemm_family *f, int group_m, bool reduced, int smem_limit,
                              evtc_cuda_gemm_config *out, int cap);

enum { EVTC_TUNE_MAX_PROBLEMS = 8 };

/* A tuning result, as stored in the cache. */
typedef struct evtc_cuda_gemm_tuned {
  evtc_cuda_gemm_config cfg;           /* the winner */
  int n_problems;
  int64_t mnk[EVTC_TUNE_MAX_PROBLEMS][3];
  double tflops[EVTC_TUNE_MAX_PROBLEMS];          /* the winner's, per problem */
  double default_tflops[EVTC_TUNE_MAX_PROBLEMS];  /* the default config's */
  int candidates, rejected;            /* measured; rejected: failed to build, run or match the default */
  double compile_s, measure_s;         /* wall time of the tuning run: NVRTC (or cache reads), then the GPU */
} evtc_cuda_gemm_tuned;

/* The template fingerprint of family f (see the top). */
uint64_t evtc_cuda_gemm_tune_fingerprint(const evtc_cuda_gemm_family *f);

/* The cache file of (device, family) into buf; false when no cache
 * directory can be named (no XDG_CACHE_HOME or HOME) or buf is too small. */
bool evtc_cuda_gemm_tune_path(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f, char *buf,
                              size_t cap);
/* Writes t for (dev, f), creating the directory; EVTC_ERR_IO naming the file. */
evtc_status evtc_cuda_gemm_tune_save(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f,
                                     const evtc_cuda_gemm_tuned *t, evtc_diag *d);
/* Reads the result of (dev, f).  False with the reason in why when there is
 * none, it is unreadable or malformed, was made for another device, family
 * or template version, or holds a config that config_check refuses. */
bool evtc_cuda_gemm_tune_load(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f,
                              evtc_cuda_gemm_tuned *t, char *why, size_t cap);

/* THE LOOKUP for code generation: the tuned config of the family of (v,
 * visitor_epilogue, sm80) on dev into *out; false (out untouched) when there
 * is no valid cached result -- the caller then uses the family's default.
 * Cheap after the first call per family (remembered in the process while
 * the file is unchanged); thread-safe. */
bool evtc_cuda_gemm_tuned_config(const evtc_cuda_device *dev, const evtc_cuda_gemm_variant *v, bool visitor_epilogue,
                                 bool sm80, evtc_cuda_gemm_config *out);

/* ---- tuning (cuda_gemm_tune.c) ---- */

typedef struct evtc_cuda_gemm_tune_options {
  bool reduced;                /* the reduced space (tests) */
  int jobs;                    /* NVRTC threads; 0: one per online CPU */
  int n_problems;              /* 0: the representative set: 8192x8192x4096, 16384x4096x1024,
                                * 16384x1024x4096, 4096x4096x4096 */
  int64_t mnk[EVTC_TUNE_MAX_PROBLEMS][3];
  FILE *log;                   /* progress lines (NULL: none) */
} evtc_cuda_gemm_tune_options;

/* Compiles (or finds in the CUBIN cache) every kernel that tuning family f
 * needs on a device of NVRTC target arch without measuring anything: no GPU
 * needed (for an sm_80 family the space within 227 KiB of shared memory, an
 * H100's or H200's).  The group_m variants searched after the first pass depend on
 * the measurements and are compiled during tuning.  *compiled and *cached
 * (either may be NULL) count the kernels built and found. */
evtc_status evtc_cuda_gemm_tune_compile(const char *arch, const evtc_cuda_gemm_family *f,
                                        const evtc_cuda_gemm_tune_options *o, int *compiled, int *cached,
                                        evtc_diag *d);

/* Tunes family f on dev, saves the result in the cache and returns it in
 * *out.  After a fault inside a candidate kernel the device is closed and
 * reopened (the candidate counts as rejected), so dev's context and stream
 * may change.  Errors: the default config failing its own check against
 * the host reference (EVTC_ERR_RUNTIME), a device that is not sm_90a for an
 * sm_90a family or older than sm_80 for an sm_80 one (EVTC_ERR_UNSUPPORTED),
 * allocation, NVRTC or cache failures. */
evtc_status evtc_cuda_gemm_tune(evtc_cuda_device *dev, const evtc_cuda_gemm_family *f,
                                const evtc_cuda_gemm_tune_options *o, evtc_cuda_gemm_tuned *out, evtc_diag *d);

/* The source of family f's kernel for cfg (named "evtc_tune_gemm"), what
 * tuning compiles and fingerprints; malloc'd. */
char *evtc_cuda_gemm_tune_source(const evtc_cuda_gemm_family *f, const evtc_cuda_gemm_config *cfg);

#endif
