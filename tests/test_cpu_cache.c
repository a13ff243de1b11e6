/* test_cpu_cache.c -- the CPU backend's kernel cache and compiler errors.
 *
 * A program built twice compiles once (a miss, then a hit) and the object
 * lands in $XDG_CACHE_HOME/evtc; a deliberately broken kernel source makes
 * compile() fail with a message naming the generated .c file and the
 * kernel whose lines the compiler complained about.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "check.h"
#include "kernel/kernel.h"
#include "runtime/program.h"

static const char text[] =
    "graph c {\n  %x = input() : f32[5,3]\n  %w = param() : f32[3,4]\n  %b = param() : f32[4]\n"
    "  %h = matmul(%x, %w) : f32[5,4]\n  %y = add(%h, %b) : f32[5,4]\n  %z = relu(%y) : f32[5,4]\n  output %z\n}\n";

static int count_files(const char *dir, const char *suffix) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t l = strlen(e->d_name), s = strlen(suffix);
    n += l > s && strcmp(e->d_name + l - s, suffix) == 0;
  }
  closedir(d);
  return n;
}

static void test_hit_and_miss(evtc_graph *g, const char *cache) {
  evtc_cpu_cache_stats s0 = evtc_cpu_cache_get_stats();
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, evtc_backend_cpu(), NULL, &d);
  CHECK(p != NULL, "first build: %s", d.msg);
  evtc_cpu_cache_stats s1 = evtc_cpu_cache_get_stats();
  CHECK(s1.misses == s0.misses + 1 && s1.hits == s0.hits, "first build misses (%d->%d, hits %d->%d)", s0.misses,
        s1.misses, s0.hits, s1.hits);
  CHECK(count_files(cache, ".so") == 1, "one object in %s", cache);
  evtc_program *q = evtc_program_new(g, NULL, 0, evtc_backend_cpu(), NULL, &d);
  CHECK(q != NULL, "second build: %s", d.msg);
  evtc_cpu_cache_stats s2 = evtc_cpu_cache_get_stats();
  CHECK(s2.hits == s1.hits + 1 && s2.misses == s1.misses, "second build hits (%d->%d)", s1.hits, s2.hits);
  CHECK(count_files(cache, ".so") == 1, "still one object");
  evtc_program_free(p);
  evtc_program_free(q);
}

static void test_broken_source(evtc_graph *g) {
  int32_t ids[1] = {evtc_graph_find(g, "z")->id};
  evtc_diag d = {0};
  evtc_kernel *k = evtc_kernel_build(g, ids, 1, &d);
  CHECK(k != NULL, "relu kernel: %s", d.msg);
  if (!k) return;
  snprintf(k->name, sizeof k->name, "k7_broken");
  const evtc_backend *be = evtc_backend_cpu();
  char *src = NULL;
  size_t len = 0;
  be->emit(be, k, &src, &len);
  char *cut = strstr(src, "for (int64_t i");
  CHECK(cut != NULL, "the emitted loop");
  if (cut) memcpy(cut, "this is not C;", 14);
  const evtc_kernel *ks[1] = {k};
  char *path = be->compile(be, src, ks, 1, &d);
  CHECK(path == NULL && d.status != EVTC_OK, "broken source fails");
  CHECK(strstr(d.msg, "kernel k7_broken") && strstr(d.msg, ".c") && strstr(d.msg, "error"),
        "message names file, kernel and error: %s", d.msg);
  free(path);
  free(src);
  evtc_kernel_free(k);
}

int main(void) {
  char dir[] = "/tmp/evtc-cpu-cache-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  char cache[256];
  snprintf(cache, sizeof cache, "%s/evtc", dir);
  char err[256];
  evtc_graph *g = evtc_graph_parse_string(text, "cache", err, sizeof err);
  CHECK(g != NULL, "parse: %s", err);
  if (g) {
    test_hit_and_miss(g, cache);
    test_broken_source(g);
    evtc_graph_free(g);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
