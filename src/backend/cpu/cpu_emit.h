/* cpu_emit.h -- what the CPU backend's C emitters share (internal).
 *
 * One emitter file per kernel family (CONVENTIONS.md #7), one entry point
 * each: cpu_emit_elementwise.c (flat loops), cpu_emit_rows.c (reduce-apply
 * over rows; also elementwise kernels with reductions), cpu_emit_gemm.c
 * (GEMM and implicit-GEMM conv with the visitor DAG as epilogue),
 * cpu_emit_opaque.c (one op without a visitor form: pad, gather, pooling, ...).
 * cpu_visitor.c turns visitor nodes into C statements for all of them, and
 * writes the module prelude (includes, Philox, helpers) once per module.
 */
#ifndef EVTC_CPU_EMIT_H
#define EVTC_CPU_EMIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "kernel/kernel.h"

/* A growing string (malloc'd). */
typedef struct evtc_sb {
  char *s;
  size_t len, cap;
} evtc_sb;

void evtc_sb_printf(evtc_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* C type of a value of dtype t in generated code ("float", "int64_t",
 * "uint8_t"): f16 and bf16 values are float (kernels compute in f32). */
const char *evtc_cpu_ctype(evtc_dtype t);
/* C type of an element of a buffer of dtype t: the value type, except
 * "uint16_t" for f16 and bf16 (their bit patterns). */
const char *evtc_cpu_storage_ctype(evtc_dtype t);
/* The one place values meet storage.  Appends the value of dtype t whose
 * stored element is the C expression `stored` (f16 / bf16: widened to
 * float, exactly), and the stored form of value v<value> of dtype
 * `value_type` in a buffer of dtype t (f16 / bf16: rounded to nearest even,
 * NaN kept quiet, overflow to infinity; an f64 value is rounded to odd in
 * f32 first, so that it is rounded once, as the interpreter does). */
void evtc_cpu_emit_from_storage(evtc_sb *b, evtc_dtype t, const char *stored);
void evtc_cpu_emit_to_storage(evtc_sb *b, evtc_dtype t, evtc_dtype value_type, int value);

/* Writes the module prelude: includes, Philox4x32-10 (bit-compatible with
 * runtime/philox.c), NaN-aware max/min, saturating casts, and the f16 /
 * bf16 conversions evtc_h2f, evtc_f2h, evtc_bf2f, evtc_f2bf, evtc_d2f_odd
 * (portable bit operations). */
void evtc_cpu_emit_prelude(evtc_sb *b);
/* The entry point's first lines: typed pointers a<i> to every argument. */
void evtc_cpu_emit_args(evtc_sb *b, const evtc_kernel *k);

/* Where a visitor statement is emitted: `r`, `c` (and `i`, the flat index
 * r*C + c, when `flat`) are in scope; ACC reads `acc_expr`. */
typedef struct evtc_cpu_vctx {
  const evtc_kernel *k;
  evtc_sb *sb;
  const char *ind;          /* indentation */
  bool flat;                /* `i` is in scope */
  const char *acc_expr;     /* GEMM: the accumulator element */
  /* Optional: writes to buf the storage expression of LOAD or STORE node i
   * (an element of the buffer's storage type; "a<arg>[index]" otherwise)
   * and returns true, or returns false for the default.  The CUDA
   * templates use it for elements of 16-byte vector accesses (a bf16 load's
   * as the evtc_bfw word that holds it, which the CUDA evtc_bf2f takes). */
  bool (*storage)(const struct evtc_cpu_vctx *x, int i, char *buf, size_t cap);
  const void *storage_ctx;
  /* Optional: for a FULL RNG, the Philox block (flat index / 4) and word
   * (flat index % 4) of the element as two expressions, when an emitter
   * knows them apart (a 16-byte vector of 4 or 8 elements starting at a
   * multiple of 4: the same block expression for 4 elements, which the
   * compiler then evaluates once).  NULL: derived from the flat index. */
  const char *rng_block, *rng_word;
  /* Optional: the first column of a vector of columns, c being vec_c0 + e for an unrolled e: a one-hot along the
   * columns compares its label - vec_c0 with e (one subtraction a vector, not an addition a column; CUDA). */
  const char *vec_c0;
  /* Optional: computed[i] true where value i is computed in this scope (not read back from a copy, not folded), its
   * operands then in scope too: a store of a cast to f16 / bf16 rounds the cast's operand (the same bits), where it
   * rounded the rounded value again, a conversion and a shift an element more (CUDA rows). */
  const bool *computed;
} evtc_cpu_vctx;

/* Emits "T v<i> = <expr>;" for compute-like node i (ACC, LOAD, IMM,
 * COMPUTE, RNG, ONE_HOT); its operands must already be in scope. */
void evtc_cpu_emit_value(const evtc_cpu_vctx *x, int i);
/* Emits the store statement of STORE node i at the index its class implies. */
void evtc_cpu_emit_store(const evtc_cpu_vctx *x, int i);
/* The index expression of LOAD node v (into buf). */
void evtc_cpu_load_index(const evtc_cpu_vctx *x, const evtc_vnode *v, char *buf, size_t cap);
/* Whether an elementwise loop body needs the row and column (r, c) and not
 * only the flat index i: one-hot, non-FULL RNG or stores, strided loads. */
bool evtc_cpu_needs_rc(const evtc_kernel *k);
/* v = erf(x) + 1 (either order): x's node index, else -1.  Emitted as evtc_erf1pf(x) (evtc_erf1p_bf16f(x)
 * where v is a bf16 value), which a backend may compute better than the sum (the CUDA prelude's shares
 * e^(-x^2) with the GELU gradient beside it, and takes a shorter polynomial for bf16). */
int evtc_cpu_erf_plus_one(const evtc_kernel *k, const evtc_vnode *v);
/* Marks in need[] every node that node i needs, transitively, among nodes of
 * classes in `classes` (bitmask of 1 << evtc_vclass), not crossing REDUCEs. */
void evtc_cpu_mark_needed(const evtc_kernel *k, int i, unsigned classes, bool *need);

/* Family entry points: append the whole kernel function to b. */
void evtc_cpu_emit_elementwise(evtc_sb *b, const evtc_kernel *k);
void evtc_cpu_emit_rows(evtc_sb *b, const evtc_kernel *k);
void evtc_cpu_emit_gemm(evtc_sb *b, const evtc_kernel *k);
/* OPAQUE kernels (cpu_emit_opaque.c): whether node n's op has a CPU
 * template of its own, and the kernel of one such node. */
bool evtc_cpu_opaque_supported(const evtc_node *n);
void evtc_cpu_emit_opaque(evtc_sb *b, const evtc_kernel *k);
/* Whether op's CPU template takes f16 / bf16 buffers: those that only move values (pad, concat, gather,
 * embedding) in their 2-byte storage, and scatter_add, which sums them in f32. */
bool evtc_cpu_opaque_takes_half(evtc_op op);
/* The attention family inside an OPAQUE kernel (cpu_emit_attention.c):
 * whether the views among k's arguments are ones the template takes (only
 * attention's, with contiguous columns; a kernel without views always
 * fits), and the body (T, y, x0..x5 in scope). */
bool evtc_cpu_attention_views_fit(const evtc_kernel *k);
void evtc_cpu_emit_attention(evtc_sb *b, const evtc_kernel *k);

#endif
