/* kernel.h -- the backend-neutral kernel IR: main loop + visitor DAG + schedule.
 *
 * A kernel is what one fused partition of a graph becomes (DESIGN.md §3).
 * It is built from a list of graph node ids and has three parts:
 *
 *  - a main-loop descriptor: a GEMM (matmul / batched matmul, M N K, batch,
 *    operand strides), a convolution run as an implicit GEMM, a row-wise
 *    reduce-then-apply loop, a plain elementwise loop, or OPAQUE (one node a
 *    backend runs whole, without a template);
 *  - a visitor DAG in EVT's vocabulary: accumulator fetch, aux load and
 *    row / column / scalar broadcast (a load through a view of a kernel
 *    input), compute (any elementwise op), row / column / scalar reduction,
 *    aux store, RNG (Philox dropout mask), one-hot, and immediates;
 *  - a schedule (cache tiles; the backend picks register tiles).
 *
 * Iteration domain.  Every kernel iterates a domain shape D (rank <= 6)
 * viewed as R rows x C columns, split at dimension `split`: R = prod D[0,
 * split), C = prod D[split, rank).  Each visitor value has a class: FULL
 * (one value per (r, c)), COL (one per row r: a column vector, e.g. a
 * softmax row maximum), ROW (one per column c, e.g. a bias gradient summed
 * over rows) or SCALAR.  CUTLASS's names follow: a "row broadcast" loads a
 * ROW vector, a "column reduction" reduces over c into a COL vector.  Loads
 * carry a view (offset + one stride per dimension of D, 0 = broadcast), so
 * NumPy broadcasting, permute, expand, slice and reshape of kernel inputs
 * fold into the load.
 *
 * Phases (reduce-apply).  A COL reduction consumed inside the kernel needs
 * its row finished first: each visitor node has a phase, the number of
 * in-kernel COL reductions on its longest path from the loads.  A backend
 * runs phase 0 .. n_phases-1 over each row, recomputing FULL values in
 * later phases (no scratch), as softmax and layernorm kernels do.
 *
 * Ownership: a kernel owns everything it points to except the graph nodes
 * (borrowed: the graph must outlive the kernel).  evtc_kernel_free frees it.
 */
#ifndef EVTC_KERNEL_H
#define EVTC_KERNEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

typedef enum evtc_mainloop_kind {
  EVTC_ML_ELEMENTWISE,  /* one pass over the domain */
  EVTC_ML_ROWS,         /* reduce-then-apply over rows: n_phases passes per row */
  EVTC_ML_GEMM,         /* matmul / batch_matmul; the epilogue is the visitor DAG */
  EVTC_ML_CONV,         /* conv2d forward as an implicit GEMM */
  EVTC_ML_OPAQUE        /* one node without a template: a backend runs it whole or refuses */
} evtc_mainloop_kind;

typedef enum evtc_vclass { EVTC_VC_FULL, EVTC_VC_COL, EVTC_VC_ROW, EVTC_VC_SCALAR } evtc_vclass;

typedef enum evtc_vnode_kind {
  EVTC_V_ACC,       /* the main loop's accumulator at (r, c) */
  EVTC_V_LOAD,      /* a kernel input through a view: aux load (FULL) or row/col/scalar broadcast */
  EVTC_V_IMM,       /* an immediate scalar (a const() without data) */
  EVTC_V_COMPUTE,   /* `op` (elementwise: unary, binary, where, cast) over args */
  EVTC_V_REDUCE,    /* `op` REDUCE_SUM/MEAN/MAX/MIN of args[0]; class of result says which axis */
  EVTC_V_STORE,     /* args[0] into kernel output `arg` */
  EVTC_V_RNG,       /* dropout keep mask (bool): philox_uniform(seed, step, flat index) >= p */
  EVTC_V_ONE_HOT,   /* args[0] (an integer) == the coordinate of domain dim `dim`; `check`: error if out of range */
  EVTC_V_STEP       /* a constant vector of two values along domain dim `dim`: `below` where its coordinate is less
                       than `depth`, `value` from there on (gemm-pad's mask: 0, then the padded columns' MASK) */
} evtc_vnode_kind;

typedef struct evtc_vnode {
  evtc_vnode_kind kind;
  evtc_vclass cls;
  evtc_dtype dtype;         /* value dtype (STORE: the stored dtype) */
  evtc_op op;               /* COMPUTE: the op (CAST: to dtype); REDUCE: the reduce op */
  int n_args;
  int32_t args[3];          /* operand vnodes (earlier in the array) */
  int phase;
  int arg;                  /* LOAD / STORE: kernel argument index */
  int64_t offset;           /* LOAD: element offset of the view */
  int64_t strides[EVTC_MAX_RANK]; /* LOAD: element stride per domain dim (0: broadcast) */
  double value;             /* IMM: the value; RNG: p; REDUCE: element count (for mean); STEP: from depth on */
  double below;             /* STEP: the value below depth */
  uint64_t seed;            /* RNG */
  int dim;                  /* ONE_HOT: domain dim of the class index; depth in `depth`; STEP: the dim it runs along */
  int64_t depth;            /* ONE_HOT: number of classes (for the range check); STEP: the coordinate of the step */
  bool check;               /* ONE_HOT: an out-of-range index is a run-time error */
  const evtc_node *node;    /* the graph node this came from, or NULL */
} evtc_vnode;

/* A kernel argument: a graph value read (input) or written (output).  Row-major from element 0 of its buffer,
 * unless `strided`: then element i of the value is at offset + sum_d i[d] strides[d] of a buffer another value
 * owns (a view the program chose: runtime/program_views.c; only OPAQUE kernels of backends that take it), and
 * when second_half is nonzero (attention_backward_kv's dK with dV), the second half of the last dim lies
 * second_half elements after the first.  `shared`: this input and an output of the kernel are one buffer
 * (the program writes the output over its dead input; the CPU template drops `restrict` for both). */
typedef struct evtc_karg {
  const evtc_node *node;
  bool output;
  bool shared;
  bool strided;
  int64_t offset;
  int64_t strides[EVTC_MAX_RANK];
  int64_t second_half;
} evtc_karg;

/* GEMM: C[b, i, j] = sum_k A[b, i, k] B[b, k, j]; element (b, i, k) of A is
 * a[a_off(b) + i*a_rs + k*a_cs], a_off(b) from the batch strides (0 where
 * that operand broadcasts over a batch dim). */
typedef struct evtc_gemm_desc {
  int64_t batch, M, N, K;
  int a_arg, b_arg;
  int batch_rank;
  int64_t batch_shape[EVTC_MAX_RANK];
  int64_t a_bstride[EVTC_MAX_RANK], b_bstride[EVTC_MAX_RANK];
  int64_t a_rs, a_cs, b_rs, b_cs;
  evtc_dtype dtype;
} evtc_gemm_desc;

/* conv2d as an implicit GEMM per (image, group): A = weights [O/g, C/g*KH*KW],
 * B = the im2col of the image (gathered while packing), M = O/g, N = OH*OW. */
typedef struct evtc_conv_desc {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
  int64_t stride[2], pad[2], dil[2], groups;   /* pad: top, left */
  int x_arg, w_arg;
} evtc_conv_desc;

typedef struct evtc_schedule {
  int64_t mc, nc, kc;       /* GEMM cache blocks (rows of A, cols of B, depth) */
  int64_t rows_per_task;    /* rows / elementwise: rows per parallel task */
} evtc_schedule;

typedef struct evtc_kernel {
  char name[64];            /* "k<index>_<first op>" set by the caller; C identifier */
  evtc_mainloop_kind kind;
  int rank, split;
  int64_t dom[EVTC_MAX_RANK];
  int64_t rows, cols;
  int n_phases;
  evtc_gemm_desc gemm;      /* GEMM, and CONV's per-image GEMM shape */
  evtc_conv_desc conv;
  const evtc_node *main;    /* the main-loop node (GEMM, CONV) or the node of an OPAQUE kernel */
  evtc_schedule sched;
  evtc_vnode *v;
  int n_v, cap_v;
  evtc_karg *args;
  int n_args, cap_args;
  const int32_t *nodes;     /* the graph node ids it covers (copy) */
  int n_nodes;
} evtc_kernel;

/* Builds the kernel of graph nodes nodes[0..n) (topological order, no
 * leaves, at most one MAINLOOP node, whose inputs must come from outside).
 * Values used outside the list (or graph outputs / the loss) become output
 * arguments; values from outside become inputs.  A group the IR cannot
 * express (an op without a template among others, reductions over
 * different axes, a value needed across rows) gives NULL and
 * EVTC_ERR_UNSUPPORTED in d naming the node and the cause.  One node
 * without a template, or one reduction over axes that are neither leading
 * nor trailing, gives an OPAQUE kernel (its inputs, then its output). */
evtc_kernel *evtc_kernel_build(const evtc_graph *g, const int32_t *nodes, int n_nodes, evtc_diag *d);
void evtc_kernel_free(evtc_kernel *k);

/* Whether the visitor DAG fits the templates every backend shares: a GEMM
 * or conv epilogue without reductions or vector stores, and no ROW vector
 * stored by every row.  When not, a short reason in why (cap bytes).  (The
 * CUDA backend's own GEMM takes reductions in its epilogue and checks
 * those kernels with its own rules: cuda_emit_evt.c.) */
bool evtc_kernel_visitor_fits(const evtc_kernel *k, char *why, size_t cap);

/* Whether the kernel runs as one flat pass over its domain: no reductions,
 * and every store writes one value per element (or a scalar, or a vector
 * whose other extent is 1).  Otherwise it needs the rows template. */
bool evtc_kernel_flat_fits(const evtc_kernel *k);

/* In a module source where each kernel starts with a "/" "* kernel NAME:"
 * comment, the kernel whose source holds 1-based line `line`, or NULL. */
const evtc_kernel *evtc_kernel_at_line(const char *src, const evtc_kernel *const *kernels, int n, long line);

/* True when the kernel has a REDUCE vnode of class c (ROW, COL, SCALAR). */
bool evtc_kernel_has_reduce(const evtc_kernel *k, evtc_vclass c);
/* Whether domain dim d is the only one of its side (rows or columns) longer than 1: its coordinate is the row r or
 * the column c itself, with no division. */
bool evtc_kernel_dim_is_whole(const evtc_kernel *k, int d);

/* For a one-node kernel (an OPAQUE template): the argument index of input j of its node, and of its first
 * output; -1 when there is none. */
int evtc_kernel_input_arg(const evtc_kernel *k, int j);
int evtc_kernel_output_arg(const evtc_kernel *k);
/* True when node lse (attention_lse) is the log-sum-exp of attention node att's scores: the same q, k, scale
 * and causality, so att's kernel can write it as a by-product (runtime/program.c). */
bool evtc_kernel_lse_of(const evtc_node *att, const evtc_node *lse);
/* True when node dq (attention_backward_q) and attention_backward_kv node kv take the same six inputs, scale
 * and causality, so kv's kernel can write dq as a by-product (FlashAttention-2's one backward pass). */
bool evtc_kernel_dq_of(const evtc_node *kv, const evtc_node *dq);

/* Views through layout nodes.  evtc_layout_view: layout node n (reshape, permute, expand, slice) over a view of
 * its input (element offset *offset, strides us per input dim) gives the view of its output (strides ns per
 * output dim; *offset moved by a slice).  evtc_layout_view_back: a permute or reshape n backwards, from a view
 * of its output (ns) to the view of its input (us) holding the same elements.  False when a reshape would
 * split or merge dims across the view's gaps (or, backwards, n is another op). */
bool evtc_layout_view(const evtc_node *n, const int64_t *us, int64_t *offset, int64_t *ns);
bool evtc_layout_view_back(const evtc_node *n, const int64_t *ns, int64_t *us);

/* Prints the kernel: main loop, domain, arguments, visitor DAG, schedule. */
void evtc_kernel_print(const evtc_kernel *k, FILE *out);
const char *evtc_vclass_name(evtc_vclass c);
const char *evtc_vnode_kind_name(const evtc_vnode *v);   /* "aux_load", "row_broadcast", ... */

/* ---- plans: which nodes form which kernel ------------------------------- */

/* A plan is an array kernel_of_node[g->n_nodes]: the kernel index of every
 * non-leaf node, -1 for leaves; kernel indices count from 0 with no gaps
 * and respect topological order (every input of a kernel comes from a leaf
 * or an earlier kernel).  The partitioner's plans use the same form. */

/* One kernel per non-leaf node (malloc'd; *n_kernels set). */
int32_t *evtc_plan_single(const evtc_graph *g, int *n_kernels);
/* A built-in greedy grouping: every node joins the latest kernel holding
 * one of its inputs when `accept` says the grown kernel is fine (a backend's
 * supports()) and order allows; main loops start kernels (their elementwise
 * epilogue chains join them), reduce-then-apply rows (softmax, layernorm
 * style) stitch.  accept NULL: anything evtc_kernel_build accepts. */
typedef bool (*evtc_plan_accept)(const evtc_kernel *k, void *ctx);
int32_t *evtc_plan_greedy(const evtc_graph *g, evtc_plan_accept accept, void *ctx, int *n_kernels);

#endif
