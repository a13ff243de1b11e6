/* partition.c -- building partitions and running the partitioners.
 *
 * evtc_partition_build turns an assignment (node -> kernel id) into the
 * kernel list with kinds and modelled costs; evtc_fusion_partition runs
 * "none", "greedy" or "ilp" (through the solution cache when one is given)
 * and returns the built partition.
 */
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion_internal.h"

const char *evtc_kernel_kind_name(evtc_kernel_kind k) {
  static const char *const names[] = {"gemm", "stitched", "elementwise", "opaque"};
  return names[k];
}

evtc_partition *evtc_partition_build(const evtc_graph *g, const evtc_device *dev, const int32_t *kernel_of) {
  evtc_fusion_ctx c;
  evtc_fusion_ctx_init(&c, g, dev);
  evtc_partition *p = calloc(1, sizeof *p);
  int32_t n = g->n_nodes;
  p->g = g;
  p->kernel_of = malloc(sizeof(int32_t) * ((size_t)n + 1));
  int32_t *renum = malloc(sizeof(int32_t) * ((size_t)n + 1)), *count = calloc((size_t)n + 1, sizeof(int32_t));
  EVTC_ASSERT(p && p->kernel_of && renum && count);
  for (int32_t v = 0; v < n; v++) renum[v] = -1;
  for (int32_t v = 0; v < n; v++) {
    int32_t k = kernel_of[v];
    EVTC_ASSERT(k < n);
    if (k < 0) {
      p->kernel_of[v] = -1;
      continue;
    }
    if (renum[k] < 0) renum[k] = p->n_kernels++;
    p->kernel_of[v] = renum[k];
    count[renum[k]]++;
  }
  p->kernels = calloc((size_t)p->n_kernels + 1, sizeof(evtc_fusion_kernel));
  EVTC_ASSERT(p->kernels != NULL);
  for (int32_t k = 0; k < p->n_kernels; k++) {
    p->kernels[k].nodes = malloc(sizeof(int32_t) * (size_t)count[k]);
    p->kernels[k].nucleus = -1;
    EVTC_ASSERT(p->kernels[k].nodes != NULL);
  }
  for (int32_t v = 0; v < n; v++) {
    if (p->kernel_of[v] < 0) continue;
    evtc_fusion_kernel *K = &p->kernels[p->kernel_of[v]];
    K->nodes[K->n_nodes++] = v;
    if (c.mainloop[v]) K->nucleus = v;
  }
  for (int32_t k = 0; k < p->n_kernels; k++) {
    evtc_fusion_kernel *K = &p->kernels[k];
    bool opaque = false, reduce = false;
    for (int32_t i = 0; i < K->n_nodes; i++) {
      opaque |= c.cls[K->nodes[i]] == EVTC_CLASS_OPAQUE;
      reduce |= c.red[K->nodes[i]] != EVTC_RED_NONE;
    }
    K->kind = opaque ? EVTC_KERNEL_OPAQUE
              : K->nucleus >= 0 ? EVTC_KERNEL_GEMM
              : reduce ? EVTC_KERNEL_STITCHED : EVTC_KERNEL_ELEMENTWISE;
    K->time_us = evtc_fusion_cost(&c, K->nodes, K->n_nodes, &K->bytes, &K->flops, NULL);
    p->bytes += K->bytes;
    p->time_us += K->time_us;
  }
  free(renum);
  free(count);
  evtc_fusion_ctx_free(&c);
  return p;
}

void evtc_partition_free(evtc_partition *p) {
  if (!p) return;
  for (int32_t k = 0; k < p->n_kernels; k++) free(p->kernels[k].nodes);
  free(p->kernels);
  free(p->kernel_of);
  free(p);
}

/* The ILP through the cache: a cached plan is used only when it still
 * passes the feasibility checker. */
static evtc_partition *run_ilp(evtc_fusion_ctx *c, const evtc_fusion_options *opt, int32_t *kernel_of,
                               evtc_diag *d) {
  evtc_ilp_report r = {0};
  uint64_t key = 0;
  if (opt->cache_dir) {
    key = evtc_fusion_cache_key(c, opt);
    if (evtc_fusion_cache_load(opt->cache_dir, key, c->n, kernel_of, &r)) {
      evtc_partition *p = evtc_partition_build(c->g, c->dev, kernel_of);
      char why[256];
      if (evtc_fusion_check(p, c->dev, why, sizeof why)) {
        r.cached = true;
        p->ilp = r;
        return p;
      }
      evtc_partition_free(p);
      memset(&r, 0, sizeof r);
    }
  }
  if (evtc_fusion_ilp(c, opt, kernel_of, &r, d) < 0) return NULL;
  if (opt->cache_dir && !r.fallback) evtc_fusion_cache_store(opt->cache_dir, key, c->n, kernel_of, &r);
  evtc_partition *p = evtc_partition_build(c->g, c->dev, kernel_of);
  p->ilp = r;
  return p;
}

evtc_partition *evtc_fusion_partition(const evtc_graph *g, const evtc_device *dev, const char *name,
                                      const evtc_fusion_options *opt, evtc_diag *d) {
  static const char *const names[] = {"none", "greedy", "ilp"};
  int which = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(name, names[i]) == 0) which = i;
  if (which < 0) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "unknown partitioner '%s' (none, greedy or ilp)", name);
    return NULL;
  }
  evtc_fusion_options defaults = {0};
  if (!opt) opt = &defaults;
  evtc_fusion_ctx c;
  evtc_fusion_ctx_init(&c, g, dev);
  c.opt = opt;
  int32_t *kernel_of = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  EVTC_ASSERT(kernel_of != NULL);
  evtc_partition *p = NULL;
  if (which == 0) {
    int32_t k = 0;
    for (int32_t v = 0; v < g->n_nodes; v++) kernel_of[v] = c.cls[v] == EVTC_CLASS_LEAF ? -1 : k++;
    p = evtc_partition_build(g, dev, kernel_of);
  } else if (which == 1) {
    evtc_fusion_greedy(&c, kernel_of);
    p = evtc_partition_build(g, dev, kernel_of);
  } else {
    p = run_ilp(&c, opt, kernel_of, d);
  }
  if (p) p->partitioner = names[which];
  free(kernel_of);
  evtc_fusion_ctx_free(&c);
  return p;
}
