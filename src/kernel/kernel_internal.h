/* kernel_internal.h -- the kernel builder's shared state (internal to src/kernel).
 *
 * kernel_build.c owns the driver (domain, split, stores, phases) and the
 * helpers that turn graph values into visitor operands; kernel_nodes.c
 * turns each graph op into visitor nodes or a main-loop descriptor.
 */
#ifndef EVTC_KERNEL_INTERNAL_H
#define EVTC_KERNEL_INTERNAL_H

#include "kernel/kernel.h"

/* What the builder knows of a graph value, by node id. */
typedef struct evtc_kbval {
  bool in_kernel;
  int vn;                            /* its vnode (in-kernel, not a view) */
  int emb[EVTC_MAX_RANK];            /* dim -> domain dim, -1 for size-1 dims */
  bool is_view;                      /* an in-kernel layout op over an outside value */
  int view_arg;
  int64_t view_off, view_strides[EVTC_MAX_RANK];   /* over the node's own shape */
} evtc_kbval;

typedef struct evtc_kb {
  const evtc_graph *g;
  evtc_kernel *k;
  evtc_kbval *val;
  evtc_diag *d;
} evtc_kb;

/* Records "node %n (op): cause" as EVTC_ERR_UNSUPPORTED; returns it. */
evtc_status evtc_kb_fail(evtc_kb *b, const evtc_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Index of the kernel argument for (n, output), added when new. */
int evtc_kb_arg(evtc_kb *b, const evtc_node *n, bool output);
/* Appends v (phase computed from its args; equal loads/immediates shared). */
int evtc_kb_add(evtc_kb *b, evtc_vnode v);
evtc_vclass evtc_kb_class(const evtc_kb *b, unsigned covered);
evtc_vclass evtc_kb_join(evtc_vclass a, evtc_vclass b);
/* Embedding of a shape against the domain: right-aligned, else left-aligned. */
bool evtc_kb_emb_of_shape(const evtc_kb *b, const evtc_type *t, int *emb);
/* The vnode of input u of n whose dims must run along domain dims want[]
 * (-1 for size-1 dims); loads outside values; -1 with d set on mismatch. */
int evtc_kb_operand(evtc_kb *b, const evtc_node *n, const evtc_node *u, const int *want);
/* Operand j of elementwise n, NumPy-broadcast against n's output. */
int evtc_kb_bcast_operand(evtc_kb *b, const evtc_node *n, int j);
/* The embedding input u of n has when read whole; false with d set. */
bool evtc_kb_input_emb(evtc_kb *b, const evtc_node *n, const evtc_node *u, int *emb);
/* Visitor nodes (or a main-loop descriptor) of node n (kernel_nodes.c). */
evtc_status evtc_kb_node(evtc_kb *b, const evtc_node *n);

#endif
