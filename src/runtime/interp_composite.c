/* interp_composite.c -- composite ops computed whole: softmax, log_softmax,
 * layernorm, batchnorm (training mode) and its running statistics, dropout,
 * cross_entropy, mse, embedding.
 *
 * Softmax-like ops subtract the row maximum before exponentiating, so large
 * logits do not overflow.  Batch statistics are biased for the
 * normalisation and unbiased (n/(n-1)) for the running variance, as in
 * PyTorch's BatchNorm.
 */
#include <math.h>
#include <string.h>

#include "runtime/interp_kernels.h"
#include "runtime/philox.h"

/* Splits shape around axis: outer * size * inner == numel. */
static void split_axis(const evtc_type *t, int ax, int64_t *outer, int64_t *size, int64_t *inner) {
  *outer = *inner = 1;
  for (int d = 0; d < ax; d++) *outer *= t->shape[d];
  for (int d = ax + 1; d < t->rank; d++) *inner *= t->shape[d];
  *size = t->shape[ax];
}

evtc_status evtc_kernel_softmax(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  bool log_form = k->node->op == EVTC_OP_LOG_SOFTMAX;
  int64_t outer, size, inner;
  split_axis(t, evtc_axis_norm(evtc_node_int(k->node, "axis"), t->rank), &outer, &size, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const double *x = k->in[0] + o * size * inner + i;
      double *y = k->out + o * size * inner + i;
      double mx = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < size; j++) mx = x[j * inner] > mx ? x[j * inner] : mx;
      for (int64_t j = 0; j < size; j++) sum += exp(x[j * inner] - mx);
      double lse = log(sum);
      for (int64_t j = 0; j < size; j++)
        y[j * inner] = log_form ? x[j * inner] - mx - lse : exp(x[j * inner] - mx) / sum;
    }
  return EVTC_OK;
}

evtc_status evtc_kernel_layernorm(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  int ax = evtc_axis_norm(evtc_node_int(k->node, "axis"), t->rank);
  double eps = evtc_node_float(k->node, "eps");
  int64_t rows = 1, len = 1;
  for (int d = 0; d < ax; d++) rows *= t->shape[d];
  for (int d = ax; d < t->rank; d++) len *= t->shape[d];
  const double *gamma = k->in[1], *beta = k->in[2];
  for (int64_t r = 0; r < rows; r++) {
    const double *x = k->in[0] + r * len;
    double *y = k->out + r * len;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < len; i++) mean += x[i];
    mean /= (double)len;
    for (int64_t i = 0; i < len; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (double)len;
    double inv = 1.0 / sqrt(var + eps);
    for (int64_t i = 0; i < len; i++) y[i] = (x[i] - mean) * inv * gamma[i] + beta[i];
  }
  return EVTC_OK;
}

/* Per-channel mean and sum of squared deviations of x[N,C,...] over every
 * axis but 1; *count = the number of values per channel. */
static void channel_stats(const evtc_type *t, const double *x, int64_t c, double *mean, double *ssd, int64_t *count) {
  int64_t n = t->shape[0], chans = t->shape[1], sp = 1;
  for (int d = 2; d < t->rank; d++) sp *= t->shape[d];
  *count = n * sp;
  double m = 0.0, s = 0.0;
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < sp; i++) m += x[(b * chans + c) * sp + i];
  m /= (double)*count;
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < sp; i++) {
      double dv = x[(b * chans + c) * sp + i] - m;
      s += dv * dv;
    }
  *mean = m;
  *ssd = s;
}

evtc_status evtc_kernel_batchnorm(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  double eps = evtc_node_float(k->node, "eps");
  int64_t n = t->shape[0], chans = t->shape[1], sp = 1;
  for (int d = 2; d < t->rank; d++) sp *= t->shape[d];
  for (int64_t c = 0; c < chans; c++) {
    double mean, ssd;
    int64_t count;
    channel_stats(t, k->in[0], c, &mean, &ssd, &count);
    double scale = k->in[1][c] / sqrt(ssd / (double)count + eps), shift = k->in[2][c];
    for (int64_t b = 0; b < n; b++)
      for (int64_t i = 0; i < sp; i++) {
        int64_t at = (b * chans + c) * sp + i;
        k->out[at] = (k->in[0][at] - mean) * scale + shift;
      }
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_batchnorm_running(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  double m = evtc_node_float(k->node, "momentum");
  bool var = k->node->op == EVTC_OP_BATCHNORM_RUNNING_VAR;
  for (int64_t c = 0; c < t->shape[1]; c++) {
    double mean, ssd;
    int64_t count;
    channel_stats(t, k->in[0], c, &mean, &ssd, &count);
    if (var && count < 2)
      return evtc_interp_fail(k, "the unbiased variance needs at least 2 values per channel, got %lld",
                              (long long)count);
    double stat = var ? ssd / (double)(count - 1) : mean;
    k->out[c] = (1.0 - m) * k->in[1][c] + m * stat;
  }
  return EVTC_OK;
}

evtc_status evtc_kernel_dropout(const evtc_kernel_args *k) {
  double p = evtc_node_float(k->node, "p");
  uint64_t seed = (uint64_t)evtc_node_int(k->node, "seed");
  double scale = 1.0 / (1.0 - p);
  int64_t numel = evtc_type_numel(&k->node->type);
  for (int64_t i = 0; i < numel; i++)
    k->out[i] = evtc_philox_uniform(seed, k->step, (uint64_t)i) >= p ? k->in[0][i] * scale : 0.0;
  return EVTC_OK;
}

evtc_status evtc_kernel_cross_entropy(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  int64_t n = t->shape[0], c = t->shape[1];
  double total = 0.0;
  for (int64_t r = 0; r < n; r++) {
    double label = k->in[1][r];
    if (!(label >= 0 && label < (double)c))
      return evtc_interp_fail(k, "label %.0f of row %lld is outside [0, %lld)", label, (long long)r, (long long)c);
    const double *x = k->in[0] + r * c;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < c; j++) mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < c; j++) sum += exp(x[j] - mx);
    total += mx + log(sum) - x[(int64_t)label];
  }
  k->out[0] = total / (double)n;
  return EVTC_OK;
}

evtc_status evtc_kernel_mse(const evtc_kernel_args *k) {
  int64_t numel = evtc_type_numel(evtc_kernel_in_type(k, 0));
  double sum = 0.0;
  for (int64_t i = 0; i < numel; i++) {
    double dv = k->in[0][i] - k->in[1][i];
    sum += dv * dv;
  }
  k->out[0] = sum / (double)numel;
  return EVTC_OK;
}

evtc_status evtc_kernel_embedding(const evtc_kernel_args *k) {
  const evtc_type *t = evtc_kernel_in_type(k, 0);
  int64_t v = t->shape[0], d = t->shape[1], m = evtc_type_numel(evtc_kernel_in_type(k, 1));
  for (int64_t j = 0; j < m; j++) {
    double id = k->in[1][j];
    if (!(id >= 0 && id < (double)v))
      return evtc_interp_fail(k, "id %.0f (element %lld) is outside the table's [0, %lld)", id, (long long)j,
                              (long long)v);
  }
  for (int64_t j = 0; j < m; j++)
    memcpy(k->out + j * d, k->in[0] + (int64_t)k->in[1][j] * d, sizeof(double) * (size_t)d);
  return EVTC_OK;
}
