/* cli.h -- the subcommands of the `evtc` tool and what they share.
 *
 * Each subcommand lives in tools/cmd_<name>.c and takes the arguments after
 * its name.  Exit status: 0 success, 2 bad input or usage (one message on
 * stderr naming the file position or node and the cause), 1 anything else.
 *
 * Every subcommand that takes a model also takes the model options below
 * (cli_common.c): how an ONNX file becomes a graph (--freeze, --dim) and
 * which loss to attach (--loss, --labels).  The optimizer names and the
 * atomic graph writer are shared here too.
 */
#ifndef EVTC_CLI_H
#define EVTC_CLI_H

#include "autodiff/autodiff.h"
#include "frontend/weights.h"
#include "ir/ir.h"

enum { EVTC_EXIT_OK = 0, EVTC_EXIT_FAIL = 1, EVTC_EXIT_BAD_INPUT = 2 };

int evtc_cmd_check(int argc, char **argv);
int evtc_cmd_grad(int argc, char **argv);
int evtc_cmd_opt(int argc, char **argv);
int evtc_cmd_run(int argc, char **argv);
int evtc_cmd_train(int argc, char **argv);
int evtc_cmd_explain(int argc, char **argv);
int evtc_cmd_tune(int argc, char **argv);

/* `evtc explain --profile RUNS` (explain_profile.c): runs partition part on backend be (the target's) and
 * prints each plan kernel's modelled and measured time and the program's memory to out; an exit status. */
struct evtc_partition;
struct evtc_backend;
int evtc_explain_profile(const struct evtc_partition *part, const struct evtc_backend *be, int runs, FILE *out);

/* The model options, as given on the command line. */
typedef struct evtc_cli_model_options {
  const char **frozen;        /* --freeze NAME: ONNX initializers imported as constants */
  int n_frozen;
  const char **dim_names;     /* --dim NAME=N: sizes of symbolic ONNX dims */
  int64_t *dim_values;
  int n_dims;
  const char *loss;           /* --loss mse|cross_entropy|mean_square, or NULL */
  const char *labels;         /* --labels INPUT: the INPUT holding the targets */
} evtc_cli_model_options;

/* Help text of the model options, for the usage messages. */
extern const char evtc_cli_model_usage[];

/* When argv[*i] is a model option, stores it (and its value, advancing *i)
 * in o and returns 1; returns 0 when it is not one and -1 after printing why
 * its value is bad.  o must start zeroed; free with
 * evtc_cli_model_options_free. */
int evtc_cli_model_option(int argc, char **argv, int *i, evtc_cli_model_options *o);
void evtc_cli_model_options_free(evtc_cli_model_options *o);

/* Reads and verifies a model file (text IR, or ONNX when the name ends in
 * .onnx, with o's --freeze and --dim; o may be NULL).  When weights is not
 * NULL it receives the initial values of the model's PARAM/STATE leaves
 * (ONNX initializers; NULL for text IR; caller frees).  On failure prints
 * "evtc: MESSAGE" and returns NULL (the caller exits with
 * EVTC_EXIT_BAD_INPUT). */
evtc_graph *evtc_cli_load_model(const char *path, const evtc_cli_model_options *o, evtc_weights **weights);

/* Attaches the loss that o asks for (--loss on the first output, labels
 * from --labels: that INPUT of the model, or a new INPUT of that name typed
 * for the loss).  Without --loss and when need_loss is set, a model without
 * a loss gets the mean of squares of its first output.  False after
 * printing why. */
bool evtc_cli_attach_loss(evtc_graph *g, const evtc_cli_model_options *o, bool need_loss);

/* When an argument is --help or -h, prints usage (the command's, ending in
 * a newline) and the model options' help to stdout and returns true: the
 * command then exits with EVTC_EXIT_OK without doing anything else. */
bool evtc_cli_help(int argc, char **argv, const char *usage);

/* The optimizer named s ("sgd", "adamw", and "none" when allow_none) in
 * *out; false after printing "evtc: --optimizer: 'S' is not ...". */
bool evtc_cli_optimizer(const char *s, bool allow_none, evtc_optimizer *out);

/* Writes g's canonical text to path atomically (temp file + rename), or to
 * stdout when path is NULL; false after printing the cause. */
bool evtc_cli_write_graph(const evtc_graph *g, const char *path);

#endif
