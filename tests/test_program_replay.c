/* test_program_replay.c -- program_replay.c's graph replay on a mock device backend (no GPU needed).
 *
 * The mock is the CPU backend with a device backend's launch entries
 * (kernel(), begin_run(), run()) and the five graph entries: a capture
 * records the run() calls instead of running them, a replay calls them
 * again with the step begin_run() gave last -- as a CUDA graph's kernels
 * read the context's step slot -- so a program that replayed a graph
 * without writing the step first, or that ran anything but run() inside a
 * capture, computes wrong values or fails.  Checked: a dropout + layernorm +
 * GEMM block trained with AdamW for 5 steps replays bit for bit what the
 * same program computes launching kernel by kernel (EVTC_CUDA_GRAPH=0), and
 * agrees with the interpreter (replay_check.h); the run that launches
 * plainly, the one that captures, the replays; a recapture when the backend
 * reports moved memory; profile runs never replay; a failed instantiation
 * and a failed launch during the capture each warn once and leave the
 * program launching one by one with right values; an interpreter kernel
 * keeps replay off; graphs are freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"
#include "replay_check.h"

typedef struct mock_handle {
  evtc_backend_fn fn;
  char name[64];
  struct mock_handle *next;
} mock_handle;

typedef struct mock_call {
  mock_handle *h;
  void *const *args;
} mock_call;

typedef struct mock_graph {
  mock_call *calls;
  int n, cap;
  int generation;           /* the mock's generation at the capture */
} mock_graph;

static struct {
  uint64_t step;            /* begin_run's */
  mock_graph *recording;    /* while a capture is on */
  int plain_launches, captures, replays, frees;
  int generation;           /* bumped to say the memory a graph's launches read moved */
  bool fail_end, fail_run_in_capture, refuse_gemm;
  int misuse;               /* calls a capture must not see */
  mock_handle *handles;
} M;

static evtc_backend mock_be;

static bool mock_supports(const evtc_backend *be, const evtc_kernel *k, char *why, size_t cap) {
  if (M.refuse_gemm && k->kind == EVTC_ML_GEMM) {
    snprintf(why, cap, "the mock refuses GEMMs");
    return false;
  }
  return evtc_backend_cpu()->supports(be, k, why, cap);
}

static void *mock_kernel(const evtc_backend *be, void *module, const char *entry, const evtc_kernel *k, evtc_diag *d) {
  (void)be;
  evtc_backend_fn fn = evtc_backend_cpu()->lookup(evtc_backend_cpu(), module, entry);
  if (!fn) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "mock: kernel %s is missing", k->name);
    return NULL;
  }
  mock_handle *h = calloc(1, sizeof *h);
  h->fn = fn;
  snprintf(h->name, sizeof h->name, "%s", k->name);
  h->next = M.handles;
  M.handles = h;
  return h;
}

static evtc_status mock_begin_run(const evtc_backend *be, uint64_t step, evtc_diag *d) {
  (void)be;
  (void)d;
  M.misuse += M.recording != NULL;
  M.step = step;
  return EVTC_OK;
}

static evtc_status mock_call_one(const mock_call *c, evtc_diag *d) {
  int err = 0;
  c->h->fn(c->args, M.step, &err);
  return err ? evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: raised its error flag", c->h->name) : EVTC_OK;
}

static evtc_status mock_run(const evtc_backend *be, void *kernel, void *const *args, evtc_diag *d) {
  (void)be;
  mock_call c = {kernel, args};
  if (!M.recording) {
    M.plain_launches++;
    return mock_call_one(&c, d);
  }
  if (M.fail_run_in_capture) return evtc_diag_set(d, EVTC_ERR_RUNTIME, "kernel %s: injected launch failure", c.h->name);
  mock_graph *g = M.recording;
  if (g->n == g->cap) g->calls = realloc(g->calls, sizeof *g->calls * (size_t)(g->cap = 2 * g->cap + 8));
  g->calls[g->n++] = c;
  return EVTC_OK;
}

static evtc_status mock_graph_begin(const evtc_backend *be, evtc_diag *d) {
  (void)be;
  if (M.recording) return evtc_diag_set(d, EVTC_ERR_RUNTIME, "mock: a capture is on already");
  M.recording = calloc(1, sizeof *M.recording);
  M.recording->generation = M.generation;
  return EVTC_OK;
}

static void mock_graph_free(const evtc_backend *be, void *graph) {
  (void)be;
  mock_graph *g = graph;
  M.frees++;
  free(g->calls);
  free(g);
}

static void *mock_graph_end(const evtc_backend *be, evtc_diag *d) {
  mock_graph *g = M.recording;
  M.recording = NULL;
  if (M.fail_end) {
    mock_graph_free(be, g);
    M.frees--;
    evtc_diag_set(d, EVTC_ERR_RUNTIME, "injected: the graph does not instantiate");
    return NULL;
  }
  M.captures++;
  return g;
}

static bool mock_graph_current(const evtc_backend *be, const void *graph) {
  (void)be;
  return ((const mock_graph *)graph)->generation == M.generation;
}

static evtc_status mock_graph_launch(const evtc_backend *be, void *graph, evtc_diag *d) {
  (void)be;
  M.misuse += M.recording != NULL;
  const mock_graph *g = graph;
  M.replays++;
  for (int i = 0; i < g->n; i++)
    if (mock_call_one(&g->calls[i], d) != EVTC_OK) return d->status;
  return EVTC_OK;
}

static void mock_init(void) {
  mock_be = *evtc_backend_cpu();
  mock_be.name = "mock";
  mock_be.supports = mock_supports;
  mock_be.kernel = mock_kernel;
  mock_be.begin_run = mock_begin_run;
  mock_be.run = mock_run;
  mock_be.graph_begin = mock_graph_begin;
  mock_be.graph_end = mock_graph_end;
  mock_be.graph_current = mock_graph_current;
  mock_be.graph_launch = mock_graph_launch;
  mock_be.graph_free = mock_graph_free;
}

static const char block_text[] =
    "graph block {\n"
    "  %x = input() : f32[64,256]\n  %res = input() : f32[64,256]\n"
    "  %g = param() {init=\"ones\"} : f32[256]\n  %b = param() {init=\"zeros\"} : f32[256]\n"
    "  %w = param() : f32[256,10]\n  %y = input() : i64[64]\n"
    "  %d = dropout(%x) {p=0.3, seed=9} : f32[64,256]\n  %r = add(%d, %res) : f32[64,256]\n"
    "  %ln = layernorm(%r, %g, %b) : f32[64,256]\n  %z = matmul(%ln, %w) : f32[64,10]\n"
    "  %loss = cross_entropy(%z, %y) : f32[]\n  output %loss\n  loss %loss\n"
    "}\n";

static evtc_graph *joint_block(void) {
  evtc_graph *fwd = oracle_parse(block_text, "block");
  if (!fwd) return NULL;
  evtc_optim_config opt = evtc_optim_default(EVTC_OPTIM_ADAMW);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &opt, &d);
  CHECK(joint != NULL, "block: autodiff: %s", d.msg);
  evtc_graph_free(fwd);
  return joint;
}

/* Runs p once at step s; the run's status. */
static evtc_status run_at(evtc_program *p, uint64_t s, const char *what) {
  evtc_diag d = {0};
  evtc_status st = evtc_program_run(p, s, &d);
  CHECK(st == EVTC_OK, "%s: run at step %llu: %s", what, (unsigned long long)s, d.msg);
  return st;
}

/* Plain first run, captured second, replays after; a recapture once the memory moved; profile runs plain. */
static void test_sequence(const evtc_graph *g) {
  const char *what = "sequence";
  evtc_program *p = replay_program(g, &mock_be, "1", what);
  if (!p) return;
  const int n = evtc_program_kernel_count(p), frees = M.frees;
  M.plain_launches = M.captures = M.replays = 0;
  run_at(p, 1, what);
  CHECK(M.plain_launches == n && M.captures == 0 && M.replays == 0, "%s: run 1 launches its %d kernels plainly "
        "(%d launches, %d captures, %d replays)", what, n, M.plain_launches, M.captures, M.replays);
  run_at(p, 2, what);
  CHECK(M.plain_launches == n && M.captures == 1 && M.replays == 1, "%s: run 2 captures and launches the graph "
        "(%d launches, %d captures, %d replays)", what, M.plain_launches, M.captures, M.replays);
  run_at(p, 3, what);
  CHECK(M.plain_launches == n && M.captures == 1 && M.replays == 2, "%s: run 3 replays", what);
  M.generation++;
  run_at(p, 4, what);
  CHECK(M.plain_launches == n && M.captures == 2 && M.replays == 3 && M.frees == frees + 1,
        "%s: moved memory: run 4 captures again (%d captures, %d replays, %d graphs freed)", what, M.captures,
        M.replays, M.frees - frees);
  double *us = malloc(sizeof(double) * (size_t)(n + 1));
  bool device_clock = true;
  evtc_diag d = {0};
  CHECK(evtc_program_profile(p, 2, 5, us, &device_clock, &d) == EVTC_OK, "%s: profile: %s", what, d.msg);
  CHECK(M.plain_launches == 3 * n && M.replays == 3 && !device_clock, "%s: profile runs launch one by one (%d launches, "
        "%d replays)", what, M.plain_launches, M.replays);
  free(us);
  run_at(p, 7, what);
  CHECK(M.replays == 4, "%s: a run after the profile replays", what);
  evtc_program_stats st = evtc_program_get_stats(p);
  CHECK(st.graph && st.graph_captures == 2 && st.no_graph[0] == 0, "%s: stats: graph %d, %d captures", what, st.graph,
        st.graph_captures);
  evtc_program_free(p);
  CHECK(M.frees == frees + 2 && M.misuse == 0, "%s: both graphs freed (%d), nothing but run() in a capture (%d)", what,
        M.frees - frees, M.misuse);
}

/* A capture that fails (instantiation or a launch inside it): one warning, the run's kernels then run plainly, the
 * values stay those of a program launching one by one, and replay stays off. */
static void test_failed_capture(const evtc_graph *g, bool in_launch) {
  const char *what = in_launch ? "failed launch in the capture" : "failed instantiation";
  evtc_program *p = replay_program(g, &mock_be, "1", what), *q = replay_program(g, &mock_be, "0", what);
  oracle_vals o = oracle_fill(g, 10);
  if (!p || !q) goto out;
  replay_feed(g, &o, p, q);
  int differ = 0;
  const int replays = M.replays;
  for (int s = 0; s < 4; s++) {
    if (s == 1) {
      M.fail_end = !in_launch;
      M.fail_run_in_capture = in_launch;
    }
    evtc_program_poison(p);
    evtc_program_poison(q);
    run_at(p, replay_step_of(s), what);
    run_at(q, replay_step_of(s), what);
    M.fail_end = M.fail_run_in_capture = false;
    for (int k = 0; k < g->n_outputs; k++) differ += !replay_same(p, q, g->outputs[k].node, 0, what, s);
    evtc_program_update(p);
    evtc_program_update(q);
  }
  CHECK(differ == 0, "%s: %d outputs differ from one-by-one runs", what, differ);
  evtc_program_stats st = evtc_program_get_stats(p);
  const char *want = in_launch ? "the capture failed: kernel k" : "the capture failed: injected: the graph does not instantiate";
  CHECK(!st.graph && strstr(st.no_graph, want) == st.no_graph && M.replays == replays && st.graph_captures == 0,
        "%s: replay off after the failure (%s), no graph replayed (%d captures)", what, st.no_graph, st.graph_captures);
  CHECK(!in_launch || strstr(st.no_graph, "injected launch failure"), "%s: the launch's error is the cause: %s", what,
        st.no_graph);
out:
  evtc_program_free(p);
  evtc_program_free(q);
  oracle_free(g, &o);
}

/* A kernel in the interpreter keeps replay off (its host work cannot be captured). */
static void test_interpreter_kernel(const evtc_graph *g) {
  M.refuse_gemm = true;
  FILE *quiet = tmpfile();
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, &mock_be, quiet, &d);
  CHECK(p != NULL, "interpreter kernel: %s", d.msg);
  M.refuse_gemm = false;
  if (p) {
    const int captures = M.captures;
    for (uint64_t s = 0; s < 3; s++) run_at(p, s, "interpreter kernel");
    evtc_program_stats st = evtc_program_get_stats(p);
    CHECK(st.interpreted > 0 && !st.graph && strstr(st.no_graph, "in the interpreter") && M.captures == captures,
          "interpreter kernel: %d interpreted, replay %s", st.interpreted, st.graph ? "on" : st.no_graph);
  }
  evtc_program_free(p);
  if (quiet) fclose(quiet);
}

int main(void) {
  char dir[] = "/tmp/evtc-program-replay-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  mock_init();
  evtc_graph *g = joint_block();
  if (g) {
    evtc_program *p = replay_compare(g, &mock_be, 5, 1e-4, 0, 10, "dropout block with adamw, mock graphs");
    evtc_program_free(p);
    evtc_program_stats cs = {0};
    evtc_diag d = {0};
    evtc_program *c = evtc_program_new(g, NULL, 0, evtc_backend_cpu(), NULL, &d);
    if (c) cs = evtc_program_get_stats(c);
    CHECK(c && !cs.graph && strcmp(cs.no_graph, "the cpu backend offers no graphs") == 0, "cpu: no graphs (%s)",
          cs.no_graph);
    evtc_program_free(c);
    test_sequence(g);
    test_failed_capture(g, false);
    test_failed_capture(g, true);
    test_interpreter_kernel(g);
  }
  evtc_graph_free(g);
  for (mock_handle *h = M.handles, *next; h; h = next) {
    next = h->next;
    free(h);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
