/* cmd_train.c -- `evtc train`: train a model on a folder of .npy files.
 *
 *   evtc train FILE --data DIR [--epochs N] [--batch B] [--lr X]
 *              [--optimizer sgd|adamw] [--seed S] [--save PATH] [--backend auto|cuda|cpu|interp]
 *              [--partitioner ilp|greedy|none|builtin] [--gemm evtc|sm80|cublaslt] [model options]
 *
 * --backend auto (the default) is cuda when a GPU is usable, else cpu; cuda runs
 * CUDA kernels (src/backend/cuda); cpu runs compiled CPU kernels (src/backend/cpu),
 * grouped by --partitioner (default ilp: the fusion ILP's plan; see
 * runtime/program_plan.h); interp runs the float64 reference interpreter.
 * Parameters start from the model file's values (ONNX initializers) or else
 * from their init attributes.  The loss is the model's, the one --loss asks
 * for (its --labels INPUT then needs DIR/train/INPUT.npy), or else the mean
 * of squares of the first output.
 * Defaults: 30 epochs, the batch the model file was written with, AdamW at
 * its default learning rate (1e-3), seed 0.  Progress goes to stdout: one
 * updating line on a terminal, one line per epoch otherwise.  Then
 * "test loss: X" and "test accuracy: X" when DIR/test exists, and the
 * checkpoint is written with --save.  The summary after training gives the
 * time to the first step (import, setup, first step), the median step after
 * it and, with a backend, the program's buffer memory (docs/cli.md `train`).
 * Exit status 2 on bad input (one message), 1 when the loss diverges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "runtime/train.h"

static const char train_usage[] =
    "usage: evtc train FILE --data DIR [--epochs N] [--batch B] [--lr X] [--optimizer sgd|adamw]\n"
    "                  [--seed S] [--save PATH] [--backend auto|cuda|cpu|interp] [--partitioner ilp|greedy|none|builtin]\n"
    "                  [--gemm evtc|sm80|cublaslt] [model options]\n";

enum { DEFAULT_EPOCHS = 30 };

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The timing and memory lines of the summary (and, on a backend with graphs, whether the steps replayed one). */
static void print_costs(const evtc_train_report *r, double import_seconds, const evtc_backend *be) {
  const bool program = be != NULL, device = program && be->finish != NULL;   /* a device runs the step queued */
  printf("time to first step: %.3f s (import %.3f s, setup %.3f s, first step %.3f s)\n",
         import_seconds + r->setup_seconds + r->first_step_seconds, import_seconds, r->setup_seconds,
         r->first_step_seconds);
  if (r->timed_steps > 0)
    printf("steady step: %.3f ms (median of the %lld steps after the first; medians of its phases: the run %.3f ms, "
           "the next batch fed %s %.3f ms, the loss read and the updates %.3f ms)\n", 1e3 * r->step_seconds,
           (long long)r->timed_steps, 1e3 * r->phase_seconds[EVTC_TRAIN_RUN], device ? "while it ran" : "after it",
           1e3 * r->phase_seconds[EVTC_TRAIN_FEED], 1e3 * r->phase_seconds[EVTC_TRAIN_AFTER]);
  if (program)
    printf("buffer memory: %.1f MiB (arena %.1f MiB, leaves and outputs %.1f MiB)\n",
           (double)(r->arena_bytes + r->owned_bytes) / 1048576.0, (double)r->arena_bytes / 1048576.0,
           (double)r->owned_bytes / 1048576.0);
  if (be && be->graph_begin) {
    if (r->graph) printf("launches: the steps after the first replayed one captured %s graph of their launches\n", be->name);
    else printf("launches: kernel by kernel (%s)\n", r->no_graph);
  }
}

/* Parses argv; false after printing why. */
static bool parse_options(int argc, char **argv, const char **model, const char **data, evtc_train_options *o,
                          evtc_cli_model_options *mo) {
  const char *lr = NULL;
  memset(o, 0, sizeof *o);
  o->epochs = DEFAULT_EPOCHS;
  o->optim = evtc_optim_default(EVTC_OPTIM_ADAMW);
  const char *backend = "auto";
  *model = *data = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v;
    int k = evtc_cli_model_option(argc, argv, &i, mo);
    if (k < 0) return false;
    if (k > 0) continue;
    if (strcmp(a, "--data") == 0) {
      if (!evtc_cli_value(argc, argv, &i, data)) return false;
    } else if (strcmp(a, "--epochs") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_int(a, v, 1, 1000000, &o->epochs)) return false;
    } else if (strcmp(a, "--batch") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_int(a, v, 1, 1 << 24, &o->batch)) return false;
    } else if (strcmp(a, "--lr") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &lr)) return false;
    } else if (strcmp(a, "--optimizer") == 0) {
      evtc_optimizer kind;
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_optimizer(v, false, &kind)) return false;
      o->optim = evtc_optim_default(kind);
    } else if (strcmp(a, "--backend") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &backend)) return false;
    } else if (strcmp(a, "--gemm") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_gemm(v)) return false;
    } else if (strcmp(a, "--partitioner") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_partitioner(v)) return false;
      o->partitioner = v;
    } else if (strcmp(a, "--seed") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &v) || !evtc_cli_u64(a, v, &o->seed)) return false;
    } else if (strcmp(a, "--save") == 0) {
      if (!evtc_cli_value(argc, argv, &i, &o->save_path)) return false;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "evtc: train: unknown option '%s'\n%s", a, train_usage);
      return false;
    } else if (!*model) {
      *model = a;
    } else {
      fprintf(stderr, "evtc: train: more than one model file ('%s', '%s')\n%s", *model, a, train_usage);
      return false;
    }
  }
  if (lr && !evtc_cli_positive("--lr", lr, &o->optim.lr)) return false;   /* after --optimizer, whatever the order */
  if (!*model || !*data) {
    fprintf(stderr, "evtc: train: %s\n%s", *model ? "--data DIR is required" : "no model file", train_usage);
    return false;
  }
  if (strcmp(backend, "interp") != 0) {
    evtc_diag d = {0};
    if (!(o->backend = evtc_backend_by_name(backend, &d))) {
      fprintf(stderr, "evtc: %s\n", d.msg);
      return false;
    }
  }
  return true;
}

int evtc_cmd_train(int argc, char **argv) {
  const char *model_path, *data_dir;
  evtc_train_options o;
  evtc_cli_model_options mo = {0};
  evtc_weights *weights = NULL;
  evtc_graph *model = NULL;
  if (evtc_cli_help(argc, argv, train_usage)) return EVTC_EXIT_OK;
  double import_start = now_seconds();
  if (!parse_options(argc, argv, &model_path, &data_dir, &o, &mo) ||
      !(model = evtc_cli_load_model(model_path, &mo, &weights)) || !evtc_cli_attach_loss(model, &mo, true)) {
    evtc_graph_free(model);
    evtc_weights_free(weights);
    evtc_cli_model_options_free(&mo);
    return EVTC_EXIT_BAD_INPUT;
  }
  double import_seconds = now_seconds() - import_start;
  o.log = stdout;
  o.live = isatty(fileno(stdout));
  o.initial = weights;
  evtc_train_report r;
  evtc_diag d = {0};
  evtc_status st = evtc_train(model, data_dir, &o, &r, &d);
  evtc_graph_free(model);
  evtc_weights_free(weights);
  evtc_cli_model_options_free(&mo);
  if (st != EVTC_OK) {
    fflush(stdout);
    fprintf(stderr, "evtc: %s\n", d.msg);
    return r.diverged ? EVTC_EXIT_FAIL : EVTC_EXIT_BAD_INPUT;
  }
  printf("trained %lld steps in %.2f s (%.1f steps/s), final loss %.4f\n", (long long)r.steps, r.seconds,
         r.seconds > 0 ? (double)r.steps / r.seconds : 0.0, r.final_loss);
  if (o.backend)
    printf("backend %s: %d kernels per step (%d in the interpreter, %d planned kernels split), partitioner %s, "
           "%.1f steps/s\n", o.backend->name, r.kernels, r.interpreted_kernels, r.split_kernels,
           o.partitioner ? o.partitioner : "ilp", r.seconds > 0 ? (double)r.steps / r.seconds : 0.0);
  else printf("backend interp: float64 interpreter, %.1f steps/s\n", r.seconds > 0 ? (double)r.steps / r.seconds : 0.0);
  print_costs(&r, import_seconds, o.backend);
  if (r.test_samples > 0) {
    printf("test loss: %.4f (%lld samples)\n", r.test_loss, (long long)r.test_samples);
    if (r.test_accuracy >= 0) printf("test accuracy: %.4f\n", r.test_accuracy);
  }
  if (o.save_path) printf("saved %d tensors to %s\n", r.saved_tensors, o.save_path);
  return EVTC_EXIT_OK;
}
