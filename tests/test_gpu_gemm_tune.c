/* test_gpu_gemm_tune.c -- the GEMM tuner (cuda_gemm_tune.h): families,
 * search space, the on-disk cache and, on an sm_90a GPU, a small tuning
 * run.
 *
 * Host part (no GPU): family names round-trip (the sm_80 template's
 * too); every candidate of the sm_90a space passes config_check, none
 * twice, both schedules and both consumer counts are there; the sm_80
 * space holds sm_80 configs only, within the shared memory it is given; a
 * saved result reads back field for field and through
 * evtc_cuda_gemm_tuned_config; damaged files (garbage, truncated, a
 * missing key, another device, another template version, a config the
 * template refuses or of the other template, an unknown key, a duplicate)
 * read as "not tuned", and the lookup notices a file replaced under it; the
 * plan of a GEMM with a bias epilogue takes the tuned config, one with the
 * bias's column sums too keeps its own tiles; an sm_80 family's result is
 * its own.  With NVRTC the reduced space's kernels
 * of a store, a visitor and an sm_80 visitor family are compiled for
 * sm_90a (that also fills the CUBIN cache that bench/gpu_gemm_tune.sh
 * carries to the GPU).
 *
 * GPU part: the reduced space on two small problems (tile remainders on
 * every side) for bf16 A M x K, B N x K with the built-in store, f16 A K x
 * M, B K x N with the visitor epilogue, and bf16 A M x K, B K x N with the
 * visitor epilogue on the sm_80 template: nothing rejected (every config
 * the template accepts must match the default's output), the winner saved
 * and found by the lookup.  Without a GPU it prints SKIPPED and exits 77.
 *
 * The tuning cache goes to a temporary $XDG_CACHE_HOME whose evtc/cuda is
 * a link to the real CUBIN cache.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_emit_gemm.h"
#include "backend/cuda/cuda_gemm_tune.h"
#include "check.h"
#include "evtc.h"
#include "kernel/kernel.h"
#include "util/fs.h"

static char tmp[64] = "/tmp/evtc-tune-test-XXXXXX";

static bool same_cfg(const evtc_cuda_gemm_config *a, const evtc_cuda_gemm_config *b) {
  return a->tile_m == b->tile_m && a->tile_n == b->tile_n && a->tile_k == b->tile_k && a->stages == b->stages &&
         a->consumers == b->consumers && a->pingpong == b->pingpong && a->cluster_m == b->cluster_m &&
         a->cluster_n == b->cluster_n && a->group_m == b->group_m;
}

static void test_families(void) {
  for (int i = 0; i < 32; i++) {
    evtc_cuda_gemm_family f = {.in = i & 1 ? EVTC_F16 : EVTC_BF16, .a_kmajor = i & 2, .b_kmajor = i & 4,
                               .visitor = i & 8, .sm80 = i & 16}, g;
    char name[32];
    evtc_cuda_gemm_family_name(&f, name, sizeof name);
    CHECK(evtc_cuda_gemm_family_parse(name, &g) && g.in == f.in && g.a_kmajor == f.a_kmajor &&
              g.b_kmajor == f.b_kmajor && g.visitor == f.visitor && g.sm80 == f.sm80,
          "family %s", name);
  }
  evtc_cuda_gemm_family g;
  CHECK(!evtc_cuda_gemm_family_parse("f32-mk-nk-store", &g) && !evtc_cuda_gemm_family_parse("bf16-mk-nk", &g) &&
            !evtc_cuda_gemm_family_parse("", &g) && !evtc_cuda_gemm_family_parse("bf16-mk-nk-store-sm90", &g),
        "bad family names refused");
  CHECK(evtc_cuda_gemm_family_parse("f16-km-kn-visitor-sm80", &g) && g.sm80 && g.visitor && g.in == EVTC_F16,
        "an sm_80 family by name");
}

/* The sm_80 template's space: sm_80 configs only, none pingpong or on a cluster, both warpgroup counts, within the
 * shared memory given (an A100's 163 KiB keeps fewer than an H200's 227), the reduced space three. */
static void test_space_sm80(void) {
  evtc_cuda_gemm_family f = {.in = EVTC_F16, .a_kmajor = true, .b_kmajor = false, .visitor = true, .sm80 = true};
  evtc_cuda_gemm_variant v = {.in = EVTC_F16, .out = EVTC_F16, .a_kmajor = true, .b_kmajor = false};
  evtc_cuda_gemm_config cs[512];
  const int h200 = 227 * 1024, a100 = 163 * 1024;
  int n = evtc_cuda_gemm_tune_space(&f, 8, false, h200, cs, 512), n_a100 = 0;
  CHECK(n >= 20 && n <= 512, "sm_80: %d candidates", n);
  int bad = 0, dup = 0, one = 0, over = 0;
  for (int i = 0; i < n && i < 512; i++) {
    char why[160];
    if (!evtc_cuda_gemm_config_check(&cs[i], &v, why, sizeof why) || !cs[i].sm80 || cs[i].pingpong ||
        cs[i].cluster_m != 1)
      bad++;
    for (int j = 0; j < i; j++) dup += same_cfg(&cs[i], &cs[j]);
    one += cs[i].consumers == 1;
    n_a100 += evtc_cuda_gemm_smem_bytes(&cs[i]) <= (unsigned)a100;
  }
  CHECK(bad == 0 && dup == 0 && one > 0 && one < n, "sm_80: %d refused or not sm_80, %d duplicates, %d one-warpgroup",
        bad, dup, one);
  int m = evtc_cuda_gemm_tune_space(&f, 8, false, a100, cs, 512);
  for (int i = 0; i < m && i < 512; i++) over += evtc_cuda_gemm_smem_bytes(&cs[i]) > (unsigned)a100;
  CHECK(m == n_a100 && m < n && over == 0, "sm_80 within 163 KiB: %d candidates (%d fit), %d over", m, n_a100, over);
  CHECK(evtc_cuda_gemm_tune_space(&f, 4, true, h200, cs, 512) == 3 && cs[0].sm80 && cs[0].group_m == 4,
        "sm_80 reduced space");
  const evtc_cuda_gemm_config d80 = evtc_cuda_gemm_family_default(&f, a100);
  CHECK(d80.sm80 && evtc_cuda_gemm_smem_bytes(&d80) <= (unsigned)a100, "the sm_80 family's default fits 163 KiB");
  printf("sm_80 search space: %d candidates per group_m within 227 KiB, %d within 163 KiB\n", n, m);
}

static void test_space(void) {
  evtc_cuda_gemm_family f = {.in = EVTC_BF16, .a_kmajor = true, .b_kmajor = true};
  evtc_cuda_gemm_config cs[512];
  int n = evtc_cuda_gemm_tune_space(&f, 8, false, 0, cs, 512);
  CHECK(n >= 40 && n <= 512, "%d candidates", n);
  evtc_cuda_gemm_variant v = {.in = EVTC_BF16, .out = EVTC_BF16, .a_kmajor = true, .b_kmajor = true};
  int pp = 0, one = 0, cl2 = 0, bad = 0, dup = 0;
  for (int i = 0; i < n && i < 512; i++) {
    char why[160];
    if (!evtc_cuda_gemm_config_check(&cs[i], &v, why, sizeof why)) bad++;
    for (int j = 0; j < i; j++) dup += same_cfg(&cs[i], &cs[j]);
    pp += cs[i].pingpong;
    one += cs[i].consumers == 1;
    cl2 += cs[i].cluster_m == 2;
    if (cs[i].group_m != 8) bad++;
  }
  CHECK(bad == 0 && dup == 0, "%d refused, %d duplicates", bad, dup);
  CHECK(pp > 0 && one > 0 && pp + one < n, "%d pingpong, %d one-consumer of %d", pp, one, n);
  CHECK(2 * cl2 == n, "%d of %d candidates on 2x1 clusters (each tile shape with and without)", cl2, n);
  CHECK(evtc_cuda_gemm_tune_space(&f, 4, true, 0, cs, 512) == 3, "reduced space");
  printf("search space: %d candidates per group_m (%d pingpong, %d with one consumer, %d on 2x1 clusters)\n", n, pp,
         one, cl2);
}

static evtc_cuda_device fake_device(void) {
  evtc_cuda_device dev = {.sm_count = 132, .cc_major = 9, .cc_minor = 0};
  snprintf(dev.name, sizeof dev.name, "Test GPU");
  return dev;
}

static bool write_text(const char *path, const char *text) {
  unlink(path);   /* a new file: the lookup must notice the change */
  FILE *f = fopen(path, "w");
  if (!f) return false;
  fputs(text, f);
  return fclose(f) == 0;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  char *s = calloc(1, 8192);
  if (f) {
    size_t n = fread(s, 1, 8191, f);
    s[n] = 0;
    fclose(f);
  }
  return s;
}

/* Copy of text with the line starting with `key ` replaced by repl (NULL: deleted). */
static char *edit_line(const char *text, const char *key, const char *repl) {
  char *out = calloc(1, strlen(text) + 512);
  size_t kl = strlen(key);
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p + 1) : strlen(p);
    if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
      if (repl) strcat(strcat(out, repl), "\n");
    } else {
      strncat(out, p, len);
    }
    p += len;
  }
  return out;
}

static void test_cache(void) {
  evtc_cuda_device dev = fake_device();
  evtc_cuda_tune_device id = evtc_cuda_tune_device_of(&dev);
  evtc_cuda_gemm_family f = {.in = EVTC_BF16, .a_kmajor = true, .b_kmajor = false, .visitor = true};
  evtc_cuda_gemm_variant v = {.in = EVTC_BF16, .out = EVTC_F32, .a_kmajor = true, .b_kmajor = false};
  evtc_cuda_gemm_config got, def = evtc_cuda_gemm_config_default();
  char why[512], path[4352];
  evtc_cuda_gemm_tuned t = {.cfg = def, .n_problems = 2, .mnk = {{8192, 8192, 4096}, {4096, 4096, 4096}},
                            .tflops = {812.5, 700.25}, .default_tflops = {800, 690.5}, .candidates = 120,
                            .rejected = 2, .compile_s = 1.5, .measure_s = 9.25}, r;
  t.cfg.tile_n = 128;
  t.cfg.stages = 5;
  t.cfg.pingpong = true;
  t.cfg.group_m = 16;
  CHECK(!evtc_cuda_gemm_tune_load(&id, &f, &r, why, sizeof why) && strstr(why, "not tuned yet"), "absent: %s", why);
  CHECK(!evtc_cuda_gemm_tuned_config(&dev, &v, true, false, &got), "absent: no config");
  evtc_diag d = {0};
  CHECK(evtc_cuda_gemm_tune_save(&id, &f, &t, &d) == EVTC_OK, "save: %s", d.msg);
  CHECK(evtc_cuda_gemm_tune_load(&id, &f, &r, why, sizeof why), "load: %s", why);
  CHECK(same_cfg(&r.cfg, &t.cfg) && r.n_problems == 2 && r.mnk[1][2] == 4096 && r.tflops[0] == 812.5 &&
            r.default_tflops[1] == 690.5 && r.candidates == 120 && r.rejected == 2 && r.compile_s == 1.5 &&
            r.measure_s == 9.25,
        "round trip");
  CHECK(evtc_cuda_gemm_tuned_config(&dev, &v, true, false, &got) && same_cfg(&got, &t.cfg), "lookup finds the result");
  CHECK(!evtc_cuda_gemm_tuned_config(&dev, &v, false, false, &got), "another family (store) is not tuned");
  evtc_cuda_gemm_variant f32 = v;
  f32.in = EVTC_F32;
  CHECK(!evtc_cuda_gemm_tuned_config(&dev, &f32, true, false, &got), "f32 inputs: no family");
  evtc_cuda_device other = dev;
  other.sm_count = 114;
  CHECK(!evtc_cuda_gemm_tuned_config(&other, &v, true, false, &got), "another SM count is another device");

  CHECK(evtc_cuda_gemm_tune_path(&id, &f, path, sizeof path), "path");
  char *good = read_text(path);
  char other_dev[160];
  snprintf(other_dev, sizeof other_dev, "device Other GPU");
  struct {
    const char *what;
    char *text;
  } bad[] = {
      {"garbage", strdup("\x01\x02 not a tuning file\n")},
      {"empty", strdup("")},
      {"truncated", strndup(good, strlen(good) / 2)},
      {"missing config", edit_line(good, "config", NULL)},
      {"another device", edit_line(good, "device", other_dev)},
      {"another template", edit_line(good, "template", "template 0000000000000000")},
      {"refused config", edit_line(good, "config", "config 256x256x64 s4 c2 g8")},
      {"unreadable config", edit_line(good, "config", "config 128x128")},
      {"unknown key", edit_line(good, "rejected", "rejected 2\ncolour blue")},
      {"duplicate key", edit_line(good, "rejected", "rejected 2\nrejected 3")},
      {"bad problem", edit_line(good, "problem", "problem 8192x8192 1 2")},
      {"other version", edit_line(good, "evtc-gemm-tune", "evtc-gemm-tune 2")},
      {"sm_80 config", edit_line(good, "config", "config 128x128x64 s4 c2 g8 sm80")},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(write_text(path, bad[i].text), "write %s", bad[i].what);
    why[0] = 0;
    CHECK(!evtc_cuda_gemm_tune_load(&id, &f, &r, why, sizeof why) && why[0], "%s: loaded", bad[i].what);
    got = def;
    CHECK(!evtc_cuda_gemm_tuned_config(&dev, &v, true, false, &got) && same_cfg(&got, &def), "%s: lookup", bad[i].what);
    printf("  %-18s -> %s\n", bad[i].what, why);
    free(bad[i].text);
  }
  CHECK(write_text(path, good), "restore");
  CHECK(evtc_cuda_gemm_tuned_config(&dev, &v, true, false, &got) && same_cfg(&got, &t.cfg), "lookup after repair");
  free(good);
}

/* Where the plan takes a tuned config (test_cache leaves its bf16-mk-kn-visitor result in place): a visitor
 * epilogue that reduces nothing gets it; one with a bias gradient's column sums keeps the pingpong 128 x 128
 * tiles with 4 stages measured for such epilogues, one with a layernorm's row sums only the cooperative default,
 * since the tuner measured neither (cuda_emit_evt.c's tile_config). */
static void test_plan_tuned(void) {
  evtc_cuda_device dev = fake_device();
  snprintf(dev.arch, sizeof dev.arch, "sm_90a");
  evtc_cuda_gemm_variant v = {.in = EVTC_BF16, .out = EVTC_F32, .a_kmajor = true, .b_kmajor = false};
  evtc_cuda_gemm_config tuned;
  CHECK(evtc_cuda_gemm_tuned_config(&dev, &v, true, false, &tuned), "plan: the tuned result is there");
  static const char *const text[3] = {
      "graph bias {\n  %x = input() : bf16[256,1024]\n  %w = param() : bf16[1024,512]\n  %b = param() : bf16[512]\n"
      "  %h0 = matmul(%x, %w) : bf16[256,512]\n  %h = add(%h0, %b) : bf16[256,512]\n  output %h\n}\n",
      "graph bias_grad {\n  %x = input() : bf16[256,1024]\n  %w = param() : bf16[1024,512]\n  %b = param() : bf16[512]\n"
      "  %h0 = matmul(%x, %w) : bf16[256,512]\n  %h = add(%h0, %b) : bf16[256,512]\n"
      "  %db = reduce_sum(%h) {axes=[0]} : bf16[512]\n  output %h\n  output %db\n}\n",
      "graph row_stats {\n  %x = input() : bf16[256,1024]\n  %w = param() : bf16[1024,512]\n"
      "  %h = matmul(%x, %w) : bf16[256,512]\n  %hf = cast(%h) {dtype=f32} : f32[256,512]\n"
      "  %s = reduce_sum(%hf) {axes=[1]} : f32[256]\n  output %h\n  output %s\n}\n"};
  const evtc_cuda_gemm_config coop = evtc_cuda_gemm_config_default();
  for (int i = 0; i < 3; i++) {
    char err[512], why[256] = "";
    evtc_graph *g = evtc_graph_parse_string(text[i], "plan", err, sizeof err);
    CHECK(g != NULL, "plan %d: %s", i, err);
    if (!g) continue;
    int32_t ids[8];
    int n = 0;
    for (int32_t j = 0; j < g->n_nodes && n < 8; j++)
      if (!evtc_op_is_leaf(g->nodes[j]->op)) ids[n++] = j;
    evtc_diag d = {0};
    evtc_kernel *k = evtc_kernel_build(g, ids, n, &d);
    evtc_cuda_evt_plan pl;
    const bool planned = k && evtc_cuda_evt_plan_of(k, &dev, &pl, why, sizeof why);
    CHECK(planned, "plan %d: %s%s", i, d.msg, why);
    if (planned && i == 0) CHECK(same_cfg(&pl.cfg, &tuned), "plan: the bias epilogue takes the tuned config");
    if (planned && i == 1)
      CHECK(pl.cfg.pingpong && pl.cfg.tile_m == 128 && pl.cfg.tile_n == 128 && pl.cfg.stages == 4 &&
                pl.cfg.group_m == 8 && !same_cfg(&pl.cfg, &tuned),
            "plan: the column sums keep pingpong 128x128 s4 g8 (got %dx%d s%d g%d%s)", pl.cfg.tile_m, pl.cfg.tile_n,
            pl.cfg.stages, pl.cfg.group_m, pl.cfg.pingpong ? " pp" : "");
    if (planned && i == 2)
      CHECK(!pl.cfg.pingpong && pl.cfg.tile_m == coop.tile_m && pl.cfg.tile_n == coop.tile_n &&
                pl.cfg.consumers == coop.consumers && !same_cfg(&pl.cfg, &tuned),
            "plan: the row sums take the cooperative default (got %dx%d s%d g%d%s)", pl.cfg.tile_m, pl.cfg.tile_n,
            pl.cfg.stages, pl.cfg.group_m, pl.cfg.pingpong ? " pp" : "");
    evtc_kernel_free(k);
    evtc_graph_free(g);
  }
}

/* An sm_80 family's result: its own file, found by the lookup for the sm_80 template only; an sm_90a config
 * there is refused. */
static void test_cache_sm80(void) {
  evtc_cuda_device dev = fake_device();
  evtc_cuda_tune_device id = evtc_cuda_tune_device_of(&dev);
  evtc_cuda_gemm_family f = {.in = EVTC_F16, .a_kmajor = false, .b_kmajor = true, .visitor = false, .sm80 = true};
  evtc_cuda_gemm_variant v = {.in = EVTC_F16, .out = EVTC_F16, .a_kmajor = false, .b_kmajor = true};
  evtc_cuda_gemm_tuned t = {.cfg = evtc_cuda_gemm_family_default(&f, 227 * 1024), .n_problems = 1,
                            .mnk = {{4096, 4096, 4096}}, .tflops = {300}, .default_tflops = {290}, .candidates = 60},
                       r;
  t.cfg.tile_m = 128;
  t.cfg.stages = 5;
  evtc_cuda_gemm_config got;
  char why[512], path[4352];
  evtc_diag d = {0};
  CHECK(!evtc_cuda_gemm_tuned_config(&dev, &v, false, true, &got), "sm_80: absent");
  CHECK(evtc_cuda_gemm_tune_save(&id, &f, &t, &d) == EVTC_OK, "sm_80 save: %s", d.msg);
  CHECK(evtc_cuda_gemm_tune_load(&id, &f, &r, why, sizeof why) && same_cfg(&r.cfg, &t.cfg) && r.cfg.sm80,
        "sm_80 load: %s", why);
  CHECK(evtc_cuda_gemm_tuned_config(&dev, &v, false, true, &got) && same_cfg(&got, &t.cfg) && got.sm80,
        "sm_80: the lookup finds the result");
  CHECK(!evtc_cuda_gemm_tuned_config(&dev, &v, false, false, &got), "sm_80: not the sm_90a family's");
  CHECK(evtc_cuda_gemm_tune_path(&id, &f, path, sizeof path), "sm_80 path");
  char *good = read_text(path), *other = edit_line(good, "config", "config 128x128x64 s4 c2 g8");
  CHECK(write_text(path, other) && !evtc_cuda_gemm_tune_load(&id, &f, &r, why, sizeof why) &&
            strstr(why, "other template"),
        "sm_80: an sm_90a config refused: %s", why);
  free(good);
  free(other);
}

/* XDG_CACHE_HOME = tmp, tmp/evtc/cuda -> the real CUBIN cache. */
static bool setup_cache(void) {
  char cuda[4096], link[128];
  if (!mkdtemp(tmp) || !evtc_cuda_cache_dir(cuda, sizeof cuda) || !evtc_mkdirs(cuda)) return false;
  snprintf(link, sizeof link, "%s/evtc", tmp);
  if (!evtc_mkdirs(link)) return false;
  snprintf(link, sizeof link, "%s/evtc/cuda", tmp);
  return symlink(cuda, link) == 0 && setenv("XDG_CACHE_HOME", tmp, 1) == 0;
}

static void remove_cache(void) {
  char p[512];
  snprintf(p, sizeof p, "%s/evtc/tune", tmp);
  DIR *dir = opendir(p);
  for (struct dirent *e; dir && (e = readdir(dir));) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    char f[800];
    snprintf(f, sizeof f, "%s/%s", p, e->d_name);
    unlink(f);
  }
  if (dir) closedir(dir);
  rmdir(p);
  snprintf(p, sizeof p, "%s/evtc/cuda", tmp);
  unlink(p);
  snprintf(p, sizeof p, "%s/evtc", tmp);
  rmdir(p);
  rmdir(tmp);
}

static const evtc_cuda_gemm_family gpu_fams[] = {
    {.in = EVTC_BF16, .a_kmajor = true, .b_kmajor = true, .visitor = false},
    {.in = EVTC_F16, .a_kmajor = false, .b_kmajor = false, .visitor = true},
    {.in = EVTC_BF16, .a_kmajor = true, .b_kmajor = false, .visitor = true, .sm80 = true},
};

static void test_tuning(evtc_cuda_device *dev) {
  evtc_cuda_gemm_tune_options o = {.reduced = true, .n_problems = 2, .mnk = {{1000, 520, 200}, {264, 776, 1032}},
                                   .log = stdout};
  for (size_t i = 0; i < sizeof gpu_fams / sizeof gpu_fams[0]; i++) {
    char fam[32], cfg[64];
    evtc_cuda_gemm_family_name(&gpu_fams[i], fam, sizeof fam);
    evtc_cuda_gemm_tuned t;
    evtc_diag d = {0};
    printf("== tuning %s (reduced)\n", fam);
    evtc_status s = evtc_cuda_gemm_tune(dev, &gpu_fams[i], &o, &t, &d);
    CHECK(s == EVTC_OK, "%s: %s", fam, d.msg);
    if (s != EVTC_OK) continue;
    evtc_cuda_gemm_config_name(&t.cfg, cfg, sizeof cfg);
    printf("%s: winner %s, %d candidates, %d rejected, NVRTC %.1f s, GPU %.1f s\n", fam, cfg, t.candidates,
           t.rejected, t.compile_s, t.measure_s);
    CHECK(t.rejected == 0, "%s: %d correct configs rejected", fam, t.rejected);
    CHECK(t.candidates >= 4 && t.n_problems == 2 && t.tflops[0] > 0 && t.default_tflops[1] > 0, "%s: result", fam);
    evtc_cuda_gemm_variant v = {.in = gpu_fams[i].in, .out = EVTC_F32, .a_kmajor = gpu_fams[i].a_kmajor,
                                .b_kmajor = gpu_fams[i].b_kmajor};
    evtc_cuda_gemm_config got;
    CHECK(evtc_cuda_gemm_tuned_config(dev, &v, gpu_fams[i].visitor, gpu_fams[i].sm80, &got) && same_cfg(&got, &t.cfg),
          "%s: the lookup finds the winner", fam);
  }
}

int main(void) {
  if (!setup_cache()) {
    fprintf(stderr, "test_gpu_gemm_tune: cannot set up the temporary cache in %s\n", tmp);
    return 1;
  }
  test_families();
  test_space();
  test_space_sm80();
  test_cache();
  test_plan_tuned();
  test_cache_sm80();
  evtc_diag d = {0};
  evtc_cuda_gemm_tune_options o = {.reduced = true, .jobs = 2};
  bool nvrtc = true;
  for (size_t i = 0; i < sizeof gpu_fams / sizeof gpu_fams[0] && nvrtc; i++) {
    int built = 0, hits = 0;
    evtc_status s = evtc_cuda_gemm_tune_compile("sm_90a", &gpu_fams[i], &o, &built, &hits, &d);
    if (s == EVTC_ERR_UNSUPPORTED) nvrtc = false;
    else CHECK(s == EVTC_OK && built + hits == 4, "compile: %s (%d + %d kernels)", d.msg, built, hits);
  }
  evtc_cuda_device dev;
  d = (evtc_diag){0};
  bool gpu = evtc_cuda_device_open(&dev, 0, &d) == EVTC_OK;
  if (gpu && strcmp(dev.arch, "sm_90a") == 0) test_tuning(&dev);
  if (gpu) evtc_cuda_device_close(&dev);
  remove_cache();
  int rc = check_summary();
  if (rc == 0 && !(gpu && strcmp(dev.arch, "sm_90a") == 0)) {
    printf("SKIPPED: GPU tuning (%s)\n", gpu ? "the GPU is not sm_90a" : d.msg);
    return 77;
  }
  return rc;
}
