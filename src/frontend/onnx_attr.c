/* onnx_attr.c -- reading the attributes of the ONNX node being mapped, with
 * the defaults the ONNX operator specs give (passed by each mapper). */
#include <string.h>

#include "frontend/onnx_internal.h"

const Onnx__AttributeProto *evtc_onnx_attr(const evtc_onnx_ctx *c, const char *name) {
  for (size_t i = 0; i < c->node->n_attribute; i++) {
    const Onnx__AttributeProto *a = c->node->attribute[i];
    if (a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

int64_t evtc_onnx_attr_int(const evtc_onnx_ctx *c, const char *name, int64_t def) {
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, name);
  return a && a->has_i ? a->i : def;
}

double evtc_onnx_attr_float(const evtc_onnx_ctx *c, const char *name, double def) {
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, name);
  if (!a) return def;
  if (a->has_f) return a->f;
  return a->has_i ? (double)a->i : def;
}

const char *evtc_onnx_attr_str(evtc_onnx_ctx *c, const char *name, const char *def) {
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, name);
  if (!a || !a->has_s) return def;
  return evtc_arena_strndup(c->arena, (const char *)a->s.data, a->s.len);
}

int evtc_onnx_attr_ints(evtc_onnx_ctx *c, const char *name, int64_t *out, int cap) {
  const Onnx__AttributeProto *a = evtc_onnx_attr(c, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)cap) {
    evtc_onnx_fail(c, EVTC_ERR_UNSUPPORTED, "attribute '%s' has %zu values; at most %d are supported", name,
                   a->n_ints, cap);
    return -2;
  }
  if (a->n_ints) memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);  /* ints is NULL when empty */
  return (int)a->n_ints;
}
