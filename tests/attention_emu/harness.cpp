/* harness.cpp -- evtc's CUDA attention library run on the CPU emulation of
 * shim.h against a float64 reference (tests/test_attention_emu_slow.py
 * builds it with the library extracted from cuda_emit_attention.c).
 *
 * Per case: random q, k, v, dout exact in bf16 or f16; the reference
 * computes out, lse (natural log) and, from out rounded to the 16-bit type
 * and lse rounded to f32 (what the GPU kernels receive), dq, dk, dv.  The
 * four kernels (forward, log-sum-exp, dq, dk with dv into rows of 2 D) run
 * as on the GPU (grid, NT threads, dynamic shared memory)
 * into NaN-poisoned outputs; ||got - want|| / ||want|| must stay below
 * 2e-2 (bf16) or 4e-3 (f16), 1e-5 for lse, every element finite.  Each
 * case runs twice: on row-major [BH, rows, D] tensors, and on views
 * (evtc_att_lay) as evtc's program hands them over when it drops layout
 * copies: q in slot 0 of a packed [B, S, 3, H, D] buffer, k and v in slots
 * 0 and 1 of [B, T, 2, H, D], out and dout in [B, S, H, D], dq into slot 1
 * of a [B, S, 3, H, D] buffer, dk and dv into padded rows of [B, T, H, 2 D
 * + 8]; the views must give the same bits and leave every other element of
 * their buffers as it was.  With 4 warps the key-block kernel also runs
 * with dq in the same pass (f32 sums by atomics): dq within the tolerance,
 * dk and dv the same bits.
 */
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "lib_emu.h"

static std::function<void()> emu_body;
static int emu_nt = 128;

static void *emu_thread(void *arg) {
  threadIdx.x = (unsigned)(uintptr_t)arg;
  emu_body();
  return nullptr;
}

/* Runs body for every block of the grid, emu_nt threads each, over fresh shared memory. */
static void emu_launch(unsigned grid, size_t smem, const std::function<void()> &body) {
  std::vector<unsigned char> mem(smem + 64);
  emu_smem_base = mem.data();
  pthread_barrier_init(&emu_block_bar, nullptr, (unsigned)emu_nt);
  for (int w = 0; w < emu_nt / 32; w++) pthread_barrier_init(&emu_warp_bar[w], nullptr, 32);
  for (unsigned b = 0; b < grid; b++) {
    memset(mem.data(), 0xAB, mem.size());
    emu_body = [&, b]() {
      blockIdx.x = b;
      body();
    };
    pthread_t th[256];
    for (int t = 0; t < emu_nt; t++) pthread_create(&th[t], nullptr, emu_thread, (void *)(uintptr_t)t);
    for (int t = 0; t < emu_nt; t++) pthread_join(th[t], nullptr);
  }
  pthread_barrier_destroy(&emu_block_bar);
  for (int w = 0; w < emu_nt / 32; w++) pthread_barrier_destroy(&emu_warp_bar[w]);
}

template <bool BF> static uint16_t enc(double x) { return BF ? emu_f2bf((float)x) : emu_f2h((float)x); }
template <bool BF> static double dec(uint16_t h) { return BF ? emu_bf2f(h) : emu_h2f(h); }

static double rel_rms(const std::vector<double> &got, const std::vector<double> &want, bool *finite) {
  double num = 0, den = 0;
  *finite = true;
  for (size_t i = 0; i < got.size(); i++) {
    if (!std::isfinite(got[i])) *finite = false;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

typedef std::pair<std::vector<uint16_t>, std::vector<double>> tensor;   /* storage, exact values */

/* A [BH, rows, cols] tensor in a buffer of `size` elements through layout l (l.h heads per batch). */
struct view {
  evtc_att_lay l;
  size_t size;
  size_t at(int bh, int r, int c) const { return (size_t)(evtc_att_base(l, bh) + r * l.sr + c); }
};
static view row_major(int BH, int rows, int cols) {
  return view{evtc_att_lay{0, (int64_t)rows * cols, (int64_t)rows * cols, cols, cols / 2, 1}, (size_t)BH * rows * cols};
}
/* Heads h (1, or 2 when BH is even) of [B, rows, slots, h, cols + pad] at slot `slot`. */
static view packed(int BH, int rows, int cols, int slots, int slot, int pad) {
  const int h = BH % 2 ? 1 : 2, B = BH / h;
  const int64_t w = cols + pad, sr = (int64_t)slots * h * w;
  return view{evtc_att_lay{slot * h * w, rows * sr, w, sr, cols / 2, h}, (size_t)B * rows * sr};
}
static std::vector<uint16_t> scatter(const std::vector<uint16_t> &x, const view &v, int BH, int rows, int cols) {
  std::vector<uint16_t> out(v.size, 0x7E7E);     /* a NaN in f16 and bf16 outside the view */
  for (int bh = 0; bh < BH; bh++)
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++) out[v.at(bh, r, c)] = x[((size_t)bh * rows + r) * cols + c];
  return out;
}
/* The view's elements row-major, and the count of elements outside it that are no longer 0x7E7E into *touched. */
static std::vector<uint16_t> gather(const std::vector<uint16_t> &buf, const view &v, int BH, int rows, int cols, int *touched) {
  std::vector<uint16_t> out((size_t)BH * rows * cols);
  std::vector<char> inside(buf.size(), 0);
  for (int bh = 0; bh < BH; bh++)
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++) {
        out[((size_t)bh * rows + r) * cols + c] = buf[v.at(bh, r, c)];
        inside[v.at(bh, r, c)] = 1;
      }
  for (size_t i = 0; i < buf.size(); i++) *touched += !inside[i] && buf[i] != 0x7E7E;
  return out;
}

template <bool BF, int D, bool CAUSAL, int NW> static int run(int BH, int S, int T) {
  emu_nt = 32 * NW;
  std::mt19937 rng((unsigned)(S * 131 + T * 7 + D + BF));
  std::uniform_real_distribution<double> U(-1, 1);
  auto make = [&](size_t n, double scale) {
    tensor x;
    for (size_t i = 0; i < n; i++) {
      x.first.push_back(enc<BF>(scale * U(rng)));
      x.second.push_back(dec<BF>(x.first.back()));
    }
    return x;
  };
  const size_t nq = (size_t)BH * S * D, nk = (size_t)BH * T * D;
  tensor q = make(nq, 2), k = make(nk, 2), v = make(nk, 1), dout = make(nq, 1);
  const double scale = 1.0 / std::sqrt((double)D);
  const int off = T - S;
  auto Q = [&](int h, int s, int j) { return q.second[((size_t)h * S + s) * D + j]; };
  auto K = [&](int h, int t, int j) { return k.second[((size_t)h * T + t) * D + j]; };
  auto V = [&](int h, int t, int j) { return v.second[((size_t)h * T + t) * D + j]; };
  auto DO = [&](int h, int s, int j) { return dout.second[((size_t)h * S + s) * D + j]; };
  std::vector<double> O(nq), L((size_t)BH * S), dQ(nq), dK(nk), dV(nk), P((size_t)S * T), dS((size_t)S * T);
  std::vector<uint16_t> Oh(nq);
  std::vector<float> Lf(L.size());
  for (int h = 0; h < BH; h++) {
    for (int s = 0; s < S; s++) {
      double mx = -INFINITY, sum = 0;
      for (int t = 0; t < T; t++) {
        double a = 0;
        for (int j = 0; j < D; j++) a += Q(h, s, j) * K(h, t, j);
        P[(size_t)s * T + t] = CAUSAL && t > s + off ? -INFINITY : a * scale;
        mx = std::max(mx, P[(size_t)s * T + t]);
      }
      for (int t = 0; t < T; t++) sum += std::exp(P[(size_t)s * T + t] - mx);
      L[(size_t)h * S + s] = mx + std::log(sum);
      Lf[(size_t)h * S + s] = (float)L[(size_t)h * S + s];
      for (int t = 0; t < T; t++) P[(size_t)s * T + t] = std::exp(P[(size_t)s * T + t] - mx) / sum;
      for (int j = 0; j < D; j++) {
        double a = 0;
        for (int t = 0; t < T; t++) a += P[(size_t)s * T + t] * V(h, t, j);
        O[((size_t)h * S + s) * D + j] = a;
        Oh[((size_t)h * S + s) * D + j] = enc<BF>(a);
      }
    }
    for (int s = 0; s < S; s++) {     /* the backward from the rounded out and lse the kernels get */
      double dd = 0;
      for (int j = 0; j < D; j++) dd += DO(h, s, j) * dec<BF>(Oh[((size_t)h * S + s) * D + j]);
      for (int t = 0; t < T; t++) {
        double a = 0, dp = 0;
        for (int j = 0; j < D; j++) a += Q(h, s, j) * K(h, t, j), dp += DO(h, s, j) * V(h, t, j);
        double p = CAUSAL && t > s + off ? 0 : std::exp(a * scale - (double)Lf[(size_t)h * S + s]);
        P[(size_t)s * T + t] = p;
        dS[(size_t)s * T + t] = p * (dp - dd);
      }
    }
    for (int s = 0; s < S; s++)
      for (int j = 0; j < D; j++) {
        double a = 0;
        for (int t = 0; t < T; t++) a += dS[(size_t)s * T + t] * K(h, t, j);
        dQ[((size_t)h * S + s) * D + j] = scale * a;
      }
    for (int t = 0; t < T; t++)
      for (int j = 0; j < D; j++) {
        double a = 0, b = 0;
        for (int s = 0; s < S; s++) a += dS[(size_t)s * T + t] * Q(h, s, j), b += P[(size_t)s * T + t] * DO(h, s, j);
        dK[((size_t)h * T + t) * D + j] = scale * a;
        dV[((size_t)h * T + t) * D + j] = b;
      }
  }
  int fails = 0;
  auto check = [&](const char *what, const std::vector<double> &got, const std::vector<double> &want, double tol) {
    bool finite;
    double e = rel_rms(got, want, &finite);
    bool ok = finite && e < tol;
    printf("  %-4s rel rms err %.2e%s%s\n", what, e, finite ? "" : " (NaN: unwritten elements)", ok ? "" : "  FAILED");
    fails += !ok;
  };
  auto decode = [&](const std::vector<uint16_t> &x) {
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = dec<BF>(x[i]);
    return r;
  };
  const double tol = BF ? 2e-2 : 4e-3;
  const int br = 16 * NW;
  const unsigned qgrid = (unsigned)(BH * ((S + br - 1) / br)), kgrid = (unsigned)(BH * ((T + br - 1) / br));
  const int st = D == 64 ? 2 : 1;     /* query-tile buffers of the key-block kernel (its launch shape) */
  const size_t smem = 2 * 64 * D * 2 + 512, smem_kv = 2 * br * D * 2 + st * (3 * 64 * D * 2 + 256) + 256;
  printf("%s D=%d%s BH=%d S=%d T=%d, %d warps\n", BF ? "bf16" : "f16", D, CAUSAL ? " causal" : "", BH, S, T, NW);
  std::vector<uint16_t> first_bits;
  for (int strided = 0; strided < 2; strided++) {
    view vq = row_major(BH, S, D), vk = row_major(BH, T, D), vv = vk, vo = vq, vd = vq, vg = vq, vkv = row_major(BH, T, 2 * D);
    if (strided) {
      vq = packed(BH, S, D, 3, 0, 0), vk = packed(BH, T, D, 2, 0, 0), vv = packed(BH, T, D, 2, 1, 0);
      vo = vd = packed(BH, S, D, 1, 0, 0), vg = packed(BH, S, D, 3, 1, 0), vkv = packed(BH, T, 2 * D, 1, 0, 8);
    }
    std::vector<uint16_t> qb = scatter(q.first, vq, BH, S, D), kb = scatter(k.first, vk, BH, T, D);
    std::vector<uint16_t> vb = scatter(v.first, vv, BH, T, D), db = scatter(dout.first, vd, BH, S, D);
    std::vector<uint16_t> ob = scatter(Oh, vo, BH, S, D);
    if (strided) {     /* k and v share one buffer, as they share the packed one in a model */
      for (size_t i = 0; i < kb.size(); i++)
        if (vb[i] != 0x7E7E) kb[i] = vb[i];
      vb = kb;
    }
    printf(" %s\n", strided ? "views" : "row-major");
    const uint16_t *qp = qb.data(), *kp = kb.data(), *vp = vb.data(), *dp = db.data();
    std::vector<uint16_t> outb(vo.size, 0x7E7E), dqb(vg.size, 0x7E7E), dkvb(vkv.size, 0x7E7E);
    std::vector<float> lse(L.size(), NAN), lse_fwd(L.size(), NAN);
    int touched = 0;
    emu_launch(qgrid, smem, [&]() {     /* the forward, writing the log-sum-exp as a by-product */
      evtc_att_fwd<BF, D, CAUSAL, false, NW>(qp, kp, vp, outb.data(), lse_fwd.data(), S, T, (float)scale, vq.l, vk.l, vv.l, vo.l);
    });
    std::vector<uint16_t> out = gather(outb, vo, BH, S, D, &touched);
    check("out", decode(out), O, tol);
    check("lse of the forward", std::vector<double>(lse_fwd.begin(), lse_fwd.end()), L, 1e-5);
    emu_launch(qgrid, smem, [&]() {
      evtc_att_fwd<BF, D, CAUSAL, true, NW>(qp, kp, kp, lse.data(), nullptr, S, T, (float)scale, vq.l, vk.l, vk.l, vq.l);
    });
    check("lse", std::vector<double>(lse.begin(), lse.end()), L, 1e-5);
    emu_launch(qgrid, smem, [&]() {
      evtc_att_bwd_q<BF, D, CAUSAL, NW>(qp, kp, vp, ob.data(), dp, Lf.data(), dqb.data(), S, T, (float)scale, vq.l, vk.l, vv.l,
                                        vo.l, vd.l, vg.l);
    });
    std::vector<uint16_t> dq = gather(dqb, vg, BH, S, D, &touched);
    check("dq", decode(dq), dQ, tol);
    emu_launch(kgrid, smem_kv, [&]() {
      evtc_att_bwd_kv<BF, D, CAUSAL, NW, false>(qp, kp, vp, ob.data(), dp, Lf.data(), dkvb.data(), S, T, (float)scale, vq.l,
                                                vk.l, vv.l, vo.l, vd.l, vkv.l, nullptr);
    });
    std::vector<uint16_t> dkv = gather(dkvb, vkv, BH, T, 2 * D, &touched);
    if (NW == 4) {     /* dq in the same pass: f32 sums by atomics, then scaled (the finishing kernel's part) */
      std::vector<uint16_t> dkvb2(vkv.size, 0x7E7E);
      std::vector<float> acc((size_t)BH * S * D, 0.0f);
      emu_launch(kgrid, smem_kv + 16 * NW * 64 * 2, [&]() {
        evtc_att_bwd_kv<BF, D, CAUSAL, NW, true>(qp, kp, vp, ob.data(), dp, Lf.data(), dkvb2.data(), S, T, (float)scale, vq.l,
                                                 vk.l, vv.l, vo.l, vd.l, vkv.l, acc.data());
      });
      std::vector<double> got_dq(acc.size());
      for (size_t i = 0; i < acc.size(); i++) got_dq[i] = dec<BF>(enc<BF>(acc[i] * (float)scale));
      check("dq in dk's pass", got_dq, dQ, tol);
      int touched2 = 0;
      if (gather(dkvb2, vkv, BH, T, 2 * D, &touched2) != dkv || touched2) {
        printf("  dk, dv with dq in the same pass differ from those without  FAILED\n");
        fails++;
      }
    }
    std::vector<double> got = decode(dkv), gk(nk), gv(nk);     /* rows of 2 D: dk then dv */
    for (size_t r = 0; r < nk / D; r++)
      for (int j = 0; j < D; j++) gk[r * D + j] = got[r * 2 * D + j], gv[r * D + j] = got[r * 2 * D + D + j];
    check("dk", gk, dK, tol);
    check("dv", gv, dV, tol);
    std::vector<uint16_t> bits = out;
    bits.insert(bits.end(), dq.begin(), dq.end());
    bits.insert(bits.end(), dkv.begin(), dkv.end());
    if (!strided) first_bits = bits;
    else if (bits != first_bits) {
      printf("  the views' results differ from the row-major ones  FAILED\n");
      fails++;
    }
    if (touched) {
      printf("  %d elements outside the output views written  FAILED\n", touched);
      fails++;
    }
  }
  return fails;
}

int main() {
  int fails = 0;
  fails += run<true, 64, false, 4>(1, 77, 77);
  fails += run<true, 64, true, 4>(1, 77, 77);
  fails += run<false, 128, true, 4>(1, 129, 129);
  fails += run<false, 64, false, 4>(1, 1, 129);
  fails += run<true, 64, true, 4>(1, 65, 200);
  fails += run<true, 128, false, 4>(1, 129, 1);
  fails += run<false, 64, true, 4>(1, 1, 1);
  fails += run<true, 64, true, 8>(1, 200, 333);
  fails += run<false, 128, false, 8>(1, 129, 70);
  fails += run<true, 64, false, 4>(2, 150, 97);
  fails += run<false, 128, true, 8>(1, 70, 140);
  fails += run<true, 64, true, 4>(4, 33, 40);     /* views over 2 batches of 2 heads */
  printf("%d failed\n", fails);
  return fails != 0;
}
