/* dropout_block.h -- the training block that test_gpu_kernels.c checks on the GPU and bench/gpu_graph_bench.c
 * times with and without graph replay: dropout + residual add + layernorm + GEMM + cross-entropy over
 * f32[64,1024], the dropout making every step's result depend on the step.
 */
#ifndef EVTC_TESTS_DROPOUT_BLOCK_H
#define EVTC_TESTS_DROPOUT_BLOCK_H

static const char block_text[] =
    "graph block {\n"
    "  %x = input() : f32[64,1024]\n  %res = input() : f32[64,1024]\n"
    "  %g = param() {init=\"ones\"} : f32[1024]\n  %b = param() {init=\"zeros\"} : f32[1024]\n"
    "  %w = param() : f32[1024,10]\n  %y = input() : i64[64]\n"
    "  %d = dropout(%x) {p=0.1, seed=9} : f32[64,1024]\n  %r = add(%d, %res) : f32[64,1024]\n"
    "  %ln = layernorm(%r, %g, %b) : f32[64,1024]\n  %z = matmul(%ln, %w) : f32[64,10]\n"
    "  %loss = cross_entropy(%z, %y) : f32[]\n  output %loss\n  loss %loss\n"
    "}\n";

#endif
