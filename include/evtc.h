/* evtc.h -- the public C API of evtc, a deep-learning training compiler.
 *
 * Opaque handles and functions only; struct layouts live in the modules'
 * own headers under src/.  Every call that can fail on bad input returns an
 * evtc_status and keeps one message (the first error) that names the file
 * position or node and the cause.
 */
#ifndef EVTC_H
#define EVTC_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum evtc_status {
  EVTC_OK = 0,
  EVTC_ERR_PARSE,        /* malformed text */
  EVTC_ERR_TYPE,         /* shape or dtype mismatch, bad attribute value */
  EVTC_ERR_UNSUPPORTED,  /* an op or feature evtc does not handle */
  EVTC_ERR_IO,           /* a file could not be read or written */
  EVTC_ERR_INVALID,      /* any other invalid argument or graph */
  EVTC_ERR_RUNTIME       /* a failure while executing (e.g. index out of range) */
} evtc_status;

const char *evtc_status_name(evtc_status s);

/* A graph: forward model or joint training graph. */
typedef struct evtc_graph evtc_graph;

/* Parses a text IR file.  On failure returns NULL and writes the message
 * ("file:line:col: cause") into err (capacity errcap). */
evtc_graph *evtc_graph_parse_file(const char *path, char *err, size_t errcap);
/* Parses text IR from memory; `file` is used in messages only. */
evtc_graph *evtc_graph_parse_string(const char *text, const char *file, char *err, size_t errcap);
/* Writes the canonical text form of g. */
void evtc_graph_print(const evtc_graph *g, FILE *out);
/* Frees the graph and everything its arena owns. */
void evtc_graph_free(evtc_graph *g);

#ifdef __cplusplus
}
#endif
#endif
