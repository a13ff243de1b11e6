/* cache.c -- the ILP's solution cache.
 *
 * A plan is stored under a 64-bit FNV-1a hash of everything that decides
 * it: the graph's canonical text, the target's constants and limits, the
 * candidate budget, the file format and the version of the cost model and
 * templates.  Files are DIR/fusion-<hash>.plan, written atomically
 * (runtime/atomic_file.h); only proven-optimal plans are stored.  A file
 * that does not parse, or whose plan fails the feasibility checker
 * (partition.c does that check), is ignored.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion_internal.h"
#include "ir/text.h"
#include "runtime/atomic_file.h"
#include "util/fs.h"
#include "util/hash.h"

uint64_t evtc_fusion_cache_key(const evtc_fusion_ctx *c, const evtc_fusion_options *opt) {
  char *text = evtc_graph_to_string(c->g);
  /* "model 2": re-reads of multi-pass kernels priced, sibling kernels -- plans of before are no optimum now;
     "model 5": the CUDA backend takes a vocabulary-wide cross-entropy with its bias gradient, which plans of before
     left to two kernels (a backend's rules that change must change this key: its tag is only its name) */
  static const char version[] = "evtc-fusion-plan 1 model 5\n";
  uint64_t h = evtc_fnv1a(EVTC_FNV1A_BASIS, version, sizeof version - 1);
  h = evtc_fnv1a(h, text, strlen(text));
  free(text);
  const evtc_device *dev = c->dev;
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%s %.17g %.17g %.17g %.17g %d %d %d %.17g %ld", dev->name, dev->copy_bw,
                   dev->gemm_flops, dev->vector_flops, dev->launch_us, dev->max_nodes, dev->max_reductions,
                   dev->max_io, dev->smem_bytes, opt->max_candidates);
  if (opt->accept) n += snprintf(buf + n, sizeof buf - (size_t)n, " accept=%s", opt->accept_tag ? opt->accept_tag : "?");
  return evtc_fnv1a(h, buf, (size_t)n);
}

static void plan_path(char *buf, size_t cap, const char *dir, uint64_t key) {
  snprintf(buf, cap, "%s/fusion-%016" PRIx64 ".plan", dir, key);
}

bool evtc_fusion_cache_load(const char *dir, uint64_t key, int32_t n, int32_t *kernel_of, evtc_ilp_report *r) {
  char path[4096];
  plan_path(path, sizeof path, dir, key);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  int version = 0, truncated = 0;
  int32_t nodes = -1;
  evtc_ilp_report t = {0};
  bool ok = fscanf(f, "evtc-fusion-plan %d nodes %" SCNd32, &version, &nodes) == 2 && version == 1 &&
            nodes == n &&
            fscanf(f, " components %d solved %d candidates %ld cuts %d", &t.components, &t.solved, &t.candidates,
                   &t.cuts) == 4 &&
            fscanf(f, " objective %lf bound %lf gap %lf seconds %lf truncated %d", &t.objective, &t.bound, &t.gap,
                   &t.seconds, &truncated) == 5;
  for (int32_t v = 0; v < n && ok; v++) ok = fscanf(f, " %" SCNd32, &kernel_of[v]) == 1 && kernel_of[v] >= -1 && kernel_of[v] < n;
  fclose(f);
  if (!ok) return false;
  t.truncated = truncated != 0;
  *r = t;
  return true;
}

void evtc_fusion_cache_store(const char *dir, uint64_t key, int32_t n, const int32_t *kernel_of,
                             const evtc_ilp_report *r) {
  char path[4096];
  plan_path(path, sizeof path, dir, key);
  evtc_diag d = {0};
  evtc_atomic_file af;
  if (!evtc_mkdirs(dir) || !evtc_atomic_open(&af, path, &d)) {
    fprintf(stderr, "evtc: note: fusion cache %s is not writable; the plan is not cached\n", dir);
    return;
  }
  fprintf(af.f, "evtc-fusion-plan 1 nodes %" PRId32 "\n", n);
  fprintf(af.f, "components %d solved %d candidates %ld cuts %d\n", r->components, r->solved, r->candidates, r->cuts);
  fprintf(af.f, "objective %.17g bound %.17g gap %.17g seconds %.17g truncated %d\n", r->objective, r->bound, r->gap,
          r->seconds, r->truncated ? 1 : 0);
  for (int32_t v = 0; v < n; v++) fprintf(af.f, "%" PRId32 "\n", kernel_of[v]);
  if (evtc_atomic_commit(&af, &d) != EVTC_OK) fprintf(stderr, "evtc: note: fusion cache: %s\n", d.msg);
}
