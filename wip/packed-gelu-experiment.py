"""packed-gelu-experiment.py IN.cu OUT.cu [f16] -- a measurement, not evtc's codegen (thirty-fifth session,
bench/RESULTS.md): the full-tile epilogue of a bias + tanh GELU visitor kernel (acc + bf16 bias -> gelu_tanh -> bf16)
that evtc generated, rewritten to work on a pair of columns at a time in packed bf16x2 arithmetic (h rounded to
bf16 and hb = h + b in bf16 as the graph's types say, then GELU with tanh.approx.bf16x2), to see at the power cap
what fewer epilogue instructions buy.  With f16: x in f32, u and tanh u in f16x2, the product in f32 (f32's
accuracy; as many SASS instructions as the f32 form, not run).  Exit 3 when IN has no such epilogue.

On the GPU machine: run gpu_evt_bench once with a fresh XDG_CACHE_HOME, copy the cache, rewrite each cached .cu
that has setmaxnreg and evtc_gelu_tanh_bf16f with this script, build both the rewritten and the unchanged source
with nvcc (as bench/tile_stamps.sh does) into the two caches' .cubin, and time the two caches alternately."""
import re, sys
src = open(sys.argv[1]).read()
f16 = len(sys.argv) > 3 and sys.argv[3] == "f16"
helper = r'''
__device__ __forceinline__ uint32_t evtc_gelu_bias_bf16x2(float a0, float a1, uint32_t b) {
  uint32_t x, x2, p, u, t, hh, y;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(x) : "f"(a1), "f"(a0));
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(x) : "r"(x), "r"(b));
  asm("mul.rn.bf16x2 %0, %1, %1;" : "=r"(x2) : "r"(x));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(p) : "r"(x2), "r"(0x3D123D12u), "r"(0x3F4C3F4Cu));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(u) : "r"(x), "r"(p));
  asm("tanh.approx.bf16x2 %0, %1;" : "=r"(t) : "r"(u));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(hh) : "r"(x), "r"(0x3F003F00u));
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(hh), "r"(t), "r"(hh));
  return y;
}
'''

helper_f16 = r'''
__device__ __forceinline__ uint32_t evtc_gelu_bias_bf16x2(float a0, float a1, uint32_t b) {
  const float x0 = a0 + __uint_as_float(b << 16), x1 = a1 + __uint_as_float(b & 0xffff0000u);
  uint32_t xh, x2, p, u, t, s, y;
  unsigned short s0, s1;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(xh) : "f"(x1), "f"(x0));
  asm("mul.rn.f16x2 %0, %1, %1;" : "=r"(x2) : "r"(xh));
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(p) : "r"(x2), "r"(0x28912891u), "r"(0x3A623A62u));
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(u) : "r"(xh), "r"(p));
  asm("tanh.approx.f16x2 %0, %1;" : "=r"(t) : "r"(u));
  asm("fma.rn.f16x2 %0, %1, %2, %2;" : "=r"(s) : "r"(t), "r"(0x38003800u));
  asm("mov.b32 {%0, %1}, %2;" : "=h"(s0), "=h"(s1) : "r"(s));
  float f0, f1;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f0) : "h"(s0));
  asm("cvt.f32.f16 %0, %1;" : "=f"(f1) : "h"(s1));
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(x1 * f1), "f"(x0 * f0));
  return y;
}
'''

elem = re.compile(r'''(?P<ind> *)uint16_t (?P<sv>sv\d+)\[2\] = \{0, 0\};
#pragma unroll
 *for \(int e = 0; e < 2; e\+\+\) \{
 *const long long c = c0 \+ e;
 *if \(EVTC_IN_M\(r\) && EVTC_IN_N\(c\)\) \{
 *const float acc_v = acc\[i\]\[4 \* j \+ 2 \* h \+ e\];
 *\{
 *const int64_t r = rg;
 *float (?P<a>v\d+) = acc_v;
 *float (?P<b>v\d+) = evtc_bf2f\((?P<lv>lv\d+)\[e\]\);
 *const float (?P<w>w\d+) = (?P=a) \+ (?P=b);
 *const float (?P<x>v\d+) = (?P=w);
 *float (?P<y>v\d+) = \(float\)\(evtc_gelu_tanh_bf16f\((?P=x)\)\);
 *(?P=sv)\[e\] = evtc_f2bf\((?P=y)\);
 *\}
 *\}
 *\}
''')
out, n, pos = [], 0, 0
for m in re.finditer(r'#define EVTC_FULL_TILE 1\n(.*?)#undef EVTC_FULL_TILE', src, re.S):
    body = m.group(1)
    def repl(e):
        global n
        n += 1
        lw = e.group("lv").replace("lv", "lw")
        return ("%(i)suint16_t %(sv)s[2];\n%(i)s{ const uint32_t pk = evtc_gelu_bias_bf16x2(acc[i][4 * j + 2 * h], "
                "acc[i][4 * j + 2 * h + 1], %(lw)s);\n%(i)s  %(sv)s[0] = (uint16_t)pk; %(sv)s[1] = (uint16_t)(pk >> 16); }\n"
                % {"i": e.group("ind"), "sv": e.group("sv"), "lw": lw})
    out.append(src[pos:m.start(1)] + elem.sub(repl, body))
    pos = m.end(1)
out.append(src[pos:])
if n == 0:
    sys.exit(3)
res = "".join(out)
k = res.index('extern "C" __global__')
res = res[:k] + (helper_f16 if f16 else helper) + res[k:]
open(sys.argv[2], "w").write(res)
print("packed_gelu: %d full-tile epilogues rewritten" % n, file=sys.stderr)
