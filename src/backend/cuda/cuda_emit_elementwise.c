/* cuda_emit_elementwise.c -- the elementwise template in CUDA C.
 *
 * For kernels without reductions whose stores cover the domain (and for
 * the epilogue of a cuBLASLt GEMM, whose accumulator tile is read from
 * scratch).  Elements move in vectors of V contiguous elements (16 bytes
 * of the narrowest streamed tensor, evtc_cuda_vec_width): each block of
 * 256 threads owns one contiguous tile of 256 * 8 vectors, each thread 8
 * vectors 256 apart, so every access of a warp is coalesced and a thread
 * has 8 independent 16-byte loads in flight (the "tile" schedule of
 * bench/RESULTS.md, which measured 93-94% of copy bandwidth with float4).
 * A vector load fills a register array evtc_vec<T, V> that the visitor's
 * statements read element by element through the storage hook of
 * evtc_cpu_vctx; stores are staged the same way.  Loads whose view is not
 * contiguous and 16-byte aligned (broadcasts, permutes, odd offsets) keep
 * one access per element.  Row and column are only computed when a
 * broadcast load, a one-hot or a non-flat store needs them (then V divides
 * the row, so a vector lies in one row), with 32-bit division when the
 * domain allows.  Scalar values are computed by every thread; scalar stores
 * by thread 0 only.
 */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"

void evtc_cuda_emit_vec_helpers(evtc_sb *b) {
  evtc_sb_printf(b, "%s",
    "#ifndef EVTC_VEC_HELPERS\n#define EVTC_VEC_HELPERS\n"
    "/* V contiguous elements moved by one access of up to 16 bytes (two or more beyond) */\n"
    "template <typename T, int V> struct alignas(sizeof(T) * V < 16 ? sizeof(T) * V : 16) evtc_vec { T v[V]; };\n"
    "/* element e of a vector of bf16, as the word that holds it (evtc_bf2f) */\n"
    "template <int V> __device__ __forceinline__ evtc_bfw evtc_vec_bfw(const evtc_vec<uint16_t, V> &v, int e) {\n"
    "  union {\n    evtc_vec<uint16_t, V> v;\n    uint32_t w[V / 2];\n  } u;\n  u.v = v;\n"
    "  return evtc_bfw{u.w[e >> 1], (e & 1) != 0};\n}\n"
    "/* max / min with NaN winning, as in the interpreter: one max.NaN (sm_80+) against EVTC_MAXN's compare,\n"
    "   NaN test and select */\n"
    "template <int OP> __device__ __forceinline__ float evtc_combf(float a, float b) {\n"
    "  if (OP == 0) return a + b;\n"
    "#if __CUDA_ARCH__ >= 800\n"
    "  float r;\n"
    "  if (OP == 1) asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
    "  else asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
    "  return r;\n"
    "#else\n"
    "  return OP == 1 ? EVTC_MAXN(a, b) : EVTC_MINN(a, b);\n"
    "#endif\n"
    "}\n"
    "/* a warp's max / min of floats, exact in f32: a shuffle and a max.NaN a step, where doubles take two shuffles,\n"
    "   two compares and two selects */\n"
    "template <int OP> __device__ __forceinline__ float evtc_warp_reducef(float v) {\n"
    "#pragma unroll\n"
    "  for (int o = 16; o > 0; o >>= 1) v = evtc_combf<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "  return v;\n"
    "}\n"
    "#endif\n");
}

typedef struct ew_ctx {
  const evtc_kernel *k;
  int vec;
  bool *vec_load;
} ew_ctx;

/* Storage hook: vector-loaded elements and staged stores. */
static bool ew_storage(const evtc_cpu_vctx *x, int i, char *buf, size_t cap) {
  const ew_ctx *e = x->storage_ctx;
  const evtc_vnode *v = &x->k->v[i];
  if (e->vec <= 1) return false;
  if (v->kind == EVTC_V_LOAD && e->vec_load[i]) snprintf(buf, cap, v->dtype == EVTC_BF16 ? "evtc_vec_bfw(lv%d, e)" : "lv%d.v[e]", i);
  else if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_FULL) snprintf(buf, cap, "sv%d.v[e]", i);
  else return false;
  return true;
}

unsigned evtc_cuda_ew_grid(const evtc_kernel *k) {
  int64_t nv = k->rows * k->cols / evtc_cuda_vec_width(k), tile = EVTC_CUDA_EW_THREADS * EVTC_CUDA_EW_PER_THREAD;
  return (unsigned)((nv + tile - 1) / tile);
}

void evtc_cuda_emit_elementwise(evtc_sb *b, const evtc_kernel *k, const char *acc_type) {
  const int nt = EVTC_CUDA_EW_THREADS, per = EVTC_CUDA_EW_PER_THREAD, V = evtc_cuda_vec_width(k);
  int64_t nn = k->rows * k->cols;
  bool rc = evtc_cpu_needs_rc(k), narrow = nn < ((int64_t)1 << 31);
  ew_ctx ec = {.k = k, .vec = V, .vec_load = calloc((size_t)k->n_v + 1, sizeof(bool))};
  for (int i = 0; i < k->n_v; i++) {
    int64_t sr;
    const evtc_vnode *v = &k->v[i];
    ec.vec_load[i] = v->cls != EVTC_VC_SCALAR && evtc_cuda_load_vectorizes(k, v, V, &sr) &&
                     (rc || sr == k->cols || k->rows == 1);
  }
  evtc_cuda_emit_vec_helpers(b);
  evtc_cuda_emit_head(b, k, "", nt);
  evtc_sb_printf(b, "  const int64_t NN = %lldLL, CC = %lldLL;\n  (void)CC;\n", (long long)nn, (long long)k->cols);
  if (acc_type) evtc_sb_printf(b, "  const %s *restrict acc = (const %s *)scratch;\n", acc_type, acc_type);
  const char *acc_expr = V > 1 ? "la.v[e]" : "acc[i]";
  evtc_cpu_vctx top = {.k = k, .sb = b, .ind = "  ", .flat = true, .acc_expr = acc_expr};
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls != EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) {
      evtc_sb_printf(b, "  if (blockIdx.x == 0 && threadIdx.x == 0)\n");
      top.ind = "    ";
      evtc_cpu_emit_store(&top, i);
      top.ind = "  ";
    } else {
      evtc_cuda_emit_value(&top, i);
    }
  }
  evtc_sb_printf(b, "  const int64_t i00 = (int64_t)blockIdx.x * %d + threadIdx.x;\n#pragma unroll\n", nt * per);
  evtc_sb_printf(b, "  for (int j = 0; j < %d; j++) {\n    const int64_t iv = i00 + j * %d;\n    if (iv < %lldLL) {\n", per, nt,
                 (long long)(nn / V));
  evtc_sb_printf(b, "      const int64_t ib = iv * %d;\n", V);
  if (rc && narrow)
    evtc_sb_printf(b, "      const int64_t r = (int64_t)((uint32_t)ib / (uint32_t)CC), cb = ib - r * CC;\n"
                      "      (void)r; (void)cb;\n");
  else if (rc)
    evtc_sb_printf(b, "      const int64_t r = ib / CC, cb = ib - r * CC;\n      (void)r; (void)cb;\n");
  const char *ind = "      ";
  if (V > 1) {
    for (int i = 0; i < k->n_v; i++) {
      const evtc_vnode *v = &k->v[i];
      if (v->cls == EVTC_VC_SCALAR) continue;
      const char *st = evtc_cpu_storage_ctype(v->dtype);
      int64_t sr = 0;
      if (v->kind == EVTC_V_LOAD && ec.vec_load[i]) {
        evtc_cuda_load_vectorizes(k, v, V, &sr);
        if (rc)
          evtc_sb_printf(b, "      const evtc_vec<%s, %d> lv%d = *(const evtc_vec<%s, %d> *)(a%d + (%lldLL + r * %lldLL + cb));\n",
                         st, V, i, st, V, v->arg, (long long)v->offset, (long long)sr);
        else
          evtc_sb_printf(b, "      const evtc_vec<%s, %d> lv%d = *(const evtc_vec<%s, %d> *)(a%d + (%lldLL + ib));\n", st,
                         V, i, st, V, v->arg, (long long)v->offset);
      }
      if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_FULL) evtc_sb_printf(b, "      evtc_vec<%s, %d> sv%d;\n", st, V, i);
    }
    if (acc_type)
      evtc_sb_printf(b, "      const evtc_vec<%s, %d> la = *(const evtc_vec<%s, %d> *)(acc + ib);\n", acc_type, V, acc_type, V);
    evtc_sb_printf(b, "#pragma unroll\n      for (int e = 0; e < %d; e++) {\n        const int64_t i = ib + e;\n        (void)i;\n", V);
    if (rc) evtc_sb_printf(b, "        const int64_t c = cb + e;\n        (void)c;\n");
    ind = "        ";
  } else {
    evtc_sb_printf(b, "      const int64_t i = ib;\n      (void)i;\n");
    if (rc) evtc_sb_printf(b, "      const int64_t c = cb;\n      (void)c;\n");
  }
  evtc_cpu_vctx x = {.k = k, .sb = b, .ind = ind, .flat = true, .acc_expr = acc_expr,
                     .storage = ew_storage, .storage_ctx = &ec};
  if (V % 4 == 0) {                  /* ib is a multiple of 4: a dropout mask takes one Philox block per 4 elements */
    x.rng_block = "(ib >> 2) + (e >> 2)";
    x.rng_word = "e & 3";
  }
  for (int i = 0; i < k->n_v; i++) {
    const evtc_vnode *v = &k->v[i];
    if (v->cls == EVTC_VC_SCALAR) continue;
    if (v->kind == EVTC_V_STORE) evtc_cpu_emit_store(&x, i);
    else evtc_cuda_emit_value(&x, i);
  }
  if (V > 1) {
    evtc_sb_printf(b, "      }\n");
    for (int i = 0; i < k->n_v; i++) {
      const evtc_vnode *v = &k->v[i];
      if (v->kind == EVTC_V_STORE && v->cls == EVTC_VC_FULL) {
        const char *st = evtc_cpu_storage_ctype(v->dtype);
        evtc_sb_printf(b, "      *(evtc_vec<%s, %d> *)(a%d + ib) = sv%d;\n", st, V, v->arg, i);
      }
    }
  }
  evtc_sb_printf(b, "    }\n  }\n}\n\n");
  free(ec.vec_load);
}
