/* cli_common.c -- what the subcommands of `evtc` share: loading a model.
 *
 * Every subcommand that takes a model file reads it through
 * evtc_cli_load_model, so all of them report a bad file the same way: one
 * line "evtc: FILE:LINE:COL: cause" on stderr, then exit status 2.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "frontend/onnx.h"

evtc_graph *evtc_cli_load_model(const char *path) {
  size_t len = strlen(path);
  if (len >= 5 && strcmp(path + len - 5, ".onnx") == 0) {        /* ONNX frontend (weights: see onnx.h) */
    evtc_diag d = {0};
    evtc_graph *g = evtc_onnx_import(path, NULL, NULL, &d);
    if (!g) fprintf(stderr, "evtc: %s\n", d.msg);
    return g;
  }
  char err[2048];
  evtc_graph *g = evtc_graph_parse_file(path, err, sizeof err);   /* parses and verifies */
  if (!g) fprintf(stderr, "evtc: %s\n", err);
  return g;
}
