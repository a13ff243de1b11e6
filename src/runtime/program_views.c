/* program_views.c -- layout copies around attention that a program does
 * not run: the attention kernels read or write the values in place,
 * through views (program_internal.h).
 *
 * A transformer splits its packed q, k, v projection into heads with a
 * slice -> reshape -> permute chain per operand, merges the heads of
 * attention's output back with permute -> reshape, and does the same to
 * the gradients.  When a plan keeps such a chain as a kernel of its own
 * (a "copy chain": layout nodes only, each the next one's only input, one
 * value in and one out) it is a full read and write of the tensor.  Three
 * cases need no copy:
 *
 *  - read: every consumer of the chain's output is an attention-family
 *    kernel.  They read the chain's input through the composed view (the
 *    packed [B, S, 3 H D] projection seen as [B, H, S, D]);
 *  - write: the chain's input is an attention-family kernel's output, every
 *    other reader of it is one too, and the chain only permutes and
 *    reshapes (a bijection).  The attention kernel writes straight into the
 *    chain output's buffer through the inverse view (the merged [B, S, H D]
 *    layout), and its readers read it there;
 *  - concat: every input of a concat kernel comes, through such chains and
 *    reshape aliases, from attention outputs (dq; dk and dv as the two
 *    halves of attention_backward_kv's output, sliced off its last axis):
 *    the attention kernels write straight into their parts of the concat's
 *    buffer (the gradient of the packed q, k, v projection), and neither
 *    the chains nor the concat run.
 *
 * The backend decides: every kernel that would take a view is built and
 * offered to supports() with it first (the CUDA template needs 16-byte
 * aligned rows with contiguous columns); otherwise the copy runs as
 * planned.  Values that become views are never graph outputs, so what a
 * caller can read back is unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "kernel/kernel.h"
#include "runtime/program_internal.h"

typedef struct views_ctx {
  const evtc_graph *g;
  const evtc_backend *be;
  const int32_t *group_of;  /* the plan: kernel index by node id, -1 for leaves */
  int32_t *group_size;      /* nodes per kernel index */
  int32_t *use_start, *uses; /* consumers of node i: uses[use_start[i] .. use_start[i + 1]) */
  evtc_value_view *views;
} views_ctx;

/* An attention-family node that is a kernel by itself. */
static bool attention_kernel(const views_ctx *c, const evtc_node *n) {
  return evtc_op_is_attention(n->op) && c->group_size[c->group_of[n->id]] == 1;
}

/* Node ids of kernel index k in order; their count. */
static int group_nodes(const views_ctx *c, int k, int32_t *ids) {
  int n = 0;
  for (int32_t i = 0; i < c->g->n_nodes; i++)
    if (c->group_of[i] == k) ids[n++] = i;
  return n;
}

/* Whether ids[0..n) is a copy chain: reshape / permute / slice nodes, each the only input and only consumer of
 * the next, the first reading a value from outside, none a graph output. */
static bool copy_chain(const views_ctx *c, const int32_t *ids, int n) {
  for (int i = 0; i < n; i++) {
    const evtc_node *x = c->g->nodes[ids[i]];
    if (x->op != EVTC_OP_RESHAPE && x->op != EVTC_OP_PERMUTE && x->op != EVTC_OP_SLICE) return false;
    if (evtc_graph_is_output(c->g, x)) return false;
    if (i > 0 && x->inputs[0]->id != ids[i - 1]) return false;
    if (i < n - 1 && c->use_start[ids[i] + 1] - c->use_start[ids[i]] != 1) return false;
  }
  return n > 1 || c->g->nodes[ids[0]]->op != EVTC_OP_RESHAPE;   /* a lone reshape is a buffer alias already */
}

/* Consumers of node id. */
static int uses_of(const views_ctx *c, int32_t id) { return c->use_start[id + 1] - c->use_start[id]; }

/* A reshape that is a kernel by itself (a buffer alias), not an output, read once. */
static bool lone_reshape(const views_ctx *c, const evtc_node *n) {
  return n->op == EVTC_OP_RESHAPE && c->group_of[n->id] >= 0 && c->group_size[c->group_of[n->id]] == 1 &&
         !evtc_graph_is_output(c->g, n) && uses_of(c, n->id) == 1;
}

/* Row-major strides of type t. */
static void row_major(const evtc_type *t, int64_t *st) {
  int64_t s = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= t->shape[d];
  }
}

/* Whether the backend runs the one-node kernel of node n with every view decided so far, and `extra` (of value
 * extra_id) on top. */
static bool takes_views(const views_ctx *c, const evtc_node *n, int32_t extra_id, const evtc_value_view *extra) {
  evtc_diag kd = {0};
  int32_t id = n->id;
  evtc_kernel *k = evtc_kernel_build(c->g, &id, 1, &kd);
  if (!k) return false;
  for (int a = 0; a < k->n_args; a++) {
    int32_t v = k->args[a].node->id;
    const evtc_value_view *w = v == extra_id ? extra : c->views[v].base >= 0 ? &c->views[v] : NULL;
    if (!w) continue;
    k->args[a].strided = true;
    k->args[a].offset = w->offset;
    memcpy(k->args[a].strides, w->strides, sizeof w->strides);
    k->args[a].second_half = w->second_half;
  }
  char why[160];
  bool ok = c->be->supports(c->be, k, why, sizeof why);
  evtc_kernel_free(k);
  return ok;
}

/* The read case for copy chain ids[0..n): its output as a view of its input's buffer. */
static bool read_view(views_ctx *c, const int32_t *ids, int n) {
  const evtc_node *y = c->g->nodes[ids[n - 1]], *x = c->g->nodes[ids[0]]->inputs[0];
  if (c->use_start[y->id + 1] == c->use_start[y->id]) return false;
  for (int32_t u = c->use_start[y->id]; u < c->use_start[y->id + 1]; u++)
    if (!attention_kernel(c, c->g->nodes[c->uses[u]])) return false;
  evtc_value_view v = {.base = x->id};
  int64_t st[EVTC_MAX_RANK];
  if (c->views[x->id].base >= 0) {     /* the input is a view itself: compose */
    if (c->views[x->id].second_half) return false;
    v = c->views[x->id];
    memcpy(st, v.strides, sizeof st);
  } else {
    row_major(&x->type, st);
  }
  for (int i = 0; i < n; i++) {
    memset(v.strides, 0, sizeof v.strides);
    if (!evtc_layout_view(c->g->nodes[ids[i]], st, &v.offset, v.strides)) return false;
    memcpy(st, v.strides, sizeof st);
  }
  for (int32_t u = c->use_start[y->id]; u < c->use_start[y->id + 1]; u++)
    if (!takes_views(c, c->g->nodes[c->uses[u]], y->id, &v)) return false;
  c->views[y->id] = v;
  return true;
}

/* The write case for copy chain ids[0..n): its input, an attention kernel's output, as a view of the chain
 * output's buffer. */
static bool write_view(views_ctx *c, const int32_t *ids, int n) {
  const evtc_node *y = c->g->nodes[ids[n - 1]], *x = c->g->nodes[ids[0]]->inputs[0];
  if (!attention_kernel(c, x) || evtc_graph_is_output(c->g, x) || c->views[x->id].base >= 0) return false;
  for (int32_t u = c->use_start[x->id]; u < c->use_start[x->id + 1]; u++) {
    const evtc_node *r = c->g->nodes[c->uses[u]];
    if (r->id != ids[0] && !attention_kernel(c, r)) return false;
  }
  evtc_value_view v = {.base = y->id};
  int64_t st[EVTC_MAX_RANK];
  row_major(&y->type, st);
  for (int i = n - 1; i >= 0; i--) {
    memset(v.strides, 0, sizeof v.strides);
    if (!evtc_layout_view_back(c->g->nodes[ids[i]], st, v.strides)) return false;
    memcpy(st, v.strides, sizeof st);
  }
  if (!takes_views(c, x, x->id, &v)) return false;
  for (int32_t u = c->use_start[x->id]; u < c->use_start[x->id + 1]; u++) {
    const evtc_node *r = c->g->nodes[c->uses[u]];
    if (r->id != ids[0] && !takes_views(c, r, x->id, &v)) return false;
  }
  c->views[x->id] = v;
  return true;
}

/* A concat input placed in the concat's buffer: the attention output it comes from, which part of it (-1 all
 * of it; 0, 1 the dK or dV half of attention_backward_kv's output), where that part lies. */
typedef struct placed {
  const evtc_node *att;
  int half;
  int64_t offset;
  int64_t strides[EVTC_MAX_RANK];
} placed;

/* Walks back from concat input x, whose elements lie at offset off with strides st of the concat's buffer,
 * through reshape aliases and copy chains to the attention output the last chain starts at (or a half of
 * attention_backward_kv's output sliced off its last axis), into *pl; the kernel indices passed into groups[]
 * (*n_groups grows). */
static bool place_input(const views_ctx *c, const evtc_node *x, int64_t off, const int64_t *st, placed *pl,
                        int32_t *groups, int *n_groups, int32_t *ids) {
  int64_t cur[EVTC_MAX_RANK], prev[EVTC_MAX_RANK];
  memcpy(cur, st, sizeof cur);
  pl->half = -1;
  for (;;) {
    for (; lone_reshape(c, x); x = x->inputs[0]) {
      memset(prev, 0, sizeof prev);
      if (!evtc_layout_view_back(x, cur, prev)) return false;
      memcpy(cur, prev, sizeof cur);
      groups[(*n_groups)++] = c->group_of[x->id];
    }
    int k = c->group_of[x->id];
    if (k < 0 || uses_of(c, x->id) != 1) return false;
    int n = group_nodes(c, k, ids);
    if (ids[n - 1] != x->id || !copy_chain(c, ids, n)) return false;
    groups[(*n_groups)++] = k;
    const evtc_node *first = c->g->nodes[ids[0]], *att = first->inputs[0];
    int skip_first = 0;
    if (att->op == EVTC_OP_ATTENTION_BACKWARD_KV && first->op == EVTC_OP_SLICE) {     /* dK or dV */
      const evtc_attr *ax = evtc_node_attr(first, "axes"), *st0 = evtc_node_attr(first, "starts"),
                      *sp = evtc_node_attr(first, "steps");
      int64_t cols = att->type.shape[3], start = st0->v.ints[0];
      if (st0->n != 1 || !ax->n || evtc_axis_norm(ax->v.ints[0], 4) != 3 || (sp->n && sp->v.ints[0] != 1) ||
          first->type.shape[3] * 2 != cols || (start != 0 && start != cols / 2))
        return false;
      pl->half = start == 0 ? 0 : 1;
      skip_first = 1;
    }
    for (int i = n - 1; i >= skip_first; i--) {
      memset(prev, 0, sizeof prev);
      if (!evtc_layout_view_back(c->g->nodes[ids[i]], cur, prev)) return false;
      memcpy(cur, prev, sizeof cur);
    }
    if (evtc_op_is_attention(att->op)) {
      if (!attention_kernel(c, att) || evtc_graph_is_output(c->g, att) || c->views[att->id].base >= 0) return false;
      pl->att = att;
      pl->offset = off;
      memcpy(pl->strides, cur, sizeof cur);
      return true;
    }
    if (skip_first) return false;
    x = att;     /* another chain before this one */
  }
}

/* The concat case for concat node z (a kernel by itself): every input placed (place_input), every attention
 * output they come from written whole into z's buffer, its other readers attention kernels.  Skips the chains
 * and aliases passed, and z's kernel. */
static bool concat_view(views_ctx *c, const evtc_node *z, unsigned char *skip, int32_t *ids) {
  int ni = z->n_inputs, axis = evtc_axis_norm((int)evtc_node_int(z, "axis"), z->type.rank), n_groups = 0;
  placed *pl = calloc((size_t)ni, sizeof *pl);
  int32_t *groups = malloc(sizeof *groups * ((size_t)c->g->n_nodes + 1));
  evtc_value_view *found = calloc((size_t)ni, sizeof *found);
  int64_t zs[EVTC_MAX_RANK], start = 0;
  row_major(&z->type, zs);
  bool ok = axis >= 0;
  for (int i = 0; ok && i < ni; i++) {
    ok = place_input(c, z->inputs[i], start * zs[axis], zs, &pl[i], groups, &n_groups, ids);
    start += z->inputs[i]->type.shape[axis];
  }
  for (int i = 0; ok && i < ni; i++) {     /* one view per attention output: all of it, or both halves alike */
    int parts = 0, half_at[2] = {-1, -1};
    for (int j = 0; j < ni; j++)
      if (pl[j].att == pl[i].att) {
        parts++;
        if (pl[j].half >= 0) half_at[pl[j].half] = j;
      }
    evtc_value_view *v = &found[i];
    *v = (evtc_value_view){.base = z->id, .offset = pl[i].offset};
    memcpy(v->strides, pl[i].strides, sizeof v->strides);
    if (pl[i].half >= 0) {
      ok = parts == 2 && half_at[0] >= 0 && half_at[1] >= 0 &&
           memcmp(pl[half_at[0]].strides, pl[half_at[1]].strides, sizeof pl[i].strides) == 0;
      if (!ok) break;
      v->offset = pl[half_at[0]].offset;
      v->second_half = pl[half_at[1]].offset - pl[half_at[0]].offset;
    } else {
      ok = parts == 1;
    }
    const evtc_node *a = pl[i].att;
    int others = 0;     /* readers of a besides the chains placed: attention kernels, which take the view */
    for (int32_t u = c->use_start[a->id]; ok && u < c->use_start[a->id + 1]; u++) {
      const evtc_node *r = c->g->nodes[c->uses[u]];
      if (attention_kernel(c, r)) ok = takes_views(c, r, a->id, v);
      else others++;
    }
    ok = ok && others == parts && takes_views(c, a, a->id, v);
  }
  if (ok) {
    for (int i = 0; i < ni; i++) c->views[pl[i].att->id] = found[i];
    for (int i = 0; i < n_groups; i++) skip[groups[i]] = 1;
    skip[c->group_of[z->id]] = 1;
  }
  free(found);
  free(groups);
  free(pl);
  return ok;
}

int evtc_program_plan_views(const evtc_graph *g, const int32_t *kernel_of_node, int n_kernels, const evtc_backend *be,
                            unsigned char *skip, evtc_value_view *views) {
  int32_t nn = g->n_nodes;
  views_ctx c = {.g = g, .be = be, .group_of = kernel_of_node, .views = views};
  c.group_size = calloc((size_t)n_kernels + 1, sizeof *c.group_size);
  c.use_start = calloc((size_t)nn + 2, sizeof *c.use_start);
  for (int32_t i = 0; i < nn; i++) {
    views[i] = (evtc_value_view){.base = -1};
    if (kernel_of_node[i] >= 0) c.group_size[kernel_of_node[i]]++;
    for (int j = 0; j < g->nodes[i]->n_inputs; j++) c.use_start[g->nodes[i]->inputs[j]->id + 1]++;
  }
  for (int32_t i = 0; i < nn; i++) c.use_start[i + 1] += c.use_start[i];
  c.uses = malloc(sizeof *c.uses * ((size_t)c.use_start[nn] + 1));
  int32_t *fill = malloc(sizeof *fill * ((size_t)nn + 1)), *ids = malloc(sizeof *ids * ((size_t)nn + 1));
  memcpy(fill, c.use_start, sizeof *fill * (size_t)nn);
  for (int32_t i = 0; i < nn; i++)
    for (int j = 0; j < g->nodes[i]->n_inputs; j++) c.uses[fill[g->nodes[i]->inputs[j]->id]++] = i;
  memset(skip, 0, (size_t)n_kernels);
  for (int k = 0; k < n_kernels; k++) {     /* concats first: they decide the layouts of their chains */
    int n = group_nodes(&c, k, ids);
    if (n == 1 && g->nodes[ids[0]]->op == EVTC_OP_CONCAT) concat_view(&c, g->nodes[ids[0]], skip, ids);
  }
  for (int k = 0; k < n_kernels; k++) {
    if (skip[k]) continue;
    int n = group_nodes(&c, k, ids);
    if (n > 0 && copy_chain(&c, ids, n) && (read_view(&c, ids, n) || write_view(&c, ids, n))) skip[k] = 1;
  }
  int dropped = 0;
  for (int k = 0; k < n_kernels; k++) dropped += skip[k];
  free(ids);
  free(fill);
  free(c.uses);
  free(c.use_start);
  free(c.group_size);
  return dropped;
}
