/* evt_fuzz.c -- libFuzzer target for the text IR reader (.evt files, what
 * `evtc train` and `evtc check` read) and the autodiff behind `evtc train`.
 *
 * Each input is taken as the text of a .evt file.  Any outcome is fine
 * except a crash, a sanitizer report, a leak, a failure without a message,
 * or a graph that fails to verify: the parsed graph, and the joint graph
 * that autodiff builds (SGD or AdamW by the input's length) when the parsed
 * one has a loss.  Built and run by `make fuzz-evt` (clang
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
  if (g->loss) {
    const evtc_optim_config opt = evtc_optim_default(size % 2 ? EVTC_OPTIM_ADAMW : EVTC_OPTIM_SGD);
    evtc_diag d = {0};
    evtc_graph *joint = evtc_autodiff(g, NULL, 0, &opt, &d);
    if (joint) {
      if (evtc_graph_verify(joint) != EVTC_OK) abort();
      evtc_graph_free(joint);
    } else if (d.status == EVTC_OK || !d.msg[0]) {
      abort();
    }
  }
  evtc_graph_free(g);
  return 0;
}
