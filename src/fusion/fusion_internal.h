/* fusion_internal.h -- what the partitioners share (not the checker).
 *
 * An evtc_fusion_ctx holds per-node facts computed once per graph: the
 * node's class (leaf, scalar chain, opaque, fusible), its consumers, its
 * siblings (see below), its element counts, the kind of reduction it is,
 * and reachability bitsets (ancestors and descendants) for convexity tests.
 *
 * Siblings: two fusible nodes other than main loops that read one common
 * tensor t over the same iteration space (t's element count equals the
 * iteration space of both, t larger than a scalar), where t is a leaf, an
 * opaque op's output or a main loop's (ctx.c says why not others).  A
 * kernel may hold siblings without a producer-consumer path between them
 * (horizontal, multi-output fusion, as XLA's sibling fusion and AStitch's
 * packing do): t is then read once instead of once per kernel.  Candidate
 * kernels are connected through producer-consumer edges and sibling links
 * together.
 *
 * On top of it: kernel admission and pricing (template.c, cost.c), the
 * kernel graph and its cycles (graph.c), candidate enumeration, greedy and
 * ILP partitioners.  feasible.c deliberately includes none of this.
 */
#ifndef EVTC_FUSION_INTERNAL_H
#define EVTC_FUSION_INTERNAL_H

#include "fusion/partition.h"

typedef enum evtc_fusion_class {
  EVTC_CLASS_LEAF,        /* input, param, state, const: no kernel */
  EVTC_CLASS_SCALAR,      /* scalar chain: recomputed inline by its readers */
  EVTC_CLASS_OPAQUE,      /* a kernel of its own */
  EVTC_CLASS_FUSIBLE      /* elementwise, broadcast, reduce, layout, main loop */
} evtc_fusion_class;

typedef enum evtc_reduce_kind {
  EVTC_RED_NONE,          /* not a reduction */
  EVTC_RED_ROW,           /* over trailing axes, some leading ones kept */
  EVTC_RED_COL,           /* over leading axes, some trailing ones kept */
  EVTC_RED_ALL,           /* to a scalar */
  EVTC_RED_OTHER          /* any other axis set */
} evtc_reduce_kind;

typedef struct evtc_fusion_ctx {
  const evtc_graph *g;
  const evtc_device *dev;
  int32_t n;              /* g->n_nodes */
  uint8_t *cls;           /* evtc_fusion_class */
  uint8_t *red;           /* evtc_reduce_kind */
  bool *is_output;
  bool *mainloop;
  int64_t *numel;         /* output elements */
  int64_t *iter;          /* iteration space: input elements for reductions */
  int32_t *user_start;    /* CSR of distinct consumers: users[user_start[v] .. user_start[v+1]) */
  int32_t *users;
  int32_t *sib_start;     /* CSR of siblings: sibs[sib_start[v] .. sib_start[v+1]) */
  int32_t *sibs;
  int32_t words;          /* 64-bit words per bitset row */
  uint64_t *anc, *desc;   /* strict ancestors / descendants, n rows */
  int32_t *stamp;         /* membership marks for set tests */
  int32_t cur;
  uint8_t *phase;         /* cost.c scratch, by node id: a member's pass */
  uint64_t *passes;       /* cost.c scratch, by node id: passes that need a value */
  const evtc_fusion_options *opt;   /* accept (may be NULL): a target's veto on node sets */
} evtc_fusion_ctx;

bool evtc_fusion_ctx_init(evtc_fusion_ctx *c, const evtc_graph *g, const evtc_device *dev);
void evtc_fusion_ctx_free(evtc_fusion_ctx *c);
/* Marks the nodes of set s (stamp = a fresh value) and returns that value. */
int32_t evtc_fusion_mark(evtc_fusion_ctx *c, const int32_t *s, int n);

/* Modelled cost of running node set s (ascending ids) as one kernel
 * (cost.c): bytes, flops and the number of distinct tensors read + written
 * (io).  Returns the time in microseconds. */
double evtc_fusion_cost(evtc_fusion_ctx *c, const int32_t *s, int n, double *bytes, double *flops, int *io);

/* True when node set s (fusible nodes) can be one kernel: template,
 * limits and convexity (template.c).  A single node always can.  *kind
 * receives its kind and *time_us its modelled time (both may be NULL). */
bool evtc_fusion_admissible(evtc_fusion_ctx *c, const int32_t *s, int n, evtc_kernel_kind *kind, double *time_us);

/* True when no superset of node set s (in any order) is admissible: a
 * violation that adding nodes cannot repair (template.c).  Used to prune
 * the enumeration. */
bool evtc_fusion_hopeless(evtc_fusion_ctx *c, const int32_t *s, int n);

/* Kernel graph of an assignment (graph.c).  Scalar-chain readers recompute
 * their inputs, so those edges do not count.  Returns true when the kernel
 * graph has a cycle; then cycle[0..*len) holds the kernels on one. */
bool evtc_fusion_find_cycle(const evtc_fusion_ctx *c, const int32_t *kernel_of, int32_t n_kernels,
                            int32_t *cycle, int32_t *len);

/* Assignment shared by greedy and ILP: opaque nodes alone, scalar-chain
 * outputs together in one kernel, fusible nodes left at -2 for the caller.
 * Returns the number of kernel ids used. */
int32_t evtc_fusion_assign_fixed(const evtc_fusion_ctx *c, int32_t *kernel_of);

/* Greedy partition (greedy.c): a full assignment, dense ids.  Returns the
 * number of kernels. */
int32_t evtc_fusion_greedy(evtc_fusion_ctx *c, int32_t *kernel_of);

/* ILP partition (ilp.c): a full assignment, dense ids; r filled in. */
int32_t evtc_fusion_ilp(evtc_fusion_ctx *c, const evtc_fusion_options *opt, int32_t *kernel_of,
                        evtc_ilp_report *r, evtc_diag *d);

/* Candidate kernels of one component (candidates.c): sets in a flat array. */
typedef struct evtc_cand_set {
  int32_t n;              /* candidates */
  int32_t cap;
  int32_t *start;         /* n + 1 offsets into nodes */
  int32_t *nodes;
  int64_t nodes_cap;
  double *cost;           /* modelled us */
  bool truncated;
} evtc_cand_set;

/* Enumerates the admissible connected node sets of component comp[0..m)
 * (ascending ids), at most max_cand of them; singletons always come first. */
void evtc_fusion_enumerate(evtc_fusion_ctx *c, const int32_t *comp, int32_t m, long max_cand,
                           evtc_cand_set *out);
/* Appends set s (ascending) with its cost unless already present. Returns its index. */
int32_t evtc_cand_add(evtc_cand_set *cs, const int32_t *s, int n, double cost);
void evtc_cand_free(evtc_cand_set *cs);

/* Solution cache (cache.c): the ILP assignment keyed by a hash of the
 * graph text, the device and the options that change the answer. */
uint64_t evtc_fusion_cache_key(const evtc_fusion_ctx *c, const evtc_fusion_options *opt);
bool evtc_fusion_cache_load(const char *dir, uint64_t key, int32_t n, int32_t *kernel_of, evtc_ilp_report *r);
void evtc_fusion_cache_store(const char *dir, uint64_t key, int32_t n, const int32_t *kernel_of,
                             const evtc_ilp_report *r);

#endif
