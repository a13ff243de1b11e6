/* interp.h -- the float64 reference interpreter.
 *
 * The interpreter runs any graph on the CPU, one node at a time in
 * topological order, computing every op in float64 and rounding each
 * output to its node's dtype (precision.h).  It is the oracle every backend
 * and every fused kernel is compared with, and it also trains small models
 * (the digits demo) directly.
 *
 * Every value is a row-major array of doubles, ints and bools included
 * (bools are 0 or 1).  INPUT, PARAM and STATE leaves read caller memory set
 * with evtc_interp_set; the caller may change that memory between runs
 * (the training loop writes updated parameters back in place).
 */
#ifndef EVTC_INTERP_H
#define EVTC_INTERP_H

#include <stdint.h>

#include "ir/ir.h"

typedef struct evtc_interp evtc_interp;

/* An interpreter for g, which must outlive it; allocates every node's
 * output buffer once. */
evtc_interp *evtc_interp_new(const evtc_graph *g);
/* Binds the value of an INPUT, PARAM or STATE leaf of the graph: `data`
 * holds numel doubles, is borrowed (not copied now, read at each run) and
 * must stay valid until the next set or the free. */
void evtc_interp_set(evtc_interp *it, const evtc_node *leaf, const double *data);
/* Runs the whole graph; step is the dropout offset (the training step).
 * Errors -- an unset leaf, an index out of range, integer division by zero --
 * return EVTC_ERR_RUNTIME with "node %name (op): cause" in d (d may be NULL). */
evtc_status evtc_interp_run(evtc_interp *it, uint64_t step, evtc_diag *d);
/* The value of node n after the last successful run (numel doubles, owned
 * by the interpreter, valid until the next run or the free). */
const double *evtc_interp_value(const evtc_interp *it, const evtc_node *n);
void evtc_interp_free(evtc_interp *it);

#endif
