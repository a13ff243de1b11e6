/* atomic_file.h -- write a file so that readers see the old or the new
 * contents, never a partial one.
 *
 * The data goes to a temporary file in the destination's directory (so
 * the final rename stays within one file system), is flushed and fsync'ed,
 * then renamed over the destination; the directory is fsync'ed too.  On any
 * failure the temporary file is removed and the destination is untouched.
 */
#ifndef EVTC_ATOMIC_FILE_H
#define EVTC_ATOMIC_FILE_H

#include <stdbool.h>
#include <stdio.h>

#include "util/diag.h"

typedef struct evtc_atomic_file {
  FILE *f;            /* write the contents here */
  char *path;         /* destination (malloc'd copy) */
  char *tmp_path;     /* temporary file in the same directory (malloc'd) */
} evtc_atomic_file;

/* Creates the temporary file for `path`; on failure records EVTC_ERR_IO
 * naming the file in d and returns false (nothing to clean up). */
bool evtc_atomic_open(evtc_atomic_file *af, const char *path, evtc_diag *d);
/* Flushes, syncs and renames into place; always closes and frees af.
 * On failure the temporary is removed and EVTC_ERR_IO is recorded. */
evtc_status evtc_atomic_commit(evtc_atomic_file *af, evtc_diag *d);

#endif
