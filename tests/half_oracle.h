/* half_oracle.h -- exact checks of f16 / bf16 storage on a backend (tests only).
 *
 * Where a kernel must give the interpreter's bits, on oracle_backend()
 * (cpu_oracle.h: the CPU backend, or the CUDA backend in the GPU tests):
 * set/get of 2-byte buffers (ties, subnormals, overflow, NaN, -0 against
 * evtc_round_to), every one of the 65536 f16 and bf16 bit patterns through
 * a load + store, a widening cast and a cast to the other format, an f16
 * product with an f16 constant, f32 -> f16 / bf16 casts at and beside
 * every kind of tie, and f64 / i64 -> f16 / bf16 casts that a double
 * rounding (through f32) would get wrong.  half_exact_tests() runs them
 * all; every kernel must run compiled.  HALF_ROWS_TEXT is the rows graph
 * (softmax, log-softmax, layernorm, reductions) the CPU and GPU tests share.
 */
#ifndef EVTC_HALF_ORACLE_H
#define EVTC_HALF_ORACLE_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_oracle.h"
#include "runtime/elements.h"
#include "runtime/precision.h"
#include "runtime/program_internal.h"

/* f16 / bf16 rows: softmax, log-softmax, layernorm, reductions over rows and columns. */
#define HALF_ROWS_TEXT(T, R, C)                                                                                    \
  "graph rows_" T " {\n  %a = input() : " T "[" #R "," #C "]\n  %g = input() : " T "[" #C "]\n"                  \
  "  %be = input() : " T "[" #C "]\n"                                                                             \
  "  %sm = softmax(%a) : " T "[" #R "," #C "]\n  %ls = log_softmax(%a) {axis=1} : " T "[" #R "," #C "]\n"          \
  "  %ln = layernorm(%a, %g, %be) : " T "[" #R "," #C "]\n"                                                       \
  "  %rs = reduce_sum(%a) {axes=[0]} : " T "[" #C "]\n  %rm = reduce_max(%a) {axes=[1]} : " T "[" #R "]\n"        \
  "  %mean = reduce_mean(%a) : " T "[]\n"                                                                          \
  "  output %sm\n  output %ls\n  output %ln\n  output %rs\n  output %rm\n  output %mean\n}\n"

/* The same double bit for bit, NaN matching NaN and -0 not matching +0. */
static bool same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

/* Runs g on oracle_backend() and in the interpreter with the given leaf values (by node name) and checks that every
 * output agrees exactly and that every kernel ran compiled. */
static void half_exact_compare(const char *text, const char *what, const char *const *leaves, double *const *vals, int n) {
  evtc_graph *g = oracle_parse(text, what);
  if (!g) return;
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, oracle_backend(), NULL, &d);
  CHECK(p != NULL, "%s: %s", what, d.msg);
  evtc_interp *it = evtc_interp_new(g);
  if (!p) goto out;
  for (int i = 0; i < n; i++) {
    const evtc_node *leaf = evtc_graph_find(g, leaves[i]);
    evtc_interp_set(it, leaf, vals[i]);
    evtc_program_set(p, leaf, vals[i]);
  }
  evtc_program_poison(p);
  CHECK(evtc_interp_run(it, 0, &d) == EVTC_OK, "%s: interpreter: %s", what, d.msg);
  CHECK(evtc_program_run(p, 0, &d) == EVTC_OK, "%s: program: %s", what, d.msg);
  evtc_program_stats st = evtc_program_get_stats(p);
  CHECK(st.interpreted == 0, "%s: %d kernels ran in the interpreter", what, st.interpreted);
  for (int k = 0; k < g->n_outputs; k++) {
    const evtc_node *o = g->outputs[k].node;
    int64_t numel = evtc_type_numel(&o->type), bad = 0;
    double *got = malloc(sizeof(double) * (size_t)numel);
    const double *want = evtc_interp_value(it, o);
    evtc_program_get(p, o, got);
    for (int64_t e = 0; e < numel; e++)
      if (!same(got[e], want[e]) && bad++ == 0)
        fprintf(stderr, "  %s: %%%s[%lld]: got %.17g, want %.17g\n", what, o->name, (long long)e, got[e], want[e]);
    CHECK(bad == 0, "%s: %%%s: %lld of %lld elements differ", what, o->name, (long long)bad, (long long)numel);
    free(got);
  }
out:
  evtc_interp_free(it);
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* Values that probe the rounding of dtype t: ties, neighbours of ties, subnormals, overflow, specials. */
static int64_t half_probes(evtc_dtype t, double *v, int64_t cap) {
  int mant = t == EVTC_F16 ? 10 : 7, emin = t == EVTC_F16 ? -14 : -126;
  double max = t == EVTC_F16 ? 65504.0 : ldexp(255.0, 120);
  int64_t n = 0;
  const double fixed[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, max, -max, max * (1 + ldexp(1, -mant - 1)),
                          max * (1 + ldexp(1, -mant - 2)), ldexp(1, emin), ldexp(1, emin - mant),
                          ldexp(1, emin - mant - 1), ldexp(3, emin - mant - 1), ldexp(1, emin - mant - 2),
                          0.1, -0.3, 3.14159265358979, 1e-7, 6e-8, 1e30, FLT_MAX};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] && n < cap; i++) v[n++] = fixed[i];
  uint64_t s = 99;
  while (n + 4 <= cap) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int e = (int)(s >> 40) % (t == EVTC_F16 ? 32 : 200) + (t == EVTC_F16 ? emin - mant - 2 : emin - mant - 10);
    double m = (double)((s >> 8) & ((1u << mant) - 1)) + (1 << mant);      /* a value of the format ... */
    double x = ldexp(m, e), half = ldexp(1, e - 1);                          /* ... and half its spacing */
    double sign = (s & 1) ? -1.0 : 1.0;
    v[n++] = sign * x;
    v[n++] = sign * (x + half);                                              /* a tie */
    v[n++] = sign * (double)nextafterf((float)(x + half), INFINITY);        /* just above, just below */
    v[n++] = sign * (double)nextafterf((float)(x + half), 0.0f);
  }
  return n;
}

static void half_test_set_get(void) {
  CHECK(evtc_buffer_elem_size(EVTC_BF16) == 2 && evtc_buffer_elem_size(EVTC_F16) == 2, "f16 and bf16 buffers take 2 bytes");
  evtc_graph *g = oracle_parse("graph sg {\n  %h = input() : f16[400]\n  %b = input() : bf16[400]\n"
                               "  %y = add(%h, %h) : f16[400]\n  output %y\n}\n", "set-get");
  if (!g) return;
  evtc_diag d = {0};
  evtc_program *p = evtc_program_new(g, NULL, 0, oracle_backend(), NULL, &d);
  CHECK(p != NULL, "set-get: %s", d.msg);
  if (p) {
    static const evtc_dtype types[] = {EVTC_F16, EVTC_BF16};
    static const char *const names[] = {"h", "b"};
    for (int t = 0; t < 2; t++) {
      double v[400], got[400];
      int64_t n = half_probes(types[t], v, 400), bad = 0;
      const evtc_node *leaf = evtc_graph_find(g, names[t]);
      evtc_program_set(p, leaf, v);
      CHECK(evtc_program_get(p, leaf, got), "set-get: %s has a buffer", names[t]);
      for (int64_t e = 0; e < n; e++)
        if (!same(got[e], evtc_round_to(types[t], v[e])) && bad++ == 0)
          fprintf(stderr, "  set-get %s: %.17g gave %.17g, want %.17g\n", evtc_dtype_name(types[t]), v[e], got[e],
                  evtc_round_to(types[t], v[e]));
      CHECK(bad == 0, "set-get %s: %lld of %lld values rounded differently from evtc_round_to",
            evtc_dtype_name(types[t]), (long long)bad, (long long)n);
    }
  }
  evtc_program_free(p);
  evtc_graph_free(g);
}

/* Every bit pattern: widened exactly (cast to f32), stored back exactly (neg twice: a load + store); times an f16
 * constant (its f16 value: the product of two f16 values is exact in f32, so one rounding, as in the interpreter). */
static void half_test_all_patterns(void) {
  double *h = malloc(sizeof(double) * 65536), *b = malloc(sizeof(double) * 65536);
  for (int i = 0; i < 65536; i++) {
    h[i] = evtc_f16_to_double((uint16_t)i);
    b[i] = evtc_bf16_to_double((uint16_t)i);
  }
  const char *leaves[] = {"h", "b"};
  double *vals[] = {h, b};
  half_exact_compare("graph bits {\n  %h = input() : f16[65536]\n  %b = input() : bf16[65536]\n"
                "  %hf = cast(%h) {dtype=f32} : f32[65536]\n  %bf = cast(%b) {dtype=f32} : f32[65536]\n"
                "  %hn = neg(%h) : f16[65536]\n  %hh = neg(%hn) : f16[65536]\n"
                "  %bn = neg(%b) : bf16[65536]\n  %bb = neg(%bn) : bf16[65536]\n"
                "  %hd = cast(%h) {dtype=f64} : f64[65536]\n  %bh = cast(%b) {dtype=f16} : f16[65536]\n"
                "  %k = const() {value=0.1} : f16[]\n  %hk = mul(%h, %k) : f16[65536]\n"
                "  output %hf\n  output %bf\n  output %hh\n  output %bb\n  output %hd\n  output %bh\n  output %hk\n}\n",
                "all bit patterns", leaves, vals, 2);
  free(h);
  free(b);
}

/* f32 -> f16 / bf16 casts at ties and beside them, stored and also widened back inside the kernel. */
static void half_test_f32_casts(void) {
  enum { N = 4096 };
  double *v = malloc(sizeof(double) * N);
  int64_t n = half_probes(EVTC_F16, v, N / 2);
  n += half_probes(EVTC_BF16, v + n, N - n);
  for (int64_t e = 0; e < n; e++) v[e] = (float)v[e];
  const char *leaves[] = {"x"};
  double *vals[] = {v};
  half_exact_compare("graph c32 {\n  %x = input() : f32[4096]\n"
                "  %h = cast(%x) {dtype=f16} : f16[4096]\n  %b = cast(%x) {dtype=bf16} : bf16[4096]\n"
                "  %hx = cast(%h) {dtype=f32} : f32[4096]\n  %bx = cast(%b) {dtype=f32} : f32[4096]\n"
                "  %hb = cast(%h) {dtype=bf16} : bf16[4096]\n"
                "  output %h\n  output %b\n  output %hx\n  output %bx\n  output %hb\n}\n",
                "f32 -> f16 / bf16 casts", leaves, vals, 1);
  free(v);
}

/* f64 and i64 -> f16 / bf16: values whose f32 rounding is a tie of the target format, so that rounding twice
 * (through f32) goes the wrong way; also every probe as f64. */
static void half_test_wide_casts(void) {
  enum { N = 1024 };
  double *d = malloc(sizeof(double) * N), *i = malloc(sizeof(double) * N);
  int64_t n = 0;
  d[n++] = 1 + ldexp(1, -8) + ldexp(1, -30);        /* bf16: up to 1 + 2^-7; through f32: a tie, to even (1) */
  d[n++] = -(1 + ldexp(1, -11) + ldexp(1, -40));    /* f16: the same */
  d[n++] = ldexp(1 + ldexp(1, -8) + ldexp(1, -33), -130);   /* bf16 subnormal */
  d[n++] = ldexp(1, -25) + ldexp(1, -60);           /* f16: just above half the smallest subnormal */
  d[n++] = 65520.0 - ldexp(1, -30);                 /* f16: just below the overflow tie */
  d[n++] = 1e300;
  n += half_probes(EVTC_F16, d + n, 400);
  n += half_probes(EVTC_BF16, d + n, N - n);
  for (int64_t e = 0; e < N; e++) {
    double x = ldexp(1, 24) + ldexp(1, 16) + 1 + (double)(e % 7) * ldexp(1, 17);   /* bf16 ties + 1 */
    i[e] = e % 3 == 0 ? x : e % 3 == 1 ? -(ldexp(1, 30) + ldexp(1, 19) + 1) : (double)(e * 977 % 70001) - 35000;
  }
  for (int64_t e = n; e < N; e++) d[e] = 0.5;
  const char *leaves[] = {"d", "i"};
  double *vals[] = {d, i};
  half_exact_compare("graph cw {\n  %d = input() : f64[1024]\n  %i = input() : i64[1024]\n"
                "  %dh = cast(%d) {dtype=f16} : f16[1024]\n  %db = cast(%d) {dtype=bf16} : bf16[1024]\n"
                "  %ih = cast(%i) {dtype=f16} : f16[1024]\n  %ib = cast(%i) {dtype=bf16} : bf16[1024]\n"
                "  output %dh\n  output %db\n  output %ih\n  output %ib\n}\n",
                "f64 / i64 -> f16 / bf16 casts", leaves, vals, 2);
  free(d);
  free(i);
}

static void half_exact_tests(void) {
  half_test_set_get();
  half_test_all_patterns();
  half_test_f32_casts();
  half_test_wide_casts();
}

#endif
