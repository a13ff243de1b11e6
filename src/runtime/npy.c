/* npy.c -- reading and writing NumPy .npy files.
 *
 * Layout of a .npy file: the magic "\x93NUMPY", major and minor version
 * bytes, the header length (2 bytes little-endian in v1, 4 in v2/v3), then
 * the header -- a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ended by '\n' -- then the raw elements.  The reader
 * parses that dict with a small tokenizer rather than trusting its layout,
 * and checks every size against the file length before touching the data.
 */
#include "runtime/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/atomic_file.h"
#include "runtime/elements.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* The .npy descr of each file dtype the reader accepts, and what it loads as. */
static const struct {
  const char *descr;
  size_t size;
  evtc_dtype dtype;       /* in-memory dtype of the loaded tensor */
  bool is_u8;             /* unsigned 8-bit: decoded by hand, then i32 */
  bool is_i8;             /* signed 8-bit: decoded by hand, then i32 */
} npy_dtypes[] = {
    {"f8", 8, EVTC_F64, false, false}, {"f4", 4, EVTC_F32, false, false}, {"f2", 2, EVTC_F16, false, false},
    {"i8", 8, EVTC_I64, false, false}, {"i4", 4, EVTC_I32, false, false}, {"u1", 1, EVTC_I32, true, false},
    {"i1", 1, EVTC_I32, false, true},  {"b1", 1, EVTC_BOOL, false, false},
};
enum { NPY_N_DTYPES = sizeof npy_dtypes / sizeof npy_dtypes[0] };

/* ---- header dict parsing ---- */

typedef struct header_parser {
  const char *p, *end;
} header_parser;

static void skip_space(header_parser *hp) {
  while (hp->p < hp->end && (*hp->p == ' ' || *hp->p == '\t' || *hp->p == '\n' || *hp->p == '\r')) hp->p++;
}

static bool accept(header_parser *hp, char c) {
  skip_space(hp);
  if (hp->p < hp->end && *hp->p == c) {
    hp->p++;
    return true;
  }
  return false;
}

/* A quoted string ('...' or "..."), copied into buf (truncated to cap-1). */
static bool parse_string(header_parser *hp, char *buf, size_t cap) {
  skip_space(hp);
  if (hp->p >= hp->end || (*hp->p != '\'' && *hp->p != '"')) return false;
  char q = *hp->p++;
  size_t n = 0;
  while (hp->p < hp->end && *hp->p != q) {
    if (n + 1 < cap) buf[n++] = *hp->p;
    hp->p++;
  }
  buf[n] = 0;
  if (hp->p >= hp->end) return false;
  hp->p++;
  return true;
}

static bool parse_word(header_parser *hp, const char *w) {
  skip_space(hp);
  size_t n = strlen(w);
  if ((size_t)(hp->end - hp->p) < n || memcmp(hp->p, w, n) != 0) return false;
  hp->p += n;
  return true;
}

/* A shape tuple "()", "(3,)", "(3, 4)"; rank > 6 is reported as rank 7. */
static bool parse_shape(header_parser *hp, int *rank, int64_t *shape) {
  if (!accept(hp, '(')) return false;
  *rank = 0;
  for (;;) {
    if (accept(hp, ')')) return true;
    skip_space(hp);
    if (hp->p >= hp->end || *hp->p < '0' || *hp->p > '9') return false;
    int64_t v = 0;
    while (hp->p < hp->end && *hp->p >= '0' && *hp->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return false;
      v = v * 10 + (*hp->p++ - '0');
    }
    if (hp->p < hp->end && *hp->p == 'L') hp->p++;      /* Python 2 longs */
    if (*rank < EVTC_MAX_RANK) shape[*rank] = v;
    if (*rank <= EVTC_MAX_RANK) (*rank)++;
    if (!accept(hp, ',')) return accept(hp, ')');
  }
}

typedef struct npy_header {
  char descr[32];
  int fortran;            /* -1 when missing */
  int rank;               /* -1 when missing */
  int64_t shape[EVTC_MAX_RANK];
} npy_header;

/* Parses the header dict; on error records "PATH: bad .npy header: ..." */
static bool parse_header(const char *path, const char *text, size_t len, npy_header *h, evtc_diag *d) {
  header_parser hp = {text, text + len};
  h->descr[0] = 0;
  h->fortran = -1;
  h->rank = -1;
  if (!accept(&hp, '{')) goto bad;
  while (!accept(&hp, '}')) {
    char key[32];
    if (!parse_string(&hp, key, sizeof key) || !accept(&hp, ':')) goto bad;
    if (strcmp(key, "descr") == 0) {
      if (!parse_string(&hp, h->descr, sizeof h->descr)) {
        evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "%s: unsupported dtype (structured arrays are not supported)",
                      path);
        return false;
      }
    } else if (strcmp(key, "fortran_order") == 0) {
      if (parse_word(&hp, "True")) h->fortran = 1;
      else if (parse_word(&hp, "False")) h->fortran = 0;
      else goto bad;
    } else if (strcmp(key, "shape") == 0) {
      if (!parse_shape(&hp, &h->rank, h->shape)) goto bad;
    } else {
      evtc_diag_set(d, EVTC_ERR_INVALID, "%s: bad .npy header: unexpected key '%s'", path, key);
      return false;
    }
    if (!accept(&hp, ',')) {
      if (!accept(&hp, '}')) goto bad;
      break;
    }
  }
  if (!h->descr[0] || h->fortran < 0 || h->rank < 0) {
    evtc_diag_set(d, EVTC_ERR_INVALID, "%s: bad .npy header: needs 'descr', 'fortran_order' and 'shape'", path);
    return false;
  }
  return true;
bad:
  evtc_diag_set(d, EVTC_ERR_INVALID, "%s: bad .npy header near offset %d: %.*s", path, (int)(hp.p - text),
                (int)(len > 120 ? 120 : len), text);
  return false;
}

/* Index into npy_dtypes for a descr such as "<f4" or "|u1", or -1. */
static int find_dtype(const char *descr) {
  char order = descr[0];
  if (order != '<' && order != '|' && order != '=') return -1;
  for (int i = 0; i < NPY_N_DTYPES; i++) {
    if (strcmp(descr + 1, npy_dtypes[i].descr) != 0) continue;
    if (order == '|' && npy_dtypes[i].size != 1) return -1;   /* '|' means "no byte order" */
    return i;
  }
  return -1;
}

/* ---- reading ---- */

/* Reads the whole file into a malloc'd buffer; EVTC_ERR_IO on failure. */
static unsigned char *read_file(const char *path, size_t *len, evtc_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  bool failed = ferror(f);
  int err = errno;
  fclose(f);
  if (failed) {
    evtc_diag_set(d, EVTC_ERR_IO, "cannot read %s: %s", path, strerror(err));
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

evtc_status evtc_npy_read(const char *path, evtc_type *type, double **data, evtc_diag *d) {
  *data = NULL;
  size_t len;
  unsigned char *buf = read_file(path, &len, d);
  if (!buf) return d->status;
  evtc_status st = EVTC_ERR_INVALID;
  if (len < 10 || memcmp(buf, npy_magic, sizeof npy_magic) != 0) {
    evtc_diag_set(d, st, "%s: not a NumPy .npy file (bad magic)", path);
    goto done;
  }
  int major = buf[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) {
      evtc_diag_set(d, st, "%s: truncated .npy header", path);
      goto done;
    }
    hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    hstart = 12;
  } else {
    evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "%s: unsupported .npy format version %d.%d", path, major, buf[7]);
    st = EVTC_ERR_UNSUPPORTED;
    goto done;
  }
  if (hlen > len - hstart) {
    evtc_diag_set(d, st, "%s: truncated .npy header (%zu bytes announced, %zu present)", path, hlen,
                  len - hstart);
    goto done;
  }
  npy_header h;
  if (!parse_header(path, (const char *)buf + hstart, hlen, &h, d)) {
    st = d->status;
    goto done;
  }
  if (h.fortran) {
    evtc_diag_set(d, EVTC_ERR_UNSUPPORTED,
                  "%s: Fortran-order arrays are not supported (save with np.ascontiguousarray)", path);
    st = EVTC_ERR_UNSUPPORTED;
    goto done;
  }
  int k = find_dtype(h.descr);
  if (k < 0) {
    evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "%s: unsupported dtype '%s' (supported: <f8 <f4 <f2 <i8 <i4 |u1 |i1 |b1)",
                  path, h.descr);
    st = EVTC_ERR_UNSUPPORTED;
    goto done;
  }
  if (h.rank > EVTC_MAX_RANK) {
    evtc_diag_set(d, EVTC_ERR_UNSUPPORTED, "%s: rank above %d is not supported", path, EVTC_MAX_RANK);
    st = EVTC_ERR_UNSUPPORTED;
    goto done;
  }
  size_t avail = len - hstart - hlen;
  bool more = false, empty = false;             /* needs more bytes than the file has; some dim is 0 */
  size_t need = npy_dtypes[k].size;
  for (int i = 0; i < h.rank; i++) empty |= h.shape[i] == 0;
  for (int i = 0; i < h.rank && !empty && !more; i++) {
    if (need > avail / (size_t)h.shape[i]) more = true;   /* need * dim > avail, without overflow */
    else need *= (size_t)h.shape[i];
  }
  if (empty) need = 0;
  if (more || need != avail) {
    char shape[160];
    int at = snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < h.rank; i++)
      at += snprintf(shape + at, sizeof shape - (size_t)at, i ? ", %lld" : "%lld", (long long)h.shape[i]);
    snprintf(shape + at, sizeof shape - (size_t)at, ")");
    if (more)
      evtc_diag_set(d, st, "%s: truncated data: shape %s of %s needs more than the %zu bytes after the header",
                    path, shape, h.descr, avail);
    else
      evtc_diag_set(d, st, "%s: trailing data: shape %s of %s needs %zu bytes but %zu follow the header", path,
                    shape, h.descr, need, avail);
    goto done;
  }
  *type = evtc_type_make(npy_dtypes[k].dtype, h.rank, h.shape);
  int64_t numel = evtc_type_numel(type);
  const unsigned char *src = buf + hstart + hlen;
  *data = malloc(sizeof(double) * (size_t)(numel > 0 ? numel : 1));
  if (npy_dtypes[k].is_u8) {
    for (int64_t i = 0; i < numel; i++) (*data)[i] = src[i];
  } else if (npy_dtypes[k].is_i8) {
    for (int64_t i = 0; i < numel; i++) (*data)[i] = (int8_t)src[i];
  } else {
    evtc_elements_decode(type->dtype, src, numel, *data);
  }
  st = EVTC_OK;
done:
  free(buf);
  return st;
}

/* ---- writing ---- */

evtc_status evtc_npy_write(const char *path, const evtc_type *type, const double *data, evtc_diag *d) {
  static const char *descr[EVTC_DTYPE_COUNT] = {
      [EVTC_F64] = "<f8", [EVTC_F32] = "<f4", [EVTC_F16] = "<f2", [EVTC_BF16] = "<f4",
      [EVTC_I64] = "<i8", [EVTC_I32] = "<i4", [EVTC_BOOL] = "|b1"};
  evtc_dtype file_dtype = type->dtype == EVTC_BF16 ? EVTC_F32 : type->dtype;
  char dict[256];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr[type->dtype]);
  for (int i = 0; i < type->rank; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, i ? ", %lld" : "%lld", (long long)type->shape[i]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", type->rank == 1 ? "," : "");
  /* Pad so that magic + version + length + header is a multiple of 64, ending in '\n'. */
  size_t total = 10 + (size_t)n + 1;
  size_t padded = (total + 63) / 64 * 64;
  size_t hlen = padded - 10;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                           (unsigned char)(hlen >> 8)};
  char header[320];
  memcpy(header, dict, (size_t)n);
  memset(header + n, ' ', hlen - (size_t)n - 1);
  header[hlen - 1] = '\n';

  evtc_atomic_file af;
  if (!evtc_atomic_open(&af, path, d)) return d->status;
  fwrite(pre, 1, sizeof pre, af.f);
  fwrite(header, 1, hlen, af.f);
  int64_t numel = evtc_type_numel(type);
  size_t size = evtc_dtype_size(file_dtype);
  unsigned char chunk[8 * 1024];
  int64_t per = (int64_t)(sizeof chunk / size);
  for (int64_t i = 0; i < numel; i += per) {
    int64_t m = numel - i < per ? numel - i : per;
    evtc_elements_encode(file_dtype, data + i, m, chunk);
    if (fwrite(chunk, size, (size_t)m, af.f) != (size_t)m) break;
  }
  return evtc_atomic_commit(&af, d);
}
