#!/usr/bin/env python3
"""test_gemm_emu_slow.py -- evtc's sm_90a GEMM template and its visitor epilogues on a CPU emulation of the GPU.

Builds tests/gemm_emu/gemm_emu.c against the build's libevtc.a; `gemm_emu emit`
writes one CUDA module as the backend would (the CUDA prelude, then its cases'
kernels): plain GEMMs on cuda_emit_gemm.c's template (persistent grid, TMA
producer warpgroup, mbarrier ring, wgmma consumers, cooperative and pingpong,
the built-in store through TMA or direct) and on the sm_80 one
(cuda_emit_gemm80.c: cp.async ring, ldmatrix, mma.sync, which
tests/attention_emu/shim.h emulates), and GEMMs with the visitor DAG of a
graph in their epilogue (cuda_emit_evt.c: bias, tanh and erf GELU with its
gradient's coefficient, an aux tile through TMA, dropout, a residual, sums
over rows and columns with NAME_fin).  This test turns the module into C++:
the one-instruction asm of conversions, approximations and packed bf16x2
arithmetic (cvt, ex2, rcp, tanh; add, sub, mul, fma, neg) becomes calls of their emulations, every helper whose body still holds
asm is dropped (tests/gemm_emu/shim_gemm.h defines each of them: mbarriers,
TMA copies with the 128B swizzle, named barriers, shared stores; the wgmma
descriptor encoder and the prelude's math stay the module's), each kernel's
NAME_mma becomes the emulated wgmma of its instruction's shape, types and
operand majorness, NAME_pin and the kernel's setmaxnreg and barrier-init
fence go.  g++ builds that with tests/gemm_emu/launch.h into a shared
library, and `gemm_emu run` checks every plain case's D against a float64
product, every visitor case's outputs against the float64 interpreter, and the
prelude's 1 + erf of bf16 values (GELU's polynomial) over every bf16 of [-6, 6]
against erf_check.h's bounds.
Driver and kernels run under AddressSanitizer, with operands and outputs
allocated to their exact sizes, so an access past them or past the shared
memory stops the run.  So a change to the template's layouts, barriers,
tile walk, stores or epilogues is checked without a GPU (test_gpu_gemm.c and test_gpu_evt.c check
them on one).  Skips (77) without g++ or the build's libevtc.a.

usage: test_gemm_emu_slow.py SOURCE_DIR EVTC_BINARY
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, EVTC = sys.argv[1], sys.argv[2]
EMU = os.path.join(SRC, "tests", "gemm_emu")


def definitions(text):
    """The module split into top-level pieces: (definition or None, lines), a definition being a __device__ or
    template function from its first line to its closing brace at column 0."""
    lines, pieces, i = text.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("__device__") or line.startswith("template"):
            j = i
            while not (lines[j] == "}" or (j == i and line.rstrip().endswith("}"))):
                j += 1
            pieces.append((line, lines[i:j + 1]))
            i = j + 1
        else:
            pieces.append((None, [line]))
            i += 1
    return pieces


def mma_emulation(head, body):
    """NAME_mma's emulation: the wgmma shape, types and imm-trans flags read from its asm."""
    m = re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.(bf16|f16)\.(?:bf16|f16) .*"
                  r"p, 1, 1, ([01]), ([01]); \}", body)
    assert m, "the GEMM's wgmma asm changed: update this test"
    n, ty, ta, tb = m.groups()
    name = re.search(r"void (\w+_mma)\(", head).group(1)
    return ("__device__ __forceinline__ void %s(float (&d)[%d], unsigned long long da, unsigned long long db) {\n"
            "  emu_gemm_mma<%s, %s, %s, %s>(d, da, db);\n}" %
            (name, int(n) // 2, "true" if ty == "bf16" else "false", n, "true" if ta == "1" else "false",
             "true" if tb == "1" else "false"))


ASM = re.compile(r"\basm\s*(?:volatile\s*)?\(")
# one-instruction asm statements `asm("OP %0, %1[, %2];" : "=c"(dst) : "c"(x)[, "c"(y)]);` and what they compute
# (shim_gemm.h): a packing cvt takes its upper half from %1
ONE_OP = re.compile(r'asm(?: volatile)?\("([a-z0-9.]+) %0, %1(?:, %2)?(?:, %3)?;" : "=\w"\((\w+)\) : "\w"\(([^()]*)\)'
                    r'(?:, "\w"\(([^()]*)\))?(?:, "\w"\(([^()]*)\))?\);')
ONE_OPS = {"cvt.rn.bf16.f32": "emu_f2bf({1})", "cvt.rn.f16.f32": "emu_f2h({1})", "cvt.f32.f16": "emu_h2f({1})",
           "cvt.rn.bf16x2.f32": "emu_pack2<true>({2}, {1})", "cvt.rn.f16x2.f32": "emu_pack2<false>({2}, {1})",
           "ex2.approx.ftz.f32": "__nvvm_ex2_approx_ftz_f({1})", "rcp.approx.ftz.f32": "emu_rcp_approx_ftz({1})",
           "tanh.approx.f32": "tanhf({1})", "add.rn.bf16x2": "emu_bf16x2_add({1}, {2})",
           "sub.rn.bf16x2": "emu_bf16x2_sub({1}, {2})", "mul.rn.bf16x2": "emu_bf16x2_mul({1}, {2})",
           "fma.rn.bf16x2": "emu_bf16x2_fma({1}, {2}, {3})", "neg.bf16x2": "emu_bf16x2_neg({1})",
           "tanh.approx.bf16x2": "emu_bf16x2_tanh({1})"}


def one_op(m):
    op, dst, x, y, z = m.groups()
    assert op in ONE_OPS, "asm %s has no emulation: update this test and shim_gemm.h" % op
    return "%s = %s;" % (dst, ONE_OPS[op].format(None, x, y, z))


def emulated(module):
    out, mmas = [], 0
    module = re.sub(r"^typedef [a-z ]+ u?int(?:8|16|32|64)_t;$", "", module, flags=re.M)   # <cstdint>'s
    module = ONE_OP.sub(one_op, module)
    for head, lines in definitions(module):
        body = "\n".join(lines)
        if head is None or not ASM.search(body):
            out.append(body)
        elif "wgmma.mma_async" in body:
            out.append(mma_emulation(head, body))
            mmas += 1
        elif re.search(r"void \w+_pin\(", head):
            out.append(head.split("{")[0].rstrip() + " {}")
    text = "\n".join(out)
    subs = [(r'asm volatile\("setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32 \d+;"\);', "/* setmaxnreg */"),
            (r'asm volatile\("fence\.mbarrier_init\.release\.cluster;" ::: "memory"\);', "/* fence.mbarrier_init */"),
            # the dynamic shared memory: 16 bytes past a boundary where the kernel aligns it itself (1024: the
            # sm_90a template's ring), at the boundary where it relies on its declared alignment
            (r'extern __shared__ __align__\((\d+)\) unsigned char evtc_smem\[\];',
             lambda m: "unsigned char *evtc_smem = emu_smem_base + %d;" % (16 if m.group(1) == "1024" else 0))]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text)
        assert n >= 1, "the GEMM kernel's body changed (%s): update this test" % pattern[:40]
    assert mmas >= 1 and not ASM.search(text), "the GEMM module has asm this test does not emulate: update shim_gemm.h"
    return '#include "shim_gemm.h"\n' + text + '\n#include "launch.h"\n'


def main():
    cxx, cc = shutil.which("g++"), shutil.which("cc") or shutil.which("gcc")
    lib = os.path.join(os.path.dirname(os.path.abspath(EVTC)), "libevtc.a")
    if not cxx or not cc or not os.path.exists(lib):
        print("SKIPPED: needs g++, cc and %s" % lib)
        return 77
    libs = subprocess.run(["pkg-config", "--libs", "libprotobuf-c", "cbc"], capture_output=True, text=True,
                          check=True).stdout.split()
    with tempfile.TemporaryDirectory() as tmp:
        driver = os.path.join(tmp, "gemm_emu")
        # both under AddressSanitizer: a kernel's load or store past an operand, an output, the reduction scratch or
        # its shared memory stops the run with the access
        subprocess.run([cc, "-O1", "-std=gnu11", "-fopenmp", "-fsanitize=address", "-I", os.path.join(SRC, "include"), "-I",
                        os.path.join(SRC, "src"), "-I", os.path.join(SRC, "tests"), "-o", driver,
                        os.path.join(EMU, "gemm_emu.c"), lib] + libs + ["-lm", "-ldl", "-lpthread"], check=True)
        module = subprocess.run([driver, "emit"], capture_output=True, text=True, check=True).stdout
        with open(os.path.join(tmp, "gemm_lib.cpp"), "w") as f:
            f.write(emulated(module))
        so = os.path.join(tmp, "gemm_lib.so")
        subprocess.run([cxx, "-O1", "-std=c++17", "-fPIC", "-shared", "-pthread", "-w", "-fsanitize=address", "-I", EMU, "-I",
                        os.path.join(SRC, "tests", "attention_emu"), "-o", so, os.path.join(tmp, "gemm_lib.cpp")],
                       check=True)
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
        return subprocess.run([driver, "run", so], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
