/* partition.h -- fusion partitions of a graph: which node runs in which
 * kernel, what each kernel is, what it costs, and the partitioners.
 *
 * A partition assigns every node a kernel id (kernel_of[node id]) or -1.
 * -1 is for nodes that no kernel computes on its own: leaves (INPUT,
 * PARAM, STATE, CONST) and "scalar chain" nodes -- rank-0 values computed
 * only from leaves and other scalar-chain nodes (hyper-parameter
 * arithmetic such as AdamW's bias corrections); every kernel that reads
 * one recomputes it inline.  A scalar-chain node that is a graph output is
 * still stored by some kernel.
 *
 * Kernel kinds (DESIGN.md §3):
 *   GEMM        one main loop (matmul, batch_matmul, conv) -- EVT's
 *               nucleus -- with an epilogue visitor DAG around it
 *               (elementwise, broadcasts, row/column/scalar reductions
 *               stored at the end, layout ops folded into loads/stores);
 *   STITCHED    a memory-intensive group with reductions: reduce-then-apply
 *               chains (softmax, layernorm, their backwards), rows kept on
 *               chip (FusionStitching/AStitch regional stitching), and
 *               sibling reductions of the same inputs (multi-output);
 *   ELEMENTWISE a plain loop over one iteration space;
 *   OPAQUE      one op that no template covers (gather, pooling, ...).
 *
 * Partitioners: "none" (one kernel per node), "greedy" (producer-consumer
 * fusion in topological order, the baseline) and "ilp" (set partitioning
 * over enumerated candidate kernels, solved with CBC; ilp.c).  Every plan
 * can be checked by evtc_fusion_check (feasible.c), which shares no code
 * with the partitioners.
 */
#ifndef EVTC_FUSION_PARTITION_H
#define EVTC_FUSION_PARTITION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

typedef enum evtc_kernel_kind {
  EVTC_KERNEL_GEMM,
  EVTC_KERNEL_STITCHED,
  EVTC_KERNEL_ELEMENTWISE,
  EVTC_KERNEL_OPAQUE
} evtc_kernel_kind;

const char *evtc_kernel_kind_name(evtc_kernel_kind k);   /* "gemm", "stitched", ... */

/* Per-target constants and template limits (device.c reads them from
 * data/devices/<name>.txt; the file format is described there). */
typedef struct evtc_device {
  char name[32];
  double copy_bw;         /* bytes/s, device-memory copy bandwidth */
  double gemm_flops;      /* FLOP/s of a main loop */
  double vector_flops;    /* FLOP/s of everything else */
  double launch_us;       /* fixed cost of one kernel */
  int max_nodes;          /* nodes per fused kernel */
  int max_reductions;     /* reduction nodes per kernel */
  int max_io;             /* distinct tensors read + written per kernel */
  double smem_bytes;      /* on-chip bytes for the rows a multi-pass kernel keeps; beyond: re-read (cost.c) */
  char calibration[160];  /* the file's "calibrated" line, or "" */
} evtc_device;

/* Loads device `name` ("cpu", "h200") from $EVTC_DATA_DIR/devices (default:
 * the source tree's data/devices).  false with the cause in d. */
bool evtc_device_load(const char *name, evtc_device *dev, evtc_diag *d);

/* One kernel of a plan: its node set and modelled cost (the kernel IR that
 * a backend compiles is evtc_kernel, kernel/kernel.h). */
typedef struct evtc_fusion_kernel {
  evtc_kernel_kind kind;
  int32_t n_nodes;
  int32_t *nodes;         /* ascending node ids */
  int32_t nucleus;        /* the main loop's node id, or -1 */
  double bytes;           /* modelled: distinct tensors read + values written */
  double flops;
  double time_us;         /* launch + max(bytes / bw, flops / peak) */
} evtc_fusion_kernel;

/* What the ILP reports (all zero for the other partitioners). */
typedef struct evtc_ilp_report {
  int components;         /* connected components of fusible nodes */
  int solved;             /* components (or merged groups) given to CBC */
  long candidates;        /* candidate kernels priced */
  int cuts;               /* cycle cuts added lazily */
  double objective;       /* modelled us of the fusible components' kernels */
  double bound;           /* CBC's lower bound of that */
  double gap;             /* (objective - bound) / objective */
  double seconds;         /* wall time of enumeration + solving */
  double enum_seconds;    /* of which enumerating and pricing candidates */
  double max_solve_seconds; /* the longest single CBC solve */
  bool truncated;         /* a component hit the candidate budget */
  bool fallback;          /* a solve failed or hit its limit: best feasible plan used */
  bool cached;            /* read from the solution cache */
  char note[256];         /* why fallback / truncation happened */
} evtc_ilp_report;

typedef struct evtc_partition {
  const evtc_graph *g;
  int32_t *kernel_of;     /* g->n_nodes entries */
  evtc_fusion_kernel *kernels;   /* ordered by smallest node id */
  int32_t n_kernels;
  double bytes, time_us;  /* sums over kernels */
  const char *partitioner;
  evtc_ilp_report ilp;
} evtc_partition;

/* Options of evtc_fusion_partition. */
typedef struct evtc_fusion_options {
  double time_limit_s;    /* per CBC solve, wall-clock seconds; <= 0: 10 s */
  long max_candidates;    /* per component; <= 0: 200000 */
  const char *cache_dir;  /* NULL: no cache */
  bool verbose;           /* solver progress on stderr */
  /* Optional: the target's own say over every node set of 2+ nodes (sets
   * ascending), e.g. whether the kernel IR builds it and a backend runs the
   * kernel (runtime/program_plan.h), so that plans are buildable as
   * planned.  NULL: the template rules and dev's limits alone.  accept_tag
   * names the rule in the plan cache key. */
  bool (*accept)(const evtc_graph *g, const int32_t *nodes, int n, void *ctx);
  void *accept_ctx;
  const char *accept_tag;
} evtc_fusion_options;

/* Runs partitioner `name` ("none", "greedy", "ilp") on g for dev.
 * Returns the partition (free with evtc_partition_free), or NULL with the
 * cause in d (an unknown name, a solver error that left no plan at all).
 * Fallbacks are reported on stderr and in p->ilp. */
evtc_partition *evtc_fusion_partition(const evtc_graph *g, const evtc_device *dev, const char *name,
                                      const evtc_fusion_options *opt, evtc_diag *d);

/* Builds a partition from an assignment (kernel ids dense from 0, -1 for
 * nodes no kernel computes): kinds, node lists and modelled costs; kernels
 * are renumbered by their smallest node id.  kernel_of is copied. */
evtc_partition *evtc_partition_build(const evtc_graph *g, const evtc_device *dev, const int32_t *kernel_of);
void evtc_partition_free(evtc_partition *p);

/* The independent feasibility checker (feasible.c): every node assigned
 * as its class requires, kernel ids dense, the kernel graph acyclic, at most
 * one main loop per kernel, every kernel fitting its template (and its
 * recorded kind) and dev's limits.  Returns true, or false with one line
 * naming the kernel and the violation in why. */
bool evtc_fusion_check(const evtc_partition *p, const evtc_device *dev, char *why, size_t cap);

/* Launch packing (pack.c), for what a program runs: in the assignment kernel_of of a partition of g, small
 * kernels of elementwise and broadcast ops of one shape with no path between them take one kernel id, so that
 * they run as one launch (a step's optimizer updates of biases and normalisation weights).  Not a fusion plan:
 * evtc_fusion_check refuses kernels of unconnected parts, which no template prices.  opt->accept (when set)
 * vetoes a pack as it vetoes a fused kernel.  Renumbers the kernel ids densely and returns their count. */
int32_t evtc_fusion_pack(const evtc_graph *g, const evtc_device *dev, const evtc_fusion_options *opt,
                         int32_t *kernel_of);

/* The plan as text: one line per kernel, then the summary line
 * "kernels: N modelled_us: X bytes: B" and, for the ILP, the line
 * "ilp: components=C objective=X bound=Y gap=G time=T s" (render.c). */
void evtc_partition_print_kernels(const evtc_partition *p, FILE *out);
void evtc_partition_print_summary(const evtc_partition *p, FILE *out);
/* Graphviz: each kernel a cluster labelled with its kind, bytes and time. */
void evtc_partition_print_dot(const evtc_partition *p, FILE *out);
/* One self-contained HTML page: the SVG inline (svg may be NULL) and a
 * sortable table of kernels. */
void evtc_partition_print_html(const evtc_partition *p, const char *svg, FILE *out);

#endif
