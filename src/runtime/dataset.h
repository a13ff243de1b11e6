/* dataset.h -- training and test data for a model, from a folder of .npy files.
 *
 * A data directory holds one folder per split (train/, test/) with one file
 * per INPUT node of the model: DIR/train/x.npy feeds %x.  Dim 0 of every
 * file counts samples (the same count in every file of a split); the other
 * dims must equal the node's dims 1.. (the node's dim 0 is the batch).
 * Values are rounded to the node's dtype when loaded, so uint8 pixels can
 * feed an f32 input.
 */
#ifndef EVTC_DATASET_H
#define EVTC_DATASET_H

#include "ir/ir.h"

/* The samples of one INPUT node. */
typedef struct evtc_dataset_column {
  char *name;              /* the INPUT node's name (malloc'd) */
  int64_t sample_numel;    /* values per sample */
  double *data;            /* n_samples * sample_numel values, row-major (malloc'd) */
} evtc_dataset_column;

typedef struct evtc_dataset {
  int n_columns;
  evtc_dataset_column *columns;   /* one per INPUT node, in graph order */
  int64_t n_samples;
} evtc_dataset;

/* True when DIR/SPLIT is a directory. */
bool evtc_dataset_exists(const char *dir, const char *split);
/* Loads DIR/SPLIT/<name>.npy for every INPUT of g.  Errors (a missing or
 * bad file, a scalar INPUT, a per-sample shape that differs from the
 * node's, sample counts that differ between files, no INPUT at all) record
 * one message naming the file in d; ds is then empty and needs no free. */
evtc_status evtc_dataset_load(evtc_dataset *ds, const evtc_graph *g, const char *dir, const char *split,
                              evtc_diag *d);
/* The column of INPUT `name`, or NULL. */
const evtc_dataset_column *evtc_dataset_column_find(const evtc_dataset *ds, const char *name);
/* Copies samples rows[0..n) of column c, in that order, to out
 * (n * c->sample_numel values). */
void evtc_dataset_gather(const evtc_dataset_column *c, const int64_t *rows, int64_t n, double *out);
void evtc_dataset_free(evtc_dataset *ds);

#endif
