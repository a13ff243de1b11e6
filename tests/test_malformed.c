/* test_malformed.c -- every .evt file in tests/malformed is rejected with the
 * message its first line announces ("# expect: LINE:COL: cause"): the parser
 * fails with "FILE:LINE:COL: cause", and `evtc check FILE` prints
 * "evtc: FILE:LINE:COL: cause" on stderr and exits with status 2.
 * argv[1] = source dir, argv[2] = the evtc binary.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "ir/text.h"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The expectation of a malformed file: its first line after "# expect: ". */
static bool read_expect(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  char line[512];
  bool ok = fgets(line, sizeof line, f) && strncmp(line, "# expect: ", 10) == 0;
  fclose(f);
  if (!ok) return false;
  line[strcspn(line, "\n")] = 0;
  snprintf(out, cap, "%s", line + 10);
  return true;
}

/* Runs `evtc check path`; returns the exit status (-1 when it did not exit
 * normally, e.g. a crash) and its stderr in err. */
static int run_check(const char *bin, const char *path, char *err, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' check '%s' 2>&1 >/dev/null", bin, path);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  size_t len = fread(err, 1, cap - 1, f);
  err[len] = 0;
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_file(const char *path, const char *bin) {
  char expect[512], err[2048], prefix[1100], out[4096];
  CHECK(read_expect(path, expect, sizeof expect), "%s: no '# expect: ' first line", path);
  evtc_graph *g = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(g == NULL, "%s: parsed, expected '%s'", path, expect);
  evtc_graph_free(g);
  if (g) return;
  snprintf(prefix, sizeof prefix, "%s:%s", path, expect);
  CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "%s: message '%s', want '%s'", path, err, prefix);
  int st = run_check(bin, path, out, sizeof out);
  CHECK(st == 2, "%s: evtc check exit status %d, want 2", path, st);
  snprintf(prefix, sizeof prefix, "evtc: %s:%s", path, expect);
  CHECK(strncmp(out, prefix, strlen(prefix)) == 0, "%s: evtc check said '%s'", path, out);
  CHECK(strchr(out, '\n') == out + strlen(out) - 1, "%s: more than one line on stderr: '%s'", path, out);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_malformed SOURCE_DIR EVTC_BINARY\n");
    return 2;
  }
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/malformed", argv[1]);
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot open %s", dir);
  char **files = NULL;
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".evt") != 0) continue;
    files = realloc(files, sizeof *files * (size_t)(n + 1));
    files[n] = malloc(strlen(dir) + len + 2);
    sprintf(files[n++], "%s/%s", dir, e->d_name);
  }
  if (d) closedir(d);
  if (n) qsort(files, (size_t)n, sizeof *files, cmp_str);
  CHECK(n >= 24, "only %d malformed files", n);
  for (int i = 0; i < n; i++) {
    check_file(files[i], argv[2]);
    free(files[i]);
  }
  free(files);
  return check_summary();
}
