/* ir.h -- the evtc graph IR: dtypes, tensor types, attributes, nodes, graphs.
 *
 * A graph owns all of its nodes, names, attribute values and shapes through
 * one arena (arena.h); nothing is freed one by one.  Nodes are SSA values in
 * topological order (a node's inputs always come before it), each with one
 * op from ops.def, its attributes (one slot per entry of the op's attribute
 * spec, defaults filled in) and its static output type.
 *
 * Errors in input (a bad file, a shape mismatch, an unknown attribute) are
 * recorded in the graph's diag -- first error only -- and the builder returns
 * NULL; a builder call given a NULL input returns NULL without a new message,
 * so callers build a whole subgraph and check g->diag once.
 */
#ifndef EVTC_IR_H
#define EVTC_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evtc.h"
#include "ir/arena.h"
#include "util/diag.h"

#define EVTC_MAX_RANK 6

/* ---- dtypes ------------------------------------------------------------ */

typedef enum evtc_dtype {
  EVTC_F64, EVTC_F32, EVTC_F16, EVTC_BF16, EVTC_I64, EVTC_I32, EVTC_BOOL,
  EVTC_DTYPE_COUNT
} evtc_dtype;

const char *evtc_dtype_name(evtc_dtype t);          /* "f32" */
bool evtc_dtype_parse(const char *s, size_t len, evtc_dtype *out);
size_t evtc_dtype_size(evtc_dtype t);               /* bytes per element */
bool evtc_dtype_is_float(evtc_dtype t);
bool evtc_dtype_is_half(evtc_dtype t);              /* f16, bf16: 2-byte floats */
bool evtc_dtype_is_int(evtc_dtype t);               /* i64, i32 (not bool) */

/* ---- tensor types -------------------------------------------------------- */

/* A static tensor type.  strides are in elements; row-major contiguous
 * unless a layout pass says otherwise.  rank 0 is a scalar. */
typedef struct evtc_type {
  evtc_dtype dtype;
  int rank;
  int64_t shape[EVTC_MAX_RANK];
  int64_t strides[EVTC_MAX_RANK];
} evtc_type;

/* A contiguous type of the given dtype and shape (rank <= EVTC_MAX_RANK). */
evtc_type evtc_type_make(evtc_dtype dt, int rank, const int64_t *shape);
int64_t evtc_type_numel(const evtc_type *t);
bool evtc_type_is_contiguous(const evtc_type *t);
bool evtc_type_equal(const evtc_type *a, const evtc_type *b);   /* dtype, shape, strides */
/* Writes "f32[32,64]" (plus "@[strides]" when not contiguous); returns buf. */
char *evtc_type_str(const evtc_type *t, char *buf, size_t cap);

/* ---- attributes ---------------------------------------------------------- */

typedef enum evtc_attr_kind {
  EVTC_ATTR_INT, EVTC_ATTR_FLOAT, EVTC_ATTR_INTS, EVTC_ATTR_FLOATS,
  EVTC_ATTR_STR, EVTC_ATTR_DTYPE
} evtc_attr_kind;

/* One entry of an op's attribute spec.  A required attribute has no
 * default; an optional one defaults to def_i / def_f / def_s, lists to
 * empty (the op's semantics say what empty means). */
typedef struct evtc_attr_spec {
  const char *name;
  evtc_attr_kind kind;
  bool required;
  int64_t def_i;          /* INT, DTYPE (as evtc_dtype) */
  double def_f;           /* FLOAT */
  const char *def_s;      /* STR */
} evtc_attr_spec;

/* An attribute value.  In a node, attrs[k] belongs to spec[k] of its op. */
typedef struct evtc_attr {
  const char *name;       /* == spec name; kept so a value list is self-describing */
  evtc_attr_kind kind;
  int n;                  /* element count of INTS / FLOATS */
  union {
    int64_t i;            /* INT, DTYPE */
    double f;             /* FLOAT */
    const int64_t *ints;  /* INTS */
    const double *floats; /* FLOATS */
    const char *s;        /* STR */
  } v;
} evtc_attr;

/* Constructors for builder calls; list data is copied by evtc_node_add. */
evtc_attr evtc_attr_int(const char *name, int64_t v);
evtc_attr evtc_attr_float(const char *name, double v);
evtc_attr evtc_attr_ints(const char *name, int n, const int64_t *v);
evtc_attr evtc_attr_floats(const char *name, int n, const double *v);
evtc_attr evtc_attr_str(const char *name, const char *v);
evtc_attr evtc_attr_dtype(const char *name, evtc_dtype v);

/* ---- ops ----------------------------------------------------------------- */

typedef enum evtc_op {
#define EVTC_OP(E, name, lo, hi, kind, attrs) EVTC_OP_##E,
#include "ir/ops.def"
#undef EVTC_OP
  EVTC_OP_COUNT
} evtc_op;

/* How a fusion partitioner may treat an op (DESIGN.md §3). */
typedef enum evtc_fusion_kind {
  EVTC_FUSE_LEAF,         /* input, param, state, const */
  EVTC_FUSE_ELEMENTWISE,
  EVTC_FUSE_BROADCAST,
  EVTC_FUSE_REDUCE,
  EVTC_FUSE_LAYOUT,
  EVTC_FUSE_MAINLOOP,
  EVTC_FUSE_OPAQUE
} evtc_fusion_kind;

typedef struct evtc_op_info {
  const char *name;
  int min_inputs, max_inputs;       /* max -1: variadic */
  evtc_fusion_kind fusion;
  const evtc_attr_spec *attrs;      /* array of n_attrs */
  int n_attrs;
} evtc_op_info;

const evtc_op_info *evtc_op_get(evtc_op op);
bool evtc_op_lookup(const char *name, size_t len, evtc_op *out);
static inline bool evtc_op_is_leaf(evtc_op op) { return op <= EVTC_OP_CONST; }
/* attention, attention_lse, attention_backward_q, attention_backward_kv (ops.def). */
static inline bool evtc_op_is_attention(evtc_op op) {
  return op == EVTC_OP_ATTENTION || op == EVTC_OP_ATTENTION_LSE || op == EVTC_OP_ATTENTION_BACKWARD_Q ||
         op == EVTC_OP_ATTENTION_BACKWARD_KV;
}

/* ---- nodes and graphs ---------------------------------------------------- */

typedef struct evtc_node evtc_node;
struct evtc_node {
  int32_t id;                 /* index in graph->nodes: topological order */
  evtc_op op;
  int32_t n_inputs;
  evtc_node **inputs;
  evtc_attr *attrs;           /* evtc_op_get(op)->n_attrs slots, spec order */
  evtc_type type;
  const char *name;           /* unique in the graph; printed as %name */
  int line, col;              /* source position when parsed, else 0 */
};

/* A graph output.  When `updates` is set, this output is the next value of
 * that PARAM or STATE node: the training loop copies it back after a step. */
typedef struct evtc_output {
  evtc_node *node;
  evtc_node *updates;
} evtc_output;

struct evtc_graph {
  evtc_arena *arena;
  const char *name;
  const char *file;           /* source file for messages, or NULL */
  evtc_node **nodes;
  int32_t n_nodes, cap_nodes;
  evtc_output *outputs;
  int32_t n_outputs, cap_outputs;
  evtc_node *loss;            /* the scalar to minimise, or NULL */
  evtc_diag diag;             /* first input error */
  /* name -> node hash (open addressing), owned by the arena */
  evtc_node **name_table;
  int32_t name_cap;
  int32_t auto_name_counter;
};

evtc_graph *evtc_graph_new(const char *name);
void evtc_graph_free(evtc_graph *g);
evtc_node *evtc_graph_find(const evtc_graph *g, const char *name);

/* Adds a node of `op` whose type is inferred from its inputs and attributes
 * (shape.c).  `attrs` may list any subset of the op's spec in any order;
 * unknown names, wrong kinds, missing required attributes and type errors
 * set g->diag and return NULL.  name NULL: a fresh "tN" name; a name that
 * is taken gets a ".N" suffix (the parser checks for duplicates itself). */
evtc_node *evtc_node_add(evtc_graph *g, evtc_op op, evtc_node *const *inputs, int n_inputs,
                         const evtc_attr *attrs, int n_attrs, const char *name);
/* Adds a leaf (INPUT, PARAM, STATE, CONST) of the given type. */
evtc_node *evtc_leaf_add(evtc_graph *g, evtc_op op, evtc_type type,
                         const evtc_attr *attrs, int n_attrs, const char *name);
/* Shorthands for attribute-free ops. */
evtc_node *evtc_unary(evtc_graph *g, evtc_op op, evtc_node *a);
evtc_node *evtc_binary(evtc_graph *g, evtc_op op, evtc_node *a, evtc_node *b);
/* A scalar (rank 0) CONST of dtype dt. */
evtc_node *evtc_scalar(evtc_graph *g, evtc_dtype dt, double value);

void evtc_graph_add_output(evtc_graph *g, evtc_node *n, evtc_node *updates);
/* True when n is read after a run: one of g's outputs, or its loss. */
bool evtc_graph_is_output(const evtc_graph *g, const evtc_node *n);

/* Attribute access by name on a node; EVTC_ASSERTs that the op has it. */
const evtc_attr *evtc_node_attr(const evtc_node *n, const char *name);
int64_t evtc_node_int(const evtc_node *n, const char *name);
double evtc_node_float(const evtc_node *n, const char *name);
const char *evtc_node_str(const evtc_node *n, const char *name);

/* Records a type error on node-to-be `name` of op `op` and returns NULL
 * (used by shape inference: "node %h (matmul): inner dims differ: 64 vs 32"). */
evtc_node *evtc_graph_fail(evtc_graph *g, evtc_status st, const char *node_name, evtc_op op,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Shape inference (shape.c): fills n->type from inputs and attributes.
 * Returns false after recording the cause in g->diag. Leaves are not inferred. */
bool evtc_infer_type(evtc_graph *g, evtc_node *n);

/* Verifier (verify.c): topological order, arity, attribute kinds, types equal
 * to re-inferred ones, unique names, outputs and loss well formed.  Records the
 * first violation in g->diag. */
evtc_status evtc_graph_verify(evtc_graph *g);

/* Copies (clone.c): a new graph with the same nodes, outputs and loss.
 * evtc_graph_rebatch also sets dim 0 of every INPUT to `batch` and infers
 * every type again (reshape targets should use -1 for the batch dim); NULL
 * with the cause in d when a node no longer type-checks. */
evtc_graph *evtc_graph_clone(const evtc_graph *g);
evtc_graph *evtc_graph_rebatch(const evtc_graph *g, int64_t batch, evtc_diag *d);
/* Copies node n of another graph into g with inputs already mapped (`inputs`
 * are g's nodes), same op, attributes and name; type re-inferred. */
evtc_node *evtc_node_copy(evtc_graph *g, const evtc_node *n, evtc_node *const *inputs);

/* Normalises a possibly negative axis against rank; -1 when out of range. */
int evtc_axis_norm(int64_t axis, int rank);

#endif
