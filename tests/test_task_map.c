/* test_task_map.c -- Hidet-style task mappings (src/kernel/task_map.h).
 *
 * Checks the algebra on the host (worker and task counts, task shape,
 * Hidet's own spatial/repeat examples, the wgmma accumulator fragment
 * layout), that every composed mapping covers its task shape exactly once
 * (a bijection between (worker, k) and tasks), and that the code
 * evtc_tm_emit writes visits the same tasks in the same order as
 * evtc_tm_task: the emitted loops are compiled with `cc` into a program
 * that prints every (worker, coordinates) and compared line by line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernel/task_map.h"

static evtc_task_map compose(evtc_task_map a, evtc_task_map b) {
  evtc_task_map m;
  bool ok = evtc_tm_compose(&a, &b, &m);
  CHECK(ok, "compose");
  return m;
}

/* Every task of the task shape is owned exactly once. */
static bool covers_once(const evtc_task_map *m, const char *what) {
  int64_t shape[EVTC_TM_MAX_RANK], total = 1;
  evtc_tm_task_shape(m, shape);
  for (int d = 0; d < m->rank; d++) total *= shape[d];
  int64_t workers = evtc_tm_workers(m), per = evtc_tm_tasks_per_worker(m);
  CHECK(workers * per == total, "%s: %lld workers x %lld tasks != %lld", what, (long long)workers, (long long)per,
        (long long)total);
  unsigned char *seen = calloc((size_t)total, 1);
  bool ok = true;
  for (int64_t w = 0; w < workers; w++)
    for (int64_t k = 0; k < per; k++) {
      int64_t c[EVTC_TM_MAX_RANK], flat = 0;
      evtc_tm_task(m, w, k, c);
      for (int d = 0; d < m->rank; d++) {
        if (c[d] < 0 || c[d] >= shape[d]) ok = false;
        flat = flat * shape[d] + c[d];
      }
      if (ok && seen[flat]++) ok = false;
    }
  free(seen);
  CHECK(ok, "%s: some task is out of range or owned twice", what);
  return ok;
}

static void check_task(const evtc_task_map *m, int64_t w, int64_t k, int64_t r, int64_t c, const char *what) {
  int64_t got[EVTC_TM_MAX_RANK];
  evtc_tm_task(m, w, k, got);
  CHECK(got[0] == r && got[1] == c, "%s: worker %lld task %lld is (%lld, %lld), want (%lld, %lld)", what,
        (long long)w, (long long)k, (long long)got[0], (long long)got[1], (long long)r, (long long)c);
}

static void algebra(void) {
  evtc_task_map s = evtc_tm_spatial2(4, 8), r = evtc_tm_repeat2(2, 2);
  CHECK(evtc_tm_workers(&s) == 32 && evtc_tm_tasks_per_worker(&s) == 1, "spatial counts");
  CHECK(evtc_tm_workers(&r) == 1 && evtc_tm_tasks_per_worker(&r) == 4, "repeat counts");
  check_task(&s, 11, 0, 1, 3, "spatial(4,8)");
  check_task(&r, 0, 3, 1, 1, "repeat(2,2)");
  /* Hidet: spatial(4,8) * repeat(2,2): worker 11 owns the 2x2 block at (2, 6) */
  evtc_task_map sr = compose(s, r);
  check_task(&sr, 11, 0, 2, 6, "spatial*repeat");
  check_task(&sr, 11, 3, 3, 7, "spatial*repeat");
  /* repeat(2,2) * spatial(4,8): worker 11 owns (1,3), (1,11), (5,3), (5,11) */
  evtc_task_map rs = compose(r, s);
  check_task(&rs, 11, 0, 1, 3, "repeat*spatial");
  check_task(&rs, 11, 1, 1, 11, "repeat*spatial");
  check_task(&rs, 11, 2, 5, 3, "repeat*spatial");
  covers_once(&sr, "spatial(4,8)*repeat(2,2)");
  covers_once(&rs, "repeat(2,2)*spatial(4,8)");
  /* Hopper wgmma m64nNk16 accumulator of a warpgroup (N = 64): warp w owns
   * rows 16w..16w+15; lane l rows l/4 and l/4+8, columns 8n + 2(l%4) + {0,1} */
  evtc_task_map frag = compose(compose(evtc_tm_spatial2(4, 1), evtc_tm_repeat2(2, 8)),
                               compose(evtc_tm_spatial2(8, 4), evtc_tm_repeat2(1, 2)));
  int64_t shape[2];
  evtc_tm_task_shape(&frag, shape);
  CHECK(shape[0] == 64 && shape[1] == 64 && evtc_tm_workers(&frag) == 128 && evtc_tm_tasks_per_worker(&frag) == 32,
        "wgmma fragment: %lldx%lld", (long long)shape[0], (long long)shape[1]);
  int64_t w = 32 * 2 + 13;       /* warp 2, lane 13 */
  check_task(&frag, w, 0, 32 + 3, 2, "fragment d[0]");
  check_task(&frag, w, 1, 32 + 3, 3, "fragment d[1]");
  check_task(&frag, w, 2, 32 + 3, 10, "fragment d[2]");
  check_task(&frag, w, 16, 32 + 3 + 8, 2, "fragment d[16]");
  covers_once(&frag, "wgmma fragment");
  /* 3-D, extents of 1, and a level spanning two dimensions */
  int64_t a[3] = {2, 1, 3}, b[3] = {1, 4, 1}, c[3] = {3, 2, 2};
  evtc_task_map m3 = compose(compose(evtc_tm_spatial(3, a), evtc_tm_repeat(3, b)), evtc_tm_spatial(3, c));
  covers_once(&m3, "3-D");
  evtc_task_map bad, r3 = evtc_tm_repeat(3, b);
  CHECK(!evtc_tm_compose(&s, &r3, &bad), "ranks must agree");
}

/* Emits m's loops into a C program printing "w c0 c1 .." per task, runs it
 * with cc, and compares its output with evtc_tm_task's enumeration. */
static void emitted_matches(const evtc_task_map *m, const char *what) {
  char loops[4096], coord[EVTC_TM_MAX_RANK][EVTC_TM_EXPR];
  int opened = evtc_tm_emit(m, "w", "j", false, "    ", loops, sizeof loops, coord);
  CHECK(opened >= 0, "%s: emit", what);
  if (opened < 0) return;
  char dir[] = "/tmp/evtc_tm_XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp");
    return;
  }
  char src[64], bin[64], out[64], cmd[512];
  snprintf(src, sizeof src, "%s/m.c", dir);
  snprintf(bin, sizeof bin, "%s/m", dir);
  snprintf(out, sizeof out, "%s/out.txt", dir);
  FILE *f = fopen(src, "w");
  fprintf(f, "#include <stdio.h>\n#include <stdint.h>\nint main(void) {\n  for (int64_t w = 0; w < %lld; w++) {\n",
          (long long)evtc_tm_workers(m));
  fputs(loops, f);
  fprintf(f, "    printf(\"%%lld\", (long long)w);\n");
  for (int d = 0; d < m->rank; d++) fprintf(f, "    printf(\" %%lld\", (long long)(%s));\n", coord[d]);
  fprintf(f, "    printf(\"\\n\");\n");
  for (int i = 0; i < opened; i++) fprintf(f, "    }\n");
  fprintf(f, "  }\n  return 0;\n}\n");
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Werror -o %s %s && %s > %s", bin, src, bin, out);
  int rc = system(cmd);
  CHECK(rc == 0, "%s: the emitted code does not compile or run (%s)", what, src);
  FILE *in = rc == 0 ? fopen(out, "r") : NULL;
  bool same = in != NULL;
  for (int64_t w = 0; same && w < evtc_tm_workers(m); w++)
    for (int64_t k = 0; same && k < evtc_tm_tasks_per_worker(m); k++) {
      int64_t c[EVTC_TM_MAX_RANK];
      evtc_tm_task(m, w, k, c);
      long long got;
      same = fscanf(in, "%lld", &got) == 1 && got == w;
      for (int d = 0; same && d < m->rank; d++) same = fscanf(in, "%lld", &got) == 1 && got == c[d];
    }
  if (in) fclose(in);
  CHECK(same, "%s: the emitted loops visit other tasks than evtc_tm_task (%s)", what, src);
  if (same) {
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
}

static void emission(void) {
  /* the rows template's vector mapping: 8 rows per block, lanes own runs of 4 */
  evtc_task_map rows = compose(compose(evtc_tm_spatial2(8, 1), evtc_tm_repeat2(1, 4)),
                               compose(evtc_tm_spatial2(1, 32), evtc_tm_repeat2(1, 4)));
  emitted_matches(&rows, "rows");
  char loops[1024], coord[2][EVTC_TM_EXPR];
  evtc_task_map lane = compose(evtc_tm_repeat2(1, 16), evtc_tm_spatial2(1, 32));
  int opened = evtc_tm_emit(&lane, "lane", "j", false, "", loops, sizeof loops, coord);
  CHECK(opened == 1 && strcmp(coord[0], "0") == 0 && strcmp(coord[1], "j0 * 32 + (int64_t)(lane)") == 0,
        "simple mappings read as written by hand: c = %s", coord[1]);
  evtc_task_map frag = compose(compose(evtc_tm_spatial2(4, 1), evtc_tm_repeat2(2, 8)),
                               compose(evtc_tm_spatial2(8, 4), evtc_tm_repeat2(1, 2)));
  emitted_matches(&frag, "wgmma fragment");
  int64_t a[3] = {2, 1, 3}, b[3] = {1, 4, 1}, c[3] = {3, 2, 2};
  evtc_task_map m3 = compose(compose(evtc_tm_spatial(3, a), evtc_tm_repeat(3, b)), evtc_tm_spatial(3, c));
  emitted_matches(&m3, "3-D");
  evtc_task_map rs = compose(evtc_tm_repeat2(2, 2), evtc_tm_spatial2(4, 8));
  emitted_matches(&rs, "repeat*spatial");
  opened = evtc_tm_emit(&frag, "w", "j", true, "", loops, sizeof loops, coord);
  CHECK(opened == 2 && strncmp(loops, "#pragma unroll\nfor (int64_t j0 = 0; j0 < 16; j0++) {\n", 52) == 0,
        "unrolled loops (CUDA): %s", loops);
  CHECK(evtc_tm_emit(&frag, "w", "j", true, "", loops, 16, coord) == -1, "a small buffer is refused");
}

int main(void) {
  algebra();
  bool have_cc = system("cc --version > /dev/null 2>&1") == 0;
  CHECK(have_cc, "cc is needed to compile the emitted code (the CPU backend needs it too)");
  if (have_cc) emission();
  return check_summary();
}
