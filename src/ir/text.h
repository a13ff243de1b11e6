/* text.h -- internal helpers of the text IR (print.c, parse.c, verify.c).
 *
 * The public entry points (evtc_graph_print, evtc_graph_parse_*) are in
 * evtc.h and evtc_graph_verify is in ir.h; this header adds what tests and
 * other modules of the library share: printing into a string, the shortest
 * exact float spelling, and the verifier's "which node was wrong" variant
 * that the parser uses to put a file position on a verifier message.
 */
#ifndef EVTC_IR_TEXT_H
#define EVTC_IR_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

/* The canonical text of g as a malloc'd NUL-terminated string (caller frees). */
char *evtc_graph_to_string(const evtc_graph *g);

/* Writes the shortest decimal spelling of x that reads back (strtod) to the
 * same double, always marked as a float: "1.0", "0.0625", "1e-05", "-0.0",
 * "inf", "-inf", "nan".  cap >= 32 always suffices.  Returns buf. */
char *evtc_float_str(double x, char *buf, size_t cap);

/* True when s is a valid node name: one or more of [A-Za-z0-9_.]. */
bool evtc_name_is_valid(const char *s);

/* evtc_graph_verify, and when it fails and the violation belongs to one
 * node, *where is set to that node (else NULL).  where may be NULL. */
evtc_status evtc_graph_verify_at(evtc_graph *g, const evtc_node **where);

#endif
