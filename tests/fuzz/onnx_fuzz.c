/* onnx_fuzz.c -- libFuzzer target for the ONNX reader and importer.
 *
 * Each input is taken as the bytes of a .onnx file and imported from
 * memory (external data refused, symbolic dims bound to 2, one initializer
 * name frozen so both leaf kinds occur, values computed at import limited
 * to 2^16 elements so that a fuzzed Range of 16M elements does not time out
 * the instrumented build).  Any outcome is fine except a
 * crash, a sanitizer report, a leak, or a graph that fails to verify after
 * a successful import.  Built and run by `make fuzz-onnx` (clang
 * -fsanitize=fuzzer,address,undefined), seeded from tests/fuzz/corpus/.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "frontend/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const dim_names[] = {"N", "batch", "seq"};
  static const int64_t dim_values[] = {2, 2, 2};
  static const char *const frozen[] = {"w"};
  evtc_onnx_options opt = {.frozen = frozen, .n_frozen = 0, .dim_names = dim_names, .dim_values = dim_values,
                           .n_dims = 3, .max_known = 1 << 16};
  opt.n_frozen = size % 4 == 0;        /* a quarter of the inputs freeze "w" (an error when absent) */
  evtc_diag d = {0};
  evtc_weights *w = NULL;
  evtc_graph *g = evtc_onnx_import_buffer(data, size, "fuzz.onnx", NULL, &opt, &w, &d);
  if (g) {
    if (evtc_graph_verify(g) != EVTC_OK) abort();
    evtc_graph_free(g);
    evtc_weights_free(w);
  } else if (d.status == EVTC_OK || !d.msg[0]) {
    abort();                            /* a failure must say why */
  }
  return 0;
}
