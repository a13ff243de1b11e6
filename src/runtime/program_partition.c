/* program_partition.c -- a fusion partition as a program plan (program_plan.h).
 *
 * The graph a compiled run plans is the one the target's pass pipeline
 * made (evtc_program_optimize).  The partitioner runs on the backend's device model (data/devices/cpu.txt,
 * or h200.txt for the CUDA backend) with the backend's veto (named by the
 * backend in the plan cache key) as its accept rule and the plan cache in the evtc cache
 * directory, then renumbers: scalar-chain nodes (kernel -1 but not leaves)
 * get kernels of their own, and kernels are ordered by a topological sort
 * of the kernel graph (Kahn's algorithm, smallest first kernel id first),
 * which the partition's acyclicity guarantees to exist.
 */
#include "runtime/program_plan.h"
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/partition.h"
#include "kernel/kernel.h"
#include "passes/manager.h"
#include "util/fs.h"

int32_t *evtc_program_plan_of_partition(const evtc_graph *g, const int32_t *kernel_of, int32_t n_part,
                                        int *n_kernels) {
  int32_t n = g->n_nodes, nk = n_part;
  int32_t *grp = malloc(sizeof(int32_t) * ((size_t)n + 1));
  for (int32_t v = 0; v < n; v++) {
    grp[v] = kernel_of[v];
    if (grp[v] < 0 && !evtc_op_is_leaf(g->nodes[v]->op)) grp[v] = nk++;
  }
  /* kernel graph edges (a -> b when b reads a value a computes), as in-degrees and a CSR */
  int32_t *indeg = calloc((size_t)nk + 1, sizeof(int32_t)), *cnt = calloc((size_t)nk + 2, sizeof(int32_t));
  int64_t n_edges = 0;
  for (int32_t v = 0; v < n; v++)
    for (int j = 0; j < g->nodes[v]->n_inputs; j++) {
      int32_t a = grp[g->nodes[v]->inputs[j]->id], b = grp[v];
      if (a >= 0 && b >= 0 && a != b) cnt[a + 1]++, n_edges++;
    }
  for (int32_t k = 0; k < nk; k++) cnt[k + 1] += cnt[k];
  int32_t *to = malloc(sizeof(int32_t) * (size_t)(n_edges + 1)), *fill = malloc(sizeof(int32_t) * ((size_t)nk + 1));
  memcpy(fill, cnt, sizeof(int32_t) * (size_t)nk);
  for (int32_t v = 0; v < n; v++)
    for (int j = 0; j < g->nodes[v]->n_inputs; j++) {
      int32_t a = grp[g->nodes[v]->inputs[j]->id], b = grp[v];
      if (a >= 0 && b >= 0 && a != b) to[fill[a]++] = b, indeg[b]++;
    }
  /* Kahn: ready kernels in a min-heap-free way -- scan by smallest first node (kernel ids are ordered so) */
  int32_t *first = malloc(sizeof(int32_t) * ((size_t)nk + 1)), *order = malloc(sizeof(int32_t) * ((size_t)nk + 1));
  for (int32_t k = 0; k < nk; k++) first[k] = n;
  for (int32_t v = 0; v < n; v++)
    if (grp[v] >= 0 && v < first[grp[v]]) first[grp[v]] = v;
  int32_t *ready = malloc(sizeof(int32_t) * ((size_t)nk + 1)), n_ready = 0, n_done = 0;
  for (int32_t k = 0; k < nk; k++)
    if (indeg[k] == 0) ready[n_ready++] = k;
  while (n_ready > 0) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_ready; i++)
      if (first[ready[i]] < first[ready[best]]) best = i;
    int32_t k = ready[best];
    ready[best] = ready[--n_ready];
    order[k] = n_done++;
    for (int32_t e = cnt[k]; e < cnt[k + 1]; e++)
      if (--indeg[to[e]] == 0) ready[n_ready++] = to[e];
  }
  EVTC_ASSERT(n_done == nk);   /* the partitioner's plans are acyclic */
  for (int32_t v = 0; v < n; v++) grp[v] = grp[v] >= 0 ? order[grp[v]] : -1;
  free(indeg);
  free(cnt);
  free(to);
  free(fill);
  free(first);
  free(order);
  free(ready);
  *n_kernels = nk;
  return grp;
}

/* Fusion options under which backend be vetoes what it cannot build (evtc_program_plan_accept), cached in
 * cache_dir (NULL: no cache). */
static evtc_fusion_options backend_options(const evtc_backend *be, const char *cache_dir) {
  return (evtc_fusion_options){.cache_dir = cache_dir, .accept = evtc_program_plan_accept, .accept_ctx = (void *)be,
                               .accept_tag = be->name};
}

int32_t *evtc_program_plan(const evtc_graph *g, const char *name, const evtc_backend *be, int *n_kernels, FILE *info,
                           evtc_diag *d) {
  *n_kernels = 0;
  if (strcmp(name, "builtin") == 0) return NULL;
  if (strcmp(name, "ilp") != 0 && strcmp(name, "greedy") != 0 && strcmp(name, "none") != 0) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "unknown partitioner '%s' (ilp, greedy, none or builtin)", name);
    return NULL;
  }
  evtc_device dev;
  if (!evtc_device_load(evtc_program_target(be), &dev, d)) return NULL;
  char cache[4096];
  bool have_cache = evtc_cache_dir("fusion", cache, sizeof cache) && evtc_mkdirs(cache);
  evtc_fusion_options opt = backend_options(be, have_cache ? cache : NULL);
  evtc_partition *p = evtc_fusion_partition(g, &dev, name, &opt, d);
  if (!p) return NULL;
  int packed = 0;
  int32_t *plan = evtc_program_plan_launched(p, &dev, be, n_kernels, &packed);
  if (info && strcmp(name, "ilp") == 0)
    fprintf(info, "partitioner ilp: %d kernels (+%d for scalar-chain nodes, %d small elementwise ones packed into "
                  "others' launches), modelled %.1f us, gap %.3g, %.2f s%s%s\n",
            p->n_kernels, *n_kernels - p->n_kernels + packed, packed, p->ilp.objective, p->ilp.gap, p->ilp.seconds,
            p->ilp.cached ? " (cached plan)" : "", p->ilp.fallback ? " (fallback plan)" : "");
  evtc_partition_free(p);
  return plan;
}

int32_t *evtc_program_plan_launched(const evtc_partition *part, const evtc_device *dev, const evtc_backend *be,
                                    int *n_kernels, int *packed) {
  const evtc_graph *g = part->g;
  int32_t *of = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  EVTC_ASSERT(of != NULL);
  memcpy(of, part->kernel_of, sizeof(int32_t) * (size_t)g->n_nodes);
  evtc_fusion_options opt = backend_options(be, NULL);
  int32_t launched = part->partitioner && strcmp(part->partitioner, "none") == 0 ? part->n_kernels
                                                                                 : evtc_fusion_pack(g, dev, &opt, of);
  int32_t *plan = evtc_program_plan_of_partition(g, of, launched, n_kernels);
  *packed = part->n_kernels - launched;
  free(of);
  return plan;
}

const char *evtc_program_target(const evtc_backend *be) { return be && strcmp(be->name, "cuda") == 0 ? "h200" : "cpu"; }

const evtc_backend *evtc_program_backend_of(const char *target, evtc_diag *d) {
  if (strcmp(target, "h200") == 0) return evtc_backend_cuda(d);
  if (strcmp(target, "cpu") == 0) return evtc_backend_cpu();
  evtc_diag_set(d, EVTC_ERR_INVALID, "no backend runs target '%s'", target);
  return NULL;
}

/* What the forward passes did: attention nodes formed, convs patchified, GEMMs padded; why be refused an
 * attention node ("" when it did not). */
typedef struct forward_counts {
  int attention, convs, pads;
  char veto[320];
} forward_counts;

static int count_op(const evtc_graph *g, evtc_op op) {
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i]->op == op;
  return n;
}

/* Pipeline pl without pass `skip` (NULL: none skipped) on g: the result when it turned a conv2d into a GEMM,
 * padded a GEMM or formed attention nodes and be (when not NULL) compiles every attention node; else NULL
 * (with c->veto set when be refuses one, or with d set when a pass fails).  *c counts the changes. */
static evtc_graph *forward_passes(const evtc_graph *g, const evtc_pipeline *pl, const char *skip,
                                  const evtc_backend *be, forward_counts *c, evtc_diag *d) {
  const char *names[16];
  int n = 0;
  EVTC_ASSERT(pl->n_passes <= 16);
  for (int i = 0; i < pl->n_passes; i++)
    if (!skip || strcmp(pl->passes[i], skip) != 0) names[n++] = pl->passes[i];
  memset(c, 0, sizeof *c);
  evtc_graph *out = evtc_pipeline_run(g, names, n, NULL, d);
  if (!out) return NULL;
  c->attention = count_op(out, EVTC_OP_ATTENTION) - count_op(g, EVTC_OP_ATTENTION);
  c->convs = count_op(g, EVTC_OP_CONV2D) - count_op(out, EVTC_OP_CONV2D);
  c->pads = count_op(out, EVTC_OP_PAD) - count_op(g, EVTC_OP_PAD);
  for (int32_t i = 0; i < out->n_nodes && !c->veto[0]; i++) {
    if (out->nodes[i]->op != EVTC_OP_ATTENTION) continue;
    evtc_diag kd = {0};
    evtc_kernel *k = evtc_kernel_build(out, &i, 1, &kd);
    char why[256] = "";
    if (!k) snprintf(c->veto, sizeof c->veto, "%%%s: %.200s", out->nodes[i]->name, kd.msg);
    else if (be && !be->supports(be, k, why, sizeof why))
      snprintf(c->veto, sizeof c->veto, "%%%s: %.200s", out->nodes[i]->name, why);
    evtc_kernel_free(k);
  }
  if ((c->attention > 0 || c->convs > 0 || c->pads > 0) && !c->veto[0]) return out;
  evtc_graph_free(out);
  return NULL;
}

void evtc_program_keep_step_outputs(evtc_graph *g) {
  int32_t kept = 0;
  for (int32_t k = 0; k < g->n_outputs; k++)
    if (g->outputs[k].node == g->loss || g->outputs[k].updates) g->outputs[kept++] = g->outputs[k];
  g->n_outputs = kept;
}

evtc_graph *evtc_program_optimize_forward(const evtc_graph *g, const char *target, const evtc_backend *be,
                                          FILE *info, evtc_diag *d) {
  char name[64];
  snprintf(name, sizeof name, "%s-forward", target);
  const evtc_pipeline *pl = evtc_pipeline_find(name);
  if (!pl) return NULL;
  forward_counts c, refused;
  evtc_graph *out = forward_passes(g, pl, NULL, be, &c, d);
  refused = c;
  if (!out && c.veto[0])      /* the rest (conv-patchify, gemm-pad) without the attention the backend refuses */
    out = forward_passes(g, pl, "attention-fuse", be, &c, d);
  if (info && d->status == EVTC_OK) {
    fprintf(info, "forward passes (%s): ", name);
    if (out) fprintf(info, "%d attention nodes, %d convs as GEMMs, %d GEMMs padded", c.attention, c.convs, c.pads);
    else fprintf(info, "nothing changed");
    if (refused.veto[0]) fprintf(info, "; attention left decomposed: the backend refuses %s", refused.veto);
    fputc('\n', info);
  }
  return out;
}

evtc_graph *evtc_program_optimize(const evtc_graph *g, const evtc_backend *be, evtc_diag *d) {
  const evtc_pipeline *pl = evtc_pipeline_find(evtc_program_target(be));
  EVTC_ASSERT(pl != NULL);
  return evtc_pipeline_run(g, pl->passes, pl->n_passes, NULL, d);
}
