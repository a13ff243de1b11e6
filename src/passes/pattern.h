/* pattern.h -- what the rewriting passes share: a driver that gives every
 * callback the source graph's use counts, and small matchers and builders.
 *
 * The passes built on it (decompose, simplify, permute-fold,
 * permute-propagate, broadcast-canonicalize) match patterns on the
 * already-rewritten inputs (nodes of rw->dst), so a chain such as
 * permute(permute(permute(x))) collapses in one walk.  Nodes they build are
 * named "<source node>.<tag>" and the final replacement takes the source
 * node's own name, so names stay stable and never use the "tN" counter.
 */
#ifndef EVTC_PASSES_PATTERN_H
#define EVTC_PASSES_PATTERN_H

#include "passes/rewrite.h"

/* rw->ctx of every callback run through evtc_pat_run. */
typedef struct evtc_pat_ctx {
  int32_t *uses;    /* src node id -> number of consumers, outputs and loss included */
  bool *pinned;     /* src node id -> it is an output or the loss: keep its name */
} evtc_pat_ctx;

/* Runs evtc_rewrite_graph(g, fn) with an evtc_pat_ctx as rw->ctx. */
evtc_graph *evtc_pat_run(const evtc_graph *g, evtc_rewrite_fn fn, evtc_diag *d);

/* True when src node n may be replaced by an existing node of another name
 * (it is no output and no loss). */
bool evtc_pat_may_forward(const evtc_rewrite *rw, const evtc_node *n);
/* True when input k of src node n has n as its only consumer. */
bool evtc_pat_single_use(const evtc_rewrite *rw, const evtc_node *n, int k);

/* ---- matchers ---- */

/* True when n is a CONST whose elements all equal one finite or infinite
 * (not NaN) value, stored in *v. */
bool evtc_pat_uniform(const evtc_node *n, double *v);
bool evtc_pat_same_shape(const evtc_type *a, const evtc_type *b);
/* NumPy broadcast of n types into shape/rank; false when they do not broadcast. */
bool evtc_pat_broadcast(int n, const evtc_type *const *t, int *rank, int64_t *shape);
/* The normalised axis mask of a reduce node over its input of rank `rank`
 * (an empty axes list means all axes). */
void evtc_pat_reduce_mask(const evtc_node *n, int rank, bool *mask);
/* True for the broadcasting binary ops ADD..GE and WHERE. */
bool evtc_pat_is_broadcasting(evtc_op op);
/* True for the one-input elementwise ops (NEG..CAST): no position dependence. */
bool evtc_pat_is_unary(evtc_op op);
/* In a joint graph (g->loss set): fwd[id] = 1 for the loss's ancestors; grad_free[id] = 1 for the other
 * non-leaf nodes that are elementwise ops (unary, broadcasting binary, where, expand) of forward values,
 * leaves and such nodes -- what a forward kernel could compute (remat, grad-factor).  Both arrays hold
 * g->n_nodes entries, zeroed by the caller. */
void evtc_pat_forward_split(const evtc_graph *g, unsigned char *fwd, unsigned char *grad_free);

/* ---- builders (into rw->dst; name: "<base>.<tag>", or base when tag is NULL) ---- */

evtc_node *evtc_pat_op(evtc_rewrite *rw, evtc_op op, evtc_node *const *ins, int n_ins, const evtc_attr *at,
                       int n_at, const char *base, const char *tag);
evtc_node *evtc_pat_bin(evtc_rewrite *rw, evtc_op op, evtc_node *a, evtc_node *b, const char *base,
                        const char *tag);
evtc_node *evtc_pat_un(evtc_rewrite *rw, evtc_op op, evtc_node *a, const char *base, const char *tag);
/* A reduce over the listed axes (n_axes 0: all). */
evtc_node *evtc_pat_reduce(evtc_rewrite *rw, evtc_op op, evtc_node *x, int n_axes, const int64_t *axes,
                           bool keepdims, const char *base, const char *tag);
/* reshape / expand / permute of x; reshape and expand return x itself when
 * the shape already matches, permute when perm is the identity. */
evtc_node *evtc_pat_reshape(evtc_rewrite *rw, evtc_node *x, int rank, const int64_t *shape, const char *base,
                            const char *tag);
evtc_node *evtc_pat_expand(evtc_rewrite *rw, evtc_node *x, int rank, const int64_t *shape, const char *base,
                           const char *tag);
evtc_node *evtc_pat_permute(evtc_rewrite *rw, evtc_node *x, const int64_t *perm, const char *base,
                            const char *tag);
/* For src PERMUTE n whose mapped input x is a PERMUTE of y: permute(y, q)
 * with q the composition, named n; y itself when q is the identity and n
 * may be forwarded; NULL when x is no permute (or n is pinned and q is the
 * identity). */
evtc_node *evtc_pat_permute_of_permute(evtc_rewrite *rw, const evtc_node *n, evtc_node *x);
/* The normalised perm of a PERMUTE node into p. */
void evtc_pat_perm(const evtc_node *n, int64_t *p);
/* A uniform CONST of dtype dt and the given shape (rank 0: a scalar);
 * reuses an equal uniform CONST of rw->dst when there is one. */
evtc_node *evtc_pat_const(evtc_rewrite *rw, evtc_dtype dt, int rank, const int64_t *shape, double v,
                          const char *base, const char *tag);

#endif
