/* program_plan.h -- the plans programs run: the fusion partitioner's
 * (src/fusion) turned into a program's kernel_of_node, and the backend's
 * veto the partitioner asks while it plans.
 *
 * Partitioner names: "ilp" and "greedy" (src/fusion, priced for device
 * "cpu" and asking evtc_program_plan_accept for every fused node set, so
 * the kernel IR and the backend agree with the plan), "none" (one kernel
 * per node) and "builtin" (the kernel IR's own greedy grouping,
 * evtc_plan_greedy: the plan evtc_program_new makes when given none).
 * The partition's layout -- kernels ordered by smallest node id, -1 for
 * leaves and for scalar-chain nodes each reader recomputes -- becomes a
 * program plan: every scalar-chain node gets a kernel of its own and the
 * kernels are numbered in a topological order of the kernel graph.
 */
#ifndef EVTC_PROGRAM_PLAN_H
#define EVTC_PROGRAM_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "fusion/partition.h"
#include "ir/ir.h"

typedef struct evtc_backend evtc_backend;

/* Whether nodes[0..n) (any order) builds as one kernel of the kernel IR
 * that backend `be` (an evtc_backend *) supports: the fusion module's
 * accept rule. */
bool evtc_program_plan_accept(const evtc_graph *g, const int32_t *nodes, int n, void *be);

/* The plan of partitioner `name` for g on be (malloc'd kernel_of_node;
 * *n_kernels set), or NULL with *n_kernels 0 for "builtin" (the program
 * makes its own), or NULL with d set (an unknown name, a device file or
 * solver failure).  A one-line summary of the ILP (kernels, objective,
 * time, whether cached) goes to info when not NULL. */
int32_t *evtc_program_plan(const evtc_graph *g, const char *name, const evtc_backend *be, int *n_kernels, FILE *info,
                           evtc_diag *d);

/* A partition's assignment (kernel_of: n_part kernels, -1 for leaves and
 * scalar-chain nodes) as a program plan: dense, every scalar-chain node in
 * a kernel of its own, kernels numbered in a topological order (malloc'd;
 * *n_kernels set). */
int32_t *evtc_program_plan_of_partition(const evtc_graph *g, const int32_t *kernel_of, int32_t n_part,
                                        int *n_kernels);
/* What be launches for partition part (priced for dev): its kernels, with the small independent elementwise ones
 * of one shape packed into one launch (evtc_fusion_pack, asking evtc_program_plan_accept; not for partitioner
 * "none", the one-node-a-kernel baseline), as a program plan like evtc_program_plan_of_partition's (malloc'd;
 * *n_kernels set, *packed the partition's kernels that joined another's launch). */
int32_t *evtc_program_plan_launched(const evtc_partition *part, const evtc_device *dev, const evtc_backend *be,
                                    int *n_kernels, int *packed);
/* The target a backend plans for, naming both its device model
 * (data/devices/NAME.txt) and its default pass pipeline: "h200" for the
 * CUDA backend, "cpu" otherwise. */
const char *evtc_program_target(const evtc_backend *be);
/* The backend that runs a target's programs ("h200": CUDA, "cpu": CPU); NULL with the cause in d when it
 * cannot start (no GPU for h200) or the target is unknown. */
const evtc_backend *evtc_program_backend_of(const char *target, evtc_diag *d);

/* Drops g's outputs other than its loss and its `updates`: a training step reads nothing else, so its
 * predictions are not stored every step (GPT-2's logits: 823 MB, a copy kernel and that much memory per
 * step).  `train` and `explain --train` both plan the step this way. */
void evtc_program_keep_step_outputs(evtc_graph *g);
/* g after the default pass pipeline of be's target (docs/passes.md): a new
 * graph with the same leaves, outputs and loss, by name; or NULL with the
 * cause in d.  Compiled runs plan and run this graph, as `evtc explain`
 * shows it. */
evtc_graph *evtc_program_optimize(const evtc_graph *g, const evtc_backend *be, evtc_diag *d);
/* The passes that run on a model before autodiff for `target` (pipeline
 * "<target>-forward", docs/passes.md: conv-patchify, on h200 also
 * gemm-pad, attention-fuse), kept only when they turned a conv2d into a
 * GEMM, padded a GEMM or formed attention nodes, and backend be (unless
 * NULL) compiles every attention node (an interpreter fallback would cost
 * more than the fusion saves; when be refuses one, the pipeline runs again
 * without attention-fuse).  With info, one line there says what changed
 * and why attention was left decomposed.  A new graph; or NULL with d
 * untouched when there is nothing to keep (no such pipeline, nothing
 * formed, a node be refuses); or NULL with d set when a pass fails. */
evtc_graph *evtc_program_optimize_forward(const evtc_graph *g, const char *target, const evtc_backend *be,
                                          FILE *info, evtc_diag *d);

#endif
