/* program.c -- build a program from a graph and a plan, and run it (program.h).
 *
 * Building: group the plan's nodes per kernel; build each kernel; split a
 * group that does not build or that the backend refuses into single nodes;
 * a single node the backend still refuses becomes an interpreter fallback.
 * Then name the kernels, emit one module (or one per distinct kernel:
 * backend.h), compile, load, look the entry points up, and place the
 * buffers: leaves, constants and graph outputs own theirs; every other
 * value passed between kernels goes into the planned arena.  A kernel that
 * would only reshape a value into a buffer of its own (a copy of the same
 * bytes: program buffers are row-major) is not run at all: the reshape's
 * buffer is its input's, whose life then lasts to the reshape's last use.
 * A layout copy chain (slice / reshape / permute) that only feeds attention
 * kernels, or only rearranges an attention kernel's output, does not run
 * either: those kernels read or write the values in place through views
 * (program_views.c), e.g. q, k and v straight from the packed projection.
 * A log-sum-exp of attention's scores that the backward needs is written by
 * the forward attention kernel of the same q, k, scale and causality, when
 * the backend takes that second output (by_product), instead of running
 * the scores again; likewise attention's dq by the kernel of dk and dv of
 * the same inputs (absorb_dq; the backend says how: the CUDA one launches
 * dq's kernel first so that it shares Dd, or sums dq in the same pass),
 * when no kernel between them touches dq's buffer.  An update (a
 * parameter's or optimizer state's next value) is written over the value
 * it replaces when the kernel that computes it is the
 * value's last reader and reads it element by element (in_place_update):
 * no second copy of the weights, and no copy back after the step.  Any
 * elementwise or rows kernel's output goes over an input of the same size
 * in the same way (a cross-entropy's gradient over the logits).  Both are
 * decided before the kernels are emitted (in_place_writes), so the CPU
 * template knows which arguments share a buffer.
 * Running:
 * launch the kernels in order with their argument pointers; a raised
 * error flag becomes a message naming the kernel.  On a backend with
 * graphs the runs after the first replay one captured graph of the
 * launches instead (program_replay.c); profile runs always launch one by
 * one, with marks between the kernels.
 *
 * Device backends (backend.h: upload != NULL) keep every buffer and the
 * arena in device memory; set/get/poison go through host staging copies
 * (a training batch is gathered from a rows table kept on the device when
 * it fits),
 * update copies on the device, and an interpreter fallback downloads its
 * inputs, runs on the host and uploads its result (slow, and warned about
 * like every fallback).
 */
#include "runtime/program.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel/kernel.h"
#include "runtime/memplan.h"
#include "runtime/program_internal.h"
#include "util/hash.h"

typedef struct prog_kernel {
  evtc_kernel *k;           /* NULL for a fallback */
  evtc_backend_fn fn;
  void *handle;             /* a device backend's kernel handle */
  evtc_fallback fb;
  bool is_fallback;
  char why[160];            /* a fallback: why the backend does not run it */
  void **argv;              /* argument pointers, filled after placement */
  void **host;              /* a fallback on a device backend: host copies of its arguments */
} prog_kernel;

struct evtc_program {
  const evtc_graph *g;
  const evtc_backend *be;
  prog_kernel *ks;
  int n_ks;
  void **modules;           /* loaded modules: one, or one per distinct kernel source */
  int n_modules;
  void **buf;               /* by node id; NULL when the value has no buffer */
  int32_t *alias_of;        /* by node id: the node whose buffer a lone reshape or a view shares, else -1 */
  evtc_value_view *views;   /* by node id: where a value attention kernels read or write in place lives */
  int *arena_first, *arena_last; /* by node id: the kernels that first and last use an arena value, else -1 */
  unsigned char *owned;     /* by node id: buf[id] was malloc'd on its own */
  unsigned char *arena;
  bool device;              /* buffers live in the backend's device memory */
  unsigned char *staging;   /* a device program's host copy of the last batch fed (evtc_program_set_rows) */
  size_t staging_bytes;
  evtc_replay replay;       /* whether runs replay a captured graph of their launches, and the graph */
  evtc_program_stats stats;
};

static size_t value_bytes(const evtc_node *n) {
  return (size_t)evtc_type_numel(&n->type) * evtc_buffer_elem_size(n->type.dtype);
}

/* Zeroed buffer memory of the program's backend. */
static void *buf_alloc(const evtc_program *p, size_t bytes) {
  if (p->device) return p->be->alloc(p->be, bytes ? bytes : 1);
  return calloc(1, bytes ? bytes : 1);
}

static void buf_free(const evtc_program *p, void *b) {
  if (p->device) {
    if (b) p->be->free(p->be, b);
  } else {
    free(b);
  }
}

static bool accept_backend(const evtc_kernel *k, void *ctx) {
  char why[128];
  const evtc_backend *be = ctx;
  return be->supports(be, k, why, sizeof why);
}

/* The node whose buffer node id's value lives in: id itself, or the value a lone reshape or a view shares
 * (followed to the end). */
static int32_t buffer_of(const evtc_program *p, int32_t id) {
  while (p->alias_of[id] >= 0) id = p->alias_of[id];
  return id;
}

/* Kernel k's arguments that are views (p->views) read or write through them. */
static void strided_args(const evtc_program *p, evtc_kernel *k) {
  for (int a = 0; a < k->n_args; a++) {
    const evtc_value_view *v = &p->views[k->args[a].node->id];
    if (v->base < 0) continue;
    k->args[a].strided = true;
    k->args[a].offset = v->offset;
    memcpy(k->args[a].strides, v->strides, sizeof v->strides);
    k->args[a].second_half = v->second_half;
  }
}

static bool has_strided_arg(const evtc_kernel *k) {
  for (int a = 0; k && a < k->n_args; a++)
    if (k->args[a].strided) return true;
  return false;
}

/* Whether kernel k (already in p->ks, not yet placed) may write n as one more output: the backend takes it. */
static bool add_output(evtc_program *p, evtc_kernel *k, const evtc_node *n) {
  k->args = realloc(k->args, sizeof *k->args * ((size_t)k->n_args + 1));
  k->args[k->n_args++] = (evtc_karg){.node = n, .output = true};
  strided_args(p, k);
  char why[128];
  if (p->be->supports(p->be, k, why, sizeof why)) return true;
  k->n_args--;
  return false;
}

/* Whether an earlier kernel of p can also write attention node n's value: the forward attention of the same q,
 * k, scale and causality for attention_lse n, the kernel of dk and dv of the same inputs for
 * attention_backward_q n.  Then it gets n as a second output. */
static bool by_product(evtc_program *p, const evtc_node *n) {
  for (int t = p->n_ks - 1; t >= 0; t--) {
    evtc_kernel *k = p->ks[t].k;
    if (!k || k->kind != EVTC_ML_OPAQUE || !(evtc_kernel_lse_of(k->main, n) || evtc_kernel_dq_of(k->main, n))) continue;
    return add_output(p, k, n);
  }
  return false;
}

/* attention_backward_kv kernel k, about to be appended: when an earlier kernel computes the dq of the same inputs
 * alone and no kernel since touches dq's buffer, k writes dq too (as its backend does it) and that kernel goes. */
static bool absorb_dq(evtc_program *p, evtc_kernel *k) {
  for (int t = p->n_ks - 1; t >= 0; t--) {
    evtc_kernel *q = p->ks[t].k;
    if (!q || q->kind != EVTC_ML_OPAQUE || !evtc_kernel_dq_of(k->main, q->main)) continue;
    int32_t dq = buffer_of(p, q->main->id);
    for (int u = t + 1; u < p->n_ks; u++)
      for (int a = 0; p->ks[u].k && a < p->ks[u].k->n_args; a++)
        if (buffer_of(p, p->ks[u].k->args[a].node->id) == dq) return false;
    int outputs = 0;
    for (int a = 0; a < q->n_args; a++) outputs += q->args[a].output;
    if (outputs != 1 || !add_output(p, k, q->main)) return false;     /* dq alone */
    evtc_kernel_free(q);
    memmove(&p->ks[t], &p->ks[t + 1], sizeof *p->ks * (size_t)(p->n_ks - t - 1));
    p->n_ks--;
    return true;
  }
  return false;
}

/* Appends the kernel of ids[0..n) (or its pieces) to p->ks; a lone reshape becomes an alias instead, an
 * attention log-sum-exp (or dq) an earlier kernel's by-product when it can be, and attention_backward_kv takes
 * over an earlier kernel's dq. */
static evtc_status add_group(evtc_program *p, const int32_t *ids, int n, FILE *warn, evtc_diag *d) {
  evtc_diag kd = {0};
  evtc_kernel *k = evtc_kernel_build(p->g, ids, n, &kd);
  if (k) strided_args(p, k);
  char why[128] = "";
  bool ok = k && p->be->supports(p->be, k, why, sizeof why);
  if (!ok && has_strided_arg(k)) {     /* program_views.c asked the backend with these views already */
    evtc_diag_set(d, EVTC_ERR_INVALID, "kernel of %%%s: the %s backend refuses the views it took when they were planned (%s)",
                  p->g->nodes[ids[0]]->name, p->be->name, why);
    evtc_kernel_free(k);
    return d->status;
  }
  const evtc_node *n0 = p->g->nodes[ids[0]];
  if (ok && n == 1 && n0->op == EVTC_OP_RESHAPE && !evtc_graph_is_output(p->g, n0)) {
    p->alias_of[n0->id] = buffer_of(p, n0->inputs[0]->id);
    p->stats.aliases++;
    evtc_kernel_free(k);
    return EVTC_OK;
  }
  if (ok && n == 1 && (n0->op == EVTC_OP_ATTENTION_LSE || n0->op == EVTC_OP_ATTENTION_BACKWARD_Q) && by_product(p, n0)) {
    p->stats.by_products++;
    evtc_kernel_free(k);
    return EVTC_OK;
  }
  if (ok && n == 1 && n0->op == EVTC_OP_ATTENTION_BACKWARD_KV && absorb_dq(p, k)) p->stats.by_products++;
  if (ok) {
    p->ks[p->n_ks++] = (prog_kernel){.k = k};
    return EVTC_OK;
  }
  if (n > 1) {
    p->stats.splits++;
    fprintf(warn, "evtc: warning: a planned kernel of %d nodes does not run as one (%s); running its nodes one by one\n",
            n, k ? why : kd.msg);
    evtc_kernel_free(k);
    for (int i = 0; i < n; i++)
      if (add_group(p, ids + i, 1, warn, d) != EVTC_OK) return d->status;
    return EVTC_OK;
  }
  prog_kernel *pk = &p->ks[p->n_ks++];
  *pk = (prog_kernel){.is_fallback = true};
  snprintf(pk->why, sizeof pk->why, "%.150s", k ? why : kd.msg);
  evtc_kernel_free(k);
  if (!evtc_fallback_init(&pk->fb, p->g->nodes[ids[0]], d)) return d->status;
  return EVTC_OK;
}

/* Argument nodes of kernel pk, in order (inputs of a fallback, then its node). */
static int kernel_args(const prog_kernel *pk, const evtc_node **out) {
  if (!pk->is_fallback) {
    for (int i = 0; i < pk->k->n_args; i++) out[i] = pk->k->args[i].node;
    return pk->k->n_args;
  }
  const evtc_node *n = pk->fb.node;
  for (int j = 0; j < n->n_inputs; j++) out[j] = n->inputs[j];
  out[n->n_inputs] = n;
  return n->n_inputs + 1;
}

static int max_args(const prog_kernel *pk) { return pk->is_fallback ? pk->fb.node->n_inputs + 1 : pk->k->n_args; }

/* The node that output node n replaces after a run (its `updates`), or NULL. */
static const evtc_node *replaced_by(const evtc_graph *g, const evtc_node *n) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].node == n && g->outputs[i].updates != n) return g->outputs[i].updates;
  return NULL;
}

/* Whether kernel k reads u only element by element in its domain's own order: the domain has u's element
 * count and every load of u is at offset 0 with the domain's row-major strides (not through a permuted or
 * shifted view, which would read an element another thread has already overwritten). */
static bool loads_in_order(const evtc_kernel *k, const evtc_node *u) {
  int64_t rm[EVTC_MAX_RANK], numel = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    rm[d] = numel;
    numel *= k->dom[d];
  }
  if (numel != evtc_type_numel(&u->type)) return false;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind != EVTC_V_LOAD || k->args[v->arg].node != u) continue;
    if (v->offset != 0) return false;
    for (int d = 0; d < k->rank; d++)
      if (k->dom[d] > 1 && v->strides[d] != rm[d]) return false;
  }
  return true;
}

/* Whether kernel t, which writes update n of leaf u, may write it into u's buffer: t is u's last reader
 * (last[u] <= t), a compiled one-pass kernel (elementwise, or a GEMM whose main loop does not read u: its
 * epilogue reads u's element (r, c) in the thread that then writes n's) that reads u in its own order, so
 * every element of u is read before, and by the thread that, it is overwritten. */
static bool in_place_update(const evtc_program *p, int t, const evtc_node *n, const evtc_node *u, const int *last) {
  const evtc_kernel *k = p->ks[t].k;
  if (!k || last[u->id] > t || !evtc_type_equal(&n->type, &u->type) || !loads_in_order(k, u)) return false;
  if (k->kind == EVTC_ML_ELEMENTWISE) return true;
  if (k->kind != EVTC_ML_GEMM) return false;
  for (int j = 0; j < k->main->n_inputs; j++) {
    const evtc_node *x = k->main->inputs[j];
    while (evtc_op_get(x->op)->fusion == EVTC_FUSE_LAYOUT && x->n_inputs) x = x->inputs[0];   /* a prologue view */
    if (x == u) return false;
  }
  return true;
}

/* Whether value n lives in the arena: no leaf, no output, no view of another's buffer. */
static bool arena_value(const evtc_program *p, const evtc_node *n) {
  return !evtc_op_is_leaf(n->op) && !evtc_graph_is_output(p->g, n) && p->views[n->id].base < 0;
}

/* Whether compiled kernel k may write output o over input u, the last use of u's buffer: a one-pass or rows
 * kernel (no main loop that reads u across elements), u the only argument in that buffer, read in the domain's
 * order (loads_in_order), o stored element by element (a store runs in the domain's order too: kernel_build.c)
 * in the last pass over a row (an earlier pass's values are loaded again in every later one), the same bytes,
 * and rows that split into whole 16-byte vectors (the CUDA rows kernel stages the stores of other rows through
 * aligned vectors).  Or a scatter_add over its base: each output element is its base element plus what the indices
 * add there (the templates then write only the rows that indices hit). */
static bool may_overwrite(const evtc_program *p, const evtc_kernel *k, int oa, int ua) {
  const evtc_node *o = k->args[oa].node, *u = k->args[ua].node;
  const bool scatter_base = k->kind == EVTC_ML_OPAQUE && o->op == EVTC_OP_SCATTER_ADD && o->n_inputs == 3 &&
                            o->inputs[2] == u;
  if (scatter_base) {
    for (int a = 0; a < k->n_args; a++)
      if (a != ua && a != oa && buffer_of(p, k->args[a].node->id) == buffer_of(p, u->id)) return false;
    return true;
  }
  if ((k->kind != EVTC_ML_ELEMENTWISE && k->kind != EVTC_ML_ROWS) || value_bytes(o) != value_bytes(u) ||
      evtc_buffer_elem_size(o->type.dtype) != evtc_buffer_elem_size(u->type.dtype) || !loads_in_order(k, u))
    return false;
  if (k->kind == EVTC_ML_ROWS && k->cols * (int64_t)evtc_buffer_elem_size(o->type.dtype) % 16) return false;
  for (int a = 0; a < k->n_args; a++)
    if (a != ua && buffer_of(p, k->args[a].node->id) == buffer_of(p, u->id)) return false;
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->kind == EVTC_V_STORE && v->arg == oa && (v->cls != EVTC_VC_FULL || v->phase != k->n_phases - 1)) return false;
  }
  return true;
}

/* Values written over another's buffer, decided before the kernels are emitted, both arguments marked `shared`:
 * an update over the parameter or state it replaces (in_place_update), and an elementwise or rows kernel's
 * output over the input whose last use that kernel is (may_overwrite, e.g. a cross-entropy's gradient over the
 * logits).  alias_of gives the value the other's buffer. */
static void in_place_writes(evtc_program *p) {
  int32_t nn = p->g->n_nodes;
  int *last = malloc(sizeof(int) * ((size_t)nn + 1));
  for (int32_t i = 0; i < nn; i++) last[i] = -1;
  for (int t = 0; t < p->n_ks; t++) {
    if (p->ks[t].is_fallback) {
      const evtc_node *n = p->ks[t].fb.node;
      for (int j = 0; j < n->n_inputs; j++) last[buffer_of(p, n->inputs[j]->id)] = t;
      last[buffer_of(p, n->id)] = t;
    } else {
      for (int a = 0; a < p->ks[t].k->n_args; a++) last[buffer_of(p, p->ks[t].k->args[a].node->id)] = t;
    }
  }
  for (int t = 0; t < p->n_ks; t++) {
    evtc_kernel *k = p->ks[t].k;
    for (int oa = 0; k && oa < k->n_args; oa++) {
      const evtc_node *o = k->args[oa].node, *r = replaced_by(p->g, o);
      if (!k->args[oa].output || p->alias_of[o->id] >= 0) continue;
      if (r && in_place_update(p, t, o, r, last)) {
        p->alias_of[o->id] = r->id;
        k->args[oa].shared = true;
        for (int ua = 0; ua < k->n_args; ua++)
          if (k->args[ua].node == r) k->args[ua].shared = true;
        p->stats.in_place++;
        continue;
      }
      if (!arena_value(p, o)) continue;
      for (int ua = 0; ua < k->n_args; ua++) {
        const evtc_node *u = k->args[ua].node;
        int32_t root = buffer_of(p, u->id);
        if (k->args[ua].output || k->args[ua].shared || !arena_value(p, u) || !arena_value(p, p->g->nodes[root]) ||
            last[root] != t || !may_overwrite(p, k, oa, ua))
          continue;
        p->alias_of[o->id] = root;
        if (last[o->id] > last[root]) last[root] = last[o->id];
        k->args[oa].shared = k->args[ua].shared = true;
        p->stats.in_place_outputs++;
        break;
      }
    }
  }
  free(last);
}

/* Owned buffers for leaves, constants and outputs; the arena for the rest. */
static void place_buffers(evtc_program *p) {
  const evtc_graph *g = p->g;
  int32_t nn = g->n_nodes;
  int *first = malloc(sizeof(int) * ((size_t)nn + 1)), *last = malloc(sizeof(int) * ((size_t)nn + 1));
  for (int32_t i = 0; i < nn; i++) first[i] = last[i] = -1;
  const evtc_node **args = malloc(sizeof(evtc_node *) * 64);
  int cap = 64;
  for (int t = 0; t < p->n_ks; t++) {
    if (max_args(&p->ks[t]) > cap) args = realloc(args, sizeof(evtc_node *) * (size_t)(cap = max_args(&p->ks[t])));
    int na = kernel_args(&p->ks[t], args);
    for (int a = 0; a < na; a++) {
      int32_t id = buffer_of(p, args[a]->id);
      if (first[id] < 0) first[id] = t;
      last[id] = t;
    }
  }
  evtc_memplan_value *mv = calloc((size_t)nn + 1, sizeof *mv);
  int *mv_node = malloc(sizeof(int) * ((size_t)nn + 1)), n_mv = 0;
  for (int32_t i = 0; i < nn; i++) {
    const evtc_node *n = g->nodes[i];
    size_t bytes = value_bytes(n);
    if (p->alias_of[i] >= 0) continue;     /* another value's buffer (below) */
    bool own = evtc_op_is_leaf(n->op) || evtc_graph_is_output(g, n);
    if (own) {
      first[i] = last[i] = -1;     /* not in the arena */
      p->buf[i] = buf_alloc(p, bytes);
      p->owned[i] = 1;
      p->stats.owned_bytes += bytes;
      if (n->op == EVTC_OP_CONST) {
        const evtc_attr *data = evtc_node_attr(n, "data");
        int64_t numel = evtc_type_numel(&n->type);
        double *vals = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
        for (int64_t e = 0; e < numel; e++) vals[e] = data->n ? data->v.floats[e] : evtc_node_float(n, "value");
        evtc_program_set(p, n, vals);
        free(vals);
      }
    } else if (first[i] >= 0) {
      mv[n_mv] = (evtc_memplan_value){.bytes = bytes, .first = first[i], .last = last[i]};
      mv_node[n_mv++] = i;
      p->stats.unplanned_bytes += (bytes + 63) / 64 * 64;
    }
  }
  p->stats.arena_bytes = evtc_memplan(mv, n_mv, p->n_ks);
  p->arena = p->device ? buf_alloc(p, p->stats.arena_bytes) : aligned_alloc(64, (p->stats.arena_bytes + 127) / 64 * 64);
  for (int v = 0; v < n_mv; v++) p->buf[mv_node[v]] = p->arena + mv[v].offset;
  for (int32_t i = 0; i < nn; i++)
    if (p->alias_of[i] >= 0) p->buf[i] = p->buf[buffer_of(p, i)];
  for (int t = 0; t < p->n_ks; t++) {
    prog_kernel *pk = &p->ks[t];
    int na = kernel_args(pk, args);
    pk->argv = malloc(sizeof(void *) * (size_t)(na + 1));
    for (int a = 0; a < na; a++) pk->argv[a] = p->buf[args[a]->id];
    if (p->device && pk->is_fallback) {
      pk->host = malloc(sizeof(void *) * (size_t)(na + 1));
      for (int a = 0; a < na; a++) pk->host[a] = calloc(1, value_bytes(args[a]) + 1);
    }
  }
  free(args);
  free(mv);
  free(mv_node);
  p->arena_first = first;
  p->arena_last = last;
}

/* The compiled kernels of p in run order (malloc'd), each renamed "k<t>_<op>" after its run position t; the
 * names they had ("k_<op>") into entry[] when entry is not NULL. */
static evtc_kernel **compiled_kernels(evtc_program *p, char (*entry)[sizeof p->ks[0].k->name], int *n) {
  evtc_kernel **ks = malloc(sizeof(evtc_kernel *) * ((size_t)p->n_ks + 1));
  *n = 0;
  for (int t = 0; t < p->n_ks; t++) {
    evtc_kernel *k = p->ks[t].k;
    if (!k) continue;
    if (entry) memcpy(entry[*n], k->name, sizeof k->name);
    char base[40];
    snprintf(base, sizeof base, "%.32s", k->name + 2);   /* "k_<op>" -> "k<t>_<op>" */
    snprintf(k->name, sizeof k->name, "k%d_%s", t, base);
    ks[(*n)++] = k;
  }
  return ks;
}

/* Looks kernel t up in module m under `entry` (a device backend's handle or a host function). */
static void kernel_entry(evtc_program *p, int t, void *m, const char *entry, evtc_diag *d) {
  if (p->be->kernel) p->ks[t].handle = p->be->kernel(p->be, m, entry, p->ks[t].k, d);
  else if (!(p->ks[t].fn = p->be->lookup(p->be, m, entry)))
    evtc_diag_set(d, EVTC_ERR_INVALID, "kernel %s is missing from its module", p->ks[t].k->name);
}

/* Emits the compiled kernels into one module, compiles, loads it and looks each entry point up. */
static evtc_status compile_one_module(evtc_program *p, evtc_diag *d) {
  int n;
  evtc_kernel **ks = compiled_kernels(p, NULL, &n);
  char *src = NULL;
  size_t len = 0;
  for (int i = 0; i < n; i++) p->be->emit(p->be, ks[i], &src, &len);
  if (n > 0) {
    char *path = p->be->compile(p->be, src, (const evtc_kernel *const *)ks, n, d);
    if (path && (p->modules[0] = p->be->load(p->be, path, d))) p->n_modules = p->stats.modules = 1;
    free(path);
    for (int t = 0; t < p->n_ks && p->n_modules && d->status == EVTC_OK; t++)
      if (p->ks[t].k) kernel_entry(p, t, p->modules[0], p->ks[t].k->name, d);
    if (!p->n_modules && !d->status) evtc_diag_set(d, EVTC_ERR_INVALID, "the kernels' module did not load");
  }
  free(src);
  free(ks);
  return d->status;
}

/* module_per_kernel: each compiled kernel is emitted alone under the name it was built with ("k_<op>"), so
 * that kernels of the same source -- a model's repeated layers -- share one module; the distinct sources
 * compile in parallel (the backend's compile is thread-safe), then load in order.  The first failure in
 * kernel order is reported. */
static evtc_status compile_per_kernel(evtc_program *p, evtc_diag *d) {
  int n;
  char(*entry)[sizeof p->ks[0].k->name] = malloc(sizeof *entry * ((size_t)p->n_ks + 1));
  evtc_kernel **ks = compiled_kernels(p, entry, &n);
  char **src = calloc((size_t)n + 1, sizeof *src);
  size_t *len = calloc((size_t)n + 1, sizeof *len);
  uint64_t *hash = malloc(sizeof *hash * ((size_t)n + 1));
  int *module_of = malloc(sizeof(int) * ((size_t)n + 1)), *first = malloc(sizeof(int) * ((size_t)n + 1));
  int n_src = 0;
  for (int i = 0; i < n; i++) {
    char shown[sizeof ks[i]->name];
    memcpy(shown, ks[i]->name, sizeof shown);
    memcpy(ks[i]->name, entry[i], sizeof shown);     /* emitted under its entry name, named in messages as shown */
    p->be->emit(p->be, ks[i], &src[i], &len[i]);
    memcpy(ks[i]->name, shown, sizeof shown);
    hash[i] = evtc_fnv1a(EVTC_FNV1A_BASIS, src[i], len[i]);
    module_of[i] = -1;
    for (int u = 0; u < n_src && module_of[i] < 0; u++) {
      int j = first[u];
      if (hash[j] == hash[i] && len[j] == len[i] && memcmp(src[j], src[i], len[i]) == 0) module_of[i] = u;
    }
    if (module_of[i] < 0) {
      module_of[i] = n_src;
      first[n_src++] = i;
    }
  }
  char **path = calloc((size_t)n_src + 1, sizeof *path);
  evtc_diag *dd = calloc((size_t)n_src + 1, sizeof *dd);
#pragma omp parallel for schedule(dynamic, 1)
  for (int u = 0; u < n_src; u++) {
    const evtc_kernel *k = ks[first[u]];
    path[u] = p->be->compile(p->be, src[first[u]], &k, 1, &dd[u]);
  }
  for (int u = 0; u < n_src && !d->status; u++) {
    if (!path[u]) *d = dd[u];
    else if ((p->modules[u] = p->be->load(p->be, path[u], d))) p->n_modules = u + 1;
    if (!p->modules[u] && !d->status)
      evtc_diag_set(d, EVTC_ERR_INVALID, "kernel %s did not compile or load", ks[first[u]]->name);
  }
  for (int t = 0, i = 0; t < p->n_ks && !d->status; t++)
    if (p->ks[t].k) {
      kernel_entry(p, t, p->modules[module_of[i]], entry[i], d);
      i++;
    }
  p->stats.modules = n_src;
  for (int u = 0; u < n_src; u++) free(path[u]);
  for (int i = 0; i < n; i++) free(src[i]);
  free(path);
  free(dd);
  free(src);
  free(len);
  free(hash);
  free(module_of);
  free(first);
  free(ks);
  free(entry);
  return d->status;
}

/* Emits, compiles and loads the compiled kernels. */
static evtc_status compile_kernels(evtc_program *p, evtc_diag *d) {
  p->modules = calloc((size_t)p->n_ks + 1, sizeof *p->modules);
  return p->be->module_per_kernel ? compile_per_kernel(p, d) : compile_one_module(p, d);
}

evtc_program *evtc_program_new(const evtc_graph *g, const int32_t *kernel_of_node, int n_kernels,
                               const evtc_backend *be, FILE *warn, evtc_diag *d) {
  if (!warn) warn = stderr;
  evtc_program *p = calloc(1, sizeof *p);
  p->g = g;
  p->be = be;
  p->device = be->upload != NULL;
  p->buf = calloc((size_t)g->n_nodes + 1, sizeof(void *));
  p->owned = calloc((size_t)g->n_nodes + 1, 1);
  p->alias_of = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  for (int32_t i = 0; i < g->n_nodes; i++) p->alias_of[i] = -1;
  int32_t *own_plan = NULL;
  if (!kernel_of_node) kernel_of_node = own_plan = evtc_plan_greedy(g, accept_backend, (void *)be, &n_kernels);
  p->views = malloc(sizeof *p->views * ((size_t)g->n_nodes + 1));
  unsigned char *skip = calloc((size_t)n_kernels + 1, 1);
  p->stats.views = evtc_program_plan_views(g, kernel_of_node, n_kernels, be, skip, p->views);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (p->views[i].base >= 0) p->alias_of[i] = p->views[i].base;
  p->ks = calloc((size_t)g->n_nodes + 1, sizeof *p->ks);
  int32_t *ids = malloc(sizeof(int32_t) * ((size_t)g->n_nodes + 1));
  for (int k = 0; k < n_kernels && d->status == EVTC_OK; k++) {
    if (skip[k]) continue;
    int n = 0;
    for (int32_t i = 0; i < g->n_nodes; i++)
      if (kernel_of_node[i] == k) ids[n++] = i;
    if (n > 0) add_group(p, ids, n, warn, d);
  }
  free(ids);
  free(skip);
  free(own_plan);
  if (d->status == EVTC_OK) in_place_writes(p);
  if (d->status != EVTC_OK || compile_kernels(p, d) != EVTC_OK) {
    evtc_program_free(p);
    return NULL;
  }
  p->stats.kernels = p->n_ks;
  for (int t = 0; t < p->n_ks; t++) {
    if (p->ks[t].is_fallback) p->stats.interpreted++;
    else p->stats.compiled++;
  }
  if (p->stats.interpreted) {
    fprintf(warn, "evtc: WARNING: %d of %d kernels have no %s template and run in the float64 interpreter (slow):",
            p->stats.interpreted, p->n_ks, be->name);
    for (int t = 0; t < p->n_ks; t++)
      if (p->ks[t].is_fallback)
        fprintf(warn, "\n  %%%s (%s): %s", p->ks[t].fb.node->name, evtc_op_get(p->ks[t].fb.node->op)->name,
                p->ks[t].why);
    fputc('\n', warn);
  }
  place_buffers(p);
  evtc_replay_init(&p->replay, be, p->stats.interpreted);
  return p;
}

void evtc_program_free(evtc_program *p) {
  if (!p) return;
  evtc_replay_free(&p->replay);
  for (int t = 0; t < p->n_ks; t++) {
    if (p->ks[t].is_fallback) evtc_fallback_free(&p->ks[t].fb);
    evtc_kernel_free(p->ks[t].k);
    if (p->ks[t].host)
      for (int a = 0; a < max_args(&p->ks[t]); a++) free(p->ks[t].host[a]);
    free(p->ks[t].host);
    free(p->ks[t].argv);
  }
  free(p->ks);
  for (int m = 0; m < p->n_modules; m++) p->be->unload(p->be, p->modules[m]);
  free(p->modules);
  free(p->staging);
  for (int32_t i = 0; i < p->g->n_nodes; i++)
    if (p->owned[i]) buf_free(p, p->buf[i]);
  free(p->buf);
  free(p->owned);
  free(p->alias_of);
  free(p->views);
  free(p->arena_first);
  free(p->arena_last);
  if (p->device) buf_free(p, p->arena);
  else free(p->arena);
  free(p);
}

void evtc_program_set(evtc_program *p, const evtc_node *leaf, const double *data) {
  EVTC_ASSERT(p->buf[leaf->id] != NULL && p->owned[leaf->id]);
  if (!p->device) {
    evtc_buffer_from_double(leaf->type.dtype, data, evtc_type_numel(&leaf->type), p->buf[leaf->id]);
    return;
  }
  size_t bytes = value_bytes(leaf);
  void *host = malloc(bytes + 1);
  evtc_buffer_from_double(leaf->type.dtype, data, evtc_type_numel(&leaf->type), host);
  p->be->upload(p->be, p->buf[leaf->id], host, bytes);
  free(host);
}

struct evtc_rows_table {
  unsigned char *host;      /* the rows in the leaf's buffer format, or NULL when they live on the device */
  unsigned char *device;    /* a device program's copy of them, or NULL */
  size_t row_bytes;
};

evtc_rows_table *evtc_program_rows_table(evtc_program *p, const evtc_node *leaf, const double *values,
                                         int64_t n_rows) {
  evtc_rows_table *t = calloc(1, sizeof *t);
  int64_t numel = n_rows * (evtc_type_numel(&leaf->type) / leaf->type.shape[0]);
  size_t bytes = (size_t)numel * evtc_buffer_elem_size(leaf->type.dtype);
  t->row_bytes = n_rows ? bytes / (size_t)n_rows : 0;
  t->host = malloc(bytes + 1);
  evtc_buffer_from_double(leaf->type.dtype, values, numel, t->host);
  if (p->device && bytes <= EVTC_DEVICE_TABLE_MAX) {
    t->device = buf_alloc(p, bytes);
    p->be->upload(p->be, t->device, t->host, bytes);
    free(t->host);
    t->host = NULL;
  }
  return t;
}

void evtc_program_rows_table_free(evtc_program *p, evtc_rows_table *t) {
  if (!t) return;
  free(t->host);
  buf_free(p, t->device);
  free(t);
}

void evtc_program_set_rows(evtc_program *p, const evtc_node *leaf, const evtc_rows_table *t, const int64_t *rows,
                           int64_t n) {
  EVTC_ASSERT(p->buf[leaf->id] != NULL && p->owned[leaf->id] && n == leaf->type.shape[0] &&
              t->row_bytes == value_bytes(leaf) / (size_t)n);
  size_t row_bytes = t->row_bytes;
  unsigned char *buf = p->buf[leaf->id];
  if (t->device) {                 /* row copies on the device, one per run of consecutive rows */
    for (int64_t i = 0, run; i < n; i += run) {
      for (run = 1; i + run < n && rows[i + run] == rows[i] + run;) run++;
      p->be->copy(p->be, buf + (size_t)i * row_bytes, t->device + (size_t)rows[i] * row_bytes,
                  (size_t)run * row_bytes);
    }
    return;
  }
  if (p->device && p->staging_bytes < value_bytes(leaf)) {   /* kept between steps: no fresh pages per batch */
    free(p->staging);
    p->staging = malloc(value_bytes(leaf) + 1);
    p->staging_bytes = value_bytes(leaf);
  }
  unsigned char *dst = p->device ? p->staging : buf;
  for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * row_bytes, t->host + (size_t)rows[i] * row_bytes, row_bytes);
  if (p->device) p->be->upload(p->be, buf, dst, value_bytes(leaf));
}

bool evtc_program_get(const evtc_program *p, const evtc_node *n, double *out) {
  if (!p->buf[n->id] || p->views[n->id].base >= 0) return false;
  if (!p->device) {
    evtc_buffer_to_double(n->type.dtype, p->buf[n->id], evtc_type_numel(&n->type), out);
    return true;
  }
  size_t bytes = value_bytes(n);
  void *host = malloc(bytes + 1);
  p->be->download(p->be, host, p->buf[n->id], bytes);
  evtc_buffer_to_double(n->type.dtype, host, evtc_type_numel(&n->type), out);
  free(host);
  return true;
}

/* A fallback kernel on a device backend: its inputs down, the interpreter, its output up. */
static evtc_status run_fallback_on_host(evtc_program *p, prog_kernel *pk, uint64_t step, evtc_diag *d) {
  const evtc_node *n = pk->fb.node;
  for (int j = 0; j < n->n_inputs; j++) p->be->download(p->be, pk->host[j], pk->argv[j], value_bytes(n->inputs[j]));
  if (evtc_fallback_run(&pk->fb, pk->host, pk->host[n->n_inputs], step, d) != EVTC_OK) return d->status;
  p->be->upload(p->be, pk->argv[n->n_inputs], pk->host[n->n_inputs], value_bytes(n));
  return EVTC_OK;
}

/* A device backend: queues the write of the run's step where its kernels read it, before the run's launches. */
static evtc_status begin_run(evtc_program *p, uint64_t step, evtc_diag *d) {
  return p->be->begin_run ? p->be->begin_run(p->be, step, d) : EVTC_OK;
}

/* Runs (a device backend: queues) kernel t; a device kernel reads the step begin_run gave. */
static evtc_status run_kernel(evtc_program *p, int t, uint64_t step, evtc_diag *d) {
  prog_kernel *pk = &p->ks[t];
  if (pk->is_fallback) {
    const evtc_node *n = pk->fb.node;
    if (p->device) return run_fallback_on_host(p, pk, step, d);
    return evtc_fallback_run(&pk->fb, pk->argv, pk->argv[n->n_inputs], step, d);
  }
  if (pk->handle) return p->be->run(p->be, pk->handle, pk->argv, d);
  int err = 0;
  pk->fn(pk->argv, step, &err);
  if (err) {
    const evtc_kernel *k = pk->k;
    const evtc_node *n = p->g->nodes[k->nodes[k->n_nodes - 1]];
    return evtc_diag_set(d, EVTC_ERR_RUNTIME,
                         "kernel %s (nodes %%%s..%%%s): an index or label is out of range, or an integer division "
                         "by zero", k->name, p->g->nodes[k->nodes[0]]->name, n->name);
  }
  return EVTC_OK;
}

/* Waits for the backend's queued work (and reports a kernel's error flag). */
static evtc_status wait_backend(evtc_program *p, evtc_diag *d) {
  if (p->be->finish) return p->be->finish(p->be, d);
  if (p->be->synchronize) p->be->synchronize(p->be);
  return EVTC_OK;
}

typedef struct run_ctx {
  evtc_program *p;
  uint64_t step;
} run_ctx;

/* Runs (queues) every kernel of a run in order: evtc_replay_run's launch_all. */
static evtc_status run_kernels(void *ctx, evtc_diag *d) {
  const run_ctx *r = ctx;
  for (int t = 0; t < r->p->n_ks; t++)
    if (run_kernel(r->p, t, r->step, d) != EVTC_OK) return d->status;
  return EVTC_OK;
}

evtc_status evtc_program_start(evtc_program *p, uint64_t step, evtc_diag *d) {
  run_ctx r = {p, step};
  if (begin_run(p, step, d) != EVTC_OK) return d->status;
  return evtc_replay_run(&p->replay, run_kernels, &r, d);
}

evtc_status evtc_program_wait(evtc_program *p, evtc_diag *d) { return wait_backend(p, d); }

evtc_status evtc_program_run(evtc_program *p, uint64_t step, evtc_diag *d) {
  if (evtc_program_start(p, step, d) != EVTC_OK) return d->status;
  return evtc_program_wait(p, d);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* One run timed on the device: a mark before every kernel and one after the last, no waits in between. */
static evtc_status profile_run_marked(evtc_program *p, uint64_t step, double *run_us, evtc_diag *d) {
  if (begin_run(p, step, d) != EVTC_OK) return d->status;
  for (int t = 0; t < p->n_ks; t++)
    if (p->be->mark(p->be, t, d) != EVTC_OK || run_kernel(p, t, step, d) != EVTC_OK) return d->status;
  if (p->be->mark(p->be, p->n_ks, d) != EVTC_OK || wait_backend(p, d) != EVTC_OK) return d->status;
  return p->be->mark_intervals(p->be, p->n_ks + 1, run_us, d);
}

evtc_status evtc_program_profile(evtc_program *p, int runs, uint64_t step, double *us, bool *device_clock,
                                 evtc_diag *d) {
  *device_clock = p->be->mark != NULL;
  for (int t = 0; t < p->n_ks; t++) us[t] = 0;
  double *run_us = *device_clock ? malloc(sizeof(double) * (size_t)(p->n_ks + 1)) : NULL;
  for (int r = 0; r < runs; r++) {
    if (run_us) {
      if (profile_run_marked(p, step + (uint64_t)r, run_us, d) != EVTC_OK) break;
      for (int t = 0; t < p->n_ks; t++) us[t] += run_us[t] / runs;
      continue;
    }
    if (begin_run(p, step + (uint64_t)r, d) != EVTC_OK) return d->status;
    for (int t = 0; t < p->n_ks; t++) {
      const double t0 = now_us();
      if (run_kernel(p, t, step + (uint64_t)r, d) != EVTC_OK || wait_backend(p, d) != EVTC_OK) return d->status;
      us[t] += (now_us() - t0) / runs;
    }
  }
  free(run_us);
  return d->status;
}

int evtc_program_kernel_count(const evtc_program *p) { return p->n_ks; }

int32_t evtc_program_kernel_first_node(const evtc_program *p, int t) {
  const prog_kernel *pk = &p->ks[t];
  return pk->k ? pk->k->nodes[0] : pk->fb.node->id;
}

bool evtc_program_kernel_writes(const evtc_program *p, int t, int32_t node) {
  const prog_kernel *pk = &p->ks[t];
  if (!pk->k) return pk->fb.node->id == node;
  for (int a = 0; a < pk->k->n_args; a++)
    if (pk->k->args[a].output && pk->k->args[a].node->id == node) return true;
  return false;
}

void evtc_program_poison(evtc_program *p) {
  const evtc_graph *g = p->g;
  if (!p->device) {
    memset(p->arena, 0xff, p->stats.arena_bytes);
    for (int32_t i = 0; i < g->n_nodes; i++)
      if (p->owned[i] && !evtc_op_is_leaf(g->nodes[i]->op)) memset(p->buf[i], 0xff, value_bytes(g->nodes[i]));
    return;
  }
  size_t most = p->stats.arena_bytes;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (p->owned[i] && value_bytes(g->nodes[i]) > most) most = value_bytes(g->nodes[i]);
  void *ones = malloc(most + 1);
  memset(ones, 0xff, most + 1);
  p->be->upload(p->be, p->arena, ones, p->stats.arena_bytes);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (p->owned[i] && !evtc_op_is_leaf(g->nodes[i]->op)) p->be->upload(p->be, p->buf[i], ones, value_bytes(g->nodes[i]));
  free(ones);
}

void evtc_program_update(evtc_program *p) {
  const evtc_graph *g = p->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const evtc_output *o = &g->outputs[i];
    if (!o->updates || o->updates == o->node || p->buf[o->updates->id] == p->buf[o->node->id]) continue;
    size_t bytes = value_bytes(o->updates);
    if (p->device) p->be->copy(p->be, p->buf[o->updates->id], p->buf[o->node->id], bytes);
    else memmove(p->buf[o->updates->id], p->buf[o->node->id], bytes);
  }
}

evtc_program_stats evtc_program_get_stats(const evtc_program *p) {
  evtc_program_stats st = p->stats;
  st.graph = p->replay.on;
  st.graph_captures = p->replay.captures;
  snprintf(st.no_graph, sizeof st.no_graph, "%s", p->replay.on ? "" : p->replay.off);
  return st;
}

typedef struct sized_value {
  int32_t id;
  size_t bytes;
} sized_value;

static int by_bytes(const void *a, const void *b) {
  size_t x = ((const sized_value *)a)->bytes, y = ((const sized_value *)b)->bytes;
  return (x < y) - (x > y);
}

int evtc_program_peak_values(const evtc_program *p, int32_t *ids, int cap, int *at, size_t *live_bytes) {
  const evtc_graph *g = p->g;
  size_t *live = calloc((size_t)p->n_ks + 1, sizeof *live);
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int t = p->arena_first[i]; t >= 0 && t <= p->arena_last[i]; t++) live[t] += value_bytes(g->nodes[i]);
  int peak = 0;
  for (int t = 1; t < p->n_ks; t++)
    if (live[t] > live[peak]) peak = t;
  *at = peak;
  *live_bytes = p->n_ks ? live[peak] : 0;
  free(live);
  sized_value *all = malloc(sizeof *all * ((size_t)g->n_nodes + 1));
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (p->arena_first[i] >= 0 && p->arena_first[i] <= peak && peak <= p->arena_last[i])
      all[n++] = (sized_value){.id = i, .bytes = value_bytes(g->nodes[i])};
  qsort(all, (size_t)n, sizeof *all, by_bytes);
  for (int k = 0; k < n && k < cap; k++) ids[k] = all[k].id;
  free(all);
  return n;
}

void evtc_program_dump(const evtc_program *p, FILE *out) {
  for (int t = 0; t < p->n_ks; t++) {
    if (p->ks[t].k) evtc_kernel_print(p->ks[t].k, out);
    else fprintf(out, "kernel %d: interpreter %%%s (%s)\n", t, p->ks[t].fb.node->name,
                 evtc_op_get(p->ks[t].fb.node->op)->name);
  }
}
