/* cli.h -- the subcommands of the `evtc` tool and what they share.
 *
 * Each subcommand lives in tools/cmd_<name>.c and takes the arguments after
 * its name.  Exit status: 0 success, 2 bad input or usage (one message on
 * stderr naming the file position or node and the cause), 1 anything else.
 */
#ifndef EVTC_CLI_H
#define EVTC_CLI_H

#include "ir/ir.h"

enum { EVTC_EXIT_OK = 0, EVTC_EXIT_FAIL = 1, EVTC_EXIT_BAD_INPUT = 2 };

int evtc_cmd_check(int argc, char **argv);
int evtc_cmd_grad(int argc, char **argv);
int evtc_cmd_run(int argc, char **argv);
int evtc_cmd_train(int argc, char **argv);

/* Reads and verifies a model file; on failure prints "evtc: MESSAGE" and
 * returns NULL (the caller exits with EVTC_EXIT_BAD_INPUT). */
evtc_graph *evtc_cli_load_model(const char *path);

#endif
