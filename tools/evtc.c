/* evtc.c -- the `evtc` command-line tool: dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *usage;
} commands[] = {
    {"check", evtc_cmd_check, "check FILE                 verify; print op histogram, inputs, outputs, param count"},
    {"grad", evtc_cmd_grad, "grad FILE [--optimizer sgd|adamw|none] [-o OUT]   print or write the joint graph"},
    {"opt", evtc_cmd_opt,
     "opt FILE [--train] [--passes=a,b,c] [--target cpu|h200] [--dump-after=NAME|all] [--print-stats] [-o OUT]"},
    {"run", evtc_cmd_run, "run FILE --input NAME=PATH.npy ... [-o DIR] [--grads]   run the forward graph"},
    {"train", evtc_cmd_train,
     "train FILE --data DIR [--epochs N] [--batch B] [--lr X] [--optimizer sgd|adamw] [--seed S] [--save PATH]"},
    {"explain", evtc_cmd_explain,
     "explain FILE [--train] [--target cpu|h200] [--partitioner ilp|greedy|none] [--format text|dot|svg|html] [-o OUT]"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: evtc COMMAND ...\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) fprintf(f, "  evtc %s\n", commands[i].usage);
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
