/* evt_fuzz.c -- libFuzzer target for the text IR reader (.evt files, what
 * `evtc train` and `evtc check` read), the autodiff behind `evtc train` and
 * the pass pipelines behind both.
 *
 * Each input is taken as the text of a .evt file.  When it parses, and when
 * the graph has a loss, autodiff builds the joint graph (SGD or AdamW by the
 * input's length); then one of the named pipelines (chosen by the length)
 * runs on the joint graph, or on the parsed one.  Any outcome is fine except
 * a crash, a sanitizer report, a leak, a failure without a message, a graph
 * that fails to verify, or a pass whose result fails to (the manager's
 * "internal error").  Built and run by `make fuzz-evt` (clang
 * -fsanitize=fuzzer,address,undefined), seeded from examples/ and
 * bench/epilogue/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/autodiff.h"
#include "evtc.h"
#include "ir/ir.h"
#include "passes/manager.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  char err[512] = "";
  evtc_graph *g = evtc_graph_parse_string(text, "fuzz.evt", err, sizeof err);
  free(text);
  if (!g) {
    if (!err[0]) abort();                 /* a failure must say why */
    return 0;
  }
  if (evtc_graph_verify(g) != EVTC_OK) abort();
  evtc_graph *joint = NULL;
  if (g->loss) {
    const evtc_optim_config opt = evtc_optim_default(size % 2 ? EVTC_OPTIM_ADAMW : EVTC_OPTIM_SGD);
    evtc_diag d = {0};
    joint = evtc_autodiff(g, NULL, 0, &opt, &d);
    if (joint) {
      if (evtc_graph_verify(joint) != EVTC_OK) abort();
    } else if (d.status == EVTC_OK || !d.msg[0]) {
      abort();
    }
  }
  const evtc_pipeline *pl = &evtc_pipelines[size / 2 % (size_t)evtc_pipeline_count];
  evtc_diag d = {0};
  evtc_graph *out = evtc_pipeline_run(joint ? joint : g, pl->passes, pl->n_passes, NULL, &d);
  if (out) evtc_graph_free(out);
  else if (d.status == EVTC_OK || !d.msg[0] || strstr(d.msg, "internal error")) abort();
  evtc_graph_free(joint);
  evtc_graph_free(g);
  return 0;
}
