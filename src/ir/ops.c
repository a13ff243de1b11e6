/* ops.c -- the op table: names, arities, fusion kinds and attribute specs,
 * generated from ops.def (ORDER OP), plus dtype names and sizes.
 *
 * Attribute specs say, for each op, which attributes exist, their kinds and
 * defaults.  A node stores one value per spec entry in this order, and the
 * printer omits values equal to their defaults, so the text stays short.
 */
#include <string.h>

#include "ir/ir.h"

#define REQ(nm, k) {.name = nm, .kind = EVTC_ATTR_##k, .required = true}
#define OPT_I(nm, d) {.name = nm, .kind = EVTC_ATTR_INT, .def_i = (d)}
#define OPT_F(nm, d) {.name = nm, .kind = EVTC_ATTR_FLOAT, .def_f = (d)}
#define OPT_S(nm, d) {.name = nm, .kind = EVTC_ATTR_STR, .def_s = (d)}
#define OPT_T(nm, d) {.name = nm, .kind = EVTC_ATTR_DTYPE, .def_i = (d)}
#define OPT_L(nm, k) {.name = nm, .kind = EVTC_ATTR_##k}

static const evtc_attr_spec attrs_none[] = {{0}};
static const evtc_attr_spec attrs_init[] = {OPT_S("init", "glorot"), OPT_F("scale", 1.0), {0}};
static const evtc_attr_spec attrs_constant[] = {OPT_F("value", 0.0), OPT_L("data", FLOATS), {0}};
static const evtc_attr_spec attrs_cast[] = {REQ("dtype", DTYPE), {0}};
static const evtc_attr_spec attrs_reduce[] = {OPT_L("axes", INTS), OPT_I("keepdims", 0), {0}};
static const evtc_attr_spec attrs_reshape[] = {REQ("shape", INTS), {0}};
static const evtc_attr_spec attrs_permute[] = {REQ("perm", INTS), {0}};
static const evtc_attr_spec attrs_expand[] = {REQ("shape", INTS), {0}};
static const evtc_attr_spec attrs_slice[] = {OPT_L("axes", INTS), REQ("starts", INTS), REQ("ends", INTS),
                                             OPT_L("steps", INTS), {0}};
static const evtc_attr_spec attrs_concat[] = {REQ("axis", INT), {0}};
static const evtc_attr_spec attrs_pad[] = {REQ("pads", INTS), OPT_L("interior", INTS), OPT_F("value", 0.0), {0}};
static const evtc_attr_spec attrs_gather[] = {OPT_I("axis", 0), {0}};
static const evtc_attr_spec attrs_one_hot[] = {REQ("depth", INT), OPT_T("dtype", EVTC_F32), OPT_I("checked", 0), {0}};
static const evtc_attr_spec attrs_scatter_add[] = {OPT_I("axis", 0), REQ("size", INT), {0}};
static const evtc_attr_spec attrs_matmul[] = {OPT_I("trans_a", 0), OPT_I("trans_b", 0), {0}};
static const evtc_attr_spec attrs_conv[] = {OPT_L("stride", INTS), OPT_L("padding", INTS), OPT_L("dilation", INTS),
                                            OPT_I("groups", 1), {0}};
static const evtc_attr_spec attrs_conv_back[] = {OPT_L("stride", INTS), OPT_L("padding", INTS),
                                                 OPT_L("dilation", INTS), OPT_I("groups", 1), REQ("shape", INTS), {0}};
static const evtc_attr_spec attrs_pool[] = {REQ("kernel", INTS), OPT_L("stride", INTS), OPT_L("padding", INTS), {0}};
static const evtc_attr_spec attrs_avgpool[] = {REQ("kernel", INTS), OPT_L("stride", INTS), OPT_L("padding", INTS),
                                               OPT_I("count_include_pad", 0), {0}};
static const evtc_attr_spec attrs_avgpool_back[] = {REQ("kernel", INTS), OPT_L("stride", INTS),
                                                    OPT_L("padding", INTS), OPT_I("count_include_pad", 0),
                                                    REQ("shape", INTS), {0}};
static const evtc_attr_spec attrs_axis[] = {OPT_I("axis", -1), {0}};
static const evtc_attr_spec attrs_layernorm[] = {OPT_I("axis", -1), OPT_F("eps", 1e-5), {0}};
static const evtc_attr_spec attrs_eps[] = {OPT_F("eps", 1e-5), {0}};
static const evtc_attr_spec attrs_momentum[] = {OPT_F("momentum", 0.1), {0}};
static const evtc_attr_spec attrs_dropout[] = {OPT_F("p", 0.5), OPT_I("seed", 0), {0}};
static const evtc_attr_spec attrs_attention[] = {REQ("scale", FLOAT), OPT_I("causal", 0), {0}};

/* Every spec ends in a {0} sentinel, so attrs_none counts zero. */
#define N_ATTRS(a) ((int)(sizeof(a) / sizeof((a)[0])) - 1)

static const evtc_op_info op_table[] = {
#define EVTC_OP(E, nm, lo, hi, kind, at) \
  {.name = nm, .min_inputs = lo, .max_inputs = hi, .fusion = EVTC_FUSE_##kind, .attrs = attrs_##at, \
   .n_attrs = N_ATTRS(attrs_##at)},
#include "ir/ops.def"
#undef EVTC_OP
};
_Static_assert(sizeof(op_table) / sizeof(op_table[0]) == EVTC_OP_COUNT, "op table out of step with ops.def");

const evtc_op_info *evtc_op_get(evtc_op op) {
  EVTC_ASSERT((unsigned)op < EVTC_OP_COUNT);
  return &op_table[op];
}

bool evtc_op_lookup(const char *name, size_t len, evtc_op *out) {
  for (int i = 0; i < EVTC_OP_COUNT; i++) {
    if (strlen(op_table[i].name) == len && memcmp(op_table[i].name, name, len) == 0) {
      *out = (evtc_op)i;
      return true;
    }
  }
  return false;
}

/* ---- dtypes (ORDER DTYPE) ---- */

static const struct {
  const char *name;
  size_t size;
} dtype_table[] = {{"f64", 8}, {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"i64", 8}, {"i32", 4}, {"bool", 1}};
_Static_assert(sizeof(dtype_table) / sizeof(dtype_table[0]) == EVTC_DTYPE_COUNT, "dtype table out of step");

const char *evtc_dtype_name(evtc_dtype t) {
  EVTC_ASSERT((unsigned)t < EVTC_DTYPE_COUNT);
  return dtype_table[t].name;
}

size_t evtc_dtype_size(evtc_dtype t) {
  EVTC_ASSERT((unsigned)t < EVTC_DTYPE_COUNT);
  return dtype_table[t].size;
}

bool evtc_dtype_parse(const char *s, size_t len, evtc_dtype *out) {
  for (int i = 0; i < EVTC_DTYPE_COUNT; i++) {
    if (strlen(dtype_table[i].name) == len && memcmp(dtype_table[i].name, s, len) == 0) {
      *out = (evtc_dtype)i;
      return true;
    }
  }
  return false;
}

bool evtc_dtype_is_float(evtc_dtype t) { return t <= EVTC_BF16; }
bool evtc_dtype_is_half(evtc_dtype t) { return t == EVTC_F16 || t == EVTC_BF16; }
bool evtc_dtype_is_int(evtc_dtype t) { return t == EVTC_I64 || t == EVTC_I32; }
