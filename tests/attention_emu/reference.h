/* reference.h -- what the CPU-emulation harnesses of evtc's attention libraries share (harness.cpp: the mma.sync
 * library; harness_wg.cpp: the wgmma one): a block's launch on POSIX threads, the 16-bit encodings, the error
 * measure, views of [BH, rows, cols] tensors, and a case's float64 reference.
 * Included after the emulated library (lib_emu.h), whose shim.h it uses. */
#include <functional>
#include <random>
#include <utility>
#include <vector>

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
  for (int g = 0; g < emu_nt / 128; g++) pthread_barrier_init(&emu_named_bar[1 + g], nullptr, 128);
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
  for (int g = 0; g < emu_nt / 128; g++) pthread_barrier_destroy(&emu_named_bar[1 + g]);
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

typedef std::pair<std::vector<uint16_t>, std::vector<double>> tensor; /* storage, exact values */

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
  std::vector<uint16_t> out(v.size, 0x7E7E); /* a NaN in f16 and bf16 outside the view */
  for (int bh = 0; bh < BH; bh++)
    for (int r = 0; r < rows; r++)
      for (int c = 0; c < cols; c++) out[v.at(bh, r, c)] = x[((size_t)bh * rows + r) * cols + c];
  return out;
}
/* The view's elements row-major, and the count of elements outside it that are no longer 0x7E7E into *touched. */
static std::vector<uint16_t> gather(const std::vector<uint16_t> &buf, const view &v, int BH, int rows, int cols,
                                    int *touched) {
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

/* A case: random q, k, v, dout exact in bf16 or f16 ([BH, S or T, D] row-major) and, in float64, out, lse
 * (natural log) and, from out rounded to the 16-bit type and lse rounded to f32 (what the kernels receive), dq,
 * dk, dv. */
template <bool BF, int D, bool CAUSAL> struct attention_case {
  int BH, S, T;
  size_t nq, nk;
  double scale;
  tensor q, k, v, dout;
  std::vector<double> O, L, dQ, dK, dV;
  std::vector<uint16_t> Oh;
  std::vector<float> Lf;
  attention_case(int BH_, int S_, int T_) : BH(BH_), S(S_), T(T_) {
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
    nq = (size_t)BH * S * D, nk = (size_t)BH * T * D;
    q = make(nq, 2), k = make(nk, 2), v = make(nk, 1), dout = make(nq, 1);
    scale = 1.0 / std::sqrt((double)D);
    const int off = T - S;
    auto Q = [&](int h, int s, int j) { return q.second[((size_t)h * S + s) * D + j]; };
    auto K = [&](int h, int t, int j) { return k.second[((size_t)h * T + t) * D + j]; };
    auto V = [&](int h, int t, int j) { return v.second[((size_t)h * T + t) * D + j]; };
    auto DO = [&](int h, int s, int j) { return dout.second[((size_t)h * S + s) * D + j]; };
    O.assign(nq, 0), L.assign((size_t)BH * S, 0), dQ.assign(nq, 0), dK.assign(nk, 0), dV.assign(nk, 0),
        Oh.assign(nq, 0);
    Lf.assign(L.size(), 0);
    std::vector<double> P((size_t)S * T), dS((size_t)S * T);
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
      for (int s = 0; s < S; s++) { /* the backward from the rounded out and lse the kernels get */
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
  }
};

/* One run's buffers of a case: row-major [BH, rows, D] tensors, or (strided) the views evtc's program hands
 * over when it drops layout copies: q in slot 0 of a packed [B, S, 3, H, D] buffer, k and v in slots 0 and 1 of
 * one [B, T, 2, H, D] buffer, out and dout in [B, S, H, D], dq into slot 1 of a [B, S, 3, H, D] buffer, dk and dv
 * into padded rows of [B, T, H, 2 D + 8]; the inputs scattered into them, the outputs poisoned. */
template <bool BF, int D, bool CAUSAL> struct case_buffers {
  view vq, vk, vv, vo, vd, vg, vkv;
  std::vector<uint16_t> qb, kb, vb, db, ob;
  std::vector<uint16_t> outb, dqb, dkvb; /* the outputs, NaN-poisoned */
  case_buffers(const attention_case<BF, D, CAUSAL> &c, bool strided) {
    const int BH = c.BH, S = c.S, T = c.T;
    vq = row_major(BH, S, D), vk = row_major(BH, T, D), vv = vk, vo = vq, vd = vq, vg = vq,
    vkv = row_major(BH, T, 2 * D);
    if (strided) {
      vq = packed(BH, S, D, 3, 0, 0), vk = packed(BH, T, D, 2, 0, 0), vv = packed(BH, T, D, 2, 1, 0);
      vo = vd = packed(BH, S, D, 1, 0, 0), vg = packed(BH, S, D, 3, 1, 0), vkv = packed(BH, T, 2 * D, 1, 0, 8);
    }
    qb = scatter(c.q.first, vq, BH, S, D), kb = scatter(c.k.first, vk, BH, T, D);
    vb = scatter(c.v.first, vv, BH, T, D), db = scatter(c.dout.first, vd, BH, S, D), ob = scatter(c.Oh, vo, BH, S, D);
    if (strided) { /* k and v share one buffer, as they share the packed one in a model */
      for (size_t i = 0; i < kb.size(); i++)
        if (vb[i] != 0x7E7E) kb[i] = vb[i];
      vb = kb;
    }
    outb.assign(vo.size, 0x7E7E), dqb.assign(vg.size, 0x7E7E), dkvb.assign(vkv.size, 0x7E7E);
  }
};

/* A case's checks, each printed; fails counts those that failed. */
template <bool BF> struct case_checks {
  int fails = 0;
  const double tol = BF ? 2e-2 : 4e-3; /* relative rms error of a 16-bit result */
  void near(const char *what, const std::vector<double> &got, const std::vector<double> &want, double bound) {
    bool finite;
    double e = rel_rms(got, want, &finite);
    bool ok = finite && e < bound;
    printf("  %-18s rel rms err %.2e%s%s\n", what, e, finite ? "" : " (NaN: unwritten elements)", ok ? "" : "  FAILED");
    fails += !ok;
  }
  static std::vector<double> decode(const std::vector<uint16_t> &x) {
    std::vector<double> r(x.size());
    for (size_t i = 0; i < x.size(); i++) r[i] = dec<BF>(x[i]);
    return r;
  }
  /* dk and dv of rows of 2 D (dk, then dv) against the reference's */
  void dk_dv(const std::vector<uint16_t> &dkv, const std::vector<double> &dK, const std::vector<double> &dV, int D) {
    std::vector<double> got = decode(dkv), gk(dK.size()), gv(dV.size());
    for (size_t r = 0; r < dK.size() / D; r++)
      for (int j = 0; j < D; j++) gk[r * D + j] = got[r * 2 * D + j], gv[r * D + j] = got[r * 2 * D + D + j];
    near("dk", gk, dK, tol);
    near("dv", gv, dV, tol);
  }
  /* The run's out, dq and dk-dv bits: kept from the row-major run (*first), the same from the views; and no element
     outside the output views written (touched: gather's count). */
  void same_bits(bool strided, const std::vector<uint16_t> &out, const std::vector<uint16_t> &dq,
                 const std::vector<uint16_t> &dkv, std::vector<uint16_t> *first, int touched) {
    std::vector<uint16_t> bits = out;
    bits.insert(bits.end(), dq.begin(), dq.end());
    bits.insert(bits.end(), dkv.begin(), dkv.end());
    if (!strided)
      *first = bits;
    else if (bits != *first) {
      printf("  the views' results differ from the row-major ones  FAILED\n");
      fails++;
    }
    if (touched) {
      printf("  %d elements outside the output views written  FAILED\n", touched);
      fails++;
    }
  }
};
