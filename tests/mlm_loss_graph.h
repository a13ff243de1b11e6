/* mlm_loss_graph.h -- BERT-Large's MLM loss kernel as the partitioner forms it from `evtc explain
 * bench/loss/bert_mlm_rows.evt --train --loss cross_entropy` (512 rows of the padded logits plus the head's bias
 * and gemm-pad's mask: log-softmax, the picked loss summed over everything, the logits' gradient and the bias's
 * column sum), in dtype T; test_rows_keep.c checks what its rows kernel keeps, test_rows_finish.c where it
 * combines its partials.
 */
#ifndef EVTC_TESTS_MLM_LOSS_GRAPH_H
#define EVTC_TESTS_MLM_LOSS_GRAPH_H

#define MLM_LOSS_TEXT(T)                                                                                             \
  "graph mlm_loss {\n  %y = input() : " T "[512,30528]\n  %b = input() : " T "[30528]\n"                              \
  "  %mask = input() : " T "[30528]\n  %labels = input() : i64[512]\n"                                                \
  "  %z = add(%y, %b) : " T "[512,30528]\n  %zm = add(%z, %mask) : " T "[512,30528]\n"                                \
  "  %max = reduce_max(%zm) {axes=[1], keepdims=1} : " T "[512,1]\n  %shift = sub(%zm, %max) : " T "[512,30528]\n"    \
  "  %exp = exp(%shift) : " T "[512,30528]\n  %sum = reduce_sum(%exp) {axes=[1], keepdims=1} : " T "[512,1]\n"        \
  "  %lse = log(%sum) : " T "[512,1]\n  %lsm = sub(%shift, %lse) : " T "[512,30528]\n"                                \
  "  %onehot = one_hot(%labels) {depth=30528, dtype=" T ", checked=1} : " T "[512,30528]\n"                           \
  "  %picked = mul(%lsm, %onehot) : " T "[512,30528]\n  %lsum = reduce_sum(%picked) : " T "[]\n"                      \
  "  %t0 = div(%exp, %sum) : " T "[512,30528]\n  %t2 = sub(%t0, %onehot) : " T "[512,30528]\n"                        \
  "  %k = const() {value=6.103515625e-05} : " T "[]\n  %gz = mul(%t2, %k) : " T "[512,30528]\n"                       \
  "  %gb = reduce_sum(%gz) {axes=[0]} : " T "[30528]\n  output %lsum\n  output %gz\n  output %gb\n}\n"

#endif
