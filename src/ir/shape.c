/* shape.c -- type inference: the output dtype and static shape of every op.
 *
 * evtc_infer_type is called by the builder for each new node (and by the
 * verifier to re-check a graph).  It reads only the node's inputs and
 * attributes, writes node->type (contiguous strides), and on a mismatch
 * records one message naming the node, the op and the cause.
 */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

#define FAIL(...) (evtc_graph_fail(g, EVTC_ERR_TYPE, n->name, n->op, __VA_ARGS__), false)

/* Largest element count a tensor may have; keeps every size product in int64. */
#define NUMEL_LIMIT ((int64_t)1 << 48)

/* a*b and a+b for sizes that bad input may make huge: false on overflow. */
static bool size_mul(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static bool size_add(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

static const evtc_type *in_type(const evtc_node *n, int i) { return &n->inputs[i]->type; }

static void set_type(evtc_node *n, evtc_dtype dt, int rank, const int64_t *shape) {
  n->type = evtc_type_make(dt, rank, shape);
}

static const char *tstr(const evtc_type *t, char *buf) { return evtc_type_str(t, buf, 96); }

/* NumPy broadcasting of k input types into out/rank; false on a clash. */
static bool broadcast(evtc_graph *g, evtc_node *n, int k, int64_t *out, int *rank) {
  int r = 0;
  for (int i = 0; i < k; i++)
    if (in_type(n, i)->rank > r) r = in_type(n, i)->rank;
  for (int d = 0; d < r; d++) out[d] = 1;
  for (int i = 0; i < k; i++) {
    const evtc_type *t = in_type(n, i);
    for (int d = 0; d < t->rank; d++) {
      int o = r - t->rank + d;
      int64_t s = t->shape[d];
      if (s == out[o] || s == 1) continue;
      if (out[o] == 1) {
        out[o] = s;
        continue;
      }
      char b0[96], b1[96];
      return FAIL("shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", tstr(in_type(n, 0), b0),
                  tstr(t, b1), o, (long long)out[o], (long long)s);
    }
  }
  *rank = r;
  return true;
}

static bool need_float(evtc_graph *g, evtc_node *n, int i) {
  if (evtc_dtype_is_float(in_type(n, i)->dtype)) return true;
  return FAIL("input %d (%%%s) must be a float tensor, not %s", i, n->inputs[i]->name,
              evtc_dtype_name(in_type(n, i)->dtype));
}

static bool need_int(evtc_graph *g, evtc_node *n, int i) {
  if (evtc_dtype_is_int(in_type(n, i)->dtype)) return true;
  return FAIL("input %d (%%%s) must be an integer tensor (i64 or i32), not %s", i, n->inputs[i]->name,
              evtc_dtype_name(in_type(n, i)->dtype));
}

static bool same_dtype(evtc_graph *g, evtc_node *n, int i, int j) {
  if (in_type(n, i)->dtype == in_type(n, j)->dtype) return true;
  return FAIL("inputs %d and %d have different dtypes (%s vs %s)", i, j, evtc_dtype_name(in_type(n, i)->dtype),
              evtc_dtype_name(in_type(n, j)->dtype));
}

static bool need_rank(evtc_graph *g, evtc_node *n, int i, int rank) {
  if (in_type(n, i)->rank == rank) return true;
  return FAIL("input %d (%%%s) must have rank %d, not %d", i, n->inputs[i]->name, rank, in_type(n, i)->rank);
}

/* Reads an INTS attribute of exactly `len` entries into v, or `def` when empty. */
static bool ints_or(evtc_graph *g, evtc_node *n, const char *name, int len, int64_t def, int64_t *v) {
  const evtc_attr *a = evtc_node_attr(n, name);
  if (a->n == 0) {
    for (int i = 0; i < len; i++) v[i] = def;
    return true;
  }
  if (a->n != len) return FAIL("attribute '%s' needs %d values, has %d", name, len, a->n);
  memcpy(v, a->v.ints, sizeof(int64_t) * (size_t)len);
  return true;
}

/* Normalised axis set from an attribute (empty: all axes when all_if_empty). */
static bool axis_set(evtc_graph *g, evtc_node *n, const evtc_attr *a, int rank, bool *mask) {
  for (int d = 0; d < rank; d++) mask[d] = a->n == 0;
  for (int i = 0; i < a->n; i++) {
    int ax = evtc_axis_norm(a->v.ints[i], rank);
    if (ax < 0) return FAIL("axis %lld is out of range for rank %d", (long long)a->v.ints[i], rank);
    if (mask[ax] && a->n) return FAIL("axis %lld is listed twice", (long long)a->v.ints[i]);
    mask[ax] = true;
  }
  return true;
}

static bool infer_reduce(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  bool mask[EVTC_MAX_RANK];
  if (!axis_set(g, n, evtc_node_attr(n, "axes"), t->rank, mask)) return false;
  bool keep = evtc_node_int(n, "keepdims") != 0;
  int64_t shape[EVTC_MAX_RANK];
  int r = 0;
  for (int d = 0; d < t->rank; d++) {
    if (!mask[d]) shape[r++] = t->shape[d];
    else if (keep) shape[r++] = 1;
  }
  if (n->op == EVTC_OP_REDUCE_MEAN && !evtc_dtype_is_float(t->dtype)) return need_float(g, n, 0);
  if (t->dtype == EVTC_BOOL) return FAIL("cannot reduce a bool tensor");
  set_type(n, t->dtype, r, shape);
  return true;
}

static bool infer_reshape(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  const evtc_attr *a = evtc_node_attr(n, "shape");
  if (a->n > EVTC_MAX_RANK) return FAIL("target rank %d exceeds %d", a->n, EVTC_MAX_RANK);
  int64_t shape[EVTC_MAX_RANK], known = 1;
  int infer_at = -1;
  for (int i = 0; i < a->n; i++) {
    shape[i] = a->v.ints[i];
    if (shape[i] == -1) {
      if (infer_at >= 0) return FAIL("more than one -1 in the target shape");
      infer_at = i;
    } else if (shape[i] < 0) {
      return FAIL("target dimension %d is negative (%lld)", i, (long long)shape[i]);
    } else if (!size_mul(known, shape[i], &known) || known > NUMEL_LIMIT) {
      return FAIL("target shape holds more than %lld elements", (long long)NUMEL_LIMIT);
    }
  }
  int64_t numel = evtc_type_numel(t);
  if (infer_at >= 0) {
    if (known == 0 || numel % known) return FAIL("cannot infer -1: %lld elements into blocks of %lld",
                                                 (long long)numel, (long long)known);
    shape[infer_at] = numel / known;
  } else if (known != numel) {
    return FAIL("target shape holds %lld elements, the input %lld", (long long)known, (long long)numel);
  }
  set_type(n, t->dtype, a->n, shape);
  return true;
}

static bool infer_permute(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  const evtc_attr *a = evtc_node_attr(n, "perm");
  if (a->n != t->rank) return FAIL("perm has %d entries for rank %d", a->n, t->rank);
  bool seen[EVTC_MAX_RANK] = {false};
  int64_t shape[EVTC_MAX_RANK];
  for (int i = 0; i < a->n; i++) {
    int p = evtc_axis_norm(a->v.ints[i], t->rank);
    if (p < 0 || seen[p]) return FAIL("perm is not a permutation of 0..%d", t->rank - 1);
    seen[p] = true;
    shape[i] = t->shape[p];
  }
  set_type(n, t->dtype, t->rank, shape);
  return true;
}

static bool infer_expand(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  const evtc_attr *a = evtc_node_attr(n, "shape");
  if (a->n < t->rank || a->n > EVTC_MAX_RANK)
    return FAIL("target rank %d must be between the input rank %d and %d", a->n, t->rank, EVTC_MAX_RANK);
  for (int d = 0; d < t->rank; d++) {
    int64_t want = a->v.ints[a->n - t->rank + d];
    if (t->shape[d] != want && t->shape[d] != 1)
      return FAIL("cannot expand dim %d of size %lld to %lld", d, (long long)t->shape[d], (long long)want);
  }
  for (int i = 0; i < a->n; i++)
    if (a->v.ints[i] < 0) return FAIL("target dimension %d is negative", i);
  set_type(n, t->dtype, a->n, a->v.ints);
  return true;
}

/* Python slice length of start:end:step (step >= 1) over a dim of size s. */
static int64_t slice_len(int64_t s, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += s;
  if (end < 0) end += s;
  start = start < 0 ? 0 : start > s ? s : start;
  end = end < 0 ? 0 : end > s ? s : end;
  return end > start ? (end - start - 1) / step + 1 : 0;
}

static bool infer_slice(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  const evtc_attr *axes = evtc_node_attr(n, "axes"), *starts = evtc_node_attr(n, "starts"),
                  *ends = evtc_node_attr(n, "ends"), *steps = evtc_node_attr(n, "steps");
  int k = axes->n ? axes->n : t->rank;
  if (starts->n != k || ends->n != k || (steps->n && steps->n != k))
    return FAIL("starts, ends (and steps) need %d entries each", k);
  int64_t shape[EVTC_MAX_RANK];
  memcpy(shape, t->shape, sizeof shape);
  bool seen[EVTC_MAX_RANK] = {false};
  for (int i = 0; i < k; i++) {
    int ax = axes->n ? evtc_axis_norm(axes->v.ints[i], t->rank) : i;
    if (ax < 0 || seen[ax]) return FAIL("slice axis %d is out of range or repeated", i);
    seen[ax] = true;
    int64_t step = steps->n ? steps->v.ints[i] : 1;
    if (step < 1) return FAIL("step %lld on axis %d must be >= 1", (long long)step, ax);
    shape[ax] = slice_len(t->shape[ax], starts->v.ints[i], ends->v.ints[i], step);
  }
  set_type(n, t->dtype, t->rank, shape);
  return true;
}

static bool infer_concat(evtc_graph *g, evtc_node *n) {
  const evtc_type *t0 = in_type(n, 0);
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), t0->rank);
  if (ax < 0) return FAIL("axis %lld is out of range for rank %d", (long long)evtc_node_int(n, "axis"), t0->rank);
  int64_t shape[EVTC_MAX_RANK];
  memcpy(shape, t0->shape, sizeof shape);
  for (int i = 1; i < n->n_inputs; i++) {
    const evtc_type *t = in_type(n, i);
    if (!same_dtype(g, n, 0, i)) return false;
    if (t->rank != t0->rank) return FAIL("input %d has rank %d, input 0 rank %d", i, t->rank, t0->rank);
    for (int d = 0; d < t->rank; d++)
      if (d != ax && t->shape[d] != t0->shape[d])
        return FAIL("input %d differs from input 0 in dim %d (%lld vs %lld)", i, d, (long long)t->shape[d],
                    (long long)t0->shape[d]);
    if (!size_add(shape[ax], t->shape[ax], &shape[ax])) return FAIL("concatenated dim %d overflows", ax);
  }
  set_type(n, t0->dtype, t0->rank, shape);
  return true;
}

static bool infer_pad(evtc_graph *g, evtc_node *n) {
  const evtc_type *t = in_type(n, 0);
  const evtc_attr *pads = evtc_node_attr(n, "pads");
  int64_t interior[EVTC_MAX_RANK];
  if (pads->n != 2 * t->rank) return FAIL("pads needs %d entries (lo..., hi...), has %d", 2 * t->rank, pads->n);
  if (!ints_or(g, n, "interior", t->rank, 0, interior)) return false;
  int64_t shape[EVTC_MAX_RANK];
  for (int d = 0; d < t->rank; d++) {
    int64_t lo = pads->v.ints[d], hi = pads->v.ints[t->rank + d];
    if (lo < 0 || hi < 0 || interior[d] < 0) return FAIL("negative padding on axis %d", d);
    int64_t s = t->shape[d], inner = 0;
    if (!size_mul(s > 0 ? s - 1 : 0, interior[d], &inner) || !size_add(inner, s, &shape[d]) ||
        !size_add(shape[d], lo, &shape[d]) || !size_add(shape[d], hi, &shape[d]))
      return FAIL("padded dim %d overflows", d);
  }
  set_type(n, t->dtype, t->rank, shape);
  return true;
}

static bool infer_gather(evtc_graph *g, evtc_node *n) {
  const evtc_type *x = in_type(n, 0), *idx = in_type(n, 1);
  if (!need_int(g, n, 1)) return false;
  int ax = evtc_axis_norm(evtc_node_int(n, "axis"), x->rank);
  if (ax < 0) return FAIL("axis %lld is out of range for rank %d", (long long)evtc_node_int(n, "axis"), x->rank);
  int r = x->rank - 1 + idx->rank;
  if (r > EVTC_MAX_RANK) return FAIL("result rank %d exceeds %d", r, EVTC_MAX_RANK);
  int64_t shape[EVTC_MAX_RANK];
  int k = 0;
  for (int d = 0; d < ax; d++) shape[k++] = x->shape[d];
  for (int d = 0; d < idx->rank; d++) shape[k++] = idx->shape[d];
  for (int d = ax + 1; d < x->rank; d++) shape[k++] = x->shape[d];
  set_type(n, x->dtype, r, shape);
  return true;
}

static bool infer_scatter_add(evtc_graph *g, evtc_node *n) {
  const evtc_type *upd = in_type(n, 0), *idx = in_type(n, 1);
  if (!need_int(g, n, 1)) return false;
  int64_t axis = evtc_node_int(n, "axis"), size = evtc_node_int(n, "size");
  int r = upd->rank - idx->rank + 1;
  if (r < 1) return FAIL("updates rank %d is smaller than the indices rank %d", upd->rank, idx->rank);
  int ax = evtc_axis_norm(axis, r);
  if (ax < 0) return FAIL("axis %lld is out of range for result rank %d", (long long)axis, r);
  if (size < 0) return FAIL("size %lld is negative", (long long)size);
  for (int d = 0; d < idx->rank; d++)
    if (upd->shape[ax + d] != idx->shape[d])
      return FAIL("updates dim %d (%lld) does not match indices dim %d (%lld)", ax + d,
                  (long long)upd->shape[ax + d], d, (long long)idx->shape[d]);
  int64_t shape[EVTC_MAX_RANK];
  int k = 0;
  for (int d = 0; d < ax; d++) shape[k++] = upd->shape[d];
  shape[k++] = size;
  for (int d = ax + idx->rank; d < upd->rank; d++) shape[k++] = upd->shape[d];
  set_type(n, upd->dtype, r, shape);
  if (n->n_inputs == 3) {   /* the base the updates are added to: the result's type, at least size along axis */
    const evtc_type *base = in_type(n, 2);
    bool fits = base->dtype == upd->dtype && base->rank == r;
    for (int d = 0; fits && d < r; d++) fits = d == ax ? base->shape[d] >= size : base->shape[d] == shape[d];
    char want[96], got[96];
    if (!fits)
      return FAIL("base %s is not %s (at least %lld along axis %d)", evtc_type_str(base, got, sizeof got),
                  evtc_type_str(&n->type, want, sizeof want), (long long)size, ax);
    set_type(n, upd->dtype, r, base->shape);
  }
  return true;
}

static bool infer_one_hot(evtc_graph *g, evtc_node *n) {
  const evtc_type *idx = in_type(n, 0);
  if (!need_int(g, n, 0)) return false;
  int64_t depth = evtc_node_int(n, "depth");
  if (depth < 1) return FAIL("depth %lld must be >= 1", (long long)depth);
  if (idx->rank + 1 > EVTC_MAX_RANK) return FAIL("result rank exceeds %d", EVTC_MAX_RANK);
  int64_t shape[EVTC_MAX_RANK];
  memcpy(shape, idx->shape, sizeof(int64_t) * (size_t)idx->rank);
  shape[idx->rank] = depth;
  set_type(n, (evtc_dtype)evtc_node_int(n, "dtype"), idx->rank + 1, shape);
  return true;
}

static bool infer_matmul(evtc_graph *g, evtc_node *n) {
  const evtc_type *a = in_type(n, 0), *b = in_type(n, 1);
  if (!need_float(g, n, 0) || !same_dtype(g, n, 0, 1)) return false;
  bool batched = n->op == EVTC_OP_BATCH_MATMUL;
  if (!batched && (a->rank != 2 || b->rank != 2))
    return FAIL("needs rank-2 operands, got ranks %d and %d (batch_matmul takes more)", a->rank, b->rank);
  if (batched && (a->rank < 2 || b->rank < 2 || (a->rank == 2 && b->rank == 2)))
    return FAIL("needs operands of rank >= 2 with at least one of rank > 2, got %d and %d", a->rank, b->rank);
  bool ta = evtc_node_int(n, "trans_a") != 0, tb = evtc_node_int(n, "trans_b") != 0;
  int64_t m = a->shape[a->rank - (ta ? 1 : 2)], ka = a->shape[a->rank - (ta ? 2 : 1)];
  int64_t kb = b->shape[b->rank - (tb ? 1 : 2)], nn = b->shape[b->rank - (tb ? 2 : 1)];
  if (ka != kb) return FAIL("inner dims differ: %lld vs %lld", (long long)ka, (long long)kb);
  int64_t shape[EVTC_MAX_RANK];
  int r = a->rank > b->rank ? a->rank : b->rank;
  for (int d = 0; d < r - 2; d++) {     /* broadcast the batch dims */
    int da = d - (r - a->rank), db = d - (r - b->rank);
    int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      return FAIL("batch dims do not broadcast (dim %d: %lld vs %lld)", d, (long long)sa, (long long)sb);
    shape[d] = sa == 1 ? sb : sa;
  }
  shape[r - 2] = m;
  shape[r - 1] = nn;
  set_type(n, a->dtype, r, shape);
  return true;
}

/* Reads conv/pool geometry: stride[2], padding[4] (top,left,bottom,right), dilation[2]. */
static bool geometry(evtc_graph *g, evtc_node *n, const int64_t *kernel, int64_t *stride, int64_t *pad,
                     int64_t *dil) {
  const evtc_attr *sa = evtc_node_attr(n, "stride");
  if (sa->n == 0 && kernel) {              /* pooling: stride defaults to the window */
    stride[0] = kernel[0];
    stride[1] = kernel[1];
  } else if (!ints_or(g, n, "stride", 2, 1, stride)) {
    return false;
  }
  if (!ints_or(g, n, "padding", 4, 0, pad)) return false;
  if (dil && !ints_or(g, n, "dilation", 2, 1, dil)) return false;
  for (int i = 0; i < 2; i++)
    if (stride[i] < 1 || (dil && dil[i] < 1)) return FAIL("stride and dilation must be >= 1");
  for (int i = 0; i < 4; i++)
    if (pad[i] < 0) return FAIL("padding must be >= 0");
  return true;
}

/* Output size of a sliding window; false (diag set) when it is empty. */
static bool window_out(evtc_graph *g, evtc_node *n, int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1,
                       int64_t d, int64_t *out) {
  int64_t span, padded;
  if (!size_mul(d, k - 1, &span) || !size_add(span, 1, &span) || !size_add(in, p0, &padded) ||
      !size_add(padded, p1, &padded))
    return FAIL("window or padding sizes overflow");
  if (padded < span) return FAIL("window of %lld exceeds the padded input of %lld", (long long)span,
                                       (long long)(in + p0 + p1));
  *out = (padded - span) / s + 1;
  return true;
}

/* conv2d output shape for x[N,C,H,W], w[O,C/g,KH,KW]; shared with the backward ops. */
static bool conv_shapes(evtc_graph *g, evtc_node *n, const int64_t *x, const int64_t *w, int64_t *y) {
  int64_t stride[2], pad[4], dil[2], groups = evtc_node_int(n, "groups");
  if (!geometry(g, n, NULL, stride, pad, dil)) return false;
  if (groups < 1 || x[1] % groups || w[0] % groups)
    return FAIL("groups %lld must divide the input channels %lld and the output channels %lld", (long long)groups,
                (long long)x[1], (long long)w[0]);
  if (w[1] * groups != x[1])
    return FAIL("weight has %lld input channels per group, the input %lld channels in %lld groups",
                (long long)w[1], (long long)x[1], (long long)groups);
  y[0] = x[0];
  y[1] = w[0];
  return window_out(g, n, x[2], w[2], stride[0], pad[0], pad[2], dil[0], &y[2]) &&
         window_out(g, n, x[3], w[3], stride[1], pad[1], pad[3], dil[1], &y[3]);
}

static bool infer_conv(evtc_graph *g, evtc_node *n) {
  if (!need_float(g, n, 0) || !same_dtype(g, n, 0, 1) || !need_rank(g, n, 0, 4) || !need_rank(g, n, 1, 4))
    return false;
  const evtc_type *a = in_type(n, 0), *b = in_type(n, 1);
  int64_t y[4];
  if (n->op == EVTC_OP_CONV2D) {
    if (!conv_shapes(g, n, a->shape, b->shape, y)) return false;
    set_type(n, a->dtype, 4, y);
    return true;
  }
  const evtc_attr *sh = evtc_node_attr(n, "shape");
  if (sh->n != 4) return FAIL("attribute 'shape' needs 4 values, has %d", sh->n);
  /* backward_input: (dy, w) -> x of `shape`; backward_weight: (x, dy) -> w of `shape` */
  bool bin = n->op == EVTC_OP_CONV2D_BACKWARD_INPUT;
  const int64_t *x = bin ? sh->v.ints : a->shape, *w = bin ? b->shape : sh->v.ints;
  const evtc_type *dy = bin ? a : b;
  if (!conv_shapes(g, n, x, w, y)) return false;
  for (int i = 0; i < 4; i++)
    if (y[i] != dy->shape[i]) {
      char buf[96];
      return FAIL("gradient %s does not match the convolution's output dim %d (%lld)", tstr(dy, buf), i,
                  (long long)y[i]);
    }
  set_type(n, a->dtype, 4, sh->v.ints);
  return true;
}

/* Pool output shape for x[N,C,H,W]. */
static bool pool_shape(evtc_graph *g, evtc_node *n, const int64_t *x, int64_t *y) {
  const evtc_attr *k = evtc_node_attr(n, "kernel");
  if (k->n != 2) return FAIL("kernel needs 2 values, has %d", k->n);
  if (k->v.ints[0] < 1 || k->v.ints[1] < 1) return FAIL("kernel sizes must be >= 1");
  int64_t stride[2], pad[4];
  if (!geometry(g, n, k->v.ints, stride, pad, NULL)) return false;
  if (pad[0] >= k->v.ints[0] || pad[2] >= k->v.ints[0] || pad[1] >= k->v.ints[1] || pad[3] >= k->v.ints[1])
    return FAIL("padding must be smaller than the kernel");
  y[0] = x[0];
  y[1] = x[1];
  return window_out(g, n, x[2], k->v.ints[0], stride[0], pad[0], pad[2], 1, &y[2]) &&
         window_out(g, n, x[3], k->v.ints[1], stride[1], pad[1], pad[3], 1, &y[3]);
}

static bool infer_pool(evtc_graph *g, evtc_node *n) {
  if (!need_float(g, n, 0) || !need_rank(g, n, 0, 4)) return false;
  const evtc_type *a = in_type(n, 0);
  int64_t y[4];
  switch (n->op) {
    case EVTC_OP_MAXPOOL2D:
    case EVTC_OP_AVGPOOL2D:
      if (!pool_shape(g, n, a->shape, y)) return false;
      set_type(n, a->dtype, 4, y);
      return true;
    case EVTC_OP_MAXPOOL2D_BACKWARD: {     /* (dy, x) -> dx like x */
      if (!same_dtype(g, n, 0, 1) || !need_rank(g, n, 1, 4)) return false;
      const evtc_type *x = in_type(n, 1);
      if (!pool_shape(g, n, x->shape, y)) return false;
      for (int i = 0; i < 4; i++)
        if (y[i] != a->shape[i]) return FAIL("gradient does not match the pooling output dim %d (%lld)", i,
                                             (long long)y[i]);
      set_type(n, a->dtype, 4, x->shape);
      return true;
    }
    default: {                             /* AVGPOOL2D_BACKWARD: (dy) -> dx of `shape` */
      const evtc_attr *sh = evtc_node_attr(n, "shape");
      if (sh->n != 4) return FAIL("attribute 'shape' needs 4 values, has %d", sh->n);
      if (!pool_shape(g, n, sh->v.ints, y)) return false;
      for (int i = 0; i < 4; i++)
        if (y[i] != a->shape[i]) return FAIL("gradient does not match the pooling output dim %d (%lld)", i,
                                             (long long)y[i]);
      set_type(n, a->dtype, 4, sh->v.ints);
      return true;
    }
  }
}

/* Checks that input i has exactly the given shape. */
static bool need_shape(evtc_graph *g, evtc_node *n, int i, int rank, const int64_t *shape, const char *what) {
  const evtc_type *t = in_type(n, i);
  bool ok = t->rank == rank;
  for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == shape[d];
  if (ok) return true;
  char buf[96];
  evtc_type want = evtc_type_make(t->dtype, rank, shape);
  return FAIL("input %d (%%%s) has type %s but %s needs %s", i, n->inputs[i]->name, tstr(t, buf), what,
              evtc_type_str(&want, (char[96]){0}, 96));
}

static bool infer_composite(evtc_graph *g, evtc_node *n) {
  const evtc_type *x = in_type(n, 0);
  switch (n->op) {
    case EVTC_OP_SOFTMAX:
    case EVTC_OP_LOG_SOFTMAX:
      if (!need_float(g, n, 0)) return false;
      if (evtc_axis_norm(evtc_node_int(n, "axis"), x->rank) < 0) return FAIL("axis is out of range");
      n->type = evtc_type_make(x->dtype, x->rank, x->shape);
      return true;
    case EVTC_OP_LAYERNORM: {
      int ax = evtc_axis_norm(evtc_node_int(n, "axis"), x->rank);
      if (!need_float(g, n, 0) || !same_dtype(g, n, 0, 1) || !same_dtype(g, n, 0, 2)) return false;
      if (ax < 0) return FAIL("axis is out of range");
      if (!need_shape(g, n, 1, x->rank - ax, x->shape + ax, "the normalised dims") ||
          !need_shape(g, n, 2, x->rank - ax, x->shape + ax, "the normalised dims"))
        return false;
      n->type = evtc_type_make(x->dtype, x->rank, x->shape);
      return true;
    }
    case EVTC_OP_BATCHNORM:
    case EVTC_OP_BATCHNORM_RUNNING_MEAN:
    case EVTC_OP_BATCHNORM_RUNNING_VAR:
      if (!need_float(g, n, 0)) return false;
      if (x->rank < 2) return FAIL("input must have rank >= 2 (N, C, ...), not %d", x->rank);
      for (int i = 1; i < n->n_inputs; i++)
        if (!same_dtype(g, n, 0, i) || !need_shape(g, n, i, 1, &x->shape[1], "one value per channel"))
          return false;
      if (n->op == EVTC_OP_BATCHNORM) n->type = evtc_type_make(x->dtype, x->rank, x->shape);
      else n->type = evtc_type_make(x->dtype, 1, &x->shape[1]);
      return true;
    case EVTC_OP_DROPOUT: {
      double p = evtc_node_float(n, "p");
      if (!need_float(g, n, 0)) return false;
      if (!(p >= 0 && p < 1)) return FAIL("p = %g must be in [0, 1)", p);
      n->type = evtc_type_make(x->dtype, x->rank, x->shape);
      return true;
    }
    case EVTC_OP_CROSS_ENTROPY:
      if (!need_float(g, n, 0) || !need_rank(g, n, 0, 2) || !need_int(g, n, 1) ||
          !need_shape(g, n, 1, 1, x->shape, "one label per row"))
        return false;
      n->type = evtc_type_make(x->dtype, 0, NULL);
      return true;
    case EVTC_OP_MSE:
      if (!need_float(g, n, 0) || !same_dtype(g, n, 0, 1) || !need_shape(g, n, 1, x->rank, x->shape, "mse"))
        return false;
      n->type = evtc_type_make(x->dtype, 0, NULL);
      return true;
    case EVTC_OP_EMBEDDING: {
      const evtc_type *ids = in_type(n, 1);
      if (!need_float(g, n, 0) || !need_rank(g, n, 0, 2) || !need_int(g, n, 1)) return false;
      if (ids->rank + 1 > EVTC_MAX_RANK) return FAIL("result rank exceeds %d", EVTC_MAX_RANK);
      int64_t shape[EVTC_MAX_RANK];
      memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->rank);
      shape[ids->rank] = x->shape[1];
      n->type = evtc_type_make(x->dtype, ids->rank + 1, shape);
      return true;
    }
    default: EVTC_ASSERT(!"not a composite op"); return false;
  }
}

/* attention family: q[B,H,S,D], k[B,H,T,D] (and v[B,H,T,Dv]) of one float
 * dtype; *lse_dt is the dtype of the per-row log-sum-exp (f32 for 2-byte
 * floats, so it keeps its precision). */
static bool attention_operands(evtc_graph *g, evtc_node *n, bool with_v, evtc_dtype *lse_dt) {
  int nv = with_v ? 3 : 2;
  for (int i = 0; i < nv; i++)
    if (!need_float(g, n, i) || !same_dtype(g, n, 0, i) || !need_rank(g, n, i, 4)) return false;
  const evtc_type *q = in_type(n, 0), *k = in_type(n, 1), *v = with_v ? in_type(n, 2) : k;
  char b0[96], b1[96];
  for (int d = 0; d < 2; d++)
    if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
      return FAIL("batch and head dims of q %s, k %s and v differ", tstr(q, b0), tstr(k, b1));
  if (k->shape[3] != q->shape[3])
    return FAIL("q %s and k %s have different head dims", tstr(q, b0), tstr(k, b1));
  if (v->shape[2] != k->shape[2])
    return FAIL("k %s and v %s have different key counts", tstr(k, b0), tstr(v, b1));
  int64_t causal = evtc_node_int(n, "causal");
  double scale = evtc_node_float(n, "scale");
  if (causal != 0 && causal != 1) return FAIL("causal = %lld must be 0 or 1", (long long)causal);
  if (!(scale == scale) || scale - scale != 0) return FAIL("scale %g is not finite", scale);
  if (causal && q->shape[2] > k->shape[2])
    return FAIL("causal with more queries (%lld) than keys (%lld) leaves rows with no key", (long long)q->shape[2],
                (long long)k->shape[2]);
  *lse_dt = q->dtype == EVTC_F64 ? EVTC_F64 : EVTC_F32;
  return true;
}

static bool infer_attention(evtc_graph *g, evtc_node *n) {
  evtc_dtype lse_dt;
  if (!attention_operands(g, n, n->op != EVTC_OP_ATTENTION_LSE, &lse_dt)) return false;
  const evtc_type *q = in_type(n, 0);
  int64_t o[4] = {q->shape[0], q->shape[1], q->shape[2], n->op == EVTC_OP_ATTENTION_LSE ? 0 : in_type(n, 2)->shape[3]};
  switch (n->op) {
    case EVTC_OP_ATTENTION: set_type(n, q->dtype, 4, o); return true;
    case EVTC_OP_ATTENTION_LSE: set_type(n, lse_dt, 3, o); return true;
    default: break;
  }
  /* backward: (q, k, v, out, dout, lse) -> dq, or [dk, dv] side by side along the last axis */
  for (int i = 3; i < 5; i++)
    if (!same_dtype(g, n, 0, i) || !need_shape(g, n, i, 4, o, i == 3 ? "the attention output" : "its gradient"))
      return false;
  if (in_type(n, 5)->dtype != lse_dt)
    return FAIL("input 5 (%%%s) must be the %s log-sum-exp, not %s", n->inputs[5]->name, evtc_dtype_name(lse_dt),
                evtc_dtype_name(in_type(n, 5)->dtype));
  if (!need_shape(g, n, 5, 3, o, "one log-sum-exp per query row")) return false;
  if (n->op == EVTC_OP_ATTENTION_BACKWARD_Q) {
    set_type(n, q->dtype, 4, q->shape);
    return true;
  }
  const evtc_type *k = in_type(n, 1);
  int64_t kv[4] = {k->shape[0], k->shape[1], k->shape[2], k->shape[3] + o[3]};
  set_type(n, q->dtype, 4, kv);
  return true;
}

static bool infer_elementwise(evtc_graph *g, evtc_node *n) {
  int64_t shape[EVTC_MAX_RANK];
  int rank = 0;
  const evtc_type *t = in_type(n, 0);
  evtc_op op = n->op;
  if (op == EVTC_OP_CAST) {
    n->type = evtc_type_make((evtc_dtype)evtc_node_int(n, "dtype"), t->rank, t->shape);
    return true;
  }
  if (n->n_inputs == 1) {             /* unary math: float only */
    if (!need_float(g, n, 0)) return false;
    n->type = evtc_type_make(t->dtype, t->rank, t->shape);
    return true;
  }
  if (op == EVTC_OP_WHERE) {
    if (in_type(n, 0)->dtype != EVTC_BOOL)
      return FAIL("condition (%%%s) must be bool, not %s", n->inputs[0]->name, evtc_dtype_name(t->dtype));
    if (!same_dtype(g, n, 1, 2) || !broadcast(g, n, 3, shape, &rank)) return false;
    set_type(n, in_type(n, 1)->dtype, rank, shape);
    return true;
  }
  if (!same_dtype(g, n, 0, 1) || !broadcast(g, n, 2, shape, &rank)) return false;
  bool compare = op >= EVTC_OP_EQ && op <= EVTC_OP_GE;
  if (!compare && t->dtype == EVTC_BOOL) return FAIL("arithmetic on bool tensors; cast them first");
  if (op == EVTC_OP_POW && !need_float(g, n, 0)) return false;
  set_type(n, compare ? EVTC_BOOL : t->dtype, rank, shape);
  return true;
}

/* Rejects results with more than NUMEL_LIMIT elements (sizes stay in int64). */
static bool numel_ok(evtc_graph *g, evtc_node *n) {
  int64_t numel = 1;
  for (int d = 0; d < n->type.rank; d++)
    if (!size_mul(numel, n->type.shape[d], &numel) || numel > NUMEL_LIMIT)
      return FAIL("result has more than %lld elements", (long long)NUMEL_LIMIT);
  return true;
}

static bool infer(evtc_graph *g, evtc_node *n);

bool evtc_infer_type(evtc_graph *g, evtc_node *n) {
  EVTC_ASSERT(!evtc_op_is_leaf(n->op));
  return infer(g, n) && numel_ok(g, n);
}

/* Dispatch by op family; evtc_type_make's stride products are checked after. */
static bool infer(evtc_graph *g, evtc_node *n) {
  switch (n->op) {
    case EVTC_OP_REDUCE_SUM: case EVTC_OP_REDUCE_MEAN: case EVTC_OP_REDUCE_MAX: case EVTC_OP_REDUCE_MIN:
      return infer_reduce(g, n);
    case EVTC_OP_RESHAPE: return infer_reshape(g, n);
    case EVTC_OP_PERMUTE: return infer_permute(g, n);
    case EVTC_OP_EXPAND: return infer_expand(g, n);
    case EVTC_OP_SLICE: return infer_slice(g, n);
    case EVTC_OP_CONCAT: return infer_concat(g, n);
    case EVTC_OP_PAD: return infer_pad(g, n);
    case EVTC_OP_GATHER: return infer_gather(g, n);
    case EVTC_OP_ONE_HOT: return infer_one_hot(g, n);
    case EVTC_OP_SCATTER_ADD: return infer_scatter_add(g, n);
    case EVTC_OP_MATMUL: case EVTC_OP_BATCH_MATMUL: return infer_matmul(g, n);
    case EVTC_OP_CONV2D: case EVTC_OP_CONV2D_BACKWARD_INPUT: case EVTC_OP_CONV2D_BACKWARD_WEIGHT:
      return infer_conv(g, n);
    case EVTC_OP_MAXPOOL2D: case EVTC_OP_MAXPOOL2D_BACKWARD: case EVTC_OP_AVGPOOL2D:
    case EVTC_OP_AVGPOOL2D_BACKWARD:
      return infer_pool(g, n);
    case EVTC_OP_GLOBAL_AVGPOOL: {
      const evtc_type *x = in_type(n, 0);
      if (!need_float(g, n, 0) || !need_rank(g, n, 0, 4)) return false;
      int64_t y[4] = {x->shape[0], x->shape[1], 1, 1};
      set_type(n, x->dtype, 4, y);
      return true;
    }
    case EVTC_OP_SOFTMAX: case EVTC_OP_LOG_SOFTMAX: case EVTC_OP_LAYERNORM: case EVTC_OP_BATCHNORM:
    case EVTC_OP_BATCHNORM_RUNNING_MEAN: case EVTC_OP_BATCHNORM_RUNNING_VAR: case EVTC_OP_DROPOUT:
    case EVTC_OP_CROSS_ENTROPY: case EVTC_OP_MSE: case EVTC_OP_EMBEDDING:
      return infer_composite(g, n);
    case EVTC_OP_ATTENTION: case EVTC_OP_ATTENTION_LSE: case EVTC_OP_ATTENTION_BACKWARD_Q:
    case EVTC_OP_ATTENTION_BACKWARD_KV:
      return infer_attention(g, n);
    default:
      EVTC_ASSERT(evtc_op_get(n->op)->fusion == EVTC_FUSE_ELEMENTWISE);
      return infer_elementwise(g, n);
  }
}
