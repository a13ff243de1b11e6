/* cli_args.c -- option values of the evtc subcommands, checked strictly. */
#include "cli_args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"

bool evtc_cli_value(int argc, char **argv, int *i, const char **out) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "evtc: %s needs a value\n", argv[*i]);
    return false;
  }
  *out = argv[++*i];
  return true;
}

bool evtc_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "evtc: %s: '%s' is not an integer in %" PRId64 "..%" PRId64 "\n", opt, s, lo, hi);
    return false;
  }
  *out = v;
  return true;
}

bool evtc_cli_u64(const char *opt, const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end || errno || s[0] == '-') {
    fprintf(stderr, "evtc: %s: '%s' is not a non-negative integer\n", opt, s);
    return false;
  }
  *out = v;
  return true;
}

bool evtc_cli_positive(const char *opt, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(v) || v <= 0) {
    fprintf(stderr, "evtc: %s: '%s' is not a positive number\n", opt, s);
    return false;
  }
  *out = v;
  return true;
}

bool evtc_cli_mkdirs(const char *path) {
  if (!*path) {
    fprintf(stderr, "evtc: empty directory name\n");
    return false;
  }
  if (evtc_mkdirs(path)) return true;
  fprintf(stderr, "evtc: cannot create directory %s: %s\n", path, strerror(errno));
  return false;
}

bool evtc_cli_gemm(const char *s) {
  if (strcmp(s, "evtc") != 0 && strcmp(s, "sm80") != 0 && strcmp(s, "cublaslt") != 0) {
    fprintf(stderr, "evtc: --gemm: '%s' is not evtc, sm80 or cublaslt\n", s);
    return false;
  }
  setenv("EVTC_GEMM", s, 1);
  return true;
}

bool evtc_cli_partitioner(const char *s) {
  if (strcmp(s, "ilp") != 0 && strcmp(s, "greedy") != 0 && strcmp(s, "none") != 0 && strcmp(s, "builtin") != 0) {
    fprintf(stderr, "evtc: --partitioner: '%s' is not ilp, greedy, none or builtin\n", s);
    return false;
  }
  return true;
}
