/* program_internal.h -- pieces of the program executor (internal to src/runtime).
 *
 * program.c builds and runs programs; program_fallback.c runs a node that
 * no backend template covers through the float64 interpreter, converting
 * its buffers to doubles and back.
 */
#ifndef EVTC_PROGRAM_INTERNAL_H
#define EVTC_PROGRAM_INTERNAL_H

#include "ir/ir.h"
#include "runtime/interp.h"

/* Bytes per element of a buffer of dtype t (its dtype size: f16 and bf16 take 2). */
size_t evtc_buffer_elem_size(evtc_dtype t);
/* Buffer <-> doubles for n elements of dtype t. */
void evtc_buffer_to_double(evtc_dtype t, const void *src, int64_t n, double *dst);
void evtc_buffer_from_double(evtc_dtype t, const double *src, int64_t n, void *dst);

/* One node run by the interpreter: a one-node graph with INPUT leaves. */
typedef struct evtc_fallback {
  evtc_graph *sub;
  evtc_interp *it;
  double **in;              /* per input of the node: numel doubles */
  const evtc_node *node;    /* in the original graph */
  const evtc_node *copy;    /* in sub */
} evtc_fallback;

/* Prepares node n of its graph; false with d set when it cannot be copied. */
bool evtc_fallback_init(evtc_fallback *f, const evtc_node *n, evtc_diag *d);
/* Runs it on buffers in[] (one per input) into out. */
evtc_status evtc_fallback_run(evtc_fallback *f, void *const *in, void *out, uint64_t step, evtc_diag *d);
void evtc_fallback_free(evtc_fallback *f);

#endif
