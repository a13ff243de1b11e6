/* ln_grad_graph.h -- BERT-Large's layernorm gradient as its joint graph has it, which test_gpu_kernels.c checks on
 * the GPU (f32, and bf16 compiled without one) and bench/gpu_bench.c times at the model's size: the incoming
 * gradient is the sum of two (the residual stream's and the sublayer's), the forward saved x-hat and 1 / sigma;
 * dx, and dgamma and dbeta summed over the rows, in one persistent row kernel with ROW partials that reads the two
 * gradients in its first pass only (cuda_emit_rows.c's decide_ahead loads them a row ahead).
 * LN_GRAD_TEXT(dtype, rows, columns), the sizes as literals.
 */
#ifndef EVTC_TESTS_LN_GRAD_GRAPH_H
#define EVTC_TESTS_LN_GRAD_GRAPH_H

#define LN_GRAD_TEXT(T, R, C)                                                                                      \
  "graph ln_grad {\n  %g1 = input() : " T "[" #R "," #C "]\n  %g2 = input() : " T "[" #R "," #C "]\n"               \
  "  %xh = input() : " T "[" #R "," #C "]\n  %rstd = input() : " T "[" #R ",1]\n  %gamma = input() : " T "[" #C "]\n" \
  "  %dy = add(%g1, %g2) : " T "[" #R "," #C "]\n  %dyg = mul(%dy, %gamma) : " T "[" #R "," #C "]\n"                  \
  "  %m1 = reduce_mean(%dyg) {axes=[1], keepdims=1} : " T "[" #R ",1]\n"                                            \
  "  %t = mul(%dyg, %xh) : " T "[" #R "," #C "]\n"                                                                  \
  "  %m2 = reduce_mean(%t) {axes=[1], keepdims=1} : " T "[" #R ",1]\n  %a = sub(%dyg, %m1) : " T "[" #R "," #C "]\n" \
  "  %bq = mul(%xh, %m2) : " T "[" #R "," #C "]\n  %c = sub(%a, %bq) : " T "[" #R "," #C "]\n"                        \
  "  %dx = mul(%c, %rstd) : " T "[" #R "," #C "]\n  %dxy = mul(%dy, %xh) : " T "[" #R "," #C "]\n"                    \
  "  %dgamma = reduce_sum(%dxy) {axes=[0]} : " T "[" #C "]\n  %dbeta = reduce_sum(%dy) {axes=[0]} : " T "[" #C "]\n"  \
  "  output %dx\n  output %dgamma\n  output %dbeta\n}\n"

#endif
