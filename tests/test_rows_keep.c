/* test_rows_keep.c -- what a CUDA rows kernel keeps on chip for its later
 * passes (evtc_cuda_rows_info, src/backend/cuda/cuda_rows_plan.c), checked
 * on the CPU: no GPU needed.
 *
 * BERT-Large's MLM loss kernel (the padded logits plus the head's bias and
 * gemm-pad's mask, log-softmax, the picked loss, the logits' gradient and
 * the bias's column sum) keeps the bf16 sum logits + bias + mask in place
 * of the logits (stands_for), as storage bits in registers, and nothing
 * else: its shift and exponential, which pass 3 needs again, would be a
 * second kept row (drop_doubles).  The logits' row is still prefetched,
 * and the emitted pass rounds the sum to bf16 where it keeps it.  The same
 * graph in f32 keeps the logits (only f16 / bf16 values stand in for
 * another), and BERT-Large's layernorm gradient keeps, as before, its
 * incoming gradients' sum times gamma in f32 (a value read from two
 * loads, kept for that) beside its normalised input, none in place of
 * another.  test_gpu_kernels runs such a
 * kernel (the bf16 cross-entropy with its bias gradient, 300 x 30528)
 * against the interpreter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_emit.h"
#include "check.h"
#include "cpu_oracle.h"
#include "kernel/kernel.h"
#include "kernel_values.h"
#include "ln_grad_graph.h"
#include "mlm_loss_graph.h"
#include "rows_emit.h"

/* The graph node of kernel value i: a load's input, or the node it computes (NULL: none). */
static int kept_names(const evtc_kernel *k, const evtc_cuda_rows_info *info, char *buf, size_t cap) {
  int n = 0;
  buf[0] = 0;
  for (int i = 0; i < k->n_v; i++) {
    if (!info->kept[i]) continue;
    const evtc_node *node = node_of(k, i);
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s", n++ ? " " : "", node ? node->name : "?");
  }
  return n;
}

static void test_mlm_loss_bf16(void) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(MLM_LOSS_TEXT("bf16"), "bf16 MLM loss", &g);
  if (!k) return;
  const int vec = evtc_cuda_vec_width(k);
  evtc_cuda_rows_info info;
  evtc_cuda_rows_info_init(&info, k, vec, true);
  const int y = value_of(k, "y"), zm = value_of(k, "zm");
  char names[256];
  int n = kept_names(k, &info, names, sizeof names);
  CHECK(y >= 0 && zm >= 0, "bf16 MLM loss: the logits' load (%d) or their masked sum (%d) not found", y, zm);
  CHECK(n == 1 && zm >= 0 && info.kept[zm], "bf16 MLM loss: kept [%s], not the masked logits alone", names);
  CHECK(zm >= 0 && info.stands_for[zm] == y, "bf16 MLM loss: the masked logits stand for value %d, not the load %d",
        zm >= 0 ? info.stands_for[zm] : -2, y);
  CHECK(info.regs_per_col == 0.5, "bf16 MLM loss: %.3f registers a column kept, not 0.5 (bf16 bits)", info.regs_per_col);
  evtc_cuda_rows_plan pl;
  char *src = rows_emit_h200(k, "mlm", &pl);
  CHECK(pl.cache == 1, "bf16 MLM loss: row cache %d, not registers", pl.cache);
  CHECK(pl.prefetch > 0 && y >= 0 && evtc_cuda_rows_prefetches(k, &info, &pl, y),
        "bf16 MLM loss: the logits' next row is not prefetched (prefetch %d)", pl.prefetch);
  char want[64];
  snprintf(want, sizeof want, "kh%d[(j * VV + e) >> 1] |= (uint32_t)kq", zm);
  CHECK(src && strstr(src, "const uint16_t kq = evtc_f2bf(") && strstr(src, want),
        "bf16 MLM loss: the emitted pass does not keep the masked logits' bf16 bits (%s)", want);
  free(src);
  evtc_cuda_rows_info_free(&info);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

/* Kernel text t keeps exactly the values `want` names (in node order), none in place of another. */
static void check_kept(const char *t, const char *what, const char *want) {
  evtc_graph *g;
  evtc_kernel *k = oracle_kernel(t, what, &g);
  if (!k) return;
  evtc_cuda_rows_info info;
  evtc_cuda_rows_info_init(&info, k, evtc_cuda_vec_width(k), true);
  char names[256];
  kept_names(k, &info, names, sizeof names);
  CHECK(strcmp(names, want) == 0, "%s: kept [%s], not [%s]", what, names, want);
  for (int i = 0; i < k->n_v; i++) CHECK(info.stands_for[i] < 0, "%s: value %d stands for %d", what, i, info.stands_for[i]);
  evtc_cuda_rows_info_free(&info);
  evtc_kernel_free(k);
  evtc_graph_free(g);
}

int main(void) {
  test_mlm_loss_bf16();
  check_kept(MLM_LOSS_TEXT("f32"), "f32 MLM loss", "y");
  check_kept(LN_GRAD_TEXT("bf16", 16384, 1024), "bf16 layernorm gradient", "dyg xh");
  return check_summary();
}
