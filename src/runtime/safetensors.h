/* safetensors.h -- checkpoints in the safetensors format.
 *
 * A safetensors file is an 8-byte little-endian header length N, then N
 * bytes of JSON mapping each tensor name to {"dtype", "shape",
 * "data_offsets": [begin, end]} (offsets into the data that follows, from
 * its start), then the raw little-endian tensor bytes.  PyTorch, JAX and
 * the `safetensors` Python package read it directly.
 */
#ifndef EVTC_SAFETENSORS_H
#define EVTC_SAFETENSORS_H

#include "ir/ir.h"

/* One tensor to save: numel(type) doubles stored in type's dtype
 * (F64 F32 F16 BF16 I64 I32 BOOL), row-major with type's shape. */
typedef struct evtc_named_tensor {
  const char *name;
  evtc_type type;
  const double *data;
} evtc_named_tensor;

/* Writes the n tensors, in order, atomically (temp file + fsync + rename).
 * Names must be distinct and must not start with "__" (reserved for
 * metadata); EVTC_ERR_INVALID or EVTC_ERR_IO with a message in d. */
evtc_status evtc_safetensors_write(const char *path, const evtc_named_tensor *tensors, int n, evtc_diag *d);

#endif
