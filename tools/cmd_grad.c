/* cmd_grad.c -- `evtc grad FILE [--optimizer none|sgd|adamw] [--lr X] [-o OUT]`.
 *
 * Loads a model that has a loss, builds the joint forward + backward (+
 * optimizer update) graph with evtc_autodiff (default optimizer: sgd with
 * its default settings, --lr overriding the learning rate) and prints its
 * canonical text IR to stdout, or writes it to OUT atomically (temp file +
 * rename).  Bad input: one message on stderr, exit status 2.
 */
#include <stdio.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "cli.h"
#include "cli_args.h"
#include "runtime/atomic_file.h"

static int usage(void) {
  fprintf(stderr, "evtc: usage: evtc grad FILE [--optimizer none|sgd|adamw] [--lr X] [-o OUT]\n");
  return EVTC_EXIT_BAD_INPUT;
}

static bool parse_optimizer(const char *s, evtc_optimizer *out) {
  static const struct { const char *name; evtc_optimizer kind; } kinds[] = {
      {"none", EVTC_OPTIM_NONE}, {"sgd", EVTC_OPTIM_SGD}, {"adamw", EVTC_OPTIM_ADAMW}};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(s, kinds[i].name) == 0) {
      *out = kinds[i].kind;
      return true;
    }
  fprintf(stderr, "evtc: --optimizer: unknown optimizer '%s' (none, sgd or adamw)\n", s);
  return false;
}

/* Writes g's text to path atomically; false after printing the cause. */
static bool write_graph(const evtc_graph *g, const char *path) {
  evtc_diag d = {0};
  evtc_atomic_file af;
  if (evtc_atomic_open(&af, path, &d)) {
    evtc_graph_print(g, af.f);
    evtc_atomic_commit(&af, &d);
  }
  if (d.status == EVTC_OK) return true;
  fprintf(stderr, "evtc: %s\n", d.msg);
  return false;
}

int evtc_cmd_grad(int argc, char **argv) {
  const char *file = NULL, *out = NULL, *value;
  evtc_optimizer kind = EVTC_OPTIM_SGD;
  double lr = 0;
  bool have_lr = false;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--optimizer") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &value) || !parse_optimizer(value, &kind)) return EVTC_EXIT_BAD_INPUT;
    } else if (strcmp(argv[i], "--lr") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &value) || !evtc_cli_positive("--lr", value, &lr)) return EVTC_EXIT_BAD_INPUT;
      have_lr = true;
    } else if (strcmp(argv[i], "-o") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &out)) return EVTC_EXIT_BAD_INPUT;
    } else if (argv[i][0] == '-' && argv[i][1] != 0) {
      fprintf(stderr, "evtc: grad: unknown option '%s'\n", argv[i]);
      return usage();
    } else if (file) {
      return usage();
    } else {
      file = argv[i];
    }
  }
  if (!file) return usage();
  evtc_graph *g = evtc_cli_load_model(file);
  if (!g) return EVTC_EXIT_BAD_INPUT;
  if (!g->loss) {
    fprintf(stderr, "evtc: %s: the model has no loss (add a line `loss %%NAME`)\n", file);
    evtc_graph_free(g);
    return EVTC_EXIT_BAD_INPUT;
  }
  evtc_optim_config cfg = evtc_optim_default(kind);
  if (have_lr) cfg.lr = lr;
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(g, NULL, 0, &cfg, &d);
  evtc_graph_free(g);
  if (!joint) {
    fprintf(stderr, "evtc: %s: %s\n", file, d.msg);
    return EVTC_EXIT_BAD_INPUT;
  }
  bool ok = true;
  if (out) ok = write_graph(joint, out);
  else evtc_graph_print(joint, stdout);
  evtc_graph_free(joint);
  return ok ? EVTC_EXIT_OK : EVTC_EXIT_BAD_INPUT;
}
