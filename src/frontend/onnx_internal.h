/* onnx_internal.h -- what the files of the ONNX frontend share.
 *
 * The import walks the ONNX graph node by node.  Every ONNX value (a graph
 * input, an initializer, a node output) gets an evtc_onnx_value: its type,
 * its evtc node once one exists, and its data when the value is known at
 * import time (constants, integer initializers, folded shape computations).
 * Known values become CONST nodes only when a computed node consumes them,
 * so shape subgraphs leave nothing behind in the graph.
 *
 * Each ONNX op type has a mapper (onnx_ops_*.c, one file per op family)
 * that reads the current node's inputs and attributes through the helpers
 * below and produces its outputs with evtc builder calls on c->g.  When all
 * inputs of a node are known, onnx_fold.c points c->g at a scratch graph,
 * runs the same mapper there and evaluates the result with the reference
 * interpreter, so any mapped op folds without a second implementation.
 */
#ifndef EVTC_ONNX_INTERNAL_H
#define EVTC_ONNX_INTERNAL_H

#include <stdbool.h>

#include "frontend/onnx.h"
#include "onnx.pb-c.h"

typedef struct evtc_onnx_value {
  const char *name;          /* ONNX spelling */
  bool defined;              /* false: an optional output evtc does not produce */
  evtc_type type;
  evtc_node *node;           /* in the model graph, or NULL until first needed */
  const double *data;        /* numel values known at import, or NULL */
  const double *initial;     /* values of a trainable initializer (leaf made on first use) */
} evtc_onnx_value;

typedef struct evtc_onnx_ctx {
  evtc_graph *model;         /* the graph being built */
  evtc_graph *g;             /* where builder calls go: model, or the scratch graph of a fold */
  evtc_arena *arena;         /* values and known data; lives for the import only */
  evtc_diag *d;
  const evtc_onnx_options *opt;
  const Onnx__GraphProto *graph; /* the ONNX graph being imported */
  evtc_weights *weights;
  const char *dir;           /* directory of the model file (external data) */
  int64_t opset;             /* default-domain opset version */
  evtc_onnx_value **table;   /* name -> value, open addressing, power-of-two capacity */
  int table_cap, n_values;
  /* the node being mapped */
  const Onnx__NodeProto *node;
  int node_index;            /* position of node in the graph, for messages */
  int n_in, n_out;
  evtc_onnx_value **in;      /* NULL for an absent optional input */
  evtc_node **in_node;       /* inputs materialised in c->g for this node */
  evtc_onnx_value **out;     /* NULL for an output left unnamed */
  evtc_node **fold_out;      /* outputs built in the scratch graph while folding */
  bool folding;
} evtc_onnx_ctx;

/* A mapper: builds the current node's outputs; false after recording why. */
typedef bool (*evtc_onnx_map_fn)(evtc_onnx_ctx *c);
typedef struct evtc_onnx_op {
  const char *op_type;
  evtc_onnx_map_fn map;
} evtc_onnx_op;

/* Op tables, each ending in {NULL, NULL} (onnx_ops_*.c). */
extern const evtc_onnx_op evtc_onnx_ops_math[];
extern const evtc_onnx_op evtc_onnx_ops_reduce[];
extern const evtc_onnx_op evtc_onnx_ops_nn[];
extern const evtc_onnx_op evtc_onnx_ops_shape[];
extern const evtc_onnx_op evtc_onnx_ops_const[];

/* ---- reading (onnx_read.c) ---- */

/* The whole file at path (malloc'd, *len bytes); NULL with the cause in d. */
uint8_t *evtc_onnx_file_read(const char *path, size_t *len, evtc_diag *d);
/* The evtc dtype of an ONNX TensorProto.DataType; false when evtc has none. */
bool evtc_onnx_dtype(int32_t onnx_type, evtc_dtype *out);
/* Decodes a tensor (typed fields, raw_data, or external data next to the
 * model) into *type and *data (numel doubles from c->arena); `what` names
 * the tensor in messages.  False with the cause in c->d. */
bool evtc_onnx_tensor_decode(evtc_onnx_ctx *c, const Onnx__TensorProto *t, const char *what, evtc_type *type,
                             double **data);

/* ---- values and the current node (onnx_values.c) ---- */

evtc_onnx_value *evtc_onnx_value_find(const evtc_onnx_ctx *c, const char *name);
/* A new value named name; NULL (c->d set) when the name is taken. */
evtc_onnx_value *evtc_onnx_value_add(evtc_onnx_ctx *c, const char *name);
/* The node of value v in c->g, made on first use: a CONST for known data,
 * a PARAM (or STATE when as_state) for a trainable initializer. */
evtc_node *evtc_onnx_value_node(evtc_onnx_ctx *c, evtc_onnx_value *v, bool as_state);

bool evtc_onnx_has(const evtc_onnx_ctx *c, int i);              /* input i present */
/* Type of input i; when it is absent, records "input i is missing" in c->d
 * (the node then fails) and returns a scalar f32 type so the mapper can go on. */
const evtc_type *evtc_onnx_type(evtc_onnx_ctx *c, int i);
const double *evtc_onnx_data(const evtc_onnx_ctx *c, int i);     /* known values of input i, or NULL */
evtc_node *evtc_onnx_in(evtc_onnx_ctx *c, int i);                /* node of input i in c->g */
evtc_node *evtc_onnx_in_state(evtc_onnx_ctx *c, int i);          /* same, initializer made a STATE */
/* Known integer values of input i into out (at most cap, count in *n);
 * false (c->d set) when the input is not known at import. */
bool evtc_onnx_ints(evtc_onnx_ctx *c, int i, int64_t *out, int cap, int *n);
/* Rounds a known double to int64, clamping outside the int64 range. */
int64_t evtc_onnx_to_int(double v);

/* Name for the node that produces output i (sanitised ONNX name; NULL in a fold). */
const char *evtc_onnx_out_name(evtc_onnx_ctx *c, int i);
/* Whether output i of the current node is an input of a later node or a
 * graph output (always true while folding). */
bool evtc_onnx_output_used(const evtc_onnx_ctx *c, int i);
/* Sets output i to node n (NULL: a builder call failed; returns false). */
bool evtc_onnx_out(evtc_onnx_ctx *c, int i, evtc_node *n);
/* Sets output i to a known value (data copied). */
bool evtc_onnx_out_const(evtc_onnx_ctx *c, int i, evtc_type t, const double *data);

/* A CONST node in c->g: numel values of data, or every element = fill when data is NULL. */
evtc_node *evtc_onnx_const(evtc_onnx_ctx *c, evtc_type t, const double *data, double fill);

/* Records "ONNX node 'name' (Op): cause" in c->d; returns false. */
bool evtc_onnx_fail(evtc_onnx_ctx *c, evtc_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same with EVTC_ERR_UNSUPPORTED and the cause prefixed "unsupported: ". */
bool evtc_onnx_unsupported(evtc_onnx_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- attributes of the current node (onnx_attr.c) ---- */

const Onnx__AttributeProto *evtc_onnx_attr(const evtc_onnx_ctx *c, const char *name);
int64_t evtc_onnx_attr_int(const evtc_onnx_ctx *c, const char *name, int64_t def);
double evtc_onnx_attr_float(const evtc_onnx_ctx *c, const char *name, double def);
/* A string attribute as a NUL-terminated arena copy, or def. */
const char *evtc_onnx_attr_str(evtc_onnx_ctx *c, const char *name, const char *def);
/* An INTS attribute into out (at most cap): its count, -1 when absent, and
 * -2 (c->d set) when longer than cap. */
int evtc_onnx_attr_ints(evtc_onnx_ctx *c, const char *name, int64_t *out, int cap);

/* ---- folding (onnx_fold.c) ---- */

/* Most elements a value computed at import may have (ConstantOfShape,
 * Range, a folded node): the option's limit or the default of onnx.h. */
int64_t evtc_onnx_max_known(const evtc_onnx_ctx *c);

/* Runs op's mapper on a scratch graph and stores every output as known data. */
bool evtc_onnx_fold(evtc_onnx_ctx *c, const evtc_onnx_op *op);

#endif
