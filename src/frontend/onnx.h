/* onnx.h -- importing ONNX models (the ONNX frontend).
 *
 * evtc_onnx_import reads a .onnx file (protobuf ModelProto, default domain,
 * opsets 1..17 for the ops it maps) and builds an evtc graph:
 *   - graph inputs without an initializer become INPUT leaves (symbolic
 *     dims must be bound through the options);
 *   - float initializers become PARAM leaves (STATE for the running mean
 *     and variance of BatchNormalization) whose initial values go into the
 *     evtc_weights table, unless frozen: frozen and non-float initializers
 *     become CONST leaves holding their data;
 *   - every node maps onto evtc ops; subgraphs whose inputs are all known
 *     at import (shape computations: Shape, Gather, Unsqueeze, Concat,
 *     ConstantOfShape, Range, ...) are evaluated there and become constants;
 *   - graph outputs become graph outputs, each node named after its ONNX
 *     output.
 * evtc names allow [A-Za-z0-9_.]: any other character of an ONNX name is
 * written as '_' (evtc_onnx_name_sanitize).
 */
#ifndef EVTC_ONNX_H
#define EVTC_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "frontend/weights.h"
#include "ir/ir.h"

typedef struct evtc_onnx_options {
  const char *const *frozen;      /* initializer names (ONNX spelling) imported as constants */
  int n_frozen;
  const char *const *dim_names;   /* values for symbolic input dims (dim_param), n_dims of them */
  const int64_t *dim_values;
  int n_dims;
  int64_t max_known;              /* most elements of a value computed at import (shape subgraphs,
                                     ConstantOfShape, Range, folded nodes); 0: the default below */
} evtc_onnx_options;

/* Values computed at import beyond this size are refused (unsupported),
 * not allocated: real shape computations are tiny. */
#define EVTC_ONNX_DEFAULT_MAX_KNOWN ((int64_t)1 << 24)

/* Imports the model at path.  opt may be NULL (nothing frozen, no dims
 * bound).  On success returns the graph and, when weights is not NULL,
 * a new table (caller frees) with the initial value of every PARAM and
 * STATE leaf, keyed by node name.  On failure returns NULL with one message
 * in d naming the ONNX node (name and op type) and the cause; unknown ops
 * give EVTC_ERR_UNSUPPORTED "unsupported ONNX op 'X' (node 'n', opset K)". */
evtc_graph *evtc_onnx_import(const char *path, const evtc_onnx_options *opt, evtc_weights **weights,
                             evtc_diag *d);

/* The same from the bytes of a model file already in memory: name stands
 * for the file in messages; external data files are looked up in dir, or
 * refused when dir is NULL. */
evtc_graph *evtc_onnx_import_buffer(const void *bytes, size_t len, const char *name, const char *dir,
                                    const evtc_onnx_options *opt, evtc_weights **weights, evtc_diag *d);

/* Writes the evtc spelling of an ONNX name into buf (cap bytes): every
 * character outside [A-Za-z0-9_.] becomes '_'; an empty name becomes "v". */
void evtc_onnx_name_sanitize(const char *name, char *buf, size_t cap);

#endif
