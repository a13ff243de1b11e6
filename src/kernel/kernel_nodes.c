/* kernel_nodes.c -- one graph op -> visitor nodes or a main-loop descriptor.
 *
 * Elementwise ops become COMPUTE nodes over broadcast operands; dropout an
 * RNG keep mask and a COMPUTE; reductions REDUCE nodes whose class says the
 * axis; layout ops over outside values become views (no node: the load
 * at their use reads through them).  Composites expand here, exactly as
 * the interpreter defines them (interp_composite.c): softmax subtracts the
 * row maximum, layernorm divides by sqrt(var + eps), cross_entropy takes
 * the mean over rows of logsumexp - the picked logit, with the label read
 * through a one-hot node that checks its range.
 */
#include <string.h>

#include "kernel/kernel_internal.h"

static int compute(evtc_kb *b, const evtc_node *n, evtc_op op, evtc_dtype dt, int x, int y, int z) {
  /* x / y with y broadcast over x (a row sum, a scalar): one reciprocal per y and a multiply per element,
   * within an ulp of the division (not for f64, which stays exact) */
  if (op == EVTC_OP_DIV && evtc_dtype_is_float(dt) && dt != EVTC_F64 &&
      evtc_kb_join(b->k->v[x].cls, b->k->v[y].cls) != b->k->v[y].cls)
    return compute(b, n, EVTC_OP_MUL, dt, x, compute(b, n, EVTC_OP_RECIPROCAL, dt, y, -1, -1), -1);
  evtc_vnode v = {.kind = EVTC_V_COMPUTE, .op = op, .dtype = dt, .node = n, .cls = EVTC_VC_SCALAR};
  int args[3] = {x, y, z};
  for (int i = 0; i < 3 && args[i] >= 0; i++) {
    v.args[v.n_args++] = args[i];
    v.cls = evtc_kb_join(v.cls, b->k->v[args[i]].cls);
  }
  return evtc_kb_add(b, v);
}

static int imm(evtc_kb *b, evtc_dtype dt, double value) {
  return evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_IMM, .cls = EVTC_VC_SCALAR, .dtype = dt, .value = value});
}

/* Covered-dims bitmask of an embedding. */
static unsigned covered(const int *emb, int rank) {
  unsigned c = 0;
  for (int i = 0; i < rank; i++)
    if (emb[i] >= 0) c |= 1u << emb[i];
  return c;
}

/* A REDUCE of vnode x (covering domain dims `in_cov`) down to `keep`;
 * -1 (d set) unless it is a column, row or scalar reduction of dims x varies along. */
static int reduce(evtc_kb *b, const evtc_node *n, evtc_op op, int x, unsigned in_cov, unsigned keep, double count) {
  evtc_kernel *k = b->k;
  unsigned rd = 0, cd = 0;                      /* nontrivial row dims (index r), column dims (index c) */
  for (int d = 0; d < k->rank; d++)
    if (k->dom[d] > 1) {
      if (d < k->split) rd |= 1u << d;
      else cd |= 1u << d;
    }
  in_cov &= rd | cd;
  keep &= in_cov;
  evtc_vclass rc = evtc_kb_class(b, keep);
  if (rc == EVTC_VC_SCALAR && !rd && cd && in_cov == cd) rc = EVTC_VC_COL;   /* the one row's reduction */
  bool ok = false;
  if (rc == EVTC_VC_COL) ok = keep == (in_cov & rd) && cd && (in_cov & cd) == cd;
  else if (rc == EVTC_VC_ROW) ok = keep == (in_cov & cd) && rd && (in_cov & rd) == rd;
  else if (rc == EVTC_VC_SCALAR) ok = in_cov == (rd | cd) || (k->v[x].cls == EVTC_VC_COL && in_cov == rd);
  if (!ok) {
    evtc_kb_fail(b, n, "reduces axes that are not the kernel's rows, columns or all of a varying value");
    return -1;
  }
  return evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_REDUCE, .op = op, .dtype = k->v[x].dtype, .cls = rc, .n_args = 1,
                                     .args = {x}, .value = count, .node = n});
}

/* The strides of a reshape of a view of type u and strides us into type t (the same elements in the same
 * row-major order), into ts: each run of u's dims that lies in memory as one block (stride[i] =
 * stride[i+1] * shape[i+1], unit dims aside) must be a whole run of t's dims, which then step through it
 * row-major.  False when a dim of t would straddle a gap -- a permuted or sliced layout the reshape reorders. */
static bool reshape_strides(const evtc_type *u, const int64_t *us, const evtc_type *t, int64_t *ts) {
  int vd = t->rank - 1;
  int64_t base = u->rank ? us[u->rank - 1] : 1, u_numel = 1, t_numel = 1;
  for (int d = u->rank - 1; d >= 0; d--) {
    u_numel *= u->shape[d];
    if (d > 0 && (u->shape[d - 1] == 1 || us[d - 1] == u_numel * base)) continue;   /* the block goes on */
    while (vd >= 0 && (t_numel < u_numel || t->shape[vd] == 1)) {
      ts[vd] = t_numel * base;
      t_numel *= t->shape[vd--];
    }
    if (t_numel != u_numel) return false;
    if (d > 0) base = us[d - 1], u_numel = 1, t_numel = 1;
  }
  for (; vd >= 0; vd--) ts[vd] = 0;   /* leading unit dims of t (all of t when u is a scalar) */
  return true;
}

bool evtc_layout_view(const evtc_node *n, const int64_t *us, int64_t *offset, int64_t *ns) {
  const evtc_node *u = n->inputs[0];
  const evtc_type *t = &n->type;
  int64_t off = *offset;
  switch (n->op) {
    case EVTC_OP_RESHAPE:
      if (!reshape_strides(&u->type, us, t, ns)) return false;
      break;
    case EVTC_OP_PERMUTE: {
      const evtc_attr *p = evtc_node_attr(n, "perm");
      for (int i = 0; i < t->rank; i++) ns[i] = us[p->v.ints[i]];
      break;
    }
    case EVTC_OP_EXPAND: {
      int shift = t->rank - u->type.rank;
      for (int i = 0; i < shift; i++) ns[i] = 0;
      for (int i = 0; i < u->type.rank; i++) ns[i + shift] = u->type.shape[i] == 1 ? 0 : us[i];
      break;
    }
    case EVTC_OP_SLICE: {
      const evtc_attr *ax = evtc_node_attr(n, "axes"), *st = evtc_node_attr(n, "starts"),
                      *sp = evtc_node_attr(n, "steps");
      memcpy(ns, us, sizeof(int64_t) * (size_t)t->rank);
      for (int j = 0; j < st->n; j++) {
        int a = ax->n ? evtc_axis_norm(ax->v.ints[j], t->rank) : j;
        int64_t dim = u->type.shape[a], start = st->v.ints[j], step = sp->n ? sp->v.ints[j] : 1;
        if (start < 0) start += dim;
        if (start < 0) start = 0;
        if (start > dim) start = dim;
        off += start * us[a];
        ns[a] = us[a] * step;
      }
      break;
    }
    default: return false;
  }
  *offset = off;
  return true;
}

bool evtc_layout_view_back(const evtc_node *n, const int64_t *ns, int64_t *us) {
  const evtc_node *u = n->inputs[0];
  if (n->op == EVTC_OP_RESHAPE) return reshape_strides(&n->type, ns, &u->type, us);
  if (n->op != EVTC_OP_PERMUTE) return false;
  const evtc_attr *p = evtc_node_attr(n, "perm");
  for (int i = 0; i < n->type.rank; i++) us[p->v.ints[i]] = ns[i];
  return true;
}

/* The view of layout node n over an outside value (or another view). */
static evtc_status layout_view(evtc_kb *b, const evtc_node *n) {
  const evtc_node *u = n->inputs[0];
  evtc_kbval *uv = &b->val[u->id], *nv = &b->val[n->id];
  int64_t us[EVTC_MAX_RANK], off = 0;
  if (uv->is_view) {
    memcpy(us, uv->view_strides, sizeof us);
    off = uv->view_off;
    nv->view_arg = uv->view_arg;
  } else {
    int64_t s = 1;
    for (int i = u->type.rank - 1; i >= 0; i--) {
      us[i] = s;
      s *= u->type.shape[i];
    }
    nv->view_arg = evtc_kb_arg(b, u, false);
  }
  memset(nv->view_strides, 0, sizeof nv->view_strides);
  if (!evtc_layout_view(n, us, &off, nv->view_strides))
    return evtc_kb_fail(b, n, "reshapes a permuted or sliced view across its gaps");
  nv->view_off = off;
  nv->is_view = true;
  return EVTC_OK;
}

/* Output embedding of elementwise n: that of a same-shaped in-kernel input, else by shape. */
static bool elementwise_emb(evtc_kb *b, const evtc_node *n, int *emb) {
  for (int j = 0; j < n->n_inputs; j++) {
    const evtc_node *u = n->inputs[j];
    const evtc_kbval *uv = &b->val[u->id];
    if (uv->in_kernel && !uv->is_view && u->type.rank == n->type.rank &&
        memcmp(u->type.shape, n->type.shape, sizeof(int64_t) * (size_t)n->type.rank) == 0) {
      memcpy(emb, uv->emb, sizeof uv->emb);
      return true;
    }
  }
  return evtc_kb_emb_of_shape(b, &n->type, emb);
}

static evtc_status gemm_desc(evtc_kb *b, const evtc_node *n) {
  evtc_kernel *k = b->k;
  evtc_gemm_desc *gd = &k->gemm;
  const evtc_type *a = &n->inputs[0]->type, *bt = &n->inputs[1]->type, *y = &n->type;
  bool ta = evtc_node_int(n, "trans_a") != 0, tb = evtc_node_int(n, "trans_b") != 0;
  for (int j = 0; j < 2; j++)
    if (b->val[n->inputs[j]->id].in_kernel) return evtc_kb_fail(b, n, "a main loop reads its operands from memory");
  gd->M = y->shape[y->rank - 2];
  gd->N = y->shape[y->rank - 1];
  gd->K = a->shape[a->rank - (ta ? 2 : 1)];
  gd->a_arg = evtc_kb_arg(b, n->inputs[0], false);
  gd->b_arg = evtc_kb_arg(b, n->inputs[1], false);
  gd->dtype = y->dtype;
  gd->a_rs = ta ? 1 : gd->K;
  gd->a_cs = ta ? gd->M : 1;
  gd->b_rs = tb ? 1 : gd->N;
  gd->b_cs = tb ? gd->K : 1;
  gd->batch_rank = y->rank - 2;
  gd->batch = 1;
  int64_t sa = gd->M * gd->K, sb = gd->K * gd->N;
  for (int d = y->rank - 3; d >= 0; d--) {
    int da = d - (y->rank - a->rank), db = d - (y->rank - bt->rank);
    gd->batch_shape[d] = y->shape[d];
    gd->batch *= y->shape[d];
    gd->a_bstride[d] = da >= 0 && a->shape[da] > 1 ? sa : 0;
    gd->b_bstride[d] = db >= 0 && bt->shape[db] > 1 ? sb : 0;
    if (da >= 0) sa *= a->shape[da];
    if (db >= 0) sb *= bt->shape[db];
  }
  k->kind = EVTC_ML_GEMM;
  return EVTC_OK;
}

static evtc_status conv_desc(evtc_kb *b, const evtc_node *n) {
  evtc_kernel *k = b->k;
  evtc_conv_desc *c = &k->conv;
  for (int j = 0; j < 2; j++)
    if (b->val[n->inputs[j]->id].in_kernel) return evtc_kb_fail(b, n, "a main loop reads its operands from memory");
  const int64_t *x = n->inputs[0]->type.shape, *w = n->inputs[1]->type.shape, *y = n->type.shape;
  const evtc_attr *st = evtc_node_attr(n, "stride"), *pd = evtc_node_attr(n, "padding"),
                  *dl = evtc_node_attr(n, "dilation");
  *c = (evtc_conv_desc){.n = x[0], .c = x[1], .h = x[2], .w = x[3], .o = w[0], .kh = w[2], .kw = w[3], .oh = y[2],
                        .ow = y[3], .groups = evtc_node_int(n, "groups")};
  for (int i = 0; i < 2; i++) {
    c->stride[i] = st->n ? st->v.ints[i] : 1;
    c->pad[i] = pd->n ? pd->v.ints[i] : 0;
    c->dil[i] = dl->n ? dl->v.ints[i] : 1;
  }
  c->x_arg = evtc_kb_arg(b, n->inputs[0], false);
  c->w_arg = evtc_kb_arg(b, n->inputs[1], false);
  k->gemm = (evtc_gemm_desc){.batch = c->n * c->groups, .M = c->o / c->groups, .N = c->oh * c->ow,
                             .K = c->c / c->groups * c->kh * c->kw, .dtype = n->type.dtype, .a_arg = c->w_arg,
                             .b_arg = c->x_arg};
  k->kind = EVTC_ML_CONV;
  return EVTC_OK;
}

/* Softmax, log_softmax, layernorm, cross_entropy, mse, global_avgpool. */
static evtc_status composite(evtc_kb *b, const evtc_node *n, int *emb) {
  evtc_kernel *k = b->k;
  const evtc_node *u = n->inputs[0];
  evtc_dtype dt = u->type.dtype;
  int xe[EVTC_MAX_RANK];
  if (!evtc_kb_input_emb(b, n, u, xe)) return b->d->status;
  int x = evtc_kb_operand(b, n, u, xe);
  if (x < 0) return b->d->status;
  unsigned cov = covered(xe, u->type.rank), coldims = 0;
  for (int d = 0; d < k->split; d++) coldims |= 1u << d;
  unsigned keep = cov & coldims;
  if (n->op != EVTC_OP_MSE) {              /* the normalised axes must be the kernel's columns */
    int first = n->op == EVTC_OP_CROSS_ENTROPY ? 1 : n->op == EVTC_OP_GLOBAL_AVGPOOL ? 2
              : evtc_axis_norm(evtc_node_int(n, "axis"), u->type.rank);
    int last = n->op == EVTC_OP_SOFTMAX || n->op == EVTC_OP_LOG_SOFTMAX ? first : u->type.rank - 1;
    for (int i = 0; i < u->type.rank; i++) {
      bool reduced = i >= first && i <= last;
      if (xe[i] >= 0 && reduced != (xe[i] >= k->split))
        return evtc_kb_fail(b, n, "normalises over axes that are not the kernel's trailing ones");
    }
  }
  int vn = -1;
  switch (n->op) {
    case EVTC_OP_SOFTMAX: case EVTC_OP_LOG_SOFTMAX: case EVTC_OP_LAYERNORM: {
      memcpy(emb, xe, sizeof xe);
      if (n->op == EVTC_OP_LAYERNORM) {
        double cnt = (double)k->cols;
        int mean = reduce(b, n, EVTC_OP_REDUCE_MEAN, x, cov, keep, cnt);
        if (mean < 0) return b->d->status;
        int dv = compute(b, n, EVTC_OP_SUB, dt, x, mean, -1);
        int var = reduce(b, n, EVTC_OP_REDUCE_MEAN, compute(b, n, EVTC_OP_MUL, dt, dv, dv, -1), cov, keep, cnt);
        int inv = compute(b, n, EVTC_OP_RSQRT, dt, compute(b, n, EVTC_OP_ADD, dt, var,
                                                           imm(b, dt, evtc_node_float(n, "eps")), -1), -1, -1);
        int gm = evtc_kb_bcast_operand(b, n, 1), bt = gm < 0 ? -1 : evtc_kb_bcast_operand(b, n, 2);
        if (bt < 0) return b->d->status;
        vn = compute(b, n, EVTC_OP_ADD, dt, compute(b, n, EVTC_OP_MUL, dt, compute(b, n, EVTC_OP_MUL, dt, dv, inv, -1),
                                                   gm, -1), bt, -1);
        break;
      }
      int mx = reduce(b, n, EVTC_OP_REDUCE_MAX, x, cov, keep, (double)k->cols);
      if (mx < 0) return b->d->status;
      int sh = compute(b, n, EVTC_OP_SUB, dt, x, mx, -1), e = compute(b, n, EVTC_OP_EXP, dt, sh, -1, -1);
      int s = reduce(b, n, EVTC_OP_REDUCE_SUM, e, cov, keep, (double)k->cols);
      vn = n->op == EVTC_OP_SOFTMAX ? compute(b, n, EVTC_OP_DIV, dt, e, s, -1)
                                    : compute(b, n, EVTC_OP_SUB, dt, sh, compute(b, n, EVTC_OP_LOG, dt, s, -1, -1), -1);
      break;
    }
    case EVTC_OP_CROSS_ENTROPY: {
      if (xe[1] < 0 && u->type.shape[1] > 1) return evtc_kb_fail(b, n, "logits do not fit the kernel's domain");
      int mx = reduce(b, n, EVTC_OP_REDUCE_MAX, x, cov, keep, (double)k->cols);
      if (mx < 0) return b->d->status;
      int s = reduce(b, n, EVTC_OP_REDUCE_SUM, compute(b, n, EVTC_OP_EXP, dt, compute(b, n, EVTC_OP_SUB, dt, x, mx, -1),
                                                       -1, -1), cov, keep, (double)k->cols);
      int lse = compute(b, n, EVTC_OP_ADD, dt, mx, compute(b, n, EVTC_OP_LOG, dt, s, -1, -1), -1);
      int want[1] = {xe[0]};
      int lab = evtc_kb_operand(b, n, n->inputs[1], want);
      if (lab < 0) return b->d->status;
      int oh = evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_ONE_HOT, .dtype = dt, .n_args = 1, .args = {lab},
                                           .cls = evtc_kb_join(k->v[lab].cls, evtc_kb_class(b, 1u << xe[1])),
                                           .dim = xe[1], .depth = u->type.shape[1], .check = true, .node = n});
      int picked = reduce(b, n, EVTC_OP_REDUCE_SUM, compute(b, n, EVTC_OP_MUL, dt, oh, x, -1), cov, keep,
                          (double)k->cols);
      int per_row = compute(b, n, EVTC_OP_SUB, dt, lse, picked, -1);
      vn = reduce(b, n, EVTC_OP_REDUCE_MEAN, per_row, keep, 0, (double)u->type.shape[0]);
      break;
    }
    case EVTC_OP_MSE: {
      int y = evtc_kb_operand(b, n, n->inputs[1], xe);
      if (y < 0) return b->d->status;
      int dv = compute(b, n, EVTC_OP_SUB, dt, x, y, -1);
      vn = reduce(b, n, EVTC_OP_REDUCE_MEAN, compute(b, n, EVTC_OP_MUL, dt, dv, dv, -1), cov, 0,
                  (double)evtc_type_numel(&u->type));
      break;
    }
    case EVTC_OP_GLOBAL_AVGPOOL:
      emb[0] = xe[0];
      emb[1] = xe[1];
      emb[2] = emb[3] = -1;
      vn = reduce(b, n, EVTC_OP_REDUCE_MEAN, x, cov, keep, (double)(u->type.shape[2] * u->type.shape[3]));
      break;
    default: EVTC_ASSERT(!"not a composite");
  }
  if (vn < 0) return b->d->status;
  return b->val[n->id].vn = vn, EVTC_OK;
}

static evtc_status reduction(evtc_kb *b, const evtc_node *n, int *emb) {
  const evtc_node *u = n->inputs[0];
  int xe[EVTC_MAX_RANK];
  if (!evtc_kb_input_emb(b, n, u, xe)) return b->d->status;
  int x = evtc_kb_operand(b, n, u, xe);
  if (x < 0) return b->d->status;
  const evtc_attr *ax = evtc_node_attr(n, "axes");
  bool keepdims = evtc_node_int(n, "keepdims") != 0, red[EVTC_MAX_RANK] = {0};
  for (int i = 0; i < ax->n; i++) red[evtc_axis_norm(ax->v.ints[i], u->type.rank)] = true;
  unsigned keep = 0;
  double count = 1;
  int o = 0;
  for (int i = 0; i < u->type.rank; i++) {
    bool r = ax->n == 0 || red[i];
    if (r) count *= (double)u->type.shape[i];
    else if (xe[i] >= 0) keep |= 1u << xe[i];
    if (keepdims) emb[o++] = r ? -1 : xe[i];
    else if (!r) emb[o++] = xe[i];
  }
  if (keep == covered(xe, u->type.rank)) {       /* nothing varying is reduced */
    b->val[n->id].vn = n->op == EVTC_OP_REDUCE_SUM && count != 1
                           ? compute(b, n, EVTC_OP_MUL, n->type.dtype, x, imm(b, n->type.dtype, count), -1) : x;
    return EVTC_OK;
  }
  int vn = reduce(b, n, n->op, x, covered(xe, u->type.rank), keep, count);
  if (vn < 0) return b->d->status;
  return b->val[n->id].vn = vn, EVTC_OK;
}

evtc_status evtc_kb_node(evtc_kb *b, const evtc_node *n) {
  evtc_kernel *k = b->k;
  evtc_kbval *nv = &b->val[n->id];
  const evtc_node *u = n->n_inputs ? n->inputs[0] : NULL;
  switch (n->op) {
    case EVTC_OP_MATMUL: case EVTC_OP_BATCH_MATMUL: case EVTC_OP_CONV2D: {
      evtc_status st = n->op == EVTC_OP_CONV2D ? conv_desc(b, n) : gemm_desc(b, n);
      if (st != EVTC_OK) return st;
      k->main = n;
      if (!evtc_kb_emb_of_shape(b, &n->type, nv->emb)) EVTC_ASSERT(!"main loop output is the domain");
      nv->vn = evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_ACC, .cls = evtc_kb_class(b, covered(nv->emb, n->type.rank)),
                                           .dtype = n->type.dtype, .node = n});
      return EVTC_OK;
    }
    case EVTC_OP_RESHAPE: case EVTC_OP_PERMUTE: case EVTC_OP_EXPAND: case EVTC_OP_SLICE: {
      const evtc_kbval *uv = &b->val[u->id];
      if (!uv->in_kernel || uv->is_view) return layout_view(b, n);
      if (n->op == EVTC_OP_PERMUTE || n->op == EVTC_OP_SLICE)
        return evtc_kb_fail(b, n, "permutes or slices a value computed in the same kernel");
      if (!evtc_kb_emb_of_shape(b, &n->type, nv->emb)) return evtc_kb_fail(b, n, "does not fit the kernel's domain");
      int want[EVTC_MAX_RANK], j = 0;
      if (n->op == EVTC_OP_EXPAND) {
        for (int i = 0; i < u->type.rank; i++)
          want[i] = u->type.shape[i] > 1 ? nv->emb[i + n->type.rank - u->type.rank] : -1;
      } else {                                    /* a reshape that only adds or drops size-1 dims */
        for (int i = 0; i < u->type.rank; i++) {
          want[i] = -1;
          if (u->type.shape[i] == 1) continue;
          while (j < n->type.rank && n->type.shape[j] == 1) j++;
          if (j == n->type.rank || n->type.shape[j] != u->type.shape[i])
            return evtc_kb_fail(b, n, "reshapes a value computed in the same kernel");
          want[i] = nv->emb[j++];
        }
      }
      int vn = evtc_kb_operand(b, n, u, want);
      if (vn < 0) return b->d->status;
      nv->vn = vn;
      return EVTC_OK;
    }
    case EVTC_OP_REDUCE_SUM: case EVTC_OP_REDUCE_MEAN: case EVTC_OP_REDUCE_MAX: case EVTC_OP_REDUCE_MIN:
      return reduction(b, n, nv->emb);
    case EVTC_OP_SOFTMAX: case EVTC_OP_LOG_SOFTMAX: case EVTC_OP_LAYERNORM: case EVTC_OP_CROSS_ENTROPY:
    case EVTC_OP_MSE: case EVTC_OP_GLOBAL_AVGPOOL:
      return composite(b, n, nv->emb);
    case EVTC_OP_ONE_HOT: {
      if (!evtc_kb_emb_of_shape(b, &n->type, nv->emb)) return evtc_kb_fail(b, n, "does not fit the kernel's domain");
      int idx = evtc_kb_operand(b, n, u, nv->emb);
      if (idx < 0) return b->d->status;
      int dim = nv->emb[n->type.rank - 1];
      nv->vn = evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_ONE_HOT, .dtype = n->type.dtype, .n_args = 1, .args = {idx},
                                           .cls = evtc_kb_join(k->v[idx].cls, dim >= 0 ? evtc_kb_class(b, 1u << dim)
                                                                                         : EVTC_VC_SCALAR),
                                           .dim = dim, .depth = evtc_node_int(n, "depth"),
                                           .check = evtc_node_int(n, "checked") != 0, .node = n});
      return EVTC_OK;
    }
    default: break;
  }
  /* elementwise: unary, binary, where, cast, dropout */
  if (!elementwise_emb(b, n, nv->emb)) return evtc_kb_fail(b, n, "does not fit the kernel's domain");
  int a[3] = {-1, -1, -1};
  for (int j = 0; j < n->n_inputs; j++)
    if ((a[j] = evtc_kb_bcast_operand(b, n, j)) < 0) return b->d->status;
  if (n->op == EVTC_OP_DROPOUT) {
    evtc_vclass c = evtc_kb_class(b, covered(nv->emb, n->type.rank));
    int64_t want = c == EVTC_VC_FULL ? k->rows * k->cols : c == EVTC_VC_COL ? k->rows : c == EVTC_VC_ROW ? k->cols : 1;
    if (want != evtc_type_numel(&n->type)) return evtc_kb_fail(b, n, "its elements are not the kernel's domain");
    double p = evtc_node_float(n, "p");
    int keep = evtc_kb_add(b, (evtc_vnode){.kind = EVTC_V_RNG, .cls = c, .dtype = EVTC_BOOL, .value = p,
                                           .seed = (uint64_t)evtc_node_int(n, "seed"), .node = n});
    nv->vn = compute(b, n, EVTC_OP_DROPOUT, n->type.dtype, a[0], keep, -1);
    k->v[nv->vn].value = p;
    return EVTC_OK;
  }
  nv->vn = compute(b, n, n->op, n->type.dtype, a[0], a[1], a[2]);
  return EVTC_OK;
}
