/* test_cpu_train_slow.c -- whole joint training graphs (forward + backward +
 * SGD or AdamW) compiled for the CPU against the float64 interpreter: the
 * loss of every step and every parameter and optimizer state after three
 * steps agree within float32 tolerance.  Models: examples/mlp.evt and the
 * tests/ir models that have a loss (those written with their own update
 * outputs are trained as written).  Slow: one compiler run per model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autodiff/autodiff.h"
#include "cpu_oracle.h"

static void train_model(const char *src_dir, const char *rel, evtc_optimizer kind, int64_t int_hi) {
  char path[1024], err[512], what[256];
  snprintf(path, sizeof path, "%s/%s", src_dir, rel);
  evtc_graph *fwd = evtc_graph_parse_file(path, err, sizeof err);
  CHECK(fwd != NULL, "%s: %s", rel, err);
  if (!fwd) return;
  bool written = false;
  for (int i = 0; i < fwd->n_outputs; i++) written |= fwd->outputs[i].updates != NULL;
  if (written) {
    if (kind == EVTC_OPTIM_SGD) {
      snprintf(what, sizeof what, "%s as written", rel);
      cpu_train_compare(fwd, 3, 1e-4, int_hi, what);
    }
    evtc_graph_free(fwd);
    return;
  }
  evtc_optim_config opt = evtc_optim_default(kind);
  evtc_diag d = {0};
  evtc_graph *joint = evtc_autodiff(fwd, NULL, 0, &opt, &d);
  CHECK(joint != NULL, "%s: autodiff: %s", rel, d.msg);
  snprintf(what, sizeof what, "%s with %s", rel, kind == EVTC_OPTIM_SGD ? "sgd" : "adamw");
  if (joint) cpu_train_compare(joint, 3, 1e-4, int_hi, what);
  evtc_graph_free(joint);
  evtc_graph_free(fwd);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  char dir[] = "/tmp/evtc-cpu-train-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1);
  const char *models[] = {"examples/mlp.evt", "tests/ir/mlp.evt", "tests/ir/names.evt", "tests/ir/norm.evt"};
  for (int m = 0; m < 4; m++) {
    train_model(argv[1], models[m], EVTC_OPTIM_SGD, 10);
    train_model(argv[1], models[m], EVTC_OPTIM_ADAMW, 10);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return check_summary();
}
