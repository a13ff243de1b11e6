/* weights.h -- initial values of a graph's leaves, by node name.
 *
 * An imported model brings the values of its parameters with it (ONNX
 * initializers), where a text IR model only says how to initialise them.
 * An evtc_weights table carries those values beside the graph: for each
 * PARAM or STATE node name, numel(node type) doubles in row-major order.
 * Whoever binds leaves (`evtc run`, `evtc train`) looks a leaf up here
 * first and falls back to evtc_init_leaf when it is absent.
 */
#ifndef EVTC_WEIGHTS_H
#define EVTC_WEIGHTS_H

#include <stdint.h>

typedef struct evtc_weights evtc_weights;

evtc_weights *evtc_weights_new(void);
void evtc_weights_free(evtc_weights *w);
/* Adds a copy of data[0..numel) under name (a copy is kept too); a name
 * already present is replaced. */
void evtc_weights_add(evtc_weights *w, const char *name, const double *data, int64_t numel);
/* The values stored under name and their count in *numel, or NULL. */
const double *evtc_weights_find(const evtc_weights *w, const char *name, int64_t *numel);

#endif
