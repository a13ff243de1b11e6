/* test_fusion.c -- the fusion partitioners against known optima.
 *
 * The hand-built graphs of tests/fusion/ (a diamond, a shared producer, a
 * fusion that would close a cycle, a forward activation reused by the
 * backward, sibling readers of one input, a softmax whose rows do or do
 * not fit on chip) are partitioned by none, greedy and the ILP.  Every plan goes
 * through the independent feasibility checker; the ILP must not be slower
 * than greedy; its kernels must be the known optimum, and for these small
 * graphs its modelled time must equal the minimum over EVERY set partition
 * of the fusible nodes that the checker accepts (brute force, sharing
 * nothing with the ILP but the cost model).  Also: plans the checker must
 * reject, determinism, the solution cache, the loud fallback when the
 * solver hits a (tiny) time limit on the joint graph of examples/mlp.evt,
 * and the h200 price of the attention family (its matrix products at half
 * the GEMM peak beside an exp per score: src/fusion/cost.c), causal and not.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "check.h"
#include "fusion/partition.h"
#include "passes/manager.h"

static evtc_device dev;
static const char *src_dir;

static evtc_graph *load(const char *name) {
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/tests/fusion/%s", src_dir, name);
  evtc_graph *g = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(g != NULL, "%s", err);
  return g;
}

static evtc_partition *run(const evtc_graph *g, const char *name, const evtc_fusion_options *o) {
  evtc_diag d = {0};
  evtc_partition *p = evtc_fusion_partition(g, &dev, name, o, &d);
  CHECK(p != NULL, "%s: %s", name, d.msg);
  char why[512];
  if (p) CHECK(evtc_fusion_check(p, &dev, why, sizeof why), "%s plan of %s infeasible: %s", name, g->name, why);
  return p;
}

static int kernel_of(const evtc_partition *p, const char *node) {
  return p->kernel_of[evtc_graph_find(p->g, node)->id];
}

/* Minimum modelled time over all feasible set partitions of the non-leaf
 * nodes (restricted growth strings), recursing over node positions. */
typedef struct brute {
  const evtc_graph *g;
  int32_t *ids, n, *assign, *of;
  double best;
} brute;

static void brute_rec(brute *b, int i, int used) {
  if (i == b->n) {
    for (int32_t v = 0; v < b->g->n_nodes; v++) b->of[v] = -1;
    for (int k = 0; k < b->n; k++) b->of[b->ids[k]] = b->assign[k];
    evtc_partition *p = evtc_partition_build(b->g, &dev, b->of);
    char why[256];
    if (evtc_fusion_check(p, &dev, why, sizeof why) && p->time_us < b->best) b->best = p->time_us;
    evtc_partition_free(p);
    return;
  }
  for (int k = 0; k <= used && k < b->n; k++) {
    b->assign[i] = k;
    brute_rec(b, i + 1, k == used ? used + 1 : used);
  }
}

static double brute_force(const evtc_graph *g) {
  brute b = {g, malloc(sizeof(int32_t) * (size_t)g->n_nodes), 0, malloc(sizeof(int32_t) * (size_t)g->n_nodes),
             malloc(sizeof(int32_t) * (size_t)g->n_nodes), INFINITY};
  for (int32_t v = 0; v < g->n_nodes; v++)
    if (evtc_op_get(g->nodes[v]->op)->fusion != EVTC_FUSE_LEAF) b.ids[b.n++] = v;
  brute_rec(&b, 0, 0);
  free(b.ids);
  free(b.assign);
  free(b.of);
  return b.best;
}

/* The three partitioners on one graph; returns the ILP plan. */
static evtc_partition *all_three(const evtc_graph *g) {
  evtc_fusion_options o = {0};
  evtc_partition *none = run(g, "none", &o), *greedy = run(g, "greedy", &o), *ilp = run(g, "ilp", &o);
  if (none && greedy && ilp) {
    CHECK(ilp->time_us <= greedy->time_us + 1e-9, "%s: ilp %.3f > greedy %.3f", g->name, ilp->time_us, greedy->time_us);
    CHECK(greedy->time_us <= none->time_us + 1e-9, "%s: greedy %.3f > none %.3f", g->name, greedy->time_us,
          none->time_us);
    CHECK(ilp->ilp.gap == 0 && !ilp->ilp.fallback, "%s: gap %g", g->name, ilp->ilp.gap);
    double best = brute_force(g);
    CHECK(fabs(ilp->time_us - best) < 1e-9, "%s: ilp %.6f but the best feasible partition is %.6f", g->name,
          ilp->time_us, best);
  }
  evtc_partition_free(none);
  evtc_partition_free(greedy);
  return ilp;
}

static void test_known_optima(void) {
  evtc_graph *g = load("diamond.evt");
  evtc_partition *p = all_three(g);
  CHECK(p && p->n_kernels == 1 && p->kernels[0].n_nodes == 4, "diamond: one kernel of 4 nodes");
  CHECK(p && p->bytes == 2 * 256 * 256 * 4 + 4, "diamond: reads x, writes d: %.0f bytes", p ? p->bytes : -1);
  evtc_partition_free(p);
  evtc_graph_free(g);

  g = load("shared_producer.evt");
  p = all_three(g);
  CHECK(p && p->n_kernels == 1 && p->bytes == 3 * 256 * 256 * 4, "shared producer: one kernel, a stays inside");
  evtc_partition_free(p);
  evtc_graph_free(g);

  g = load("activation_reuse.evt");
  p = all_three(g);
  CHECK(p && p->n_kernels == 2, "activation reuse: 2 kernels, got %d", p ? p->n_kernels : -1);
  if (p) {
    int k = kernel_of(p, "h");
    CHECK(kernel_of(p, "a") == k && kernel_of(p, "y") == k && kernel_of(p, "mask") == k && kernel_of(p, "gh") == k,
          "activation reuse: the backward mask is in the forward GEMM's epilogue");
    CHECK(kernel_of(p, "gw") != k && p->kernels[k].kind == EVTC_KERNEL_GEMM, "activation reuse: gw alone");
    CHECK(p->kernels[k].bytes == 3 * 128 * 128 * 4 + 4 + 2 * 128 * 128 * 4, "h never reaches memory: %.0f",
          p->kernels[k].bytes);
  }
  evtc_partition_free(p);
  evtc_graph_free(g);

  g = load("siblings.evt");
  p = all_three(g);
  CHECK(p && p->n_kernels == 2, "siblings: 2 kernels, got %d", p ? p->n_kernels : -1);
  if (p) {
    int k = kernel_of(p, "a");
    CHECK(kernel_of(p, "e") == k && kernel_of(p, "s") == k && kernel_of(p, "w") != k,
          "siblings: %%s joins the kernel of %%a and %%e, %%w stays alone");
    CHECK(p->kernels[k].bytes == 2 * 256 * 256 * 4 + 2 * 256 * 4, "siblings: %%x read once: %.0f bytes",
          p->kernels[k].bytes);
  }
  evtc_partition_free(p);
  evtc_graph_free(g);

  /* rows of 2 KiB: on the cpu target (512 KiB) %x is read once; on a target
   * with 1 KiB on chip the one kernel is still admissible, and the model
   * charges the two passes that read %x again */
  g = load("row_cache.evt");
  p = all_three(g);
  CHECK(p && p->n_kernels == 1 && p->bytes == 2 * 64 * 512 * 4, "row cache: one kernel, %%x read once: %.0f bytes",
        p ? p->bytes : -1);
  evtc_partition_free(p);
  evtc_device roomy = dev;
  dev.smem_bytes = 1024;
  p = all_three(g);
  CHECK(p && p->n_kernels == 1 && p->bytes == 4 * 64 * 512 * 4,
        "row cache over 1 KiB on chip: one kernel reading %%x three times: %.0f bytes", p ? p->bytes : -1);
  evtc_partition_free(p);
  dev = roomy;
  evtc_graph_free(g);

  g = load("cycle.evt");
  p = all_three(g);
  if (p) {
    bool a = kernel_of(p, "a1") == kernel_of(p, "a2"), b = kernel_of(p, "b2") == kernel_of(p, "b1");
    CHECK(a != b, "cycle: exactly one of the two pairs is fused (a %d, b %d)", a, b);
    CHECK(p->ilp.cuts >= 1, "cycle: a lazy cut was needed, got %d", p->ilp.cuts);
    CHECK(kernel_of(p, "p") != kernel_of(p, "q") || kernel_of(p, "m") == kernel_of(p, "p"), "cycle: p, q convex");
    CHECK(p->n_kernels == 6, "cycle: 6 kernels, got %d", p->n_kernels);
  }
  evtc_partition_free(p);
  evtc_graph_free(g);
}

/* Plans built by hand that the checker must refuse, with its reason. */
static void expect_refused(const evtc_graph *g, const int32_t *of, const char *what) {
  evtc_partition *p = evtc_partition_build(g, &dev, of);
  char why[256] = "";
  bool ok = evtc_fusion_check(p, &dev, why, sizeof why);
  CHECK(!ok && strstr(why, what), "expected a refusal mentioning '%s', got %s", what, ok ? "accepted" : why);
  evtc_partition_free(p);
}

static void test_checker_refuses(void) {
  evtc_graph *g = load("cycle.evt");
  /* x y w a1 b2 o1 o2 a2 b1 p m q: both pairs fused -> a cycle through the softmaxes */
  int32_t both[] = {-1, -1, -1, 0, 1, 2, 3, 0, 1, 4, 5, 6};
  expect_refused(g, both, "cycle");
  int32_t leaf[] = {0, -1, -1, 0, 1, 2, 3, 0, 4, 5, 6, 7};
  expect_refused(g, leaf, "leaf");
  int32_t lost[] = {-1, -1, -1, -1, 1, 2, 3, 0, 4, 5, 6, 7};
  expect_refused(g, lost, "in no kernel");
  int32_t opaque[] = {-1, -1, -1, 0, 1, 0, 3, 0, 4, 5, 6, 7};
  expect_refused(g, opaque, "opaque");
  int32_t prologue[] = {-1, -1, -1, 0, 1, 2, 3, 4, 5, 6, 6, 7};
  expect_refused(g, prologue, "main loop");
  evtc_graph_free(g);
  g = load("activation_reuse.evt");
  /* x w g zero h a y mask gh gw: both GEMMs in one kernel */
  int32_t two[] = {-1, -1, -1, -1, 0, 0, 0, 0, 0, 0};
  expect_refused(g, two, "main loops");
  evtc_graph_free(g);
  g = load("siblings.evt");
  /* x g y a e s w: %w shares no input with the siblings */
  int32_t packed[] = {-1, -1, -1, 0, 0, 0, 0};
  expect_refused(g, packed, "not connected");
  evtc_graph_free(g);
}

/* The joint graph of examples/mlp.evt (AdamW) after the cpu pipeline. */
static evtc_graph *mlp_joint(void) {
  char path[4096], err[512];
  snprintf(path, sizeof path, "%s/examples/mlp.evt", src_dir);
  evtc_graph *fwd = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(fwd != NULL, "%s", err);
  evtc_optim_config cfg = evtc_optim_default(EVTC_OPTIM_ADAMW);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &cfg, &d);
  evtc_graph_free(fwd);
  const evtc_pipeline *pl = evtc_pipeline_find("cpu");
  evtc_graph *g = evtc_pipeline_run(joint, pl->passes, pl->n_passes, NULL, &d);
  CHECK(g != NULL, "%s", d.msg);
  evtc_graph_free(joint);
  return g;
}

static void test_joint_graph(void) {
  evtc_graph *g = mlp_joint();
  evtc_fusion_options o = {0};
  evtc_partition *greedy = run(g, "greedy", &o), *a = run(g, "ilp", &o), *b = run(g, "ilp", &o);
  CHECK(a && b && memcmp(a->kernel_of, b->kernel_of, sizeof(int32_t) * (size_t)g->n_nodes) == 0,
        "the ILP is deterministic");
  CHECK(a && greedy && a->time_us < greedy->time_us, "mlp joint: ilp %.3f beats greedy %.3f", a ? a->time_us : 0,
        greedy ? greedy->time_us : 0);
  CHECK(a && a->ilp.gap == 0 && !a->ilp.fallback && !a->ilp.truncated, "mlp joint: proven optimal");

  /* the solution cache: a second run reads the same plan back */
  char dir[] = "/tmp/evtc-test-fusion-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  o.cache_dir = dir;
  evtc_partition *c1 = run(g, "ilp", &o), *c2 = run(g, "ilp", &o);
  CHECK(c1 && !c1->ilp.cached && c2 && c2->ilp.cached, "second run is served from the cache");
  CHECK(c1 && c2 && a && memcmp(c2->kernel_of, a->kernel_of, sizeof(int32_t) * (size_t)g->n_nodes) == 0 &&
            c2->ilp.objective == a->ilp.objective,
        "the cached plan is the solved one");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "cleanup");

  /* a tiny time limit: the best feasible plan, reported loudly, still checked */
  evtc_fusion_options tiny = {.time_limit_s = 1e-9};
  evtc_partition *f = run(g, "ilp", &tiny);
  CHECK(f && f->ilp.fallback && strstr(f->ilp.note, "time limit"), "time-limit fallback reported: %s",
        f ? f->ilp.note : "");
  CHECK(f && greedy && f->time_us <= greedy->time_us + 1e-9, "fallback no worse than greedy");
  evtc_partition_free(f);
  evtc_partition_free(c1);
  evtc_partition_free(c2);
  evtc_partition_free(a);
  evtc_partition_free(b);
  evtc_partition_free(greedy);
  evtc_graph_free(g);
}

/* Each attention-family node of a [2, 4, 512 / 768, 64] bf16 graph is a kernel of its own, priced at launch +
 * 2 products S T D per batch-head / (half the GEMM peak) + 10 flops per score on the vector units (compute-bound
 * at this size), half of both when causal. */
static void test_attention_cost(const evtc_device *h200) {
  static const char *const ops[] = {"o", "lse", "dq", "dkv"};
  static const int products[] = {2, 1, 3, 4};
  for (int causal = 0; causal < 2; causal++) {
    char text[1024];
    snprintf(text, sizeof text,
             "graph att {\n  %%q = input() : bf16[2,4,512,64]\n  %%k = input() : bf16[2,4,768,64]\n"
             "  %%v = input() : bf16[2,4,768,64]\n  %%dout = input() : bf16[2,4,512,64]\n"
             "  %%o = attention(%%q, %%k, %%v) {scale=0.125, causal=%d} : bf16[2,4,512,64]\n"
             "  %%lse = attention_lse(%%q, %%k) {scale=0.125, causal=%d} : f32[2,4,512]\n"
             "  %%dq = attention_backward_q(%%q, %%k, %%v, %%o, %%dout, %%lse) {scale=0.125, causal=%d} : bf16[2,4,512,64]\n"
             "  %%dkv = attention_backward_kv(%%q, %%k, %%v, %%o, %%dout, %%lse) {scale=0.125, causal=%d} : bf16[2,4,768,128]\n"
             "  output %%dq\n  output %%dkv\n}\n",
             causal, causal, causal, causal);
    char err[512];
    evtc_graph *g = evtc_graph_parse_string(text, "attention cost", err, sizeof err);
    CHECK(g != NULL, "attention cost graph: %s", err);
    if (!g) continue;
    evtc_diag d = {0};
    evtc_fusion_options o = {0};
    evtc_partition *p = evtc_fusion_partition(g, h200, "none", &o, &d);
    CHECK(p != NULL, "attention cost: %s", d.msg);
    const double scores = 2.0 * 4 * 512 * 768 * (causal ? 0.5 : 1.0);
    for (int i = 0; p && i < 4; i++) {
      const evtc_fusion_kernel *k = &p->kernels[kernel_of(p, ops[i])];
      const double want = h200->launch_us + 1e6 * (2.0 * products[i] * scores * 64 / (0.5 * h200->gemm_flops) +
                                                    10.0 * scores / h200->vector_flops);
      CHECK(k->n_nodes == 1 && fabs(k->time_us - want) < 1e-6 * want, "attention cost%s: %%%s %.4f us, want %.4f",
            causal ? " (causal)" : "", ops[i], k->time_us, want);
    }
    evtc_partition_free(p);
    evtc_graph_free(g);
  }
}

int main(int argc, char **argv) {
  src_dir = argc > 1 ? argv[1] : ".";
  char data[4096];
  snprintf(data, sizeof data, "%s/data", src_dir);
  setenv("EVTC_DATA_DIR", data, 1);
  evtc_diag d = {0};
  CHECK(evtc_device_load("cpu", &dev, &d), "%s", d.msg);
  CHECK(!evtc_device_load("nosuch", &(evtc_device){0}, &d), "unknown target refused");
  test_known_optima();
  test_checker_refuses();
  test_joint_graph();
  evtc_device h200;
  CHECK(evtc_device_load("h200", &h200, &d) && h200.copy_bw == 4.17e12 && h200.gemm_flops == 725e12 &&
            h200.launch_us == 3,
        "h200 constants");
  test_attention_cost(&h200);
  return check_summary();
}
