/* cmd_tune.c -- `evtc tune`: tune evtc's GEMM templates (sm_90a, and the
 * sm_80 one for families named ...-sm80) on this GPU, once per kernel
 * family, and cache the winners (cuda_gemm_tune.h).
 *
 * Code generation then reads the cache for every problem size; tuning
 * again is needed only for a new device or a changed template.  Prints one
 * progress line per candidate, then a table (last) with each family's
 * winner, its TFLOP/s and the default config's on every representative
 * problem, and the tuning time (NVRTC + GPU).  --compile-only builds the
 * candidates' CUBINs into the kernel cache without a GPU (for a device
 * whose NVRTC has the same version); --show prints what is cached.
 * It uses nothing of the other commands (no model loading), so a small
 * binary of this file, cli_args.c and a main calling evtc_cmd_tune can
 * stand in for evtc on a GPU machine (bench/gpu_gemm_tune.sh does that).
 */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_gemm_tune.h"
#include "cli.h"
#include "cli_args.h"

static const char tune_usage[] =
    "usage: evtc tune [--family F]... [--problem MxNxK]... [--jobs N] [--reduced]\n"
    "                 [--compile-only [--arch sm_NN] | --show]\n"
    "  --family F       a kernel family: TYPE-A-B-EPILOGUE with TYPE bf16|f16, A mk|km (A stored M x K or\n"
    "                   K x M), B nk|kn, EPILOGUE store|visitor, then -sm80 for the sm_80 template (mma.sync,\n"
    "                   any GPU from sm_80 on); default bf16-mk-nk-store; repeatable\n"
    "  --problem MxNxK  measure on these sizes instead of the representative set (repeatable, at most 8)\n"
    "  --jobs N         NVRTC threads (default: one per CPU)\n"
    "  --reduced        a handful of candidates (a quick check of the machinery)\n"
    "  --compile-only   compile the candidates into the kernel cache for --arch (default sm_90a: an H100 or\n"
    "                   H200; sm_80, sm_86, ... for the sm_80 template's families only); no GPU needed\n"
    "  --show           print the cached results for GPU 0; tune nothing\n";

enum { MAX_FAMILIES = 16 };

static void print_rows(const char *fam, const evtc_cuda_gemm_tuned *t) {
  char cfg[64];
  evtc_cuda_gemm_config_name(&t->cfg, cfg, sizeof cfg);
  for (int i = 0; i < t->n_problems; i++) {
    char shape[48], tuned[32] = "";
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)t->mnk[i][0], (long long)t->mnk[i][1],
             (long long)t->mnk[i][2]);
    if (i == 0) snprintf(tuned, sizeof tuned, "%.1f + %.1f", t->compile_s, t->measure_s);
    printf("%-20s %-24s %-18s %9.1f %9.1f %7.3f  %s\n", i ? "" : fam, i ? "" : cfg, shape, t->tflops[i],
           t->default_tflops[i], t->default_tflops[i] > 0 ? t->tflops[i] / t->default_tflops[i] : 0, tuned);
  }
}

static void print_header(void) {
  printf("\n%-20s %-24s %-18s %9s %9s %7s  %s\n", "family", "winner", "M x N x K", "TFLOP/s", "default", "ratio",
         "tuning s (NVRTC + GPU)");
}

int evtc_cmd_tune(int argc, char **argv) {
  evtc_cuda_gemm_family fams[MAX_FAMILIES];
  int n_fams = 0;
  evtc_cuda_gemm_tune_options o = {.log = stdout};
  bool compile_only = false, show = false;
  const char *arch = NULL;    /* --arch: the target of --compile-only (default sm_90a) */
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    long long m, n, k;
    char tail[2];
    int64_t jobs;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(tune_usage, stdout);
      return EVTC_EXIT_OK;
    }
    if (!strcmp(a, "--family") && val && n_fams < MAX_FAMILIES && evtc_cuda_gemm_family_parse(val, &fams[n_fams])) {
      n_fams++;
      i++;
    } else if (!strcmp(a, "--problem") && val && o.n_problems < EVTC_TUNE_MAX_PROBLEMS &&
               sscanf(val, "%lldx%lldx%lld%1s", &m, &n, &k, tail) == 3 && m > 0 && n > 0 && k > 0) {
      memcpy(o.mnk[o.n_problems++], (int64_t[3]){m, n, k}, sizeof o.mnk[0]);
      i++;
    } else if (!strcmp(a, "--jobs") && val) {
      if (!evtc_cli_int("--jobs", val, 1, 1024, &jobs)) return EVTC_EXIT_BAD_INPUT;
      o.jobs = (int)jobs;
      i++;
    } else if (!strcmp(a, "--reduced")) {
      o.reduced = true;
    } else if (!strcmp(a, "--compile-only")) {
      compile_only = true;
    } else if (!strcmp(a, "--arch") && val) {
      int major = 0, used = 0;
      if (sscanf(val, "sm_%d%n", &major, &used) != 1 || major < 80 || (val[used] && strcmp(val + used, "a") != 0)) {
        fprintf(stderr, "evtc: tune: --arch %s is not sm_80 or later (sm_80, sm_86, sm_90a, ...)\n", val);
        return EVTC_EXIT_BAD_INPUT;
      }
      arch = val;
      i++;
    } else if (!strcmp(a, "--show")) {
      show = true;
    } else {
      fprintf(stderr, "evtc: tune: bad argument '%s'%s%s\n%s", a, val && a[0] == '-' ? " " : "",
              val && a[0] == '-' ? val : "", tune_usage);
      return EVTC_EXIT_BAD_INPUT;
    }
  }
  if (compile_only && show) {
    fprintf(stderr, "evtc: tune: --compile-only and --show exclude each other\n%s", tune_usage);
    return EVTC_EXIT_BAD_INPUT;
  }
  if (arch && !compile_only) {    /* tuning measures GPU 0, whatever its arch */
    fprintf(stderr, "evtc: tune: --arch %s without --compile-only: tuning runs on GPU 0's own arch\n%s", arch,
            tune_usage);
    return EVTC_EXIT_BAD_INPUT;
  }
  if (n_fams == 0) evtc_cuda_gemm_family_parse("bf16-mk-nk-store", &fams[n_fams++]);
  evtc_diag d = {0};
  char fam[32];
  if (compile_only) {
    if (!arch) arch = "sm_90a";
    for (int i = 0; i < n_fams; i++) {    /* every family checked before any is compiled */
      evtc_cuda_gemm_family_name(&fams[i], fam, sizeof fam);
      if (!fams[i].sm80 && strcmp(arch, "sm_90a") != 0) {
        fprintf(stderr, "evtc: tune: family %s is the sm_90a template's: --arch %s cannot run it\n", fam, arch);
        return EVTC_EXIT_BAD_INPUT;
      }
    }
    for (int i = 0; i < n_fams; i++) {
      int built = 0, hits = 0;
      evtc_cuda_gemm_family_name(&fams[i], fam, sizeof fam);
      if (evtc_cuda_gemm_tune_compile(arch, &fams[i], &o, &built, &hits, &d) != EVTC_OK) {
        fprintf(stderr, "evtc: tune: %s: %s\n", fam, d.msg);
        return EVTC_EXIT_FAIL;
      }
      printf("%s: %d kernels compiled for %s, %d already in the cache\n", fam, built, arch, hits);
    }
    return EVTC_EXIT_OK;
  }
  evtc_cuda_device dev;
  if (evtc_cuda_device_open(&dev, 0, &d) != EVTC_OK) {
    fprintf(stderr, "evtc: tune: %s\n", d.msg);
    return EVTC_EXIT_FAIL;
  }
  evtc_cuda_gemm_tuned res[MAX_FAMILIES];
  bool have[MAX_FAMILIES] = {false};
  int rc = EVTC_EXIT_OK;
  printf("device %s, %d SMs, compute capability %d.%d\n", dev.name, dev.sm_count, dev.cc_major, dev.cc_minor);
  for (int i = 0; i < n_fams; i++) {
    evtc_cuda_gemm_family_name(&fams[i], fam, sizeof fam);
    char why[512];
    if (show) {
      evtc_cuda_tune_device id = evtc_cuda_tune_device_of(&dev);
      have[i] = evtc_cuda_gemm_tune_load(&id, &fams[i], &res[i], why, sizeof why);
      if (!have[i]) printf("%s: %s\n", fam, why);
      continue;
    }
    printf("== tuning %s\n", fam);
    fflush(stdout);
    d = (evtc_diag){0};
    if (evtc_cuda_gemm_tune(&dev, &fams[i], &o, &res[i], &d) != EVTC_OK) {
      fprintf(stderr, "evtc: tune: %s: %s\n", fam, d.msg);
      rc = EVTC_EXIT_FAIL;
      continue;
    }
    have[i] = true;
    printf("%s: %d candidates, %d rejected; tuned in %.1f s (NVRTC %.1f s, GPU %.1f s)\n", fam, res[i].candidates,
           res[i].rejected, res[i].compile_s + res[i].measure_s, res[i].compile_s, res[i].measure_s);
  }
  print_header();
  for (int i = 0; i < n_fams; i++) {
    evtc_cuda_gemm_family_name(&fams[i], fam, sizeof fam);
    if (have[i]) print_rows(fam, &res[i]);
  }
  evtc_cuda_device_close(&dev);
  return rc;
}
