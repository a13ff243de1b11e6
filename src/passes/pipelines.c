/* pipelines.c -- the named pipelines: ordered pass-name lists, data only.
 *
 * `cpu` and `h200` are the default pipelines of the two targets (`evtc opt
 * --target T`).  They keep the graph's interface (outputs, the reported
 * loss); the `-noloss` variants add loss-elimination, EVT's choice for a
 * training step whose loss value nobody reads.  The two targets differ in
 * two passes: h200 runs permute-propagate, which sinks permutes toward their
 * consumers so that permute-fold absorbs them into matmul operand layouts
 * (free on the GPU GEMM templates); cpu leaves permutes where they are, as
 * EVT's BERT pipeline does; and h200 recomputes cheap forward values in the
 * backward (remat, after grad-factor).  Order: cleanup,
 * loss-elimination, decompositions, cse, constant folding, algebraic
 * simplification, split gradients as concats, permutation folding/propagation, broadcast
 * canonicalisation, cse, (grad-factor, cse, remat,) dce.
 */
#include <string.h>

#include "passes/manager.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The two targets' pipelines share everything but permute-propagate, and
 * each -noloss variant is its base plus loss-elimination after cleanup, so
 * the lists are built from two shared runs.  One pass per line, so that a
 * pass added by another change is one line. */
#define FRONT_PASSES          \
  "decompose",                \
  "cse",                      \
  "constant-fold",            \
  "simplify",                 \
  "pad-concat"
#define BACK_PASSES           \
  "permute-fold",             \
  "broadcast-canonicalize",   \
  "cse"

/* h200 recomputes cheap forward values in the backward (remat, after the last cse, which would merge them
 * back): activation memory, and a GEMM epilogue that already loads x computes 1 + erf(x / sqrt 2) rather
 * than load it; the CPU's kernels are compute-bound, so cpu keeps them.  Before that, grad-factor turns an
 * activation's gradient chain into the incoming gradient times one coefficient of forward values (GELU's
 * J(h)), which the forward GEMM can make beside the activation; cse then merges its constants. */
static const char *const cpu_passes[] = {"cleanup", FRONT_PASSES, BACK_PASSES, "dce"};
static const char *const cpu_noloss_passes[] = {"cleanup", "loss-elimination", FRONT_PASSES, BACK_PASSES, "dce"};
static const char *const h200_passes[] = {"cleanup",     FRONT_PASSES, "permute-propagate", BACK_PASSES,
                                          "grad-factor", "cse",        "remat",             "dce"};
static const char *const h200_noloss_passes[] = {"cleanup",     "loss-elimination", FRONT_PASSES, "permute-propagate",
                                                 BACK_PASSES,   "grad-factor",      "cse",        "remat",
                                                 "dce"};
/* run on a model before autodiff (runtime/program_plan.h): the attention the backward would otherwise tear apart,
 * patch-embedding convs as GEMMs (whose backward is GEMMs too), and vocabulary-wide GEMMs padded to TMA's
 * alignment (so are their backward GEMMs) */
static const char *const h200_forward_passes[] = {"conv-patchify", "permute-fold", "gemm-pad", "attention-fuse",
                                                  "dce"};
/* the CPU's conv2d_backward_weight template is ~20x slower than its GEMM (ViT-B patch embedding, batch 8) */
static const char *const cpu_forward_passes[] = {"conv-patchify", "permute-fold", "dce"};

const evtc_pipeline evtc_pipelines[] = {
    {"cpu", "default for --target cpu", cpu_passes, N(cpu_passes)},
    {"h200", "default for --target h200", h200_passes, N(h200_passes)},
    {"cpu-noloss", "cpu plus loss-elimination (training step without the loss value)", cpu_noloss_passes,
     N(cpu_noloss_passes)},
    {"h200-noloss", "h200 plus loss-elimination (training step without the loss value)", h200_noloss_passes,
     N(h200_noloss_passes)},
    {"h200-forward", "before autodiff for --target h200: patchify convs as GEMMs, aligned GEMM widths, fused attention", h200_forward_passes,
     N(h200_forward_passes)},
    {"cpu-forward", "before autodiff for --target cpu: patchify convs as GEMMs", cpu_forward_passes,
     N(cpu_forward_passes)},
};
const int evtc_pipeline_count = N(evtc_pipelines);

const evtc_pipeline *evtc_pipeline_find(const char *name) {
  for (int i = 0; i < evtc_pipeline_count; i++)
    if (strcmp(evtc_pipelines[i].name, name) == 0) return &evtc_pipelines[i];
  return NULL;
}
