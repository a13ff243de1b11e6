/* cpu_backend.c -- the CPU backend: C source -> cc -> cached shared object -> dlopen.
 *
 * supports() accepts the kernels the C templates can run: elementwise and
 * rows kernels over every dtype (f16 and bf16 as 2-byte storage with f32
 * math, cpu_visitor.c), f32 / f64 GEMMs and f16 / bf16 ones (operands
 * widened to f32 by the packers) whose epilogues have no reductions,
 * OPAQUE kernels of the ops cpu_emit_opaque.c covers over f32 / f64 /
 * integer values (pad, concat, gather and embedding, which only move
 * values, over any dtype).  Other OPAQUE kernels touching f16 / bf16 are
 * refused with that reason (the program then runs them in the interpreter
 * and warns).  emit() dispatches to the template of the
 * kernel's family.
 * compile() writes the module source and builds it with the system C
 * compiler (`cc -O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp -shared -fPIC`) into
 * $XDG_CACHE_HOME/evtc (default ~/.cache/evtc), named by a 64-bit FNV-1a
 * hash of the source, the flags and `cc --version`; a cached object is
 * reused without compiling.  Source and object are written atomically (a
 * temporary file renamed into place), so concurrent processes never load
 * a partial object.  A compiler error names the generated file, the
 * kernel whose lines it points into and the first error line.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_emit.h"
#include "runtime/atomic_file.h"
#include "util/fs.h"
#include "util/hash.h"

/* -fno-trapping-math: nobody reads the FP exception flags, and without it GCC will not if-convert the
 * selects of the inline expf/erff, so loops calling them stay scalar */
static const char cc_flags[] = "-std=gnu11 -O3 -march=native -fno-math-errno -fno-trapping-math -fopenmp -shared -fPIC";
static evtc_cpu_cache_stats stats;

evtc_cpu_cache_stats evtc_cpu_cache_get_stats(void) { return stats; }

static bool cpu_supports(const evtc_backend *be, const evtc_kernel *k, char *why, size_t cap) {
  if (k->kind == EVTC_ML_OPAQUE && !evtc_cpu_opaque_supported(k->main)) {
    snprintf(why, cap, "no CPU template for %s", evtc_op_get(k->main->op)->name);
    return false;
  }
  if (!evtc_cpu_attention_views_fit(k)) {
    snprintf(why, cap, "%s through a view (the CPU takes views only in attention, with contiguous columns)",
             k->main ? evtc_op_get(k->main->op)->name : "a kernel");
    return false;
  }
  int outputs = 0;
  for (int i = 0; i < k->n_args; i++) outputs += k->args[i].output;
  if (k->kind == EVTC_ML_OPAQUE && outputs > 1) {   /* a by-product (program.c): the CPU's templates write one */
    snprintf(why, cap, "%s with a second output", evtc_op_get(k->main->op)->name);
    return false;
  }
  bool empty = false;
  for (int i = 0; i < k->n_args; i++) empty |= evtc_type_numel(&k->args[i].node->type) == 0;
  if ((k->kind == EVTC_ML_OPAQUE && empty) || (k->kind != EVTC_ML_OPAQUE && k->rows * k->cols == 0) || ((k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV) && k->gemm.batch == 0)) {
    snprintf(why, cap, "an empty tensor");
    return false;
  }
  if (k->kind == EVTC_ML_OPAQUE && !evtc_cpu_opaque_takes_half(k->main->op))
    for (int i = 0; i < k->n_args; i++)
      if (evtc_dtype_is_half(k->args[i].node->type.dtype)) {
        snprintf(why, cap, "%s values in %s (the CPU's templates of it are for f32, f64 and integers)",
                 evtc_dtype_name(k->args[i].node->type.dtype), evtc_op_get(k->main->op)->name);
        return false;
      }
  bool gemm = k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV;
  if (gemm && !(k->gemm.dtype == EVTC_F32 || k->gemm.dtype == EVTC_F64 || evtc_dtype_is_half(k->gemm.dtype))) {
    snprintf(why, cap, "%s GEMM (the CPU GEMM is f32 and f64, f16 and bf16 widened to f32)",
             evtc_dtype_name(k->gemm.dtype));
    return false;
  }
  return evtc_kernel_visitor_fits(k, why, cap);
}

static void cpu_emit(const evtc_backend *be, const evtc_kernel *k, char **src, size_t *len) {
  evtc_sb b = {.s = *src, .len = *len, .cap = *src ? *len + 1 : 0};
  if (!b.s) evtc_cpu_emit_prelude(&b);
  evtc_sb_printf(&b, "/* kernel %s: %d node%s, first %%%s */\n", k->name, k->n_nodes, k->n_nodes == 1 ? "" : "s",
                 k->main ? k->main->name : k->v[k->n_v - 1].node ? k->v[k->n_v - 1].node->name : "?");
  if (k->kind == EVTC_ML_OPAQUE) evtc_cpu_emit_opaque(&b, k);
  else if (k->kind == EVTC_ML_GEMM || k->kind == EVTC_ML_CONV) evtc_cpu_emit_gemm(&b, k);
  else if (evtc_kernel_flat_fits(k)) evtc_cpu_emit_elementwise(&b, k);
  else evtc_cpu_emit_rows(&b, k);
  *src = b.s;
  *len = b.len;
}

/* `cc --version`'s first line (cached for the process). */
static const char *cc_version(void) {
  static char version[256];
  if (version[0]) return version;
  FILE *p = popen("cc --version 2>/dev/null", "r");
  if (!p || !fgets(version, sizeof version, p)) snprintf(version, sizeof version, "unknown cc");
  if (p) pclose(p);
  return version;
}

bool evtc_cpu_cache_dir(char *buf, size_t cap) { return evtc_cache_dir(NULL, buf, cap); }

/* The first "file:line:col: error: ..." line of the compiler's log, and its line number. */
static void first_error(const char *log_path, char *msg, size_t cap, long *line) {
  msg[0] = 0;
  *line = 0;
  FILE *f = fopen(log_path, "r");
  if (!f) return;
  char buf[512];
  while (fgets(buf, sizeof buf, f)) {
    char *e = strstr(buf, "error");
    if (!e) continue;
    buf[strcspn(buf, "\n")] = 0;
    snprintf(msg, cap, "%s", buf);
    char *colon = strstr(buf, ".c:");
    if (colon) *line = strtol(colon + 3, NULL, 10);
    break;
  }
  fclose(f);
}

static char *cpu_compile(const evtc_backend *be, const char *src, const evtc_kernel *const *kernels, int n_kernels,
                         evtc_diag *d) {
  char dir[4096];
  if (!evtc_cpu_cache_dir(dir, sizeof dir)) {
    evtc_diag_set(d, EVTC_ERR_IO, "no kernel cache directory: set XDG_CACHE_HOME or HOME");
    return NULL;
  }
  if (!evtc_mkdirs(dir)) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot create the kernel cache %s: %s", dir, strerror(errno));
    return NULL;
  }
  const char *ver = cc_version();
  uint64_t h = evtc_fnv1a(EVTC_FNV1A_BASIS, src, strlen(src));
  h = evtc_fnv1a(h, cc_flags, sizeof cc_flags);
  h = evtc_fnv1a(h, ver, strlen(ver));
  size_t cap = strlen(dir) + 64;
  char *so = malloc(cap), *c_path = malloc(cap), *tmp = malloc(cap + 32), *log = malloc(cap);
  snprintf(so, cap, "%s/evtc-%016llx.so", dir, (unsigned long long)h);
  snprintf(c_path, cap, "%s/evtc-%016llx.c", dir, (unsigned long long)h);
  snprintf(log, cap, "%s/evtc-%016llx.log", dir, (unsigned long long)h);
  snprintf(tmp, cap + 32, "%s/evtc-%016llx.so.%ld.tmp", dir, (unsigned long long)h, (long)getpid());
  if (access(so, R_OK) == 0) {
    stats.hits++;
    goto done;
  }
  stats.misses++;
  evtc_atomic_file af;
  if (!evtc_atomic_open(&af, c_path, d)) goto fail;
  fputs(src, af.f);
  if (evtc_atomic_commit(&af, d) != EVTC_OK) goto fail;
  size_t cmd_cap = 3 * cap + 256;
  char *cmd = malloc(cmd_cap);
  snprintf(cmd, cmd_cap, "cc %s -o '%s' '%s' 2> '%s'", cc_flags, tmp, c_path, log);
  int rc = system(cmd);
  free(cmd);
  if (rc != 0) {
    char msg[600];
    long line;
    first_error(log, msg, sizeof msg, &line);
    const evtc_kernel *k = evtc_kernel_at_line(src, kernels, n_kernels, line);
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "the C compiler failed on generated file %s in kernel %s: %s (full log: %s)",
                  c_path, k ? k->name : "(module prelude)", msg[0] ? msg : "no message", log);
    unlink(tmp);
    goto fail;
  }
  if (rename(tmp, so) != 0) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot move %s into the kernel cache: %s", tmp, strerror(errno));
    unlink(tmp);
    goto fail;
  }
  unlink(log);
done:
  free(c_path);
  free(tmp);
  free(log);
  return so;
fail:
  free(so);
  free(c_path);
  free(tmp);
  free(log);
  return NULL;
}

static void *cpu_load(const evtc_backend *be, const char *path, evtc_diag *d) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) evtc_diag_set(d, EVTC_ERR_IO, "cannot load kernels %s: %s", path, dlerror());
  return h;
}

static evtc_backend_fn cpu_lookup(const evtc_backend *be, void *module, const char *name) {
  evtc_backend_fn fn;
  void *sym = dlsym(module, name);
  memcpy(&fn, &sym, sizeof fn);      /* POSIX: object pointer -> function pointer */
  return fn;
}

static void cpu_unload(const evtc_backend *be, void *module) { dlclose(module); }

static const evtc_backend cpu_backend = {
    .name = "cpu",
    .ctx = NULL,
    .supports = cpu_supports,
    .emit = cpu_emit,
    .compile = cpu_compile,
    .load = cpu_load,
    .lookup = cpu_lookup,
    .unload = cpu_unload,
    .launch = NULL,
    .alloc = NULL,
    .free = NULL,
    .copy = NULL,
    .synchronize = NULL,
};

const evtc_backend *evtc_backend_cpu(void) { return &cpu_backend; }
