/* dataset.c -- loading a data split (one .npy file per INPUT node) and
 * gathering mini-batches from it. */
#include "runtime/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/npy.h"
#include "runtime/precision.h"

/* Loads one file into column c for INPUT n; *samples is set from the file
 * (first file) or checked against it (later files). */
static evtc_status load_column(evtc_dataset_column *c, const evtc_node *n, const char *path, int64_t *samples,
                               const char *first_path, evtc_diag *d) {
  evtc_type t;
  double *data;
  if (n->type.rank == 0)
    return evtc_diag_set(d, EVTC_ERR_INVALID, "input %%%s is a scalar: training data needs a batch dimension",
                         n->name);
  if (evtc_npy_read(path, &t, &data, d) != EVTC_OK) return d->status;
  bool same = t.rank == n->type.rank;
  for (int i = 1; same && i < t.rank; i++) same = t.shape[i] == n->type.shape[i];
  if (!same) {
    /* Show the expected file shape: the node's with dim 0 as "N". */
    char want[160], got[128];
    int at = snprintf(want, sizeof want, "%s[N", evtc_dtype_name(n->type.dtype));
    for (int i = 1; i < n->type.rank; i++)
      at += snprintf(want + at, sizeof want - (size_t)at, ",%lld", (long long)n->type.shape[i]);
    snprintf(want + at, sizeof want - (size_t)at, "]");
    evtc_diag_set(d, EVTC_ERR_TYPE, "input %%%s: expected %s samples, got %s from %s", n->name, want,
                  evtc_type_str(&t, got, sizeof got), path);
    free(data);
    return d->status;
  }
  if (*samples >= 0 && t.shape[0] != *samples) {
    evtc_diag_set(d, EVTC_ERR_TYPE, "%s has %lld samples but %s has %lld", path, (long long)t.shape[0],
                  first_path, (long long)*samples);
    free(data);
    return d->status;
  }
  *samples = t.shape[0];
  int64_t numel = evtc_type_numel(&t);
  for (int64_t i = 0; i < numel; i++) data[i] = evtc_round_to(n->type.dtype, data[i]);
  c->name = strdup(n->name);
  c->sample_numel = 1;
  for (int i = 1; i < t.rank; i++) c->sample_numel *= t.shape[i];
  c->data = data;
  return EVTC_OK;
}

bool evtc_dataset_exists(const char *dir, const char *split) {
  size_t cap = strlen(dir) + strlen(split) + 2;
  char *path = malloc(cap);
  snprintf(path, cap, "%s/%s", dir, split);
  struct stat st;
  bool ok = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  free(path);
  return ok;
}

evtc_status evtc_dataset_load(evtc_dataset *ds, const evtc_graph *g, const char *dir, const char *split,
                              evtc_diag *d) {
  memset(ds, 0, sizeof *ds);
  ds->columns = calloc((size_t)g->n_nodes + 1, sizeof *ds->columns);
  ds->n_samples = -1;
  char *first_path = NULL;
  for (int32_t i = 0; i < g->n_nodes && d->status == EVTC_OK; i++) {
    const evtc_node *n = g->nodes[i];
    if (n->op != EVTC_OP_INPUT) continue;
    size_t cap = strlen(dir) + strlen(split) + strlen(n->name) + 8;
    char *path = malloc(cap);
    snprintf(path, cap, "%s/%s/%s.npy", dir, split, n->name);
    if (load_column(&ds->columns[ds->n_columns], n, path, &ds->n_samples, first_path, d) == EVTC_OK) {
      ds->n_columns++;
      if (!first_path) {
        first_path = path;
        path = NULL;
      }
    }
    free(path);
  }
  free(first_path);
  if (d->status == EVTC_OK && ds->n_columns == 0)
    evtc_diag_set(d, EVTC_ERR_INVALID, "the model has no input to feed from %s/%s", dir, split);
  if (d->status != EVTC_OK) {
    evtc_dataset_free(ds);
    return d->status;
  }
  return EVTC_OK;
}

const evtc_dataset_column *evtc_dataset_column_find(const evtc_dataset *ds, const char *name) {
  for (int i = 0; i < ds->n_columns; i++)
    if (strcmp(ds->columns[i].name, name) == 0) return &ds->columns[i];
  return NULL;
}

void evtc_dataset_gather(const evtc_dataset_column *c, const int64_t *rows, int64_t n, double *out) {
  size_t row_bytes = sizeof(double) * (size_t)c->sample_numel;
  for (int64_t i = 0; i < n; i++) memcpy(out + i * c->sample_numel, c->data + rows[i] * c->sample_numel, row_bytes);
}

void evtc_dataset_free(evtc_dataset *ds) {
  for (int i = 0; i < ds->n_columns; i++) {
    free(ds->columns[i].name);
    free(ds->columns[i].data);
  }
  free(ds->columns);
  memset(ds, 0, sizeof *ds);
}
