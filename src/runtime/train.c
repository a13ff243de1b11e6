/* train.c -- the training loop: data, joint graph, steps, progress.
 *
 * One trainer owns the rebatched model, the joint graph, the interpreter
 * or a compiled program (a backend's kernels, runtime/program.h), and a
 * buffer for every leaf of the joint graph.  A step runs the graph with the
 * global step number as the dropout offset on the mini-batch gathered into
 * the INPUT buffers before it (a program's batch comes from a copy of the
 * data in the inputs' buffer formats made once, so a step converts
 * nothing), gathers the next step's batch -- on a device while the run's
 * kernels run, queued behind them (BERT-Large on an H200: 0.25 ms a step
 * no longer spent before the run) -- and copies each `updates` output into
 * the PARAM or STATE buffer it replaces, which the next run reads.  Each
 * step's wall time (run, next gather, the loss's download) is kept for the
 * report: the first apart, the median of the rest, and the median of each
 * phase of it (evtc_train_phase), so that the time a step spends outside
 * its kernels shows.
 */
#include "runtime/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/init.h"
#include "runtime/interp.h"
#include "runtime/program.h"
#include "runtime/program_plan.h"

enum { TIMED_STEPS = 1 << 20 };   /* step times kept for the median */

typedef struct trainer {
  evtc_graph *fwd;                 /* the model rebatched to the training batch */
  evtc_graph *joint;               /* forward + backward + optimizer */
  const evtc_node *loss;           /* joint's loss node */
  evtc_interp *it;                 /* without a backend */
  evtc_program *prog;              /* with one: PARAM/STATE values live in it during training */
  evtc_leaf_values values;         /* joint's leaves */
  const evtc_dataset_column **feed; /* by joint node id: the column of an INPUT */
  evtc_rows_table **table;         /* by joint node id, with a program: an INPUT's column in its buffer format */
  evtc_dataset train;
  int64_t batch;
} trainer;

double *evtc_leaf_values_find(const evtc_leaf_values *v, const char *name) {
  const evtc_node *n = evtc_graph_find(v->g, name);
  return n ? v->data[n->id] : NULL;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place); NAN when n is 0. */
static double median(double *v, int64_t n) {
  if (n == 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, compare_doubles);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* splitmix64: the shuffling stream (seeded, the same on every machine). */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Fisher-Yates shuffle of perm[0..n) with unbiased bounded draws. */
static void shuffle(int64_t *perm, int64_t n, uint64_t *state) {
  for (int64_t i = n - 1; i > 0; i--) {
    uint64_t bound = (uint64_t)i + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
    do r = next_random(state);
    while (r >= limit);
    int64_t j = (int64_t)(r % bound), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

static void trainer_free(trainer *t) {
  if (t->values.data)
    for (int32_t i = 0; i < t->joint->n_nodes; i++) free(t->values.data[i]);
  free(t->values.data);
  free(t->feed);
  if (t->table)
    for (int32_t i = 0; i < t->joint->n_nodes; i++) evtc_program_rows_table_free(t->prog, t->table[i]);
  free(t->table);
  if (t->it) evtc_interp_free(t->it);
  evtc_program_free(t->prog);
  evtc_graph_free(t->joint);
  evtc_graph_free(t->fwd);
  evtc_dataset_free(&t->train);
}

/* Every label of a cross-entropy loss of fwd in [0, classes) and whole, checked once before the first step:
 * on the GPU the loss may read vocabulary logits padded with masked columns (gemm-pad), where a label past
 * the classes would not fail the kernels' range check. */
static evtc_status check_labels(const evtc_graph *fwd, const evtc_dataset *data, evtc_diag *d) {
  for (int32_t i = 0; i < fwd->n_nodes; i++) {
    const evtc_node *n = fwd->nodes[i];
    if (n->op != EVTC_OP_CROSS_ENTROPY) continue;
    const evtc_node *lab = n->inputs[1];
    while (lab->op == EVTC_OP_RESHAPE) lab = lab->inputs[0];
    const evtc_dataset_column *col = lab->op == EVTC_OP_INPUT ? evtc_dataset_column_find(data, lab->name) : NULL;
    const evtc_type *logits = &n->inputs[0]->type;
    int64_t classes = logits->shape[logits->rank - 1], count = col ? data->n_samples * col->sample_numel : 0;
    for (int64_t j = 0; j < count; j++) {
      double v = col->data[j];
      if (!(v >= 0 && v < (double)classes && v == floor(v)))
        return evtc_diag_set(d, EVTC_ERR_INVALID,
                             "label %g of sample %lld (input %%%s) is not one of the %lld classes of %%%s (%s)", v,
                             (long long)(j / col->sample_numel), lab->name, (long long)classes, n->name,
                             evtc_op_get(n->op)->name);
    }
  }
  return EVTC_OK;
}

/* Everything before the first step; EVTC_OK or the first error in d. */
static evtc_status trainer_setup(trainer *t, const evtc_graph *model, const char *dir, const evtc_train_options *o,
                                 evtc_diag *d) {
  if (!model->loss)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "the model has no `loss` line: nothing to minimise");
  if (o->optim.kind == EVTC_OPTIM_NONE)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "training needs an optimizer (sgd or adamw)");
  if (!evtc_dataset_exists(dir, "train")) return evtc_diag_set(d, EVTC_ERR_IO, "data directory %s has no train/ folder", dir);
  int64_t batch = o->batch;
  for (int32_t i = 0; batch == 0 && i < model->n_nodes; i++)
    if (model->nodes[i]->op == EVTC_OP_INPUT && model->nodes[i]->type.rank > 0) batch = model->nodes[i]->type.shape[0];
  if (batch <= 0) return evtc_diag_set(d, EVTC_ERR_INVALID, "the model has no batched input");
  t->batch = batch;
  if (!(t->fwd = evtc_graph_rebatch(model, batch, d))) return d->status;
  evtc_program_keep_step_outputs(t->fwd);   /* test predictions come from the model itself (train_eval.c) */
  if (evtc_dataset_load(&t->train, t->fwd, dir, "train", d) != EVTC_OK ||
      check_labels(t->fwd, &t->train, d) != EVTC_OK)
    return d->status;
  if (t->train.n_samples < batch)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "batch %lld is larger than the training set (%lld samples in %s/train)",
                         (long long)batch, (long long)t->train.n_samples, dir);
  if (o->backend) {              /* the target's forward passes (fused attention on the GPU) before autodiff */
    evtc_graph *fused = evtc_program_optimize_forward(t->fwd, evtc_program_target(o->backend), o->backend,
                                                      o->log, d);
    if (d->status != EVTC_OK) return d->status;
    if (fused) {
      evtc_graph_free(t->fwd);
      t->fwd = fused;
    }
  }
  if (!(t->joint = evtc_autodiff(t->fwd, NULL, 0, &o->optim, d))) return d->status;
  if (o->backend) {              /* compiled kernels run the target's optimised joint graph */
    evtc_graph *opt = evtc_program_optimize(t->joint, o->backend, d);
    if (!opt) return d->status;
    evtc_graph_free(t->joint);
    t->joint = opt;
  }
  t->loss = evtc_graph_find(t->joint, model->loss->name);
  EVTC_ASSERT(t->loss != NULL);
  if (o->backend) {
    int nk = 0;
    int32_t *plan = evtc_program_plan(t->joint, o->partitioner ? o->partitioner : "ilp", o->backend, &nk, o->log, d);
    if (d->status != EVTC_OK) return d->status;
    t->prog = evtc_program_new(t->joint, plan, nk, o->backend, stderr, d);
    free(plan);
    if (!t->prog) return d->status;
  } else {
    t->it = evtc_interp_new(t->joint);
  }
  t->values.g = t->joint;
  t->values.data = calloc((size_t)t->joint->n_nodes + 1, sizeof(double *));
  t->feed = calloc((size_t)t->joint->n_nodes + 1, sizeof *t->feed);
  t->table = calloc((size_t)t->joint->n_nodes + 1, sizeof *t->table);
  for (int32_t i = 0; i < t->joint->n_nodes; i++) {
    const evtc_node *n = t->joint->nodes[i];
    if (n->op != EVTC_OP_INPUT && n->op != EVTC_OP_PARAM && n->op != EVTC_OP_STATE) continue;
    int64_t numel = evtc_type_numel(&n->type);
    t->values.data[i] = calloc((size_t)(numel > 0 ? numel : 1), sizeof(double));
    if (n->op == EVTC_OP_INPUT) {
      t->feed[i] = evtc_dataset_column_find(&t->train, n->name);
      if (!t->feed[i])
        return evtc_diag_set(d, EVTC_ERR_INVALID, "input %%%s of the joint graph has no data in %s/train", n->name,
                             dir);
      if (t->prog) t->table[i] = evtc_program_rows_table(t->prog, n, t->feed[i]->data, t->train.n_samples);
    } else {
      int64_t have = 0;
      const double *w = evtc_weights_find(o->initial, n->name, &have);
      if (w && have == numel) memcpy(t->values.data[i], w, sizeof(double) * (size_t)numel);
      else evtc_init_leaf(n, t->values.data[i], o->seed);
    }
    if (t->prog) evtc_program_set(t->prog, n, t->values.data[i]);
    else evtc_interp_set(t->it, n, t->values.data[i]);
  }
  return EVTC_OK;
}

/* Gathers samples rows[0..batch) into the input leaves: a program's buffers (queued after a run in flight on a
 * device, which reads the batch before), or the values the interpreter reads in place. */
static void trainer_feed(trainer *t, const int64_t *rows, int64_t batch) {
  for (int32_t i = 0; i < t->joint->n_nodes; i++)
    if (t->table[i]) evtc_program_set_rows(t->prog, t->joint->nodes[i], t->table[i], rows, batch);
    else if (t->feed[i]) evtc_dataset_gather(t->feed[i], rows, batch, t->values.data[i]);
}

/* One step on the batch fed before; feeds samples next[0..batch) (NULL: none) for the step after it, on a device
 * while the step's kernels run (the interpreter has run by then).  Returns the loss (d set on error); phase[] gets
 * the step's wall seconds by evtc_train_phase. */
static double trainer_step(trainer *t, const int64_t *next, int64_t batch, uint64_t step, double *phase,
                           evtc_diag *d) {
  const double t0 = now_seconds();
  if ((t->prog ? evtc_program_start(t->prog, step, d) : evtc_interp_run(t->it, step, d)) != EVTC_OK) return NAN;
  const double t1 = now_seconds();
  if (next) trainer_feed(t, next, batch);
  const double t2 = now_seconds();
  if (t->prog && evtc_program_wait(t->prog, d) != EVTC_OK) return NAN;
  const double t3 = now_seconds();
  double loss = NAN;
  if (t->prog) {
    evtc_program_get(t->prog, t->loss, &loss);
    evtc_program_update(t->prog);
  } else {
    loss = evtc_interp_value(t->it, t->loss)[0];
    for (int32_t k = 0; k < t->joint->n_outputs; k++) {
      const evtc_output *out = &t->joint->outputs[k];
      if (!out->updates) continue;
      size_t bytes = sizeof(double) * (size_t)evtc_type_numel(&out->updates->type);
      memmove(t->values.data[out->updates->id], evtc_interp_value(t->it, out->node), bytes);
    }
  }
  phase[EVTC_TRAIN_FEED] = t2 - t1;
  phase[EVTC_TRAIN_RUN] = (t1 - t0) + (t3 - t2);
  phase[EVTC_TRAIN_AFTER] = now_seconds() - t3;
  return loss;
}

/* The live progress line: bar, epoch, step, loss, speed. */
static void draw_live(FILE *log, int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                      double speed) {
  enum { WIDTH = 24 };
  double done = ((double)(epoch - 1) + (double)step / (double)steps) / (double)epochs;
  int fill = (int)(done * WIDTH + 0.5);
  char bar[WIDTH + 1];
  for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = 0;
  fprintf(log, "\r[%s] epoch %lld/%lld step %lld/%lld loss %.4f %.1f steps/s\033[K", bar, (long long)epoch,
          (long long)epochs, (long long)step, (long long)steps, loss, speed);
  fflush(log);
}

/* Runs the epochs; fills r's training fields. */
static evtc_status trainer_loop(trainer *t, const evtc_train_options *o, evtc_train_report *r, evtc_diag *d) {
  int64_t n = t->train.n_samples, batch = r->batch, steps = n / batch;
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)n), *next_perm = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  uint64_t rng = o->seed ^ 0x73687566666c65ull;       /* "shuffle": a stream apart from init's */
  shuffle(perm, n, &rng);
  trainer_feed(t, perm, batch);
  int64_t total = o->epochs * steps;
  const size_t kept = (size_t)(total < TIMED_STEPS ? total : TIMED_STEPS);
  double *times = malloc(sizeof(double) * kept), *phases[EVTC_TRAIN_PHASES];
  for (int ph = 0; ph < EVTC_TRAIN_PHASES; ph++) phases[ph] = malloc(sizeof(double) * kept);
  double start = now_seconds();
  for (int64_t epoch = 1; epoch <= o->epochs; epoch++) {
    if (epoch < o->epochs) {     /* the next epoch's order, for its first batch, fed during this epoch's last step */
      memcpy(next_perm, perm, sizeof(int64_t) * (size_t)n);
      shuffle(next_perm, n, &rng);
    }
    double sum = 0, epoch_start = now_seconds(), last_draw = 0;
    for (int64_t s = 0; s < steps; s++) {
      double step_start = now_seconds(), phase[EVTC_TRAIN_PHASES] = {0};
      const int64_t *next = s + 1 < steps ? perm + (s + 1) * batch : epoch < o->epochs ? next_perm : NULL;
      double loss = trainer_step(t, next, batch, (uint64_t)r->steps, phase, d);
      if (d->status != EVTC_OK) break;
      double took = now_seconds() - step_start;
      if (r->steps == 0) r->first_step_seconds = took;
      else if (r->timed_steps < TIMED_STEPS) {
        for (int ph = 0; ph < EVTC_TRAIN_PHASES; ph++) phases[ph][r->timed_steps] = phase[ph];
        times[r->timed_steps++] = took;
      }
      r->steps++;
      if (!isfinite(loss)) {
        r->diverged = true;
        evtc_diag_set(d, EVTC_ERR_RUNTIME, "the loss became %g at epoch %lld step %lld (try a smaller --lr)", loss,
                      (long long)epoch, (long long)s + 1);
        break;
      }
      sum += loss;
      double now = now_seconds();
      if (o->log && o->live && (now - last_draw > 0.1 || s + 1 == steps)) {
        draw_live(o->log, epoch, o->epochs, s + 1, steps, sum / (double)(s + 1),
                  (double)(s + 1) / (now - epoch_start));
        last_draw = now;
      }
    }
    if (d->status != EVTC_OK) break;
    int64_t *done = perm;
    perm = next_perm;
    next_perm = done;
    double mean = sum / (double)steps, speed = (double)steps / (now_seconds() - epoch_start);
    if (epoch == 1) r->first_loss = mean;
    r->final_loss = mean;
    if (o->log && !o->live)
      fprintf(o->log, "epoch %lld/%lld loss %.4f steps/s %.1f\n", (long long)epoch, (long long)o->epochs, mean, speed);
  }
  if (o->log && o->live) fputc('\n', o->log);
  r->seconds = now_seconds() - start;
  r->step_seconds = median(times, r->timed_steps);
  free(times);
  free(next_perm);
  for (int ph = 0; ph < EVTC_TRAIN_PHASES; ph++) {
    r->phase_seconds[ph] = median(phases[ph], r->timed_steps);
    free(phases[ph]);
  }
  free(perm);
  return d->status;
}

evtc_status evtc_train(const evtc_graph *model, const char *data_dir, const evtc_train_options *o,
                       evtc_train_report *r, evtc_diag *d) {
  memset(r, 0, sizeof *r);
  r->test_loss = NAN;
  r->test_accuracy = -1;
  r->step_seconds = NAN;
  trainer t = {0};
  double setup_start = now_seconds();
  if (trainer_setup(&t, model, data_dir, o, d) != EVTC_OK) goto out;
  r->setup_seconds = now_seconds() - setup_start;
  r->batch = t.batch;
  r->train_samples = t.train.n_samples;
  if (o->log) {
    const char *opt = o->optim.kind == EVTC_OPTIM_SGD ? "sgd" : "adamw";
    fprintf(o->log, "train: %lld samples, batch %lld, %lld steps/epoch, %s lr %g, %lld epochs\n",
            (long long)r->train_samples, (long long)r->batch, (long long)(r->train_samples / r->batch), opt,
            o->optim.lr, (long long)o->epochs);
  }
  if (t.prog) {
    evtc_program_stats ps = evtc_program_get_stats(t.prog);
    r->kernels = ps.kernels;
    r->interpreted_kernels = ps.interpreted;
    r->split_kernels = ps.splits;
    r->arena_bytes = ps.arena_bytes;
    r->owned_bytes = ps.owned_bytes;
  }
  evtc_status looped = trainer_loop(&t, o, r, d);
  if (t.prog) {     /* after the steps: a failed capture turns graphs off */
    evtc_program_stats ps = evtc_program_get_stats(t.prog);
    r->graph = ps.graph;
    memcpy(r->no_graph, ps.no_graph, sizeof r->no_graph);
  }
  for (int32_t i = 0; t.prog && i < t.joint->n_nodes; i++)   /* trained values back for evaluation and saving */
    if (t.joint->nodes[i]->op == EVTC_OP_PARAM || t.joint->nodes[i]->op == EVTC_OP_STATE)
      evtc_program_get(t.prog, t.joint->nodes[i], t.values.data[i]);
  if (looped != EVTC_OK) goto out;

  if (evtc_dataset_exists(data_dir, "test")) {
    evtc_dataset test;
    if (evtc_dataset_load(&test, model, data_dir, "test", d) != EVTC_OK) goto out;
    r->test_samples = test.n_samples;
    evtc_train_evaluate(model, &test, &t.values, &r->test_loss, &r->test_accuracy, d);
    evtc_dataset_free(&test);
    if (d->status != EVTC_OK) goto out;
  }
  if (o->save_path) r->saved_tensors = evtc_train_save(o->save_path, model, &t.values, d);
out:
  trainer_free(&t);
  return d->status;
}
