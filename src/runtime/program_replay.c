/* program_replay.c -- a program's runs replayed as one captured device graph (program_internal.h).
 *
 * Launching a training step's kernels one by one costs the host about a
 * microsecond and a half each on a GPU (a BERT-Large step launches ~1500);
 * replayed as a CUDA graph they cost about one less.  The first run queues
 * its launches plainly, so that whatever the backend makes lazily on a first
 * launch (module loads, tensor maps, shared-memory opt-ins) is made outside
 * any capture; the second run's launches are captured (the backend's
 * graph_begin .. graph_end around the run() calls alone: the step was
 * written before, by begin_run, and every kernel reads it from device
 * memory, so one graph serves every step) and the graph is launched; later
 * runs replay it.  A program's launch arguments are fixed for its life
 * (program.c places every buffer once), so the graph stays valid unless the
 * backend moves memory the launches read (graph_current): then the next run
 * captures again.
 *
 * Replay is off when the backend captures no graphs, when a kernel runs in
 * the interpreter (its host copies cannot be captured), or when
 * EVTC_CUDA_GRAPH=0; a capture that fails prints one warning with the
 * backend's error and leaves the program launching kernel by kernel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/program_internal.h"

void evtc_replay_init(evtc_replay *r, const evtc_backend *be, int interpreted) {
  *r = (evtc_replay){.be = be};
  const char *env = getenv("EVTC_CUDA_GRAPH");
  if (!be->graph_begin) snprintf(r->off, sizeof r->off, "the %s backend offers no graphs", be->name);
  else if (env && strcmp(env, "0") == 0) snprintf(r->off, sizeof r->off, "EVTC_CUDA_GRAPH=0");
  else if (interpreted)
    snprintf(r->off, sizeof r->off, "%d kernel%s in the interpreter", interpreted, interpreted == 1 ? " runs" : "s run");
  else r->on = true;
}

void evtc_replay_free(evtc_replay *r) {
  if (r->graph) r->be->graph_free(r->be, r->graph);
  r->graph = NULL;
}

/* Captures the launches of launch_all(ctx) into r->graph (nothing runs).  On failure: one warning naming the
 * cause, replay off for good, false. */
static bool capture(evtc_replay *r, evtc_replay_launch_fn launch_all, void *ctx) {
  evtc_diag cd = {0};
  if (r->be->graph_begin(r->be, &cd) == EVTC_OK) {
    evtc_diag ld = {0};
    const evtc_status launched = launch_all(ctx, &ld);
    r->graph = r->be->graph_end(r->be, &cd);
    if (launched != EVTC_OK) {     /* the launch's error says more than the capture's end */
      evtc_replay_free(r);
      cd = ld;
    }
  }
  if (r->graph) {
    r->captures++;
    return true;
  }
  fprintf(stderr,
          "evtc: WARNING: the %s backend could not capture a run's launches as a graph (%s); this program's runs "
          "launch their kernels one by one from now on\n", r->be->name, cd.msg);
  r->on = false;
  snprintf(r->off, sizeof r->off, "the capture failed: %.100s", cd.msg);
  return false;
}

evtc_status evtc_replay_run(evtc_replay *r, evtc_replay_launch_fn launch_all, void *ctx, evtc_diag *d) {
  if (!r->on) return launch_all(ctx, d);
  if (r->graph && !r->be->graph_current(r->be, r->graph)) evtc_replay_free(r);   /* memory it reads moved */
  if (!r->graph) {
    if (!r->ran_plain) {
      if (launch_all(ctx, d) != EVTC_OK) return d->status;
      r->ran_plain = true;
      return EVTC_OK;
    }
    if (!capture(r, launch_all, ctx)) return launch_all(ctx, d);     /* nothing captured has run: run it now */
  }
  return r->be->graph_launch(r->be, r->graph, d);
}
