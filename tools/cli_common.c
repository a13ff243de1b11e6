/* cli_common.c -- what the subcommands of `evtc` share: the model options,
 * loading a model, attaching a loss, optimizer names and writing a graph.
 *
 * Every subcommand that takes a model file reads it through
 * evtc_cli_load_model, so all of them report a bad file the same way: one
 * line "evtc: FILE:LINE:COL: cause" on stderr, then exit status 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "cli.h"
#include "cli_args.h"
#include "frontend/onnx.h"
#include "runtime/atomic_file.h"

const char evtc_cli_model_usage[] =
    "model options: [--freeze NAME]... [--dim NAME=N]... [--loss mse|cross_entropy|mean_square] [--labels INPUT]\n";

/* Appends s to a NULL-initialised array grown one entry at a time. */
static void push_name(const char ***list, int *n, const char *s) {
  *list = realloc(*list, sizeof **list * (size_t)(*n + 1));
  EVTC_ASSERT(*list != NULL);
  (*list)[(*n)++] = s;
}

int evtc_cli_model_option(int argc, char **argv, int *i, evtc_cli_model_options *o) {
  const char *a = argv[*i], *v;
  if (strcmp(a, "--freeze") == 0) {
    if (!evtc_cli_value(argc, argv, i, &v)) return -1;
    push_name(&o->frozen, &o->n_frozen, v);
  } else if (strcmp(a, "--dim") == 0) {
    if (!evtc_cli_value(argc, argv, i, &v)) return -1;
    const char *eq = strchr(v, '=');
    int64_t size;
    if (!eq || eq == v) {
      fprintf(stderr, "evtc: --dim: expected NAME=N, got '%s'\n", v);
      return -1;
    }
    if (!evtc_cli_int("--dim", eq + 1, 1, (int64_t)1 << 40, &size)) return -1;
    char *name = strndup(v, (size_t)(eq - v));             /* freed with the options */
    EVTC_ASSERT(name != NULL);
    push_name(&o->dim_names, &o->n_dims, name);
    o->dim_values = realloc(o->dim_values, sizeof *o->dim_values * (size_t)o->n_dims);
    EVTC_ASSERT(o->dim_values != NULL);
    o->dim_values[o->n_dims - 1] = size;
  } else if (strcmp(a, "--loss") == 0) {
    if (!evtc_cli_value(argc, argv, i, &o->loss)) return -1;
    if (strcmp(o->loss, "mse") != 0 && strcmp(o->loss, "cross_entropy") != 0 && strcmp(o->loss, "mean_square") != 0) {
      fprintf(stderr, "evtc: --loss: '%s' is not mse, cross_entropy or mean_square\n", o->loss);
      return -1;
    }
  } else if (strcmp(a, "--labels") == 0) {
    if (!evtc_cli_value(argc, argv, i, &o->labels)) return -1;
  } else {
    return 0;
  }
  return 1;
}

void evtc_cli_model_options_free(evtc_cli_model_options *o) {
  for (int i = 0; i < o->n_dims; i++) free((char *)o->dim_names[i]);
  free(o->dim_names);
  free(o->dim_values);
  free(o->frozen);
  memset(o, 0, sizeof *o);
}

evtc_graph *evtc_cli_load_model(const char *path, const evtc_cli_model_options *o, evtc_weights **weights) {
  size_t len = strlen(path);
  if (weights) *weights = NULL;
  if (len >= 5 && strcmp(path + len - 5, ".onnx") == 0) {
    evtc_onnx_options opt = {0};
    if (o) opt = (evtc_onnx_options){.frozen = o->frozen, .n_frozen = o->n_frozen, .dim_names = o->dim_names,
                                     .dim_values = o->dim_values, .n_dims = o->n_dims};
    evtc_diag d = {0};
    evtc_graph *g = evtc_onnx_import(path, &opt, weights, &d);
    if (!g) fprintf(stderr, "evtc: %s\n", d.msg);
    return g;
  }
  if (o && (o->n_frozen || o->n_dims)) {
    fprintf(stderr, "evtc: %s: --%s applies to ONNX models only (a text IR model has static shapes; make a "
            "frozen parameter a const)\n", path, o->n_frozen ? "freeze" : "dim");
    return NULL;
  }
  char err[2048];
  evtc_graph *g = evtc_graph_parse_file(path, err, sizeof err);   /* parses and verifies */
  if (!g) fprintf(stderr, "evtc: %s\n", err);
  return g;
}

/* The labels INPUT named name: the model's, or a new one typed for `kind`
 * on pred (cross_entropy: i64 of pred's shape without the class axis; mse:
 * pred's type).  NULL after printing why. */
static evtc_node *labels_input(evtc_graph *g, const char *name, const char *kind, const evtc_node *pred) {
  evtc_node *n = evtc_graph_find(g, name);
  if (n) {
    if (n->op == EVTC_OP_INPUT) return n;
    fprintf(stderr, "evtc: --labels %s: %%%s is a %s node, not an input\n", name, name, evtc_op_get(n->op)->name);
    return NULL;
  }
  for (const char *p = name; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.", *p)) {
      fprintf(stderr, "evtc: --labels '%s': a node name uses only [A-Za-z0-9_.]\n", name);
      return NULL;
    }
  evtc_type t = evtc_type_make(pred->type.dtype, pred->type.rank, pred->type.shape);
  if (strcmp(kind, "cross_entropy") == 0) {
    if (pred->type.rank < 1) {
      fprintf(stderr, "evtc: --loss cross_entropy: the prediction %%%s is a scalar\n", pred->name);
      return NULL;
    }
    t = evtc_type_make(EVTC_I64, pred->type.rank - 1, pred->type.shape);
  }
  n = evtc_leaf_add(g, EVTC_OP_INPUT, t, NULL, 0, name);
  if (!n) fprintf(stderr, "evtc: --labels %s: %s\n", name, g->diag.msg);
  return n;
}

bool evtc_cli_attach_loss(evtc_graph *g, const evtc_cli_model_options *o, bool need_loss) {
  const char *kind = o ? o->loss : NULL;
  if (o && o->labels && (!kind || strcmp(kind, "mean_square") == 0)) {
    fprintf(stderr, "evtc: --labels needs --loss mse or --loss cross_entropy\n");
    return false;
  }
  if (kind && strcmp(kind, "mean_square") != 0 && !o->labels) {
    fprintf(stderr, "evtc: --loss %s needs --labels INPUT\n", kind);
    return false;
  }
  if (!kind && (!need_loss || g->loss)) return true;
  if (g->loss) {
    fprintf(stderr, "evtc: --loss: the model already has a loss (%%%s)\n", g->loss->name);
    return false;
  }
  if (g->n_outputs == 0) {
    fprintf(stderr, "evtc: the model has no output to compute a loss from\n");
    return false;
  }
  if (!kind) kind = "mean_square";                  /* the default: mean of squares of the first output */
  evtc_node *pred = g->outputs[0].node, *labels = NULL;
  if (strcmp(kind, "mean_square") != 0 && !(labels = labels_input(g, o->labels, kind, pred))) return false;
  evtc_diag d = {0};
  if (!evtc_loss_attach(g, kind, pred, labels, &d)) {
    fprintf(stderr, "evtc: --loss %s: %s\n", kind, d.msg);
    return false;
  }
  return true;
}

bool evtc_cli_help(int argc, char **argv, const char *usage) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("%s%s", usage, evtc_cli_model_usage);
      return true;
    }
  return false;
}

bool evtc_cli_optimizer(const char *s, bool allow_none, evtc_optimizer *out) {
  static const struct { const char *name; evtc_optimizer kind; } kinds[] = {
      {"none", EVTC_OPTIM_NONE}, {"sgd", EVTC_OPTIM_SGD}, {"adamw", EVTC_OPTIM_ADAMW}};
  for (size_t i = allow_none ? 0 : 1; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcmp(s, kinds[i].name) == 0) {
      *out = kinds[i].kind;
      return true;
    }
  fprintf(stderr, "evtc: --optimizer: '%s' is not %s\n", s, allow_none ? "none, sgd or adamw" : "sgd or adamw");
  return false;
}

bool evtc_cli_write_graph(const evtc_graph *g, const char *path) {
  if (!path) {
    evtc_graph_print(g, stdout);
    return true;
  }
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
