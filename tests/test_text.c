/* test_text.c -- the text IR: printer and parser agree byte for byte.
 *
 * Round trip: every tests/ir and examples .evt file is canonical, so
 * print(parse(file)) must equal the file.  Also: the tests/ir files use every
 * op; shortest exact float spellings; a graph built through the API prints,
 * parses and prints again the same; non-canonical input (comments, spacing,
 * omitted non-leaf types) prints canonically; `evtc check` output.
 * argv[1] = source dir, argv[2] = the evtc binary.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "ir/text.h"

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  buf[len] = 0;
  return buf;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted paths of the .evt files in dir (malloc'd array of malloc'd strings); *n gets the count. */
static char **list_evt(const char *dir, int *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char **v = NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".evt") != 0) continue;
    v = realloc(v, sizeof *v * (size_t)(*n + 1));
    v[*n] = malloc(strlen(dir) + len + 2);
    sprintf(v[*n], "%s/%s", dir, e->d_name);
    (*n)++;
  }
  closedir(d);
  if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
  return v;
}

/* Round-trips every .evt file of dir; marks the ops seen in seen[] (may be NULL). */
static int round_trip_dir(const char *dir, bool *seen) {
  int n;
  char **files = list_evt(dir, &n);
  for (int i = 0; i < n; i++) {
    char err[2048];
    char *text = read_file(files[i]);
    evtc_graph *g = evtc_graph_parse_file(files[i], err, sizeof err);
    CHECK(g != NULL, "%s does not parse: %s", files[i], err);
    if (g && text) {
      char *out = evtc_graph_to_string(g);
      CHECK(strcmp(out, text) == 0, "%s does not round-trip; printed:\n%s", files[i], out);
      CHECK(evtc_graph_verify(g) == EVTC_OK, "%s: parsed graph fails verification: %s", files[i], g->diag.msg);
      evtc_graph *c = evtc_graph_clone(g);          /* a copy prints the same too */
      char *out2 = evtc_graph_to_string(c);
      CHECK(strcmp(out2, out) == 0, "%s: clone prints differently", files[i]);
      for (int32_t k = 0; seen && k < g->n_nodes; k++) seen[g->nodes[k]->op] = true;
      free(out);
      free(out2);
      evtc_graph_free(c);
    }
    evtc_graph_free(g);
    free(text);
    free(files[i]);
  }
  free(files);
  return n;
}

static void test_round_trip(const char *src) {
  char dir[1024];
  bool seen[EVTC_OP_COUNT] = {false};
  snprintf(dir, sizeof dir, "%s/tests/ir", src);
  int n = round_trip_dir(dir, seen);
  CHECK(n >= 10, "only %d files in tests/ir", n);
  for (int op = 0; op < EVTC_OP_COUNT; op++)
    CHECK(seen[op], "op %s is used by no tests/ir file", evtc_op_get((evtc_op)op)->name);
  snprintf(dir, sizeof dir, "%s/examples", src);
  round_trip_dir(dir, NULL);   /* the folder may be missing or empty */
}

static void test_float_str(void) {
  static const struct {
    double x;
    const char *s;
  } cases[] = {{0.0, "0.0"}, {1.0, "1.0"}, {-2.5, "-2.5"}, {0.0625, "0.0625"}, {1e-5, "1e-05"}, {0.1, "0.1"},
               {100.0, "100.0"}, {1500.0, "1500.0"}, {123456789.0, "123456789.0"}, {1e20, "1e+20"},
               {1e16, "1e+16"}, {-0.0, "-0.0"}, {0.30000000000000004, "0.30000000000000004"},
               {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}};
  char buf[40];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK(strcmp(evtc_float_str(cases[i].x, buf, sizeof buf), cases[i].s) == 0, "%.17g printed as %s, want %s",
          cases[i].x, buf, cases[i].s);
  CHECK(strcmp(evtc_float_str(INFINITY, buf, sizeof buf), "inf") == 0, "inf: %s", buf);
  CHECK(strcmp(evtc_float_str(-INFINITY, buf, sizeof buf), "-inf") == 0, "-inf: %s", buf);
  CHECK(strcmp(evtc_float_str(-NAN, buf, sizeof buf), "nan") == 0, "nan: %s", buf);
  /* Random bit patterns: always marked as a float, always read back exactly. */
  uint64_t s = 0x9e3779b97f4a7c15u;
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    double x;
    memcpy(&x, &s, sizeof x);
    if (!isfinite(x)) continue;
    evtc_float_str(x, buf, sizeof buf);
    double y = strtod(buf, NULL);
    if (memcmp(&x, &y, sizeof x) != 0 || !strpbrk(buf, ".e")) bad++;
  }
  CHECK(bad == 0, "%d random doubles did not print exactly", bad);
}

/* A graph built through the API prints, parses back and prints the same. */
static void test_api_graph(void) {
  evtc_graph *g = evtc_graph_new("built");
  evtc_node *x = evtc_leaf_add(g, EVTC_OP_INPUT, evtc_type_make(EVTC_F32, 2, (int64_t[]){3, 4}), NULL, 0, "x");
  evtc_attr init = evtc_attr_str("init", "normal");
  evtc_node *w = evtc_leaf_add(g, EVTC_OP_PARAM, evtc_type_make(EVTC_F32, 2, (int64_t[]){4, 2}), &init, 1, "w");
  evtc_node *h = evtc_binary(g, EVTC_OP_MATMUL, x, w);
  evtc_attr ax = evtc_attr_ints("axes", 1, (int64_t[]){1});
  evtc_node *r = evtc_node_add(g, EVTC_OP_REDUCE_SUM, &h, 1, &ax, 1, NULL);
  evtc_node *l = evtc_node_add(g, EVTC_OP_REDUCE_MEAN, &r, 1, NULL, 0, "loss");
  evtc_node *k = evtc_scalar(g, EVTC_F32, 0.5);
  evtc_node *wn = evtc_binary(g, EVTC_OP_MUL, w, k);
  evtc_graph_add_output(g, l, NULL);
  evtc_graph_add_output(g, wn, w);
  g->loss = l;
  CHECK(evtc_graph_verify(g) == EVTC_OK, "built graph fails verification: %s", g->diag.msg);
  char *text = evtc_graph_to_string(g);
  const char *want =
      "graph built {\n"
      "  %x = input() : f32[3,4]\n"
      "  %w = param() {init=\"normal\"} : f32[4,2]\n"
      "  %t0 = matmul(%x, %w) : f32[3,2]\n"
      "  %t1 = reduce_sum(%t0) {axes=[1]} : f32[3]\n"
      "  %loss = reduce_mean(%t1) : f32[]\n"
      "  %t2 = const() {value=0.5} : f32[]\n"
      "  %t3 = mul(%w, %t2) : f32[4,2]\n"
      "  output %loss\n"
      "  output %t3 -> %w\n"
      "  loss %loss\n"
      "}\n";
  CHECK(strcmp(text, want) == 0, "printed:\n%s", text);
  char err[1024];
  evtc_graph *p = evtc_graph_parse_string(text, "built.evt", err, sizeof err);
  CHECK(p != NULL, "reparse failed: %s", err);
  if (p) {
    char *again = evtc_graph_to_string(p);
    CHECK(strcmp(again, text) == 0, "reprinted:\n%s", again);
    free(again);
    CHECK(p->file && strcmp(p->file, "built.evt") == 0, "file name not kept");
    evtc_node *t1 = evtc_graph_find(p, "t1");
    CHECK(t1 && t1->line == 5 && t1->col == 3, "t1 at %d:%d", t1 ? t1->line : -1, t1 ? t1->col : -1);
    CHECK(p->loss == evtc_graph_find(p, "loss"), "loss not set");
    CHECK(p->n_outputs == 2 && p->outputs[1].updates == evtc_graph_find(p, "w"), "update target lost");
  }
  evtc_graph_free(p);
  free(text);
  evtc_graph_free(g);
}

/* Comments, blank lines, odd spacing, CRLF and omitted non-leaf types are
 * accepted; the printer gives the canonical form. */
static void test_non_canonical(void) {
  const char *in =
      "# a model\r\n"
      "\n"
      "graph   g{\r\n"
      "\t%a=input():f32[2 , 3]   # trailing comment\n"
      "  %b = exp( %a )\n"
      "  %c = reduce_sum(%b){ axes = [ 0 ], keepdims=0 }\n"
      "  %d = const() {data=[1, 2, 3]} : f32[3]\n"
      "  %e = pad(%d) {pads=[1,0], value=2} : f32[4]\n"
      "  %f = const() {data=[]} : f32[]\n"
      "  %s = input() : f32[1,2]@[5,1]\n"
      "\n"
      "  output %c\n"
      "}\n"
      "# done\n";
  const char *want =
      "graph g {\n"
      "  %a = input() : f32[2,3]\n"
      "  %b = exp(%a) : f32[2,3]\n"
      "  %c = reduce_sum(%b) {axes=[0]} : f32[3]\n"
      "  %d = const() {data=[1.0,2.0,3.0]} : f32[3]\n"
      "  %e = pad(%d) {pads=[1,0], value=2.0} : f32[4]\n"
      "  %f = const() : f32[]\n"
      "  %s = input() : f32[1,2]\n"
      "  output %c\n"
      "}\n";
  char err[1024];
  evtc_graph *g = evtc_graph_parse_string(in, "nc.evt", err, sizeof err);
  CHECK(g != NULL, "non-canonical input rejected: %s", err);
  if (g) {
    char *out = evtc_graph_to_string(g);
    CHECK(strcmp(out, want) == 0, "printed:\n%s", out);
    free(out);
    evtc_node *a = evtc_graph_find(g, "a");
    CHECK(a && a->line == 4 && a->col == 2, "%%a at %d:%d", a ? a->line : -1, a ? a->col : -1);
  }
  evtc_graph_free(g);
  /* A graph text without a final newline after '}' is fine; no err buffer is fine. */
  g = evtc_graph_parse_string("graph g {\n  %a = input() : f32[]\n}", NULL, NULL, 0);
  CHECK(g != NULL, "no final newline rejected");
  evtc_graph_free(g);
  g = evtc_graph_parse_string("graph g {\n  %a = nope() : f32[]\n}", NULL, err, sizeof err);
  CHECK(g == NULL && strcmp(err, "<string>:2:8: unknown op 'nope'") == 0, "got '%s'", err);
  g = evtc_graph_parse_string("graph g {\n", "tiny.evt", err, 8);   /* message truncated, not overrun */
  CHECK(g == NULL && strlen(err) == 7, "truncated message '%s'", err);
}

static void test_file_errors(const char *src) {
  char err[1024], path[1024];
  CHECK(evtc_graph_parse_file("/nonexistent/x.evt", err, sizeof err) == NULL, "missing file parsed");
  CHECK(strstr(err, "/nonexistent/x.evt: cannot read") != NULL, "got '%s'", err);
  snprintf(path, sizeof path, "%s/tests/ir", src);
  CHECK(evtc_graph_parse_file(path, err, sizeof err) == NULL, "a directory parsed");
  CHECK(strstr(err, "cannot read") != NULL, "got '%s'", err);
}

/* `evtc check` prints the node count, the op histogram in op order, the
 * inputs, the outputs and the parameter count. */
static void test_cmd_check(const char *src, const char *bin) {
  char cmd[2048], out[4096] = {0};
  snprintf(cmd, sizeof cmd, "'%s' check '%s/tests/ir/mlp.evt' 2>&1", bin, src);
  FILE *f = popen(cmd, "r");
  size_t len = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[len] = 0;
  int st = f ? pclose(f) : -1;
  const char *want =
      "nodes: 15\n"
      "  input 3\n"
      "  param 3\n"
      "  const 1\n"
      "  relu 1\n"
      "  add 1\n"
      "  sub 1\n"
      "  mul 1\n"
      "  matmul 2\n"
      "  softmax 1\n"
      "  cross_entropy 1\n"
      "inputs: 3\n"
      "  %x f32[32,64]\n"
      "  %y i64[32]\n"
      "  %g1 f32[64,128]\n"
      "outputs: 3\n"
      "  %probs f32[32,10]\n"
      "  %loss f32[]\n"
      "  %w1.next f32[64,128] -> %w1\n"
      "params: 9600 (3 tensors)\n"
      "loss: %loss\n";
  CHECK(st == 0, "evtc check exit status %d", st);
  CHECK(strcmp(out, want) == 0, "evtc check printed:\n%s", out);
  snprintf(cmd, sizeof cmd, "'%s' check >/dev/null 2>&1", bin);
  st = system(cmd);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "evtc check without FILE: status %d", st);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_text SOURCE_DIR EVTC_BINARY\n");
    return 2;
  }
  test_round_trip(argv[1]);
  test_float_str();
  test_api_graph();
  test_non_canonical();
  test_file_errors(argv[1]);
  test_cmd_check(argv[1], argv[2]);
  return check_summary();
}
