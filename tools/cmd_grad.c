/* cmd_grad.c -- `evtc grad FILE [--optimizer none|sgd|adamw] [--lr X] [-o OUT]
 * [model options]`.
 *
 * Loads a model (attaching the loss the model options ask for; a model
 * without a loss gets the mean of squares of its first output), builds the joint forward + backward (+
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

static const char grad_usage[] = "usage: evtc grad FILE [--optimizer none|sgd|adamw] [--lr X] [-o OUT] [model options]\n";

static int usage(void) {
  fprintf(stderr, "evtc: %s%s", grad_usage, evtc_cli_model_usage);
  return EVTC_EXIT_BAD_INPUT;
}

/* Parses argv; false after printing why. */
static bool parse_args(int argc, char **argv, const char **file, const char **out, evtc_optim_config *cfg,
                       evtc_cli_model_options *mo) {
  const char *value;
  evtc_optimizer kind = EVTC_OPTIM_SGD;
  double lr = 0;
  bool have_lr = false;
  for (int i = 0; i < argc; i++) {
    int k = evtc_cli_model_option(argc, argv, &i, mo);
    if (k < 0) return false;
    if (k > 0) continue;
    if (strcmp(argv[i], "--optimizer") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &value) || !evtc_cli_optimizer(value, true, &kind)) return false;
    } else if (strcmp(argv[i], "--lr") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &value) || !evtc_cli_positive("--lr", value, &lr)) return false;
      have_lr = true;
    } else if (strcmp(argv[i], "-o") == 0) {
      if (!evtc_cli_value(argc, argv, &i, out)) return false;
    } else if (argv[i][0] == '-' && argv[i][1] != 0) {
      fprintf(stderr, "evtc: grad: unknown option '%s'\n", argv[i]);
      usage();
      return false;
    } else if (*file) {
      usage();
      return false;
    } else {
      *file = argv[i];
    }
  }
  if (!*file) {
    usage();
    return false;
  }
  *cfg = evtc_optim_default(kind);
  if (have_lr) cfg->lr = lr;
  return true;
}

int evtc_cmd_grad(int argc, char **argv) {
  const char *file = NULL, *out = NULL;
  evtc_optim_config cfg;
  evtc_cli_model_options mo = {0};
  evtc_graph *g = NULL, *joint = NULL;
  int rc = EVTC_EXIT_BAD_INPUT;
  if (evtc_cli_help(argc, argv, grad_usage)) return EVTC_EXIT_OK;
  if (!parse_args(argc, argv, &file, &out, &cfg, &mo)) goto done;
  if (!(g = evtc_cli_load_model(file, &mo, NULL)) || !evtc_cli_attach_loss(g, &mo, true)) goto done;
  evtc_diag d = {0};
  if (!(joint = evtc_autodiff(g, NULL, 0, &cfg, &d))) {
    fprintf(stderr, "evtc: %s: %s\n", file, d.msg);
    goto done;
  }
  if (evtc_cli_write_graph(joint, out)) rc = EVTC_EXIT_OK;
done:
  evtc_graph_free(joint);
  evtc_graph_free(g);
  evtc_cli_model_options_free(&mo);
  return rc;
}
