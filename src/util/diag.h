/* diag.h -- first-error diagnostics and internal assertions.
 *
 * Bad input is reported through an evtc_diag: the first message set is kept
 * (later ones are dropped, as in SQLite's sqlite3ErrorMsg), and the caller
 * checks the status once.  Broken internal invariants are not input errors:
 * EVTC_ASSERT prints file and line and aborts.
 */
#ifndef EVTC_DIAG_H
#define EVTC_DIAG_H

#include "evtc.h"

typedef struct evtc_diag {
  evtc_status status;
  char msg[1024];
} evtc_diag;

/* Records status and message unless an error is already recorded.
 * Returns the status now held (the first one). */
evtc_status evtc_diag_set(evtc_diag *d, evtc_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void evtc_diag_clear(evtc_diag *d) { d->status = EVTC_OK; d->msg[0] = 0; }

void evtc_assert_fail(const char *file, int line, const char *expr) __attribute__((noreturn));
#define EVTC_ASSERT(x) ((x) ? (void)0 : evtc_assert_fail(__FILE__, __LINE__, #x))

#endif
