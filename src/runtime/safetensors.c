/* safetensors.c -- writing checkpoints in the safetensors format.
 *
 * The JSON header is built in memory first (its length comes first in the
 * file), padded with spaces to a multiple of 8 bytes so that the data is
 * aligned, and carries {"__metadata__": {"producer": "evtc"}}.
 */
#include "runtime/safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/atomic_file.h"
#include "runtime/elements.h"

static const char *const st_dtype[EVTC_DTYPE_COUNT] = {
    [EVTC_F64] = "F64", [EVTC_F32] = "F32", [EVTC_F16] = "F16", [EVTC_BF16] = "BF16",
    [EVTC_I64] = "I64", [EVTC_I32] = "I32", [EVTC_BOOL] = "BOOL"};

/* A growable string. */
typedef struct strbuf {
  char *s;
  size_t len, cap;
} strbuf;

/* Appends printf-formatted text, growing the buffer as needed. */
static void __attribute__((format(printf, 2, 3))) sb_put(strbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    b->cap = b->cap * 2 + (size_t)n + 1;
    b->s = realloc(b->s, b->cap);
  }
}

/* Appends name as a JSON string (quotes, backslashes and control bytes escaped). */
static void sb_json_string(strbuf *b, const char *name) {
  sb_put(b, "\"");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
    if (*p == '"' || *p == '\\') sb_put(b, "\\%c", *p);
    else if (*p < 0x20) sb_put(b, "\\u%04x", *p);
    else sb_put(b, "%c", *p);
  }
  sb_put(b, "\"");
}

evtc_status evtc_safetensors_write(const char *path, const evtc_named_tensor *tensors, int n, evtc_diag *d) {
  for (int i = 0; i < n; i++) {
    if (strncmp(tensors[i].name, "__", 2) == 0)
      return evtc_diag_set(d, EVTC_ERR_INVALID, "%s: tensor name '%s' is reserved", path, tensors[i].name);
    for (int j = 0; j < i; j++)
      if (strcmp(tensors[i].name, tensors[j].name) == 0)
        return evtc_diag_set(d, EVTC_ERR_INVALID, "%s: tensor name '%s' given twice", path, tensors[i].name);
  }
  strbuf h = {malloc(256), 0, 256};
  sb_put(&h, "{\"__metadata__\":{\"producer\":\"evtc\"}");
  uint64_t offset = 0;
  for (int i = 0; i < n; i++) {
    const evtc_type *t = &tensors[i].type;
    uint64_t bytes = (uint64_t)evtc_type_numel(t) * evtc_dtype_size(t->dtype);
    sb_put(&h, ",");
    sb_json_string(&h, tensors[i].name);
    sb_put(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype[t->dtype]);
    for (int k = 0; k < t->rank; k++) sb_put(&h, k ? ",%lld" : "%lld", (long long)t->shape[k]);
    sb_put(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
           (unsigned long long)(offset + bytes));
    offset += bytes;
  }
  sb_put(&h, "}");
  while (h.len % 8) sb_put(&h, " ");

  evtc_atomic_file af;
  if (!evtc_atomic_open(&af, path, d)) {
    free(h.s);
    return d->status;
  }
  unsigned char len8[8];
  for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
  fwrite(len8, 1, 8, af.f);
  fwrite(h.s, 1, h.len, af.f);
  free(h.s);
  unsigned char chunk[8192];
  for (int i = 0; i < n; i++) {
    const evtc_type *t = &tensors[i].type;
    size_t size = evtc_dtype_size(t->dtype);
    int64_t numel = evtc_type_numel(t), per = (int64_t)(sizeof chunk / size);
    for (int64_t k = 0; k < numel; k += per) {
      int64_t m = numel - k < per ? numel - k : per;
      evtc_elements_encode(t->dtype, tensors[i].data + k, m, chunk);
      fwrite(chunk, size, (size_t)m, af.f);
    }
  }
  return evtc_atomic_commit(&af, d);
}
