/* cmd_explain.c -- `evtc explain FILE [--train] [--target cpu|h200]
 * [--partitioner ilp|greedy|none[,...]] [--format text|dot|svg|html] [-o OUT]`.
 *
 * Partitions a model (with --train: its joint forward + backward + update
 * graph, as `evtc train` builds it -- the target's forward passes, then
 * autodiff; then the target's default pass pipeline from passes/manager.h;
 * no passes with --no-passes) into fused kernels and shows
 * the plan:
 * text lists the kernels and ends with one summary line per partitioner
 * run ("kernels: N modelled_us: X bytes: B (name)", plus the ILP's
 * "ilp: components=C objective=X bound=Y gap=G time=T s"); dot draws the
 * kernels as clusters; svg runs Graphviz `dot -Tsvg` on that; html is one
 * self-contained page with the SVG and a sortable kernel table.  Several
 * partitioners (comma-separated) all run; the drawings show the last.
 * Every plan goes through the feasibility checker; a plan that fails it is
 * an internal error (exit 1).  --profile N plans as `train` does (only
 * node sets the target's backend builds and runs) and runs the last plan on the
 * target's backend and prints modelled against measured time per kernel
 * (explain_profile.c; text on stdout after the plan).  ILP plans are cached in $EVTC_CACHE_DIR,
 * else $XDG_CACHE_HOME/evtc, else ~/.cache/evtc (--no-cache: none).
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "cli.h"
#include "cli_args.h"
#include "fusion/partition.h"
#include "passes/manager.h"
#include "runtime/atomic_file.h"
#include "runtime/program_plan.h"
#include "util/fs.h"

extern char **environ;

typedef struct explain_args {
  const char *file, *target, *partitioners, *format, *out;
  bool train, no_cache, verbose, raw;
  int profile_runs;          /* --profile N: run the last plan N times on the target's backend, per kernel */
  const evtc_backend *profile_be; /* with --profile: the target's backend (forward-pass veto, plan, profile) */
  evtc_optimizer optimizer;
  evtc_fusion_options fopt;
  evtc_cli_model_options model;
} explain_args;

static const char explain_usage[] =
    "usage: evtc explain FILE [--train] [--optimizer none|sgd|adamw] [--target cpu|h200]\n"
    "                    [--partitioner ilp|greedy|none[,...]] [--format text|dot|svg|html] [-o OUT]\n"
    "                    [--time-limit S] [--max-candidates N] [--no-cache] [--no-passes] [--verbose]\n"
    "                    [--profile N]\n"
    "                    [model options]\n";

static int usage(void) {
  fprintf(stderr, "evtc: %s%s", explain_usage, evtc_cli_model_usage);
  return EVTC_EXIT_BAD_INPUT;
}

static bool one_of(const char *opt, const char *v, const char *const *allowed) {
  for (int i = 0; allowed[i]; i++)
    if (strcmp(v, allowed[i]) == 0) return true;
  fprintf(stderr, "evtc: %s: '%s' is not allowed\n", opt, v);
  return false;
}

static int parse_args(int argc, char **argv, explain_args *a) {
  static const char *const formats[] = {"text", "dot", "svg", "html", NULL};
  const char *v;
  for (int i = 0; i < argc; i++) {
    int m = evtc_cli_model_option(argc, argv, &i, &a->model);
    if (m < 0) return -1;
    if (m > 0) continue;
    const char *o = argv[i];
    if (strcmp(o, "--train") == 0) a->train = true;
    else if (strcmp(o, "--no-cache") == 0) a->no_cache = true;
    else if (strcmp(o, "--no-passes") == 0) a->raw = true;
    else if (strcmp(o, "--verbose") == 0) a->verbose = true;
    else if (strcmp(o, "--target") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &a->target)) return -1;
    } else if (strcmp(o, "--partitioner") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &a->partitioners)) return -1;
    } else if (strcmp(o, "--format") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &a->format) || !one_of("--format", a->format, formats)) return -1;
    } else if (strcmp(o, "--optimizer") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_optimizer(v, true, &a->optimizer)) return -1;
    } else if (strcmp(o, "--time-limit") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_positive("--time-limit", v, &a->fopt.time_limit_s))
        return -1;
    } else if (strcmp(o, "--max-candidates") == 0) {
      int64_t n;
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_int("--max-candidates", v, 1, 100000000, &n)) return -1;
      a->fopt.max_candidates = (long)n;
    } else if (strcmp(o, "--profile") == 0) {
      int64_t n;
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_int("--profile", v, 1, 100000, &n)) return -1;
      a->profile_runs = (int)n;
    } else if (strcmp(o, "-o") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &a->out)) return -1;
    } else if (o[0] == '-' && o[1]) {
      fprintf(stderr, "evtc: explain: unknown option '%s'\n", o);
      return -1;
    } else if (a->file) {
      return -1;
    } else {
      a->file = o;
    }
  }
  return a->file ? 0 : -1;
}

/* *g through the target's forward passes as `train` applies them
 * (conv-patchify, attention-fuse; with --profile vetoed as there by the
 * backend the profile runs on); *g stays when they keep nothing or fail
 * (said on stderr). */
static void forward_passes(const explain_args *a, evtc_graph **g) {
  evtc_diag d = {0};
  evtc_graph *fwd = evtc_program_optimize_forward(*g, a->target, a->profile_be, stderr, &d);
  if (d.status != EVTC_OK) fprintf(stderr, "evtc: %s: forward passes: %s\n", a->file, d.msg);
  if (fwd) {
    evtc_graph_free(*g);
    *g = fwd;
  }
}

/* The graph to partition: the model, or with --train its joint graph
 * (after the forward passes, unless --no-passes), then (unless
 * --no-passes) the target's default pass pipeline.  NULL after printing
 * why. */
static evtc_graph *load_graph(explain_args *a) {
  evtc_graph *g = evtc_cli_load_model(a->file, &a->model, NULL);
  evtc_diag d = {0};
  if (g && a->train) {
    evtc_graph *joint = NULL;
    evtc_optim_config cfg = evtc_optim_default(a->optimizer);
    bool ok = evtc_cli_attach_loss(g, &a->model, true);
    if (ok) evtc_program_keep_step_outputs(g);    /* the step as `train` runs it: no predictions stored */
    if (ok && !a->raw) forward_passes(a, &g);
    if (ok && !(joint = evtc_autodiff(g, NULL, 0, &cfg, &d)))
      fprintf(stderr, "evtc: %s: %s\n", a->file, d.msg);
    evtc_graph_free(g);
    g = joint;
  }
  const evtc_pipeline *pl = evtc_pipeline_find(a->target);
  if (!g || a->raw || !pl) return g;
  evtc_graph *opt = evtc_pipeline_run(g, pl->passes, pl->n_passes, NULL, &d);
  evtc_graph_free(g);
  if (!opt) fprintf(stderr, "evtc: %s: pipeline %s: %s\n", a->file, pl->name, d.msg);
  return opt;
}

/* The cache directory (malloc'd), or NULL for none. */
static char *cache_dir(void) {
  const char *e = getenv("EVTC_CACHE_DIR");
  char buf[4096];
  if (e && *e) return strdup(e);
  return evtc_cache_dir(NULL, buf, sizeof buf) ? strdup(buf) : NULL;
}

/* Runs `dot -Tsvg` on p's dot text; the SVG (malloc'd) or NULL after printing why. */
static char *render_svg(const evtc_partition *p) {
  char in[] = "/tmp/evtc-explain-XXXXXX";
  int fd = mkstemp(in);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  evtc_partition_print_dot(p, f);
  fclose(f);
  char outp[sizeof in + 4];
  snprintf(outp, sizeof outp, "%s.svg", in);
  char *argv[] = {"dot", "-Tsvg", in, "-o", outp, NULL};
  pid_t pid;
  int status = -1;
  char *svg = NULL;
  if (posix_spawnp(&pid, "dot", NULL, NULL, argv, environ) == 0 && waitpid(pid, &status, 0) == pid &&
      WIFEXITED(status) && WEXITSTATUS(status) == 0 && (f = fopen(outp, "rb"))) {
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    svg = malloc((size_t)n + 1);
    EVTC_ASSERT(svg != NULL);
    svg[fread(svg, 1, (size_t)n, f)] = 0;
    fclose(f);
  } else {
    fprintf(stderr, "evtc: explain: running Graphviz `dot -Tsvg` failed (is graphviz installed?)\n");
  }
  unlink(in);
  unlink(outp);
  return svg;
}

static bool write_output(explain_args *a, evtc_partition **runs, int n_runs, const evtc_device *dev) {
  const evtc_partition *last = runs[n_runs - 1];
  char *svg = NULL;
  if (strcmp(a->format, "svg") == 0 || strcmp(a->format, "html") == 0) {
    svg = render_svg(last);
    if (!svg) return false;
  }
  evtc_diag d = {0};
  evtc_atomic_file af = {0};
  FILE *out = stdout;
  if (a->out) {
    if (!evtc_atomic_open(&af, a->out, &d)) {
      fprintf(stderr, "evtc: %s\n", d.msg);
      free(svg);
      return false;
    }
    out = af.f;
  }
  if (strcmp(a->format, "text") == 0) {
    fprintf(out, "graph %s: %d nodes, target %s\n", last->g->name, last->g->n_nodes, dev->name);
    for (int i = 0; i < n_runs; i++) {
      fprintf(out, "== partitioner %s ==\n", runs[i]->partitioner);
      evtc_partition_print_kernels(runs[i], out);
    }
    for (int i = 0; i < n_runs; i++) evtc_partition_print_summary(runs[i], out);
  } else if (strcmp(a->format, "dot") == 0) {
    evtc_partition_print_dot(last, out);
  } else if (strcmp(a->format, "svg") == 0) {
    fputs(svg, out);
  } else {
    evtc_partition_print_html(last, svg, out);
  }
  free(svg);
  if (a->out && evtc_atomic_commit(&af, &d) != EVTC_OK) {
    fprintf(stderr, "evtc: %s\n", d.msg);
    return false;
  }
  return true;
}

int evtc_cmd_explain(int argc, char **argv) {
  explain_args a = {.target = "cpu", .partitioners = "ilp", .format = "text", .optimizer = EVTC_OPTIM_SGD};
  if (evtc_cli_help(argc, argv, explain_usage)) return EVTC_EXIT_OK;
  if (parse_args(argc, argv, &a) != 0) {
    evtc_cli_model_options_free(&a.model);
    return usage();
  }
  evtc_device dev;
  evtc_diag d = {0};
  if (!evtc_device_load(a.target, &dev, &d)) {
    fprintf(stderr, "evtc: --target: %s\n", d.msg);
    evtc_cli_model_options_free(&a.model);
    return EVTC_EXIT_BAD_INPUT;
  }
  if (a.profile_runs > 0 && !(a.profile_be = evtc_program_backend_of(a.target, &d))) {
    fprintf(stderr, "evtc: explain --profile: target %s needs its backend: %s\n", a.target, d.msg);
    evtc_cli_model_options_free(&a.model);
    return EVTC_EXIT_BAD_INPUT;
  }
  evtc_graph *g = load_graph(&a);
  evtc_cli_model_options_free(&a.model);
  if (!g) return EVTC_EXIT_BAD_INPUT;
  char *cache = a.no_cache ? NULL : cache_dir();
  a.fopt.cache_dir = cache;
  a.fopt.verbose = a.verbose;
  if (a.profile_runs > 0) {       /* plan as train does: only node sets the backend builds and runs */
    a.fopt.accept = evtc_program_plan_accept;
    a.fopt.accept_ctx = (void *)a.profile_be;
    a.fopt.accept_tag = a.profile_be->name;
  }
  evtc_partition *runs[8];
  int n_runs = 0, rc = EVTC_EXIT_OK;
  char *list = strdup(a.partitioners), *save = NULL;
  for (char *name = strtok_r(list, ",", &save); name && rc == EVTC_EXIT_OK; name = strtok_r(NULL, ",", &save)) {
    if (n_runs == 8) {
      fprintf(stderr, "evtc: --partitioner: at most 8 runs\n");
      rc = EVTC_EXIT_BAD_INPUT;
      break;
    }
    evtc_partition *p = evtc_fusion_partition(g, &dev, name, &a.fopt, &d);
    if (!p) {
      fprintf(stderr, "evtc: --partitioner: %s\n", d.msg);
      rc = EVTC_EXIT_BAD_INPUT;
      break;
    }
    runs[n_runs++] = p;
    char why[512];
    if (!evtc_fusion_check(p, &dev, why, sizeof why)) {
      fprintf(stderr, "evtc: internal error: the %s plan is infeasible: %s\n", name, why);
      rc = EVTC_EXIT_FAIL;
    }
    if (p->ilp.cached) fprintf(stderr, "evtc: note: fusion plan read from the cache in %s\n", cache);
  }
  if (rc == EVTC_EXIT_OK && n_runs == 0) rc = usage();
  if (rc == EVTC_EXIT_OK && !write_output(&a, runs, n_runs, &dev)) rc = EVTC_EXIT_FAIL;
  if (rc == EVTC_EXIT_OK && a.profile_runs > 0) rc = evtc_explain_profile(runs[n_runs - 1], a.profile_be, a.profile_runs, stdout);
  for (int i = 0; i < n_runs; i++) evtc_partition_free(runs[i]);
  free(list);
  free(cache);
  evtc_graph_free(g);
  return rc;
}
