/* cuda_gemm_tune_cache.c -- the tuner's families, search space and on-disk
 * results, and the lookup code generation calls (cuda_gemm_tune.h).
 *
 * One file per device and family: <cache>/tune/gemm-<device hash>-<family>.txt,
 * lines of "key value":
 *   evtc-gemm-tune 1
 *   device NVIDIA H200
 *   sm_count 132
 *   cc 9.0
 *   family bf16-mk-nk-store
 *   template 0123456789abcdef
 *   config 128x256x64 s4 c2 g8
 *   candidates 120
 *   rejected 0
 *   compile_s 3.2
 *   measure_s 9.5
 *   problem 8192x8192x4096 812.1 807.6       (the winner's and the default's TFLOP/s)
 * Every key but `problem` exactly once, in any order; anything else makes
 * the file unreadable (the caller then uses the default config).
 */
#include "backend/cuda/cuda_gemm_tune.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/atomic_file.h"
#include "util/fs.h"
#include "util/hash.h"

evtc_cuda_gemm_family evtc_cuda_gemm_family_of(const evtc_cuda_gemm_variant *v, bool visitor, bool sm80) {
  return (evtc_cuda_gemm_family){.in = v->in, .a_kmajor = v->a_kmajor, .b_kmajor = v->b_kmajor, .visitor = visitor,
                                 .sm80 = sm80};
}

evtc_cuda_gemm_variant evtc_cuda_gemm_family_variant(const evtc_cuda_gemm_family *f) {
  return (evtc_cuda_gemm_variant){.in = f->in, .out = f->in, .a_kmajor = f->a_kmajor, .b_kmajor = f->b_kmajor};
}

void evtc_cuda_gemm_family_name(const evtc_cuda_gemm_family *f, char *buf, size_t cap) {
  snprintf(buf, cap, "%s-%s-%s-%s%s", f->in == EVTC_F16 ? "f16" : "bf16", f->a_kmajor ? "mk" : "km",
           f->b_kmajor ? "nk" : "kn", f->visitor ? "visitor" : "store", f->sm80 ? "-sm80" : "");
}

bool evtc_cuda_gemm_family_parse(const char *s, evtc_cuda_gemm_family *f) {
  for (int i = 0; i < 32; i++) {
    evtc_cuda_gemm_family g = {.in = i & 1 ? EVTC_F16 : EVTC_BF16, .a_kmajor = i & 2, .b_kmajor = i & 4,
                               .visitor = i & 8, .sm80 = i & 16};
    char name[32];
    evtc_cuda_gemm_family_name(&g, name, sizeof name);
    if (strcmp(s, name) == 0) {
      *f = g;
      return true;
    }
  }
  return false;
}

evtc_cuda_tune_device evtc_cuda_tune_device_of(const evtc_cuda_device *dev) {
  evtc_cuda_tune_device t = {.sm_count = dev->sm_count, .cc_major = dev->cc_major, .cc_minor = dev->cc_minor};
  snprintf(t.name, sizeof t.name, "%s", dev->name);
  return t;
}

/* ---- the search space ---- */

evtc_cuda_gemm_config evtc_cuda_gemm_family_default(const evtc_cuda_gemm_family *f, int smem_optin) {
  return f->sm80 ? evtc_cuda_gemm_config_default_sm80(smem_optin) : evtc_cuda_gemm_config_default();
}

/* Appends c (with group_m) to out when the template accepts it within smem_limit (0: config_check's bound). */
static void offer(const evtc_cuda_gemm_family *f, evtc_cuda_gemm_config c, int group_m, int smem_limit,
                  evtc_cuda_gemm_config *out, int cap, int *n) {
  const evtc_cuda_gemm_variant v = evtc_cuda_gemm_family_variant(f);
  char why[160];
  c.group_m = group_m;
  if (!evtc_cuda_gemm_config_check(&c, &v, why, sizeof why)) return;
  if (smem_limit > 0 && evtc_cuda_gemm_smem_bytes(&c) > (unsigned)smem_limit) return;
  if (*n < cap) out[*n] = c;
  (*n)++;
}

int evtc_cuda_gemm_tune_space(const evtc_cuda_gemm_family *f, int group_m, bool reduced, int smem_limit,
                              evtc_cuda_gemm_config *out, int cap) {
  static const int tiles[] = {64, 128, 256};
  /* reduced (sm_90a): the default's shape with fewer stages, a pingpong and a one-consumer config; (sm_80): the
     default's tile with one stage more, the smaller default's and a one-warpgroup config */
  static const evtc_cuda_gemm_config few[] = {
      {.tile_m = 128, .tile_n = 256, .stages = 3, .consumers = 2},
      {.tile_m = 128, .tile_n = 128, .stages = 4, .consumers = 2, .pingpong = true},
      {.tile_m = 128, .tile_n = 128, .stages = 5, .consumers = 1},
  };
  static const evtc_cuda_gemm_config few80[] = {
      {.tile_m = 256, .tile_n = 128, .stages = 4, .consumers = 2},
      {.tile_m = 128, .tile_n = 128, .stages = 4, .consumers = 2},
      {.tile_m = 128, .tile_n = 128, .stages = 3, .consumers = 1},
  };
  const evtc_cuda_gemm_config base = evtc_cuda_gemm_family_default(f, EVTC_CUDA_GEMM_SMEM_LIMIT);
  int n = 0;
  if (reduced) {
    _Static_assert(sizeof few == sizeof few80, "the reduced spaces: as many configs each");
    const evtc_cuda_gemm_config *set = f->sm80 ? few80 : few;
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++) {
      evtc_cuda_gemm_config c = base;
      c.tile_m = set[i].tile_m;
      c.tile_n = set[i].tile_n;
      c.stages = set[i].stages;
      c.consumers = set[i].consumers;
      c.pingpong = set[i].pingpong;
      offer(f, c, group_m, smem_limit, out, cap, &n);
    }
    return n;
  }
  const int max_stages = f->sm80 ? 6 : 7;
  for (int cluster = 1; cluster <= (f->sm80 ? 1 : 2); cluster++)   /* sm_90a: also 2x1 clusters (B multicast) */
    for (int consumers = 2; consumers >= 1; consumers--)
      for (int pp = 0; pp <= (consumers == 2 && !f->sm80); pp++)
        for (int im = 0; im < 3; im++)
          for (int in = 0; in < 3; in++)
            for (int stages = 2; stages <= max_stages; stages++) {
              evtc_cuda_gemm_config c = base;
              c.tile_m = tiles[im];
              c.tile_n = tiles[in];
              c.stages = stages;
              c.consumers = consumers;
              c.pingpong = pp;
              c.cluster_m = cluster;
              offer(f, c, group_m, smem_limit, out, cap, &n);
            }
  return n;
}

/* ---- the cache file ---- */

uint64_t evtc_cuda_gemm_tune_fingerprint(const evtc_cuda_gemm_family *f) {
  evtc_cuda_gemm_config c = evtc_cuda_gemm_family_default(f, EVTC_CUDA_GEMM_SMEM_LIMIT);
  char *src = evtc_cuda_gemm_tune_source(f, &c);
  uint64_t h = evtc_fnv1a(EVTC_FNV1A_BASIS, src, strlen(src));
  free(src);
  return h;
}

bool evtc_cuda_gemm_tune_path(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f, char *buf,
                              size_t cap) {
  char dir[4096], fam[32], key[192];
  if (!evtc_cache_dir("tune", dir, sizeof dir)) return false;
  evtc_cuda_gemm_family_name(f, fam, sizeof fam);
  snprintf(key, sizeof key, "%s|%d|%d.%d", dev->name, dev->sm_count, dev->cc_major, dev->cc_minor);
  unsigned long long h = evtc_fnv1a(EVTC_FNV1A_BASIS, key, strlen(key));
  int n = snprintf(buf, cap, "%s/gemm-%016llx-%s.txt", dir, h, fam);
  return n > 0 && (size_t)n < cap;
}

evtc_status evtc_cuda_gemm_tune_save(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f,
                                     const evtc_cuda_gemm_tuned *t, evtc_diag *d) {
  char path[4352], dir[4096], fam[32], cfg[64];
  if (!evtc_cuda_gemm_tune_path(dev, f, path, sizeof path) || !evtc_cache_dir("tune", dir, sizeof dir))
    return evtc_diag_set(d, EVTC_ERR_IO, "no tuning cache directory: set XDG_CACHE_HOME or HOME");
  if (!evtc_mkdirs(dir))
    return evtc_diag_set(d, EVTC_ERR_IO, "cannot create the tuning cache %s: %s", dir, strerror(errno));
  evtc_cuda_gemm_family_name(f, fam, sizeof fam);
  evtc_cuda_gemm_config_name(&t->cfg, cfg, sizeof cfg);
  evtc_atomic_file af;
  if (!evtc_atomic_open(&af, path, d)) return d->status;
  fprintf(af.f, "evtc-gemm-tune 1\ndevice %s\nsm_count %d\ncc %d.%d\nfamily %s\ntemplate %016llx\nconfig %s\n",
          dev->name, dev->sm_count, dev->cc_major, dev->cc_minor, fam,
          (unsigned long long)evtc_cuda_gemm_tune_fingerprint(f), cfg);
  fprintf(af.f, "candidates %d\nrejected %d\ncompile_s %.3f\nmeasure_s %.3f\n", t->candidates, t->rejected,
          t->compile_s, t->measure_s);
  for (int i = 0; i < t->n_problems; i++)
    fprintf(af.f, "problem %lldx%lldx%lld %.2f %.2f\n", (long long)t->mnk[i][0], (long long)t->mnk[i][1],
            (long long)t->mnk[i][2], t->tflops[i], t->default_tflops[i]);
  return evtc_atomic_commit(&af, d);
}

static bool fail(char *why, size_t cap, const char *path, const char *what) {
  snprintf(why, cap, "%s: %s", path, what);
  return false;
}

/* Parses one "key value" line into t (seen: a bit per key); false with why. */
static bool parse_line(char *line, const evtc_cuda_tune_device *dev, const char *fam, evtc_cuda_gemm_tuned *t,
                       unsigned *seen, const char *path, char *why, size_t cap) {
  static const char *const keys[] = {"evtc-gemm-tune", "device", "sm_count", "cc", "family", "template", "config",
                                     "candidates", "rejected", "compile_s", "measure_s", "problem"};
  enum { N_KEYS = sizeof keys / sizeof keys[0], PROBLEM = N_KEYS - 1 };
  char *val = strchr(line, ' ');
  if (!val) return fail(why, cap, path, "a line without a value");
  *val++ = 0;
  int k = 0;
  while (k < N_KEYS && strcmp(line, keys[k]) != 0) k++;
  if (k == N_KEYS) return fail(why, cap, path, "an unknown key");
  if (k != PROBLEM && (*seen >> k & 1)) return fail(why, cap, path, "a key given twice");
  *seen |= 1u << k;
  char tail[2] = "";
  int a = 0, b = 0;
  long long m, n, kk;
  double x, y;
  switch (k) {
  case 0: return strcmp(val, "1") == 0 || fail(why, cap, path, "another format version");
  case 1: return strcmp(val, dev->name) == 0 || fail(why, cap, path, "made for another device");
  case 2:
    return (sscanf(val, "%d%1s", &a, tail) == 1 && a == dev->sm_count) || fail(why, cap, path, "made for another SM count");
  case 3:
    return (sscanf(val, "%d.%d%1s", &a, &b, tail) == 2 && a == dev->cc_major && b == dev->cc_minor) ||
           fail(why, cap, path, "made for another compute capability");
  case 4: return strcmp(val, fam) == 0 || fail(why, cap, path, "made for another kernel family");
  case 5: return true;   /* compared by the caller, which knows the fingerprint */
  case 6: return evtc_cuda_gemm_config_parse(val, &t->cfg) || fail(why, cap, path, "an unreadable config");
  case 7:
    return (sscanf(val, "%d%1s", &t->candidates, tail) == 1 && t->candidates >= 0) ||
           fail(why, cap, path, "a bad candidate count");
  case 8:
    return (sscanf(val, "%d%1s", &t->rejected, tail) == 1 && t->rejected >= 0) ||
           fail(why, cap, path, "a bad rejected count");
  case 9:
    return (sscanf(val, "%lf%1s", &t->compile_s, tail) == 1 && t->compile_s >= 0) ||
           fail(why, cap, path, "a bad compile time");
  case 10:
    return (sscanf(val, "%lf%1s", &t->measure_s, tail) == 1 && t->measure_s >= 0) ||
           fail(why, cap, path, "a bad measuring time");
  default:
    if (t->n_problems >= EVTC_TUNE_MAX_PROBLEMS) return fail(why, cap, path, "too many problems");
    if (sscanf(val, "%lldx%lldx%lld %lf %lf%1s", &m, &n, &kk, &x, &y, tail) != 5 || m < 1 || n < 1 || kk < 1 ||
        !(x >= 0) || !(y >= 0))
      return fail(why, cap, path, "a bad problem line");
    t->mnk[t->n_problems][0] = m;
    t->mnk[t->n_problems][1] = n;
    t->mnk[t->n_problems][2] = kk;
    t->tflops[t->n_problems] = x;
    t->default_tflops[t->n_problems++] = y;
    return true;
  }
}

bool evtc_cuda_gemm_tune_load(const evtc_cuda_tune_device *dev, const evtc_cuda_gemm_family *f,
                              evtc_cuda_gemm_tuned *t, char *why, size_t cap) {
  char path[4352], fam[32], line[512], tmpl[32] = "";
  memset(t, 0, sizeof *t);
  if (!evtc_cuda_gemm_tune_path(dev, f, path, sizeof path))
    return fail(why, cap, "tuning cache", "no directory (set XDG_CACHE_HOME or HOME)");
  FILE *fp = fopen(path, "r");
  if (!fp) return fail(why, cap, path, errno == ENOENT ? "not tuned yet" : strerror(errno));
  evtc_cuda_gemm_family_name(f, fam, sizeof fam);
  unsigned seen = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, fp)) {
    size_t len = strlen(line);
    if (len == 0 || line[len - 1] != '\n') {
      ok = fail(why, cap, path, "a truncated or overlong line");
      break;
    }
    line[len - 1] = 0;
    if (strncmp(line, "template ", 9) == 0) snprintf(tmpl, sizeof tmpl, "%.31s", line + 9);
    ok = parse_line(line, dev, fam, t, &seen, path, why, cap);
  }
  if (ok && ferror(fp)) ok = fail(why, cap, path, strerror(errno));
  fclose(fp);
  if (!ok) return false;
  if (seen != (1u << 12) - 1) return fail(why, cap, path, "missing keys");
  char fp_hex[32];
  snprintf(fp_hex, sizeof fp_hex, "%016llx", (unsigned long long)evtc_cuda_gemm_tune_fingerprint(f));
  if (strcmp(tmpl, fp_hex) != 0) return fail(why, cap, path, "made for another version of the GEMM template");
  const evtc_cuda_gemm_variant v = evtc_cuda_gemm_family_variant(f);
  char cwhy[160];
  if (!evtc_cuda_gemm_config_check(&t->cfg, &v, cwhy, sizeof cwhy)) {
    snprintf(why, cap, "%s: config refused: %s", path, cwhy);
    return false;
  }
  if (t->cfg.sm80 != f->sm80) return fail(why, cap, path, "a config of the other template");
  return true;
}

/* ---- the lookup, remembered per file while it stays the same ---- */

typedef struct memo {
  char path[4352];
  struct stat st;       /* of the file when read (st_ino 0: absent) */
  bool found;
  evtc_cuda_gemm_config cfg;
} memo;

enum { N_MEMO = 32 };
static memo memos[N_MEMO];
static int n_memos;
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

bool evtc_cuda_gemm_tuned_config(const evtc_cuda_device *dev, const evtc_cuda_gemm_variant *v, bool visitor_epilogue,
                                 bool sm80, evtc_cuda_gemm_config *out) {
  if (v->in != EVTC_BF16 && v->in != EVTC_F16) return false;
  const evtc_cuda_gemm_family f = evtc_cuda_gemm_family_of(v, visitor_epilogue, sm80);
  const evtc_cuda_tune_device id = evtc_cuda_tune_device_of(dev);
  char path[4352];
  if (!evtc_cuda_gemm_tune_path(&id, &f, path, sizeof path)) return false;
  struct stat st;
  if (stat(path, &st) != 0) memset(&st, 0, sizeof st);
  pthread_mutex_lock(&memo_lock);
  memo *m = NULL;
  for (int i = 0; i < n_memos && !m; i++)
    if (strcmp(memos[i].path, path) == 0) m = &memos[i];
  if (!m || !same_file(&m->st, &st)) {
    evtc_cuda_gemm_tuned t = {0};
    char why[256];
    bool found = st.st_ino != 0 && evtc_cuda_gemm_tune_load(&id, &f, &t, why, sizeof why);
    if (!m && n_memos < N_MEMO) m = &memos[n_memos++];
    if (m) {
      snprintf(m->path, sizeof m->path, "%s", path);
      m->st = st;
      m->found = found;
      m->cfg = t.cfg;
    } else if (found) {
      *out = t.cfg;   /* the table is full: answer without remembering */
    }
    if (!m) {
      pthread_mutex_unlock(&memo_lock);
      return found;
    }
  }
  bool found = m->found;
  if (found) *out = m->cfg;
  pthread_mutex_unlock(&memo_lock);
  return found;
}
