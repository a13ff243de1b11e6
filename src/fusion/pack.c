/* pack.c -- horizontal packing: small elementwise kernels of one shape that
 * share nothing, run as one launch (AStitch's packing of independent
 * memory-bound ops).
 *
 * A training step ends with one optimizer update per parameter; those of
 * biases and normalisation weights are elementwise chains over a vector
 * (BERT-Large: 203 kernels a step, ~3 us of launch each on an H200 for a
 * few KB of work).  Producer-consumer fusion cannot join them: no update
 * reads another's values.  So after a partitioner has placed every node,
 * the kernels made only of elementwise and broadcast ops of one shape of
 * at most PACK_MAX_ELEMS elements are grouped by that shape and packed in
 * plan order: a kernel joins the pack being filled when no path of the
 * graph joins it to the pack's members either way, the kernel graph stays
 * acyclic (no path through another kernel either) and the union is
 * admissible (template.c: the target's limits on nodes and tensors read +
 * written, and the target's own veto), and else starts the next pack.
 * Larger kernels are left alone: they fill the GPU on their own, and
 * packing them would hold their inputs live until the pack's last member
 * is ready.  This is a launch decision, after the plan: the partitioners'
 * plans, and what the feasibility checker accepts, stay connected kernels,
 * which the cost model prices.
 */
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion_internal.h"
#include "fusion/partition.h"

enum { PACK_MAX_ELEMS = 1 << 16 };

typedef struct packable {
  int32_t id;             /* kernel id in kernel_of */
  int32_t first;          /* its smallest node: plan order */
  const evtc_node *shape; /* a member: the shape all members share */
} packable;

static bool same_shape(const evtc_type *s, const evtc_type *t) {
  if (s->rank != t->rank) return false;
  for (int d = 0; d < s->rank; d++)
    if (s->shape[d] != t->shape[d]) return false;
  return true;
}

static int by_shape_then_order(const void *a, const void *b) {
  const packable *x = a, *y = b;
  const evtc_type *s = &x->shape->type, *t = &y->shape->type;
  if (s->rank != t->rank) return s->rank - t->rank;
  for (int d = 0; d < s->rank; d++)
    if (s->shape[d] != t->shape[d]) return s->shape[d] < t->shape[d] ? -1 : 1;
  return (x->first > y->first) - (x->first < y->first);
}

/* Whether kernel k's nodes (ascending, n of them) are elementwise and broadcast ops of one shape of at most
 * PACK_MAX_ELEMS (> 1) elements. */
static bool packable_kernel(const evtc_fusion_ctx *c, const int32_t *nodes, int n) {
  const evtc_type *t0 = &c->g->nodes[nodes[0]]->type;
  int64_t elems = evtc_type_numel(t0);
  if (elems <= 1 || elems > PACK_MAX_ELEMS) return false;
  for (int i = 0; i < n; i++) {
    const evtc_node *v = c->g->nodes[nodes[i]];
    const evtc_fusion_kind f = evtc_op_get(v->op)->fusion;
    if (c->cls[v->id] != EVTC_CLASS_FUSIBLE || (f != EVTC_FUSE_ELEMENTWISE && f != EVTC_FUSE_BROADCAST) ||
        !same_shape(&v->type, t0))
      return false;
  }
  return true;
}

/* Whether no path of the graph joins node set s (n nodes) and the pack, given the union of its members' descendant
 * and ancestor bitsets. */
static bool independent(const int32_t *s, int n, const uint64_t *desc, const uint64_t *anc) {
  for (int i = 0; i < n; i++) {
    const size_t w = (size_t)s[i] / 64;
    const uint64_t bit = 1ull << (s[i] % 64);
    if ((desc[w] | anc[w]) & bit) return false;
  }
  return true;
}

/* Packs kernel_of in place (a pack takes its first member's kernel id). */
static void pack_kernels(evtc_fusion_ctx *c, int32_t *kernel_of) {
  const int32_t n = c->n;
  const size_t words = (size_t)c->words;
  /* each kernel's nodes, ascending (CSR by kernel id) */
  int32_t nk = 0;
  for (int32_t v = 0; v < n; v++)
    if (kernel_of[v] + 1 > nk) nk = kernel_of[v] + 1;
  int32_t *start = calloc((size_t)nk + 2, sizeof(int32_t)), *nodes = malloc(sizeof(int32_t) * ((size_t)n + 1));
  int32_t *fill = malloc(sizeof(int32_t) * ((size_t)nk + 1));
  packable *cand = malloc(sizeof(packable) * ((size_t)nk + 1));
  int32_t *members = malloc(sizeof(int32_t) * ((size_t)n + 1));   /* the pack being filled, ascending */
  uint64_t *desc = calloc(words + 1, sizeof(uint64_t)), *anc = calloc(words + 1, sizeof(uint64_t));
  int32_t *cycle = malloc(sizeof(int32_t) * ((size_t)nk + 1)), cycle_len = 0;
  EVTC_ASSERT(start && nodes && fill && cand && members && desc && anc && cycle);
  for (int32_t v = 0; v < n; v++)
    if (kernel_of[v] >= 0) start[kernel_of[v] + 1]++;
  for (int32_t k = 0; k < nk; k++) start[k + 1] += start[k];
  memcpy(fill, start, sizeof(int32_t) * (size_t)nk);
  for (int32_t v = 0; v < n; v++)
    if (kernel_of[v] >= 0) nodes[fill[kernel_of[v]]++] = v;
  int32_t n_cand = 0;
  for (int32_t k = 0; k < nk; k++) {
    const int32_t m = start[k + 1] - start[k];
    if (m > 0 && packable_kernel(c, nodes + start[k], m))
      cand[n_cand++] = (packable){k, nodes[start[k]], c->g->nodes[nodes[start[k]]]};
  }
  qsort(cand, (size_t)n_cand, sizeof cand[0], by_shape_then_order);
  int32_t n_pack = 0, pack_id = -1;
  for (int32_t i = 0; i < n_cand; i++) {
    const int32_t *s = nodes + start[cand[i].id];
    const int m = start[cand[i].id + 1] - start[cand[i].id];
    bool joins = pack_id >= 0 && same_shape(&cand[i].shape->type, &cand[i - 1].shape->type) &&
                 independent(s, m, desc, anc);
    if (joins) {     /* the union, ascending, admissible under the target's limits */
      int32_t *u = malloc(sizeof(int32_t) * (size_t)(n_pack + m));
      int a = 0, b = 0, o = 0;
      while (a < n_pack || b < m) u[o++] = b >= m || (a < n_pack && members[a] < s[b]) ? members[a++] : s[b++];
      evtc_kernel_kind kind;
      joins = evtc_fusion_admissible(c, u, o, &kind, NULL) && kind == EVTC_KERNEL_ELEMENTWISE;
      /* no path through other kernels either: one kernel may read a member of the pack and feed another */
      for (int j = 0; j < m && joins; j++) kernel_of[s[j]] = pack_id;
      if (joins && evtc_fusion_find_cycle(c, kernel_of, nk, cycle, &cycle_len)) {
        for (int j = 0; j < m; j++) kernel_of[s[j]] = cand[i].id;
        joins = false;
      }
      if (joins) {
        memcpy(members, u, sizeof(int32_t) * (size_t)o);
        n_pack = o;
      }
      free(u);
    }
    if (!joins) {    /* a new pack from this kernel */
      pack_id = cand[i].id;
      memcpy(members, s, sizeof(int32_t) * (size_t)m);
      n_pack = m;
      memset(desc, 0, sizeof(uint64_t) * words);
      memset(anc, 0, sizeof(uint64_t) * words);
    }
    for (int j = 0; j < m; j++)
      for (size_t w = 0; w < words; w++) {
        desc[w] |= c->desc[(size_t)s[j] * words + w];
        anc[w] |= c->anc[(size_t)s[j] * words + w];
      }
  }
  free(start);
  free(nodes);
  free(fill);
  free(cand);
  free(members);
  free(desc);
  free(anc);
  free(cycle);
}

int32_t evtc_fusion_pack(const evtc_graph *g, const evtc_device *dev, const evtc_fusion_options *opt,
                         int32_t *kernel_of) {
  evtc_fusion_ctx c;
  evtc_fusion_ctx_init(&c, g, dev);
  c.opt = opt;
  pack_kernels(&c, kernel_of);
  evtc_fusion_ctx_free(&c);
  int32_t *renum = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1)), n_kernels = 0;
  EVTC_ASSERT(renum != NULL);
  for (int32_t v = 0; v < g->n_nodes; v++) renum[v] = -1;
  for (int32_t v = 0; v < g->n_nodes; v++) {
    if (kernel_of[v] < 0) continue;
    if (renum[kernel_of[v]] < 0) renum[kernel_of[v]] = n_kernels++;
    kernel_of[v] = renum[kernel_of[v]];
  }
  free(renum);
  return n_kernels;
}
