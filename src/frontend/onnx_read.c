/* onnx_read.c -- reading ONNX files: the ModelProto itself (protobuf-c code
 * generated from Debian's onnx.proto at build time) and tensor data, from
 * the typed repeated fields, from raw_data, or from an external data file
 * next to the model.  Every tensor is decoded into doubles, the interchange
 * form of the reference runtime. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_internal.h"

/* Largest element count accepted for one tensor (guards allocations). */
#define ONNX_MAX_NUMEL ((int64_t)1 << 36)

uint8_t *evtc_onnx_file_read(const char *path, size_t *len, evtc_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    evtc_diag_set(d, EVTC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  EVTC_ASSERT(buf != NULL);
  for (;;) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    buf = realloc(buf, cap);
    EVTC_ASSERT(buf != NULL);
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    evtc_diag_set(d, EVTC_ERR_IO, "%s: read error", path);
    return NULL;
  }
  *len = n;
  return buf;
}

bool evtc_onnx_dtype(int32_t onnx_type, evtc_dtype *out) {
  switch (onnx_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = EVTC_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = EVTC_F64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = EVTC_F16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = EVTC_BF16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = EVTC_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = EVTC_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = EVTC_BOOL; return true;
    default: return false;
  }
}

/* IEEE half (bits) to double. */
static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * ldexp(m, -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * ldexp(m + 1024, e - 25);
}

static double bf16_to_double(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Decodes n little-endian elements of dtype dt from bytes into out. */
static void decode_bytes(evtc_dtype dt, const uint8_t *p, int64_t n, double *out) {
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
      case EVTC_F32: { float v; memcpy(&v, p + 4 * i, 4); out[i] = v; break; }
      case EVTC_F64: { double v; memcpy(&v, p + 8 * i, 8); out[i] = v; break; }
      case EVTC_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); out[i] = (double)v; break; }
      case EVTC_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); out[i] = v; break; }
      case EVTC_BOOL: out[i] = p[i] != 0; break;
      case EVTC_F16: out[i] = half_to_double((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
      case EVTC_BF16: out[i] = bf16_to_double((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
      default: EVTC_ASSERT(!"dtype"); break;
    }
  }
}

/* The value of key in a tensor's external_data entries, or NULL. */
static const char *external_field(const Onnx__TensorProto *t, const char *key) {
  for (size_t i = 0; i < t->n_external_data; i++)
    if (t->external_data[i]->key && strcmp(t->external_data[i]->key, key) == 0) return t->external_data[i]->value;
  return NULL;
}

/* Reads `bytes` bytes of an external data file into a malloc'd buffer. */
static uint8_t *read_external(evtc_onnx_ctx *c, const Onnx__TensorProto *t, const char *what, size_t bytes) {
  const char *loc = external_field(t, "location"), *off = external_field(t, "offset"),
             *len = external_field(t, "length");
  if (!loc || !*loc || loc[0] == '/' || strstr(loc, "..")) {
    evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s': external data needs a relative 'location' inside the "
                   "model's directory", what);
    return NULL;
  }
  if (!c->dir) {
    evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s': external data, but the model was not read from a file",
                   what);
    return NULL;
  }
  long long offset = off ? strtoll(off, NULL, 10) : 0, length = len ? strtoll(len, NULL, 10) : (long long)bytes;
  if (offset < 0 || length != (long long)bytes) {
    evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s': external data length %lld, the tensor needs %zu bytes", what,
                   length, bytes);
    return NULL;
  }
  size_t cap = strlen(c->dir) + strlen(loc) + 2;
  char *path = malloc(cap);
  snprintf(path, cap, "%s/%s", c->dir, loc);
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  long size = -1;
  if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);      /* the file must hold the bytes before we allocate */
  bool ok = size >= 0 && (unsigned long long)offset + bytes <= (unsigned long long)size &&
            fseek(f, (long)offset, SEEK_SET) == 0 && (buf = malloc(bytes ? bytes : 1)) != NULL &&
            fread(buf, 1, bytes, f) == bytes;
  if (!ok) {
    evtc_onnx_fail(c, EVTC_ERR_IO, "tensor '%s': cannot read %zu bytes at offset %lld of external file %s", what,
                   bytes, offset, path);
    free(buf);
    buf = NULL;
  }
  if (f) fclose(f);
  free(path);
  return buf;
}

bool evtc_onnx_tensor_decode(evtc_onnx_ctx *c, const Onnx__TensorProto *t, const char *what, evtc_type *type,
                             double **data) {
  evtc_dtype dt;
  if (!evtc_onnx_dtype(t->data_type, &dt))
    return evtc_onnx_unsupported(c, "tensor '%s' has ONNX data type %d, which evtc does not support", what,
                                 (int)t->data_type);
  if (t->n_dims > EVTC_MAX_RANK)
    return evtc_onnx_unsupported(c, "tensor '%s' has rank %zu; evtc supports up to %d", what, t->n_dims,
                                 EVTC_MAX_RANK);
  int64_t numel = 1, shape[EVTC_MAX_RANK] = {0};
  for (size_t i = 0; i < t->n_dims; i++) {
    shape[i] = t->dims[i];
    if (shape[i] < 0 || shape[i] > ONNX_MAX_NUMEL || (numel *= shape[i]) > ONNX_MAX_NUMEL)
      return evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s' has a bad or too large shape", what);
  }
  *type = evtc_type_make(dt, (int)t->n_dims, shape);
  size_t bytes = (size_t)numel * evtc_dtype_size(dt);
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  size_t have = 0;
  switch (dt) {
    case EVTC_F32: have = t->n_float_data; break;
    case EVTC_F64: have = t->n_double_data; break;
    case EVTC_I64: have = t->n_int64_data; break;
    default: have = t->n_int32_data; break;     /* i32, bool, f16 and bf16 bits */
  }
  /* every source is checked against the shape before the values are allocated */
  if (!external && t->has_raw_data && t->raw_data.len != bytes)
    return evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s': raw_data has %zu bytes, the shape needs %zu", what,
                          t->raw_data.len, bytes);
  if (!external && !t->has_raw_data && have != (size_t)numel)
    return evtc_onnx_fail(c, EVTC_ERR_INVALID, "tensor '%s' holds %zu values, its shape needs %lld", what, have,
                          (long long)numel);
  uint8_t *ext = NULL;
  if (external && !(ext = read_external(c, t, what, bytes))) return false;
  double *out = evtc_arena_alloc(c->arena, sizeof(double) * (size_t)(numel ? numel : 1));
  *data = out;
  if (ext || t->has_raw_data) {
    decode_bytes(dt, ext ? ext : t->raw_data.data, numel, out);
    free(ext);
    return true;
  }
  for (int64_t i = 0; i < numel; i++) {
    switch (dt) {
      case EVTC_F32: out[i] = t->float_data[i]; break;
      case EVTC_F64: out[i] = t->double_data[i]; break;
      case EVTC_I64: out[i] = (double)t->int64_data[i]; break;
      case EVTC_F16: out[i] = half_to_double((uint16_t)t->int32_data[i]); break;
      case EVTC_BF16: out[i] = bf16_to_double((uint16_t)t->int32_data[i]); break;
      case EVTC_BOOL: out[i] = t->int32_data[i] != 0; break;
      default: out[i] = t->int32_data[i]; break;
    }
  }
  return true;
}
