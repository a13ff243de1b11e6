/* ilp.c -- the optimal partitioner: set partitioning over candidate
 * kernels, solved with CBC, acyclicity by lazy cycle cuts.
 *
 * Fusible nodes split into connected components (producer-consumer edges
 * between fusible nodes and sibling links, fusion_internal.h; leaves,
 * scalar chains and opaque ops cut the edges).
 * For each component the candidates (candidates.c: every admissible
 * connected node set, priced by the cost model) become binary columns x_c
 * with cost t_c, and every node a row: sum of x_c over the candidates
 * holding it = 1.  Minimising sum t_c x_c gives the fastest plan whose
 * kernels are each feasible.  Acyclicity of the kernel graph is not a
 * property of single kernels, so it is enforced lazily: after solving,
 * the whole plan's kernel graph is searched for a cycle; the fused kernels
 * on a cycle can never all be chosen together, so the cut
 * sum_{c in cycle} x_c <= |cycle| - 1 is added and the component is solved
 * again (components whose kernels meet on one cycle are merged into one
 * model first).  Splitting any kernel into single nodes never creates a
 * cycle, so the cuts cut off no acyclic plan: the final plan is optimal
 * over the candidates.
 *
 * The greedy plan is the MIP start, and its kernels are columns, so the
 * result is never worse than greedy.  When CBC fails or hits the time
 * limit, the best feasible plan found is used and a warning goes to
 * stderr and into the report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "Cbc_C_Interface.h"
#include "fusion/fusion_internal.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CBC 2.10 prints some progress lines ("N slacks added") with printf even
 * at log level 0; they would corrupt `evtc explain`'s stdout, so stdout is
 * pointed at /dev/null while the solver runs.  Returns the saved descriptor
 * for quiet_end (-1: nothing to restore). */
static int quiet_begin(void) {
  fflush(stdout);
  int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
  if (saved < 0 || null < 0 || dup2(null, STDOUT_FILENO) < 0) {
    if (saved >= 0) close(saved);
    saved = -1;
  }
  if (null >= 0) close(null);
  return saved;
}

static void quiet_end(int saved) {
  if (saved < 0) return;
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
}

static int32_t uf_find(int32_t *parent, int32_t x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

/* Unions by smaller index as root, so a group is named by its first component. */
static void uf_union(int32_t *parent, int32_t a, int32_t b) {
  a = uf_find(parent, a);
  b = uf_find(parent, b);
  if (a < b) parent[b] = a;
  else if (b < a) parent[a] = b;
}

typedef struct comp_info {
  int32_t *nodes, m;
  evtc_cand_set cands;
  int32_t offset;         /* global id of candidate 0 */
  int32_t *greedy, n_greedy;
  bool *chosen;           /* per candidate */
} comp_info;

typedef struct cut {
  int32_t nz;
  int32_t *cands;         /* global candidate ids */
} cut;

typedef struct ilp_state {
  evtc_fusion_ctx *c;
  const evtc_fusion_options *opt;
  comp_info *comps;
  int32_t n_comps;
  int32_t *group;         /* union-find over components */
  cut *cuts;
  int32_t n_cuts;
  double *obj, *bound;    /* per group root */
  bool *dirty;
  int32_t *row_of;        /* node -> row while building a model */
  evtc_ilp_report *r;
} ilp_state;

static comp_info *comp_of_cand(ilp_state *s, int32_t gid, int32_t *local) {
  int32_t lo = 0, hi = s->n_comps - 1;
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (s->comps[mid].offset <= gid) lo = mid;
    else hi = mid - 1;
  }
  *local = gid - s->comps[lo].offset;
  return &s->comps[lo];
}

/* Chooses the greedy kernels of component ci. */
static void choose_greedy(comp_info *ci) {
  memset(ci->chosen, 0, sizeof(bool) * (size_t)ci->cands.n);
  for (int32_t i = 0; i < ci->n_greedy; i++) ci->chosen[ci->greedy[i]] = true;
}

static double chosen_cost(const comp_info *ci) {
  double t = 0;
  for (int32_t i = 0; i < ci->cands.n; i++)
    if (ci->chosen[i]) t += ci->cands.cost[i];
  return t;
}

/* Records and prints (loudly) that component group root has no proven optimum. */
static void warn(ilp_state *s, const char *what, int32_t root) {
  s->r->fallback = true;
  char msg[200];
  snprintf(msg, sizeof msg, "%s in the component of %%%s", what, s->c->g->nodes[s->comps[root].nodes[0]]->name);
  if (!s->r->note[0]) snprintf(s->r->note, sizeof s->r->note, "%s", msg);
  fprintf(stderr, "evtc: WARNING: fusion ILP: %s; using the best feasible plan found instead of a proven optimum\n",
          msg);
}

/* Solves the group whose root component is root; sets chosen, obj, bound. */
static void solve_group(ilp_state *s, int32_t root) {
  int32_t ncols = 0, nrows = 0;
  for (int32_t k = root; k < s->n_comps; k++)
    if (uf_find(s->group, k) == root) {
      for (int32_t i = 0; i < s->comps[k].m; i++) s->row_of[s->comps[k].nodes[i]] = nrows++;
      ncols += s->comps[k].cands.n;
    }
  if (ncols == nrows) {                            /* only single nodes: nothing to choose */
    double t = 0;
    for (int32_t k = root; k < s->n_comps; k++)
      if (uf_find(s->group, k) == root) {
        for (int32_t i = 0; i < s->comps[k].cands.n; i++) s->comps[k].chosen[i] = true;
        t += chosen_cost(&s->comps[k]);
      }
    s->obj[root] = s->bound[root] = t;
    return;
  }
  int32_t *col_gid = malloc(sizeof(int32_t) * (size_t)ncols);
  CoinBigIndex *start = malloc(sizeof(CoinBigIndex) * ((size_t)ncols + 1));
  double *lb = calloc((size_t)ncols, sizeof(double)), *ub = malloc(sizeof(double) * (size_t)ncols);
  double *obj = malloc(sizeof(double) * (size_t)ncols), *rhs = malloc(sizeof(double) * (size_t)nrows);
  int64_t nnz = 0;
  for (int32_t k = root; k < s->n_comps; k++)
    if (uf_find(s->group, k) == root) nnz += s->comps[k].cands.start[s->comps[k].cands.n];
  int64_t n_one = nnz > ncols ? nnz : ncols;       /* matrix values, cut and MIP-start coefficients */
  double *one = malloc(sizeof(double) * (size_t)n_one);
  int *index = malloc(sizeof(int) * (size_t)(nnz + 1));
  int *start_idx = malloc(sizeof(int) * ((size_t)ncols + 1));
  EVTC_ASSERT(col_gid && start && lb && ub && obj && one && rhs && index && start_idx);
  int32_t col = 0;
  int64_t at = 0;
  for (int32_t k = root; k < s->n_comps; k++) {
    if (uf_find(s->group, k) != root) continue;
    const evtc_cand_set *cs = &s->comps[k].cands;
    for (int32_t i = 0; i < cs->n; i++, col++) {
      col_gid[col] = s->comps[k].offset + i;
      start[col] = (CoinBigIndex)at;
      ub[col] = 1;
      obj[col] = cs->cost[i];
      for (int32_t j = cs->start[i]; j < cs->start[i + 1]; j++) index[at++] = s->row_of[cs->nodes[j]];
    }
  }
  start[ncols] = (CoinBigIndex)at;
  for (int64_t i = 0; i < n_one; i++) one[i] = 1;
  for (int32_t i = 0; i < nrows; i++) rhs[i] = 1;
  Cbc_Model *m = Cbc_newModel();
  Cbc_loadProblem(m, ncols, nrows, start, index, one, lb, ub, obj, rhs, rhs);
  for (int32_t i = 0; i < ncols; i++) Cbc_setInteger(m, i);
  for (int32_t q = 0; q < s->n_cuts; q++) {
    int32_t local, first = s->cuts[q].cands[0];
    comp_info *ci = comp_of_cand(s, first, &local);
    if (uf_find(s->group, (int32_t)(ci - s->comps)) != root) continue;
    int nz = 0;
    for (int32_t j = 0; j < s->cuts[q].nz; j++)      /* candidate ids -> column indices */
      for (int32_t x = 0; x < ncols; x++)
        if (col_gid[x] == s->cuts[q].cands[j]) start_idx[nz++] = x;
    Cbc_addRow(m, "", nz, start_idx, one, 'L', (double)nz - 1);
  }
  int n_start = 0;
  for (int32_t x = 0; x < ncols; x++) {
    int32_t local;
    comp_info *ci = comp_of_cand(s, col_gid[x], &local);
    for (int32_t i = 0; i < ci->n_greedy; i++)
      if (ci->greedy[i] == local) start_idx[n_start++] = x;
  }
  Cbc_setMIPStartI(m, n_start, start_idx, one);
  Cbc_setLogLevel(m, s->opt->verbose ? 1 : 0);
  /* The set-partitioning LP is tight already: CBC's preprocessing and cut
   * generators cost more than they save here (BERT layer: 0.6 s -> 0.27 s). */
  Cbc_setParameter(m, "preprocess", "off");
  Cbc_setParameter(m, "cuts", "off");
  /* The limit in wall-clock seconds, not CBC's default of CPU seconds: getrusage's user time of a short solve may
   * read 0 until a scheduler tick lands in it, so a loaded machine could run past a small limit unseen (a 1e-9 s
   * limit was missed under ASan with two tests at a time). */
  Cbc_setParameter(m, "timeMode", "elapsed");
  Cbc_setMaximumSeconds(m, s->opt->time_limit_s > 0 ? s->opt->time_limit_s : 10.0);
  Cbc_setAllowableFractionGap(m, 0.0);
  Cbc_setAllowableGap(m, 1e-9);
  double t0 = now_s();
  int saved = s->opt->verbose ? -1 : quiet_begin();
  Cbc_solve(m);
  quiet_end(saved);
  t0 = now_s() - t0;
  if (t0 > s->r->max_solve_seconds) s->r->max_solve_seconds = t0;
  s->r->solved++;
  const double *sol = Cbc_bestSolution(m);
  bool optimal = Cbc_isProvenOptimal(m) != 0;
  /* a usable solution covers every row exactly once */
  bool usable = sol != NULL;
  if (usable) {
    int *cover = calloc((size_t)nrows, sizeof(int));
    for (int32_t x = 0; x < ncols; x++)
      if (sol[x] > 0.5)
        for (CoinBigIndex j = start[x]; j < start[x + 1]; j++) cover[index[j]]++;
    for (int32_t i = 0; i < nrows && usable; i++) usable = cover[i] == 1;
    free(cover);
  }
  for (int32_t k = root; k < s->n_comps; k++)
    if (uf_find(s->group, k) == root) choose_greedy(&s->comps[k]);
  if (usable) {
    for (int32_t k = root; k < s->n_comps; k++)
      if (uf_find(s->group, k) == root) memset(s->comps[k].chosen, 0, sizeof(bool) * (size_t)s->comps[k].cands.n);
    for (int32_t x = 0; x < ncols; x++) {
      int32_t local;
      comp_info *ci = comp_of_cand(s, col_gid[x], &local);
      ci->chosen[local] = sol[x] > 0.5;
    }
  }
  double t = 0;
  for (int32_t k = root; k < s->n_comps; k++)
    if (uf_find(s->group, k) == root) t += chosen_cost(&s->comps[k]);
  s->obj[root] = t;
  double b = Cbc_getBestPossibleObjValue(m);
  s->bound[root] = optimal ? t : (b < t ? b : t);
  if (!optimal)
    warn(s, Cbc_isSecondsLimitReached(m) ? "CBC hit its time limit" : "CBC found no proven optimum", root);
  Cbc_deleteModel(m);
  free(col_gid);
  free(start);
  free(lb);
  free(ub);
  free(obj);
  free(one);
  free(rhs);
  free(index);
  free(start_idx);
}

/* Connected components of fusible nodes (producer-consumer edges and
 * sibling links), numbered by their smallest node. */
static int32_t find_components(const evtc_fusion_ctx *c, comp_info **out) {
  int32_t *parent = malloc(sizeof(int32_t) * (size_t)(c->n + 1)), *id = malloc(sizeof(int32_t) * (size_t)(c->n + 1));
  EVTC_ASSERT(parent && id);
  for (int32_t v = 0; v < c->n; v++) parent[v] = v;
  for (int32_t v = 0; v < c->n; v++) {
    if (c->cls[v] != EVTC_CLASS_FUSIBLE) continue;
    const evtc_node *nd = c->g->nodes[v];
    for (int32_t k = 0; k < nd->n_inputs; k++)
      if (c->cls[nd->inputs[k]->id] == EVTC_CLASS_FUSIBLE) uf_union(parent, v, nd->inputs[k]->id);
    for (int32_t k = c->sib_start[v]; k < c->sib_start[v + 1]; k++) uf_union(parent, v, c->sibs[k]);
  }
  int32_t n = 0;
  for (int32_t v = 0; v < c->n; v++) id[v] = -1;
  comp_info *comps = calloc((size_t)c->n + 1, sizeof *comps);
  EVTC_ASSERT(comps != NULL);
  for (int32_t v = 0; v < c->n; v++) {
    if (c->cls[v] != EVTC_CLASS_FUSIBLE) continue;
    int32_t r = uf_find(parent, v);
    if (id[r] < 0) id[r] = n++;
    comp_info *ci = &comps[id[r]];
    ci->nodes = realloc(ci->nodes, sizeof(int32_t) * (size_t)(ci->m + 1));
    EVTC_ASSERT(ci->nodes != NULL);
    ci->nodes[ci->m++] = v;
  }
  free(parent);
  free(id);
  *out = comps;
  return n;
}

/* Writes the plan of the chosen candidates into kernel_of (fixed kernels
 * already there, ids from k0); cand_of[kernel] = global candidate id of a
 * fused kernel, else -1.  Returns the kernel count. */
static int32_t assemble(ilp_state *s, int32_t *kernel_of, int32_t k0, int32_t *cand_of) {
  int32_t k = k0;
  for (int32_t i = 0; i < k0; i++) cand_of[i] = -1;
  for (int32_t q = 0; q < s->n_comps; q++) {
    comp_info *ci = &s->comps[q];
    for (int32_t i = 0; i < ci->cands.n; i++) {
      if (!ci->chosen[i]) continue;
      int32_t len = ci->cands.start[i + 1] - ci->cands.start[i];
      cand_of[k] = len > 1 ? ci->offset + i : -1;
      for (int32_t j = ci->cands.start[i]; j < ci->cands.start[i + 1]; j++) kernel_of[ci->cands.nodes[j]] = k;
      k++;
    }
  }
  return k;
}

int32_t evtc_fusion_ilp(evtc_fusion_ctx *c, const evtc_fusion_options *opt, int32_t *kernel_of, evtc_ilp_report *r,
                        evtc_diag *d) {
  (void)d;
  double t0 = now_s();
  memset(r, 0, sizeof *r);
  int32_t n = c->n;
  int32_t *greedy_of = malloc(sizeof(int32_t) * (size_t)(n + 1));
  EVTC_ASSERT(greedy_of != NULL);
  int32_t n_greedy = evtc_fusion_greedy(c, greedy_of);
  int32_t k0 = evtc_fusion_assign_fixed(c, kernel_of);
  ilp_state s = {.c = c, .opt = opt, .r = r};
  s.n_comps = find_components(c, &s.comps);
  r->components = s.n_comps;
  long max_cand = opt->max_candidates > 0 ? opt->max_candidates : 200000;
  int32_t total = 0;
  int32_t *members = malloc(sizeof(int32_t) * (size_t)(n + 1));
  EVTC_ASSERT(members != NULL);
  for (int32_t q = 0; q < s.n_comps; q++) {
    comp_info *ci = &s.comps[q];
    evtc_fusion_enumerate(c, ci->nodes, ci->m, max_cand, &ci->cands);
    if (ci->cands.truncated && !r->truncated) {
      r->truncated = true;
      fprintf(stderr, "evtc: note: fusion ILP: the component of %%%s has more than %ld candidate kernels; "
              "the plan is optimal over the first %ld only\n", c->g->nodes[ci->nodes[0]]->name, max_cand, max_cand);
    }
    /* the greedy kernels of this component become columns too (MIP start) */
    ci->greedy = malloc(sizeof(int32_t) * (size_t)ci->m);
    EVTC_ASSERT(ci->greedy != NULL);
    for (int32_t i = 0; i < ci->m; i++) {
      int32_t gk = greedy_of[ci->nodes[i]], cnt = 0;
      bool first = true;
      for (int32_t j = 0; j < i && first; j++) first = greedy_of[ci->nodes[j]] != gk;
      if (!first) continue;
      for (int32_t j = i; j < ci->m; j++)
        if (greedy_of[ci->nodes[j]] == gk) members[cnt++] = ci->nodes[j];
      double t = evtc_fusion_cost(c, members, cnt, NULL, NULL, NULL);
      ci->greedy[ci->n_greedy++] = evtc_cand_add(&ci->cands, members, cnt, t);
    }
    ci->offset = total;
    total += ci->cands.n;
    ci->chosen = calloc((size_t)ci->cands.n, sizeof(bool));
    EVTC_ASSERT(ci->chosen != NULL);
  }
  r->candidates = total;
  r->enum_seconds = now_s() - t0;
  s.group = malloc(sizeof(int32_t) * (size_t)(s.n_comps + 1));
  s.obj = calloc((size_t)s.n_comps + 1, sizeof(double));
  s.bound = calloc((size_t)s.n_comps + 1, sizeof(double));
  s.dirty = malloc(sizeof(bool) * (size_t)(s.n_comps + 1));
  s.row_of = malloc(sizeof(int32_t) * (size_t)(n + 1));
  int32_t *cand_of = malloc(sizeof(int32_t) * (size_t)(n + 1)), *cycle = malloc(sizeof(int32_t) * (size_t)(n + 1));
  EVTC_ASSERT(s.group && s.obj && s.bound && s.dirty && s.row_of && cand_of && cycle);
  for (int32_t q = 0; q < s.n_comps; q++) s.group[q] = q, s.dirty[q] = true;
  int32_t k = k0;
  bool give_up = false;
  for (int iter = 0;; iter++) {
    for (int32_t q = 0; q < s.n_comps; q++)
      if (s.dirty[q] && uf_find(s.group, q) == q) {
        solve_group(&s, q);
        s.dirty[q] = false;
      }
    k = assemble(&s, kernel_of, k0, cand_of);
    int32_t len;
    if (!evtc_fusion_find_cycle(c, kernel_of, k, cycle, &len)) break;
    if (iter >= 2000 || (r->fallback && iter >= 50)) {
      give_up = true;
      break;
    }
    cut q = {0, malloc(sizeof(int32_t) * (size_t)len)};
    EVTC_ASSERT(q.cands != NULL);
    int32_t root = -1;
    for (int32_t i = 0; i < len; i++) {
      if (cand_of[cycle[i]] < 0) continue;
      int32_t local;
      comp_info *ci = comp_of_cand(&s, cand_of[cycle[i]], &local);
      int32_t comp = (int32_t)(ci - s.comps);
      q.cands[q.nz++] = cand_of[cycle[i]];
      if (root >= 0) uf_union(s.group, root, comp);
      root = uf_find(s.group, comp);
    }
    EVTC_ASSERT(q.nz > 0);   /* single nodes never close a cycle */
    s.cuts = realloc(s.cuts, sizeof(cut) * (size_t)(s.n_cuts + 1));
    EVTC_ASSERT(s.cuts != NULL);
    s.cuts[s.n_cuts++] = q;
    s.dirty[uf_find(s.group, root)] = true;
    r->cuts++;
  }
  for (int32_t q = 0; q < s.n_comps; q++)
    if (uf_find(s.group, q) == q) r->objective += s.obj[q], r->bound += s.bound[q];
  if (give_up) {
    r->fallback = true;
    snprintf(r->note, sizeof r->note, "cycle cuts did not converge; the greedy plan is used");
    fprintf(stderr, "evtc: WARNING: fusion ILP: %s\n", r->note);
    memcpy(kernel_of, greedy_of, sizeof(int32_t) * (size_t)n);
    k = n_greedy;
    r->objective = r->bound = 0;
    for (int32_t q = 0; q < s.n_comps; q++) {
      choose_greedy(&s.comps[q]);
      r->objective += chosen_cost(&s.comps[q]);
    }
    r->bound = r->objective;
  }
  r->gap = r->objective > 0 ? (r->objective - r->bound) / r->objective : 0;
  if (r->gap < 1e-12) r->gap = 0;
  r->seconds = now_s() - t0;
  for (int32_t q = 0; q < s.n_comps; q++) {
    free(s.comps[q].nodes);
    free(s.comps[q].greedy);
    free(s.comps[q].chosen);
    evtc_cand_free(&s.comps[q].cands);
  }
  for (int32_t q = 0; q < s.n_cuts; q++) free(s.cuts[q].cands);
  free(s.cuts);
  free(s.comps);
  free(s.group);
  free(s.obj);
  free(s.bound);
  free(s.dirty);
  free(s.row_of);
  free(cand_of);
  free(cycle);
  free(members);
  free(greedy_of);
  return k;
}
