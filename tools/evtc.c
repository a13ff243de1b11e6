/* evtc.c -- the `evtc` command-line tool: dispatch to the subcommands.
 *
 * `evtc` alone (exit 2) or `evtc --help` (exit 0) lists the commands with
 * one line each; `evtc COMMAND --help` prints that command's options.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} commands[] = {
    {"check", evtc_cmd_check, "parse and verify a model; print its ops, inputs, outputs and parameter count"},
    {"grad", evtc_cmd_grad, "print the joint forward + backward + optimizer graph as text IR"},
    {"opt", evtc_cmd_opt, "run a pass pipeline on a model (--train: on its joint graph); print the result"},
    {"explain", evtc_cmd_explain, "partition a model into fused kernels; show the plan (text, dot, svg, html)"},
    {"run", evtc_cmd_run, "run a model once on .npy inputs; write every output (--grads: and the gradients)"},
    {"train", evtc_cmd_train, "train a model on a .npy data set; report loss and accuracy; save a checkpoint"},
    {"tune", evtc_cmd_tune, "tune evtc's GEMM on this GPU once per kernel family; cache the winners"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: evtc COMMAND [ARGS]       (evtc COMMAND --help: the command's options)\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  evtc %-8s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EVTC_EXIT_BAD_INPUT : EVTC_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
  fprintf(stderr, "evtc: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return EVTC_EXIT_BAD_INPUT;
}
