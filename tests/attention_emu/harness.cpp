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
#include "lib_emu.h"
#include "reference.h"

template <bool BF, int D, bool CAUSAL, int NW> static int run(int BH, int S, int T) {
  emu_nt = 32 * NW;
  const attention_case<BF, D, CAUSAL> c(BH, S, T);
  const std::vector<double> &O = c.O, &L = c.L, &dQ = c.dQ;
  const std::vector<float> &Lf = c.Lf;
  const double scale = c.scale;
  case_checks<BF> ck;
  const int br = 16 * NW;
  const unsigned qgrid = (unsigned)(BH * ((S + br - 1) / br)), kgrid = (unsigned)(BH * ((T + br - 1) / br));
  const int st = D == 64 ? 2 : 1; /* query-tile buffers of the key-block kernel (its launch shape) */
  const size_t smem = 2 * 64 * D * 2 + 512, smem_kv = 2 * br * D * 2 + st * (3 * 64 * D * 2 + 256) + 256;
  printf("%s D=%d%s BH=%d S=%d T=%d, %d warps\n", BF ? "bf16" : "f16", D, CAUSAL ? " causal" : "", BH, S, T, NW);
  std::vector<uint16_t> first_bits;
  for (int strided = 0; strided < 2; strided++) {
    case_buffers<BF, D, CAUSAL> b(c, strided);
    printf(" %s\n", strided ? "views" : "row-major");
    const uint16_t *qp = b.qb.data(), *kp = b.kb.data(), *vp = b.vb.data(), *dp = b.db.data(), *op = b.ob.data();
    std::vector<float> lse(L.size(), NAN), lse_fwd(L.size(), NAN);
    int touched = 0;
    emu_launch(qgrid, smem, [&]() { /* the forward, writing the log-sum-exp as a by-product */
                                    evtc_att_fwd<BF, D, CAUSAL, false, NW>(qp, kp, vp, b.outb.data(), lse_fwd.data(), S,
                                                                           T, (float)scale, b.vq.l, b.vk.l, b.vv.l,
                                                                           b.vo.l);
    });
    std::vector<uint16_t> out = gather(b.outb, b.vo, BH, S, D, &touched);
    ck.near("out", ck.decode(out), O, ck.tol);
    ck.near("lse of the forward", std::vector<double>(lse_fwd.begin(), lse_fwd.end()), L, 1e-5);
    emu_launch(qgrid, smem, [&]() {
      evtc_att_fwd<BF, D, CAUSAL, true, NW>(qp, kp, kp, lse.data(), nullptr, S, T, (float)scale, b.vq.l, b.vk.l, b.vk.l,
                                            b.vq.l);
    });
    ck.near("lse", std::vector<double>(lse.begin(), lse.end()), L, 1e-5);
    emu_launch(qgrid, smem, [&]() {
      evtc_att_bwd_q<BF, D, CAUSAL, NW>(qp, kp, vp, op, dp, Lf.data(), b.dqb.data(), S, T, (float)scale, b.vq.l, b.vk.l,
                                        b.vv.l, b.vo.l, b.vd.l, b.vg.l);
    });
    std::vector<uint16_t> dq = gather(b.dqb, b.vg, BH, S, D, &touched);
    ck.near("dq", ck.decode(dq), dQ, ck.tol);
    emu_launch(kgrid, smem_kv, [&]() {
      evtc_att_bwd_kv<BF, D, CAUSAL, NW, false>(qp, kp, vp, op, dp, Lf.data(), b.dkvb.data(), S, T, (float)scale,
                                                b.vq.l, b.vk.l, b.vv.l, b.vo.l, b.vd.l, b.vkv.l, nullptr);
    });
    std::vector<uint16_t> dkv = gather(b.dkvb, b.vkv, BH, T, 2 * D, &touched);
    if (NW == 4) { /* dq in the same pass: f32 sums by atomics, then scaled (the finishing kernel's part) */
      std::vector<uint16_t> dkvb2(b.vkv.size, 0x7E7E);
      std::vector<float> acc((size_t)BH * S * D, 0.0f);
      emu_launch(kgrid, smem_kv + 16 * NW * 64 * 2, [&]() {
        evtc_att_bwd_kv<BF, D, CAUSAL, NW, true>(qp, kp, vp, op, dp, Lf.data(), dkvb2.data(), S, T, (float)scale,
                                                 b.vq.l, b.vk.l, b.vv.l, b.vo.l, b.vd.l, b.vkv.l, acc.data());
      });
      std::vector<double> got_dq(acc.size());
      for (size_t i = 0; i < acc.size(); i++) got_dq[i] = dec<BF>(enc<BF>(acc[i] * (float)scale));
      ck.near("dq in dk's pass", got_dq, dQ, ck.tol);
      int touched2 = 0;
      if (gather(dkvb2, b.vkv, BH, T, 2 * D, &touched2) != dkv || touched2) {
        printf("  dk, dv with dq in the same pass differ from those without  FAILED\n");
        ck.fails++;
      }
    }
    ck.dk_dv(dkv, c.dK, c.dV, D);
    ck.same_bits(strided, out, dq, dkv, &first_bits, touched);
  }
  return ck.fails;
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
  fails += run<true, 64, true, 4>(4, 33, 40); /* views over 2 batches of 2 heads */
  printf("%d failed\n", fails);
  return fails != 0;
}
