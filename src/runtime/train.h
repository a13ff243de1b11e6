/* train.h -- the training loop of the reference runtime.
 *
 * evtc_train takes a forward model with a loss and a data directory
 * (dataset.h: DIR/train/<input>.npy, optionally DIR/test/<input>.npy),
 * rebatches the model, builds the joint graph with the chosen optimizer
 * (autodiff.h), initialises PARAM/STATE leaves from the initial values
 * given (an imported model's weights) or else from their attributes, and
 * runs the float64 interpreter step after step: each epoch visits the
 * training samples in a fresh seeded order, drops the last partial batch,
 * and copies every `updates` output back into its PARAM/STATE after each
 * step.  Afterwards it evaluates the model on the test split, when there is
 * one, and saves a safetensors checkpoint when asked.
 */
#ifndef EVTC_TRAIN_H
#define EVTC_TRAIN_H

#include <stdbool.h>
#include <stdio.h>

#include "autodiff/autodiff.h"
#include "backend/backend.h"
#include "frontend/weights.h"
#include "runtime/dataset.h"

typedef struct evtc_train_options {
  int64_t epochs;             /* >= 1 */
  int64_t batch;              /* >= 1, or 0: the batch size the model was written with */
  evtc_optim_config optim;    /* SGD or ADAMW */
  uint64_t seed;              /* parameter initialisation and shuffling */
  const evtc_weights *initial; /* initial PARAM/STATE values by name (others: init attrs), or NULL */
  const evtc_backend *backend; /* run compiled kernels (runtime/program.h), or NULL: the float64 interpreter */
  const char *partitioner;    /* with a backend: the plan (runtime/program_plan.h: ilp, greedy, none, builtin); NULL: ilp */
  const char *save_path;      /* safetensors checkpoint of PARAM and STATE values, or NULL */
  FILE *log;                  /* progress lines, or NULL for none */
  bool live;                  /* log is a terminal: one updating line instead of a line per epoch */
} evtc_train_options;

/* The phases of a step, timed apart: the next step's batch gathered into the inputs (a program: queued behind the
 * run's kernels, while a device runs them), the run without that (a device program: its kernels queued and waited
 * for), the loss read back and the updates queued. */
typedef enum evtc_train_phase { EVTC_TRAIN_FEED, EVTC_TRAIN_RUN, EVTC_TRAIN_AFTER, EVTC_TRAIN_PHASES } evtc_train_phase;

typedef struct evtc_train_report {
  int64_t batch, steps, train_samples;
  double first_loss, final_loss;  /* mean training loss of the first and last epochs */
  double seconds;                 /* training time (evaluation and saving excluded) */
  bool diverged;                  /* stopped because the loss became NaN or infinite */
  int64_t test_samples;           /* 0: no test split */
  double test_loss;               /* loss on the test split */
  double test_accuracy;           /* -1 when the model has no (prediction, integer labels) pair */
  int saved_tensors;              /* tensors written to save_path */
  int kernels, interpreted_kernels; /* with a backend: kernels per step, of which run by the interpreter */
  int split_kernels;              /* planned kernels the backend could not run as one, split into nodes */
  double setup_seconds;           /* before the first step: data, passes, autodiff, plan, kernels built and compiled */
  double first_step_seconds;      /* the first step (a device backend's first launches included) */
  double step_seconds;            /* median time of the steps after the first (the first 2^20 of them); NAN for one step */
  int64_t timed_steps;            /* how many steps that median covers */
  double phase_seconds[EVTC_TRAIN_PHASES]; /* the median of each phase over the same steps */
  size_t arena_bytes, owned_bytes; /* with a backend: the program's buffers (evtc_program_stats) */
  bool graph;                     /* with a backend: the steps after the first replayed one captured graph of their
                                   * launches (evtc_program_stats.graph); else why not in no_graph */
  char no_graph[160];
} evtc_train_report;

/* Trains `model` (not modified) and fills *r.  Bad data or options give one
 * message in d (naming the file or node) and a status other than EVTC_OK;
 * a diverging loss gives EVTC_ERR_RUNTIME with r->diverged set. */
evtc_status evtc_train(const evtc_graph *model, const char *data_dir, const evtc_train_options *o,
                       evtc_train_report *r, evtc_diag *d);

/* ---- pieces shared by train.c and train_eval.c ---- */

/* Buffers of a graph's INPUT, PARAM and STATE leaves, indexed by node id. */
typedef struct evtc_leaf_values {
  const evtc_graph *g;
  double **data;
} evtc_leaf_values;

/* The buffer of the leaf named `name`, or NULL. */
double *evtc_leaf_values_find(const evtc_leaf_values *v, const char *name);

/* Runs `model` rebatched to the whole test split with the PARAM/STATE
 * values of `params` (matched by name) and sets *loss (NAN without a loss)
 * and *accuracy: argmax over the last axis of the model's first output that
 * is not the loss, against the integer INPUT whose shape is that output's
 * shape without the last axis; -1 when there is no such pair. */
evtc_status evtc_train_evaluate(const evtc_graph *model, const evtc_dataset *test, const evtc_leaf_values *params,
                                double *loss, double *accuracy, evtc_diag *d);

/* Saves every PARAM and STATE of `model` with its value from `params` as a
 * safetensors file; returns the number of tensors written, or -1 (d set). */
int evtc_train_save(const char *path, const evtc_graph *model, const evtc_leaf_values *params, evtc_diag *d);

#endif
