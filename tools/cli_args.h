/* cli_args.h -- parsing option values of the evtc subcommands.
 *
 * Each helper checks the whole string (no trailing junk, no overflow, the
 * allowed range) and on failure prints "evtc: OPTION: cause" to stderr and
 * returns false, so a command can `return EVTC_EXIT_BAD_INPUT` at once.
 */
#ifndef EVTC_CLI_ARGS_H
#define EVTC_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>

/* The value of option argv[*i] (argv[*i + 1]); advances *i.  false when the
 * option is the last argument. */
bool evtc_cli_value(int argc, char **argv, int *i, const char **out);
/* A decimal integer in [lo, hi]. */
bool evtc_cli_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A decimal unsigned 64-bit integer (seeds). */
bool evtc_cli_u64(const char *opt, const char *s, uint64_t *out);
/* A finite floating-point number > 0. */
bool evtc_cli_positive(const char *opt, const char *s, double *out);
/* Creates directory `path` and its missing parents (like mkdir -p); false
 * with a message when that fails. */
bool evtc_cli_mkdirs(const char *path);
/* --gemm evtc|sm80|cublaslt: which GEMM the CUDA backend runs for GEMM kernels
 * (evtc's own with the epilogue fused, or cuBLASLt + an epilogue kernel);
 * sets the environment variable EVTC_GEMM, which the backend reads
 * (backend/cuda/cuda_gemm.h).  false with a message for another value. */
bool evtc_cli_gemm(const char *s);
/* --partitioner: ilp, greedy, none or builtin (runtime/program_plan.h);
 * false with a message for another value. */
bool evtc_cli_partitioner(const char *s);

#endif
