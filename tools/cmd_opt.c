/* cmd_opt.c -- `evtc opt FILE [--train] [--optimizer none|sgd|adamw] [--lr X]
 * [--passes=a,b,c] [--target cpu|h200] [--pipeline NAME] [--dump-after=NAME|all]
 * [--print-stats] [-o OUT] [model options]` and `evtc opt --list`.
 *
 * Loads a model, with --train first builds its joint training graph exactly
 * as `evtc grad` does (same optimizer options, default sgd), runs a pass
 * pipeline on it (--passes lists the passes, an empty list runs none;
 * otherwise --pipeline NAME, otherwise the default pipeline of --target,
 * cpu when not given) and prints the result's text IR to stdout, or writes
 * it to OUT atomically.  --dump-after and --print-stats write to stderr, so
 * stdout stays one graph.  --list prints every registered pass and pipeline.
 * Bad input: one message on stderr, exit status 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "cli.h"
#include "cli_args.h"
#include "passes/manager.h"

enum { MAX_PASSES = 256 };

typedef struct opt_args {
  const char *file, *out, *target, *pipeline, *passes;
  bool train, list;
  evtc_optim_config cfg;
  evtc_pass_options po;
  evtc_cli_model_options mo;
} opt_args;

static const char opt_usage[] =
    "usage: evtc opt FILE [--train] [--optimizer none|sgd|adamw] [--lr X] [--passes=a,b,c]\n"
    "                [--target cpu|h200] [--pipeline NAME] [--dump-after=NAME|all] [--print-stats]\n"
    "                [-o OUT] [model options]\n"
    "       evtc opt --list\n";

static int usage(void) {
  fprintf(stderr, "evtc: %s%s", opt_usage, evtc_cli_model_usage);
  return EVTC_EXIT_BAD_INPUT;
}

static void list_passes(void) {
  printf("passes:\n");
  for (int i = 0; i < evtc_pass_registry_count; i++)
    printf("  %-24s %s\n", evtc_pass_registry[i]->name, evtc_pass_registry[i]->summary);
  printf("pipelines:\n");
  for (int i = 0; i < evtc_pipeline_count; i++) {
    printf("  %-24s %s:", evtc_pipelines[i].name, evtc_pipelines[i].summary);
    for (int k = 0; k < evtc_pipelines[i].n_passes; k++) printf("%s%s", k ? "," : " ", evtc_pipelines[i].passes[k]);
    printf("\n");
  }
}

/* "--name=value" or "--name value": the value of option `name` at argv[*i]
 * (advancing *i for the second form) in *out; 1 when argv[*i] is that
 * option, 0 when not, -1 when its value is missing. */
static int option(int argc, char **argv, int *i, const char *name, const char **out) {
  size_t len = strlen(name);
  if (strncmp(argv[*i], name, len) != 0) return 0;
  if (argv[*i][len] == '=') {
    *out = argv[*i] + len + 1;
    return 1;
  }
  if (argv[*i][len] != 0) return 0;
  return evtc_cli_value(argc, argv, i, out) ? 1 : -1;
}

/* Parses argv into a; false after printing why. */
static bool parse_args(int argc, char **argv, opt_args *a) {
  const char *value = NULL;
  evtc_optimizer kind = EVTC_OPTIM_SGD;
  double lr = 0;
  bool have_lr = false;
  for (int i = 0; i < argc; i++) {
    int k = evtc_cli_model_option(argc, argv, &i, &a->mo);
    if (k == 0) k = option(argc, argv, &i, "--passes", &a->passes);
    if (k == 0) k = option(argc, argv, &i, "--target", &a->target);
    if (k == 0) k = option(argc, argv, &i, "--pipeline", &a->pipeline);
    if (k == 0) k = option(argc, argv, &i, "--dump-after", &a->po.dump_after);
    if (k == 0 && (k = option(argc, argv, &i, "--optimizer", &value)) > 0 && !evtc_cli_optimizer(value, true, &kind))
      k = -1;
    if (k == 0 && (k = option(argc, argv, &i, "--lr", &value)) > 0) {
      if (!evtc_cli_positive("--lr", value, &lr)) k = -1;
      have_lr = true;
    }
    if (k == 0) k = option(argc, argv, &i, "-o", &a->out);
    if (k < 0) return false;
    if (k > 0) continue;
    if (strcmp(argv[i], "--train") == 0) {
      a->train = true;
    } else if (strcmp(argv[i], "--print-stats") == 0) {
      a->po.print_stats = true;
    } else if (strcmp(argv[i], "--list") == 0) {
      a->list = true;
    } else if ((argv[i][0] == '-' && argv[i][1] != 0) || a->file) {
      fprintf(stderr, "evtc: opt: unexpected argument '%s'\n", argv[i]);
      usage();
      return false;
    } else {
      a->file = argv[i];
    }
  }
  if (!a->file && !a->list) {
    usage();
    return false;
  }
  a->cfg = evtc_optim_default(kind);
  if (have_lr) a->cfg.lr = lr;
  return true;
}

/* Splits the comma list s into names (pointers into *copy, which the caller
 * frees); returns the count, or -1 after printing why. */
static int split_passes(const char *s, char **copy, const char **names) {
  *copy = strdup(s);
  int n = 0;
  for (char *p = *copy; *p;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = 0;
    if (!*p || n == MAX_PASSES) {
      fprintf(stderr, "evtc: --passes: %s in '%s'\n", *p ? "too many passes" : "empty pass name", s);
      return -1;
    }
    names[n++] = p;
    if (!comma) break;
    p = comma + 1;
    if (!*p) {
      fprintf(stderr, "evtc: --passes: empty pass name in '%s'\n", s);
      return -1;
    }
  }
  return n;
}

/* The pass list a asks for, in names; count or -1 after printing why. */
static int choose_passes(const opt_args *a, char **copy, const char **names) {
  if (a->passes) return split_passes(a->passes, copy, names);
  const char *which = a->pipeline ? a->pipeline : a->target ? a->target : "cpu";
  if (a->target && strcmp(a->target, "cpu") != 0 && strcmp(a->target, "h200") != 0) {
    fprintf(stderr, "evtc: --target: unknown target '%s' (cpu or h200)\n", a->target);
    return -1;
  }
  const evtc_pipeline *p = evtc_pipeline_find(which);
  if (!p) {
    fprintf(stderr, "evtc: --pipeline: unknown pipeline '%s' (evtc opt --list shows them)\n", which);
    return -1;
  }
  for (int i = 0; i < p->n_passes; i++) names[i] = p->passes[i];
  return p->n_passes;
}

int evtc_cmd_opt(int argc, char **argv) {
  opt_args a = {.po = {.dump = stderr, .stats = stderr}};
  const char *names[MAX_PASSES];
  char *copy = NULL;
  evtc_graph *g = NULL, *joint = NULL, *result = NULL;
  int rc = EVTC_EXIT_BAD_INPUT, n;
  evtc_diag d = {0};
  if (evtc_cli_help(argc, argv, opt_usage)) return EVTC_EXIT_OK;
  if (!parse_args(argc, argv, &a)) goto done;
  if (a.list) {
    list_passes();
    rc = EVTC_EXIT_OK;
    goto done;
  }
  if ((n = choose_passes(&a, &copy, names)) < 0) goto done;
  if (a.po.dump_after && strcmp(a.po.dump_after, "all") != 0) {
    bool found = false;
    for (int i = 0; i < n && !found; i++) found = strcmp(names[i], a.po.dump_after) == 0;
    if (!found) {
      fprintf(stderr, "evtc: --dump-after: pass '%s' is not in the pipeline\n", a.po.dump_after);
      goto done;
    }
  }
  if (!(g = evtc_cli_load_model(a.file, &a.mo, NULL)) || !evtc_cli_attach_loss(g, &a.mo, a.train)) goto done;
  if (a.train && !(joint = evtc_autodiff(g, NULL, 0, &a.cfg, &d))) {
    fprintf(stderr, "evtc: %s: %s\n", a.file, d.msg);
    goto done;
  }
  if (!(result = evtc_pipeline_run(joint ? joint : g, names, n, &a.po, &d))) {
    fprintf(stderr, "evtc: %s: %s\n", a.file, d.msg);
    goto done;
  }
  if (evtc_cli_write_graph(result, a.out)) rc = EVTC_EXIT_OK;
done:
  free(copy);
  evtc_graph_free(result);
  evtc_graph_free(joint);
  evtc_graph_free(g);
  evtc_cli_model_options_free(&a.mo);
  return rc;
}
