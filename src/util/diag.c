/* diag.c -- first-error diagnostics and the abort path of EVTC_ASSERT. */
#include "util/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

evtc_status evtc_diag_set(evtc_diag *d, evtc_status s, const char *fmt, ...) {
  if (d->status != EVTC_OK) return d->status;
  d->status = s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return s;
}

void evtc_assert_fail(const char *file, int line, const char *expr) {
  fprintf(stderr, "evtc: internal error at %s:%d: assertion failed: %s\n", file, line, expr);
  abort();
}

const char *evtc_status_name(evtc_status s) {
  switch (s) {
    case EVTC_OK: return "ok";
    case EVTC_ERR_PARSE: return "parse error";
    case EVTC_ERR_TYPE: return "type error";
    case EVTC_ERR_UNSUPPORTED: return "unsupported";
    case EVTC_ERR_IO: return "I/O error";
    case EVTC_ERR_INVALID: return "invalid";
    case EVTC_ERR_RUNTIME: return "runtime error";
  }
  return "unknown status";
}
