/* program_fallback.c -- nodes without a template, run by the interpreter,
 * and the conversion of native buffers to and from doubles.
 *
 * Buffers hold every dtype in its own size: f16 (IEEE binary16) and bf16
 * (the top half of an f32) take 2 bytes, converted from doubles with one
 * rounding to nearest even (subnormals kept, overflow to infinity, NaN
 * stays a quiet NaN) by runtime/elements.c, exactly as the interpreter's
 * evtc_round_to rounds.
 *
 * A fallback node is copied into a graph of its own whose inputs are
 * INPUT leaves of the same types; each run converts the input buffers to
 * doubles, runs the interpreter (which rounds to every dtype, f16 and bf16
 * included) and converts the output back.  This is slow and only exists
 * so that every op runs; program.c warns loudly about each such node.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/elements.h"
#include "runtime/precision.h"
#include "runtime/program_internal.h"

size_t evtc_buffer_elem_size(evtc_dtype t) { return evtc_dtype_size(t); }

void evtc_buffer_to_double(evtc_dtype t, const void *src, int64_t n, double *dst) {
  switch (t) {
    case EVTC_F64: memcpy(dst, src, sizeof(double) * (size_t)n); break;
    case EVTC_F32: for (int64_t i = 0; i < n; i++) dst[i] = ((const float *)src)[i]; break;
    case EVTC_F16: for (int64_t i = 0; i < n; i++) dst[i] = evtc_f16_to_double(((const uint16_t *)src)[i]); break;
    case EVTC_BF16: for (int64_t i = 0; i < n; i++) dst[i] = evtc_bf16_to_double(((const uint16_t *)src)[i]); break;
    case EVTC_I64: for (int64_t i = 0; i < n; i++) dst[i] = (double)((const int64_t *)src)[i]; break;
    case EVTC_I32: for (int64_t i = 0; i < n; i++) dst[i] = ((const int32_t *)src)[i]; break;
    case EVTC_BOOL: for (int64_t i = 0; i < n; i++) dst[i] = ((const uint8_t *)src)[i]; break;
    default: EVTC_ASSERT(!"dtype");
  }
}

void evtc_buffer_from_double(evtc_dtype t, const double *src, int64_t n, void *dst) {
  switch (t) {        /* f16 and bf16: one rounding from the double, the same as evtc_round_to's */
    case EVTC_F16: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = evtc_double_to_f16(src[i]); return;
    case EVTC_BF16: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = evtc_double_to_bf16(src[i]); return;
    default: break;
  }
  for (int64_t i = 0; i < n; i++) {
    double x = evtc_round_to(t, src[i]);
    switch (t) {
      case EVTC_F64: ((double *)dst)[i] = x; break;
      case EVTC_F32: ((float *)dst)[i] = (float)x; break;
      case EVTC_I64: ((int64_t *)dst)[i] = (int64_t)x; break;
      case EVTC_I32: ((int32_t *)dst)[i] = (int32_t)x; break;
      case EVTC_BOOL: ((uint8_t *)dst)[i] = x != 0; break;
      default: EVTC_ASSERT(!"dtype");
    }
  }
}

bool evtc_fallback_init(evtc_fallback *f, const evtc_node *n, evtc_diag *d) {
  memset(f, 0, sizeof *f);
  f->node = n;
  f->sub = evtc_graph_new("fallback");
  evtc_node *ins[8] = {0};
  evtc_node **inputs = n->n_inputs > 8 ? calloc((size_t)n->n_inputs, sizeof *inputs) : ins;
  f->in = calloc((size_t)n->n_inputs + 1, sizeof(double *));
  for (int j = 0; j < n->n_inputs; j++) {
    const evtc_type *t = &n->inputs[j]->type;
    inputs[j] = evtc_leaf_add(f->sub, EVTC_OP_INPUT, evtc_type_make(t->dtype, t->rank, t->shape), NULL, 0, NULL);
    int64_t numel = evtc_type_numel(t);
    f->in[j] = calloc((size_t)(numel > 0 ? numel : 1), sizeof(double));
  }
  f->copy = evtc_node_copy(f->sub, n, inputs);
  if (inputs != ins) free(inputs);
  if (!f->copy) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "node %%%s: cannot prepare the interpreter fallback: %s", n->name,
                  f->sub->diag.msg);
    return false;
  }
  f->it = evtc_interp_new(f->sub);
  for (int j = 0; j < n->n_inputs; j++) evtc_interp_set(f->it, f->sub->nodes[j], f->in[j]);
  return true;
}

evtc_status evtc_fallback_run(evtc_fallback *f, void *const *in, void *out, uint64_t step, evtc_diag *d) {
  const evtc_node *n = f->node;
  for (int j = 0; j < n->n_inputs; j++)
    evtc_buffer_to_double(n->inputs[j]->type.dtype, in[j], evtc_type_numel(&n->inputs[j]->type), f->in[j]);
  if (evtc_interp_run(f->it, step, d) != EVTC_OK) return d->status;
  evtc_buffer_from_double(n->type.dtype, evtc_interp_value(f->it, f->copy), evtc_type_numel(&n->type), out);
  return EVTC_OK;
}

void evtc_fallback_free(evtc_fallback *f) {
  if (f->in)
    for (int j = 0; j < f->node->n_inputs; j++) free(f->in[j]);
  free(f->in);
  if (f->it) evtc_interp_free(f->it);
  if (f->sub) evtc_graph_free(f->sub);
}
