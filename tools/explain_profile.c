/* explain_profile.c -- `evtc explain --profile N`: where the time goes.
 *
 * Runs the partition that explain shows as a program on the target's
 * backend (cmd_explain.c opens it: the CPU backend for cpu, the CUDA
 * backend, which needs a GPU, for h200), on random inputs (floats uniform in [-1, 1]; integers that
 * index a gather, embedding, scatter_add, one_hot or cross-entropy uniform over the smallest range those
 * readers allow, so that a scatter's atomics spread as they do on real ids; other integers and bools 0) and
 * parameters and optimizer states initialised as `train` starts them (evtc_init_leaf: with weights uniform in
 * [-1, 1] instead, a transformer layer's softmax saturated and its backward ran on subnormal floats: 189 ms a
 * run on the CPU against 36 ms so, and 39 ms for the same step in bench/cpu.sh, 2026-11-30),
 * twice to warm up (on a GPU the second run captures the CUDA graph the later runs replay), N times as a whole
 * (the mean time of a run), then N times kernel by kernel
 * (evtc_program_profile: on a GPU CUDA events between the kernels, no
 * waits; on the CPU a wait after every kernel), and prints each plan kernel's modelled time next
 * to its measured one and what it achieved (TFLOP/s of a main loop, GB/s of the others' modelled bytes), the
 * slowest first, the same summed over families (kernels of one kind whose first
 * nodes' names differ only in numbers: a model's layers), the totals per kernel kind, and the totals.  A plan
 * kernel that the program split, or ran in the interpreter, sums the
 * program kernels that hold its nodes; scalar-chain nodes (which the plan
 * leaves to their readers) show as their own program kernels; a lone
 * reshape that the program runs as a buffer alias shows with no time, and
 * a plan kernel whose values another kernel writes (attention's log-sum-exp
 * or dq as a by-product, a small kernel packed into another's launch) shows
 * with no time and its modelled time added to that kernel's row, which
 * measures its work.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "cli.h"
#include "fusion/partition.h"
#include "runtime/init.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

typedef struct profile_row {
  int plan_kernel;          /* -1: a scalar-chain node's own kernel */
  int32_t first_node;
  double modelled_us, measured_us;
  double flops, bytes;      /* modelled, for what the row achieved */
  int program_kernels;
  int runs_in;              /* a plan kernel with no kernel of its own whose values another writes: that one's plan
                               kernel (its row has this one's modelled time); else -1 */
} profile_row;

static int by_measured(const void *a, const void *b) {
  double x = ((const profile_row *)a)->measured_us, y = ((const profile_row *)b)->measured_us;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The range [0, bound) that v's readers accept when they use it as an index or label, looking
 * through reshapes; INT64_MAX when none does. */
static int64_t index_bound(const evtc_graph *g, const evtc_node *v) {
  int64_t bound = INT64_MAX;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *m = g->nodes[i];
    for (int32_t a = 0; a < m->n_inputs; a++) {
      if (m->inputs[a] != v) continue;
      const evtc_type *x = &m->inputs[0]->type;
      int64_t b = INT64_MAX;
      switch (m->op) {
        case EVTC_OP_RESHAPE: b = index_bound(g, m); break;
        case EVTC_OP_GATHER: b = a == 1 ? x->shape[evtc_axis_norm(evtc_node_int(m, "axis"), x->rank)] : b; break;
        case EVTC_OP_EMBEDDING: b = a == 1 ? x->shape[0] : b; break;
        case EVTC_OP_SCATTER_ADD: b = a == 1 ? evtc_node_int(m, "size") : b; break;
        case EVTC_OP_ONE_HOT: b = evtc_node_int(m, "depth"); break;
        case EVTC_OP_CROSS_ENTROPY: b = a == 1 ? x->shape[x->rank - 1] : b; break;
        default: break;
      }
      if (b < bound) bound = b;
    }
  }
  return bound;
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

/* The leaves, as the header says (fixed seeds: the same values every time). */
static void fill_leaves(evtc_program *prog, const evtc_graph *g) {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    double *v = calloc((size_t)(numel > 0 ? numel : 1), sizeof(double));
    const bool is_float = evtc_dtype_is_float(n->type.dtype);
    const int64_t bound = is_float || n->type.dtype == EVTC_BOOL ? INT64_MAX : index_bound(g, n);
    if (n->op != EVTC_OP_INPUT) evtc_init_leaf(n, v, 0);
    else
      for (int64_t e = 0; e < numel && (is_float || bound < INT64_MAX); e++)
        v[e] = is_float ? (double)(next_random(&s) >> 11) * 0x1.0p-52 - 1 : (double)(next_random(&s) % (uint64_t)bound);
    evtc_program_set(prog, n, v);
    free(v);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* What a kernel of modelled FLOP and bytes achieved in us, into buf: "465 TFLOP/s" for a main loop (a GEMM, or an
 * opaque kernel whose modelled time its FLOP bound: attention; GFLOP/s below a TFLOP/s), else "3120 GB/s" of its
 * modelled bytes (distinct tensors read + values written, each once; MB/s below a GB/s); "-" without a measured
 * time. */
static void achieved(const evtc_device *dev, evtc_kernel_kind kind, double flops, double bytes, double us, char *buf,
                     size_t cap) {
  const bool compute = kind == EVTC_KERNEL_GEMM ||
                       (kind == EVTC_KERNEL_OPAQUE && flops / dev->gemm_flops > bytes / dev->copy_bw);
  const double per_s = (compute ? flops : bytes) / (us * 1e-6);
  const char *unit = compute ? "FLOP/s" : "B/s";
  if (us <= 0) snprintf(buf, cap, "-");
  else if (per_s >= 1e12 && compute) snprintf(buf, cap, "%.0f T%s", per_s * 1e-12, unit);
  else if (per_s >= 1e9) snprintf(buf, cap, "%.0f G%s", per_s * 1e-9, unit);
  else snprintf(buf, cap, "%.1f M%s", per_s * 1e-6, unit);
}

/* A family of plan kernels: the same kind and first-node name but for its numbers (a model's layers). */
typedef struct profile_family {
  char key[96];
  const char *kind;
  int32_t first_node;       /* of its slowest kernel */
  int kernels;
  double measured_us, modelled_us;
  double flops, bytes;      /* modelled, over the kernels with a plan kernel (not scalar chains) */
  evtc_kernel_kind plan_kind;
} profile_family;

static int family_by_measured(const void *a, const void *b) {
  double x = ((const profile_family *)a)->measured_us, y = ((const profile_family *)b)->measured_us;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* kind, then name with each run of digits as N; a generated name (tN) takes its op's name too, so that the
 * anonymous kernels of different ops stay apart. */
static void family_key(const char *kind, const evtc_node *n, char *key, size_t cap) {
  size_t k = (size_t)snprintf(key, cap, "%s ", kind);
  for (const char *c = n->name; *c && k + 2 < cap; c++) {
    const bool digit = *c >= '0' && *c <= '9', after_digit = c > n->name && c[-1] >= '0' && c[-1] <= '9';
    if (!digit) key[k++] = *c;
    else if (!after_digit) key[k++] = 'N';
  }
  key[k] = 0;
  if (strcmp(key + strlen(kind) + 1, "tN") == 0) snprintf(key + k, cap - k, ":%s", evtc_op_get(n->op)->name);
}

/* The families of rows, the slowest first: up to SHOWN of them, then one line for the rest. */
static void print_families(FILE *out, const evtc_partition *part, const evtc_device *dev, const profile_row *rows,
                           int n_rows) {
  enum { SHOWN = 30 };
  const evtc_graph *g = part->g;
  profile_family *f = calloc((size_t)(n_rows + 1), sizeof *f);
  if (!f) return;
  int nf = 0;
  for (int r = 0; r < n_rows; r++) {
    const profile_row *x = &rows[r];
    const char *kind = x->plan_kernel >= 0 ? evtc_kernel_kind_name(part->kernels[x->plan_kernel].kind) : "scalar";
    char key[96];
    family_key(kind, g->nodes[x->first_node], key, sizeof key);
    int i = 0;
    while (i < nf && strcmp(f[i].key, key) != 0) i++;
    if (i == nf) {
      snprintf(f[nf].key, sizeof f[nf].key, "%s", key);
      f[nf].kind = kind;
      f[nf++].first_node = x->first_node;    /* rows come slowest first */
    }
    f[i].kernels++;
    f[i].measured_us += x->measured_us;
    f[i].modelled_us += x->modelled_us;
    if (x->plan_kernel >= 0) {
      f[i].flops += x->flops, f[i].bytes += x->bytes;
      f[i].plan_kind = part->kernels[x->plan_kernel].kind;
    }
  }
  qsort(f, (size_t)nf, sizeof *f, family_by_measured);
  fprintf(out, "profile by family (plan kernels of one kind whose first nodes' names differ only in numbers, the "
               "slowest first; first node: the family's slowest):\n");
  fprintf(out, "%-11s %7s %12s %12s %10s %12s  %s\n", "kind", "kernels", "measured_us", "modelled_us", "each_us", "achieved",
          "first node");
  double rest_us = 0, rest_mod = 0;
  int rest_kernels = 0;
  for (int i = 0; i < nf; i++) {
    if (i >= SHOWN) {
      rest_us += f[i].measured_us, rest_mod += f[i].modelled_us, rest_kernels += f[i].kernels;
      continue;
    }
    char rate[32] = "-";
    if (strcmp(f[i].kind, "scalar") != 0)
      achieved(dev, f[i].plan_kind, f[i].flops, f[i].bytes, f[i].measured_us, rate, sizeof rate);
    fprintf(out, "%-11s %7d %12.3f %12.3f %10.3f %12s  %%%s\n", f[i].kind, f[i].kernels, f[i].measured_us, f[i].modelled_us,
            f[i].measured_us / f[i].kernels, rate, g->nodes[f[i].first_node]->name);
  }
  if (nf > SHOWN)
    fprintf(out, "%-11s %7d %12.3f %12.3f %10s %12s  (%d more families)\n", "rest", rest_kernels, rest_us, rest_mod, "-",
            "-", nf - SHOWN);
  free(f);
}

int evtc_explain_profile(const evtc_partition *part, const evtc_backend *be, int runs, FILE *out) {
  const evtc_graph *g = part->g;
  evtc_diag d = {0};
  int nk = 0, packed = 0;
  evtc_device dev;
  evtc_program *prog = NULL;
  double *us = NULL;
  profile_row *rows = NULL;
  int rc = EVTC_EXIT_OK, n_rows = 0;
  if (!evtc_device_load(evtc_program_target(be), &dev, &d)) goto failed;
  int32_t *plan = evtc_program_plan_launched(part, &dev, be, &nk, &packed);   /* the kernels `run` and `train` launch */
  prog = evtc_program_new(g, plan, nk, be, stderr, &d);
  free(plan);
  if (!prog) goto failed;
  fill_leaves(prog, g);
  for (uint64_t w = 0; w < 2; w++)
    if (evtc_program_run(prog, w, &d) != EVTC_OK) goto failed;
  const double t0 = now_us();
  for (int r = 0; r < runs; r++)
    if (evtc_program_run(prog, 2 + (uint64_t)r, &d) != EVTC_OK) goto failed;
  const double whole_us = (now_us() - t0) / runs;
  const int n = evtc_program_kernel_count(prog);
  us = malloc(sizeof(double) * (size_t)(n + 1));
  bool device_clock = false;
  if (evtc_program_profile(prog, runs, 2 + (uint64_t)runs, us, &device_clock, &d) != EVTC_OK) goto failed;
  /* one row per plan kernel (+ one per scalar-chain kernel), in first-node order */
  rows = calloc((size_t)(part->n_kernels + n + 1), sizeof *rows);
  int *row_of = malloc(sizeof(int) * (size_t)(part->n_kernels + 1)), *row_of_t = malloc(sizeof(int) * (size_t)(n + 1));
  for (int k = 0; k < part->n_kernels; k++) row_of[k] = -1;
  double measured = 0;
  for (int t = 0; t < n; t++) {
    const int32_t first = evtc_program_kernel_first_node(prog, t);
    const int k = part->kernel_of[first];
    int r = k >= 0 ? row_of[k] : -1;
    if (r < 0) {
      r = n_rows++;
      rows[r] = (profile_row){.plan_kernel = k, .first_node = first, .modelled_us = k >= 0 ? part->kernels[k].time_us : 0,
                              .flops = k >= 0 ? part->kernels[k].flops : 0, .bytes = k >= 0 ? part->kernels[k].bytes : 0,
                              .runs_in = -1};
      if (k >= 0) row_of[k] = r;
    }
    row_of_t[t] = r;
    rows[r].measured_us += us[t];
    rows[r].program_kernels++;
    measured += us[t];
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {    /* plan kernels the program runs no kernel for: aliases, views */
    const int k = part->kernel_of[i];
    if (k >= 0 && row_of[k] < 0) {
      row_of[k] = n_rows;
      rows[n_rows++] = (profile_row){.plan_kernel = k, .first_node = i, .modelled_us = part->kernels[k].time_us,
                                     .flops = part->kernels[k].flops, .bytes = part->kernels[k].bytes, .runs_in = -1};
    }
  }
  /* Of those, a plan kernel whose values another program kernel writes (attention's log-sum-exp or dq written as a
     by-product, a small kernel packed into another's launch) has its work measured in that kernel's row: its
     modelled time moves there, so that each row sets the work it measures beside the work modelled for it. */
  for (int r = 0; r < n_rows; r++) {
    profile_row *x = &rows[r];
    if (x->program_kernels > 0 || x->plan_kernel < 0) continue;
    const evtc_fusion_kernel *K = &part->kernels[x->plan_kernel];
    for (int t = 0; t < n && x->runs_in < 0; t++)
      for (int32_t i = 0; i < K->n_nodes && x->runs_in < 0; i++)
        if (evtc_program_kernel_writes(prog, t, K->nodes[i]) && rows[row_of_t[t]].plan_kernel >= 0) {
          profile_row *w = &rows[row_of_t[t]];
          w->modelled_us += x->modelled_us, w->flops += x->flops, w->bytes += x->bytes;
          x->modelled_us = x->flops = x->bytes = 0;
          x->runs_in = w->plan_kernel;
        }
  }
  free(row_of);
  free(row_of_t);
  qsort(rows, (size_t)n_rows, sizeof *rows, by_measured);
  const evtc_program_stats st = evtc_program_get_stats(prog);
  fprintf(out, "== profile: backend %s, %d runs, mean us per kernel (%s) ==\n", be->name, runs,
          device_clock ? "device clock: events between kernels, no waits" : "host clock, a wait after each kernel");
  fprintf(out, "%-8s %-11s %6s %12s %12s %9s %12s  %s\n", "kernel", "kind", "nodes", "modelled_us", "measured_us",
          "meas/mod", "achieved", "first node");
  for (int r = 0; r < n_rows; r++) {
    const profile_row *x = &rows[r];
    char name[32];
    if (x->plan_kernel >= 0) snprintf(name, sizeof name, "%d", x->plan_kernel);
    else snprintf(name, sizeof name, "chain");
    const evtc_fusion_kernel *K = x->plan_kernel >= 0 ? &part->kernels[x->plan_kernel] : NULL;
    char rate[32] = "-";
    if (K) achieved(&dev, K->kind, x->flops, x->bytes, x->measured_us, rate, sizeof rate);
    char note[160] = "";
    if (x->program_kernels > 1) snprintf(note, sizeof note, " (split in the program)");
    else if (x->runs_in >= 0)
      snprintf(note, sizeof note, " (no kernel: kernel %d writes its values, a by-product or packed into its launch; "
                                  "its modelled time is counted there)", x->runs_in);
    else if (x->program_kernels == 0)
      snprintf(note, sizeof note, " (no kernel: a reshape alias or a view attention reads or writes in place)");
    fprintf(out, "%-8s %-11s %6d %12.3f %12.3f %9.2f %12s  %%%s%s\n", name, K ? evtc_kernel_kind_name(K->kind) : "scalar",
            K ? K->n_nodes : 1, x->modelled_us, x->measured_us, x->modelled_us > 0 ? x->measured_us / x->modelled_us : 0,
            rate, g->nodes[x->first_node]->name, note);
  }
  print_families(out, part, &dev, rows, n_rows);
  enum { KINDS = EVTC_KERNEL_OPAQUE + 2 };     /* the plan's kinds, then scalar-chain kernels */
  double kind_us[KINDS] = {0}, kind_mod[KINDS] = {0};
  int kind_n[KINDS] = {0};
  for (int r = 0; r < n_rows; r++) {
    const int kind = rows[r].plan_kernel >= 0 ? (int)part->kernels[rows[r].plan_kernel].kind : KINDS - 1;
    kind_us[kind] += rows[r].measured_us;
    kind_mod[kind] += rows[r].modelled_us;
    kind_n[kind] += rows[r].program_kernels;
  }
  fprintf(out, "profile by kind (program kernels, measured us, modelled us):");
  for (int k = 0; k < KINDS; k++)
    if (kind_n[k] > 0 || kind_mod[k] > 0)     /* a kind of aliases and views alone runs no kernel */
      fprintf(out, " %s %d %.3f %.3f;", k < KINDS - 1 ? evtc_kernel_kind_name((evtc_kernel_kind)k) : "scalar", kind_n[k],
              kind_us[k], kind_mod[k]);
  fputc('\n', out);
  fprintf(out, "profile: plan kernels %d, program kernels %d (%d compiled, %d in the interpreter, %d splits, "
               "%d reshapes sharing their input's buffer, %d layout copies attention reads or writes in place, %d by-products "
               "of other kernels, %d updates in place, %d outputs over their dead input, %d plan kernels packed into others' "
               "launches); modelled %.3f us, measured %.3f us kernel by kernel (%s), %.3f us as a whole run\n",
          part->n_kernels, n, st.compiled, st.interpreted, st.splits, st.aliases, st.views, st.by_products, st.in_place, st.in_place_outputs,
          packed, part->time_us, measured, device_clock ? "device clock" : "with waits", whole_us);
  if (st.graph)
    fprintf(out, "launches: whole runs replay one captured graph of the program's launches (captured %d time%s); "
                 "kernel by kernel when profiled\n", st.graph_captures, st.graph_captures == 1 ? "" : "s");
  else
    fprintf(out, "launches: kernel by kernel (%s)\n", st.no_graph);
  fprintf(out, "memory: %.1f MiB of program buffers (arena %.1f MiB, leaves and outputs %.1f MiB)\n",
          (double)(st.arena_bytes + st.owned_bytes) / (1 << 20), (double)st.arena_bytes / (1 << 20),
          (double)st.owned_bytes / (1 << 20));
  enum { SHOWN = 8 };
  int32_t peak_ids[SHOWN];
  int peak_at = 0;
  size_t live = 0;
  int n_live = evtc_program_peak_values(prog, peak_ids, SHOWN, &peak_at, &live);
  if (n_live > 0) {
    fprintf(out, "memory peak: %.1f MiB of %d values live in program kernel %d (%%%s); the largest:", (double)live / (1 << 20),
            n_live, peak_at, g->nodes[evtc_program_kernel_first_node(prog, peak_at)]->name);
    for (int k = 0; k < n_live && k < SHOWN; k++) {
      const evtc_node *v = g->nodes[peak_ids[k]];
      fprintf(out, " %%%s %.1f", v->name,
              (double)evtc_type_numel(&v->type) * (double)evtc_dtype_size(v->type.dtype) / (1 << 20));
    }
    fputc('\n', out);
  }
  goto done;
failed:
  fprintf(stderr, "evtc: explain --profile: %s\n", d.msg);
  rc = EVTC_EXIT_BAD_INPUT;
done:
  free(rows);
  free(us);
  evtc_program_free(prog);
  return rc;
}
