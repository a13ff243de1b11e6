#!/usr/bin/env python3
"""test_attention_emu_slow.py -- the CUDA attention libraries on a CPU emulation of the GPU.

Extracts the device libraries from src/backend/cuda/cuda_emit_attention.c
(mma.sync) and cuda_emit_attention_wg.c (wgmma, head dim 64: the C strings
the emitters write into every module), replaces their asm (ldmatrix,
mma.sync, cvt packs, cp.async and its waits, atomic adds; wgmma, stmatrix,
named barriers, vector reductions, ex2) with the emulations of
tests/attention_emu/shim.h and shim_wg.h, builds tests/attention_emu/
harness.cpp and harness_wg.cpp with the system C++ compiler, under
AddressSanitizer (an access past a tensor or the shared memory stops the
run), and runs them:
every kernel of the family (forward, log-sum-exp, dq, dk with dv in one
kernel, dq in its pass) on odd shapes, causal and not, row-major and
through strided views, against a float64 reference (reference.h); the
mma.sync library at head dims 64 and 128 with blocks of 4 and 8 warps, the
wgmma one with blocks of one and two warpgroups.  This checks the kernels'
fragment and shared-memory layouts, masking, online softmax and tiling
without a GPU (test_gpu_attention.c checks them on one).
Skips (77) without g++.

usage: test_attention_emu_slow.py SOURCE_DIR [EVTC_BINARY]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
# the library's own asm helpers; ldmatrix, mma.sync and the cp.async groups come from cuda_emit_mma.c, which
# the library does not contain: shim.h emulates them all
HELPERS = ["evtc_att_saddr(", "evtc_att_pack(", "evtc_att_red("]
# the wgmma library's (shim_wg.h)
WG_HELPERS = ["evtc_awg_pin(", "evtc_awg_ex2("]


def c_string(path, name):
    """The lines of C string `name` in the file at path, unescaped."""
    text = open(os.path.join(SRC, path)).read()
    body = text.split("static const char %s[] =\n" % name, 1)[1].split(";\n\n", 1)[0]
    lines = []
    for m in re.finditer(r'^\s*"(.*)\\n"$', body, re.M):
        lines.append(re.sub(r'\\(.)', r'\1', m.group(1)))
    return lines


def without(lines, helpers):
    """The lines without the definitions (from a __device__ or template line to its closing brace) of the helpers
    named, which the shims define instead."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if (line.startswith("__device__") or line.startswith("template")) and any(h in line for h in helpers):
            if not line.rstrip().endswith("}"):
                while lines[i] != "}":
                    i += 1
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out).replace("extern __shared__ uint4 evtc_att_smem[];", "uint4 *evtc_att_smem = (uint4 *)emu_smem_base;")


def emulated():
    """The mma.sync library with its asm helpers dropped (shim.h has them) and cp.async emulated."""
    text = without(c_string("src/backend/cuda/cuda_emit_attention.c", "attention_lib"), HELPERS)
    text, n = re.subn(r'asm volatile\("cp\.async\.cg\.shared\.global \[%0\], \[%1\], 16, %2;\\n" ::"r"\(dst\), '
                      r'"l"\(src\), "r"\((.*)\)\);', r'emu_cp_async(dst, src, \1);', text)
    assert n == 1 and "asm" not in text, "the library's asm helpers changed: update this test and shim.h"
    return '#include "shim.h"\n' + text + "\n"


def emulated_wg():
    """The wgmma library with its two asm-only helpers dropped (shim_wg.h has them, with the wgmma calls the emitter
    writes) and its other asm emulated in place."""
    text = without(c_string("src/backend/cuda/cuda_emit_attention_wg.c", "attention_wg_kernels"), WG_HELPERS)
    subs = [(r'asm volatile\("stmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \[%0\], \{%1, %2, %3, %4\};\\n"\s*'
             r'::"r"\((.*?)\), "r"\((.*?)\), "r"\((.*?)\),\s*"r"\((.*?)\), "r"\((.*?)\) : "memory"\);',
             r'emu_stmatrix_x4(\1, \2, \3, \4, \5);'),
            (r'asm volatile\("ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 \{%0, %1, %2, %3\}, \[%4\];\\n"\s*'
             r': "=r"\(a\[0\]\), "=r"\(a\[1\]\), "=r"\(a\[2\]\), "=r"\(a\[3\]\) : "r"\((.*)\)\);', r'evtc_ldsm(a, \1);'),
            (r'asm volatile\("cp\.async\.ca\.shared\.global \[%0\], \[%1\], 4, %2;\\n" ::"r"\((.*?)\), "l"\((.*?)\), '
             r'"r"\((.*)\)\);', r'emu_cp_async4(\1, \2, \3);'),
            (r'asm volatile\("fence\.proxy\.async\.shared::cta;\\n" ::: "memory"\);', r'/* fence.proxy.async */'),
            (r'asm volatile\("bar\.sync (\d), 128;\\n" ::: "memory"\);', r'emu_bar_named(\1);'),
            (r'asm volatile\("red\.global\.add\.v4\.f32 \[%0\], \{%1, %2, %3, %4\};\\n" ::"l"\((.*?)\), "f"\((.*?)\), '
             r'"f"\((.*?)\),\s*"f"\((.*?)\), "f"\((.*?)\) : "memory"\);', r'emu_red_v4(\1, \2, \3, \4, \5);')]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text)
        assert n >= 1, "the wgmma library's asm changed (%s): update this test and shim_wg.h" % pattern[:40]
    assert "asm" not in text, "the wgmma library's asm changed: update this test and shim_wg.h"
    return '#include "shim_wg.h"\n' + text + "\n"


def main():
    cxx = shutil.which("g++")
    if not cxx:
        print("SKIPPED: no g++")
        return 77
    emu = os.path.join(SRC, "tests/attention_emu")
    rc = 0
    with tempfile.TemporaryDirectory() as tmp:
        for harness, lib in (("harness", emulated()), ("harness_wg", emulated() + emulated_wg())):
            os.makedirs(os.path.join(tmp, harness))
            with open(os.path.join(tmp, harness, "lib_emu.h"), "w") as f:
                f.write(lib)
            exe = os.path.join(tmp, harness, harness)
            # under AddressSanitizer: a kernel's access past a tensor or its shared memory stops the run
            subprocess.run([cxx, "-O1", "-std=c++17", "-pthread", "-fsanitize=address", "-I", os.path.join(tmp, harness),
                            "-I", emu, "-o", exe, os.path.join(emu, harness + ".cpp")], check=True)
            rc |= subprocess.run([exe], env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0")).returncode
    return rc


if __name__ == "__main__":
    sys.exit(main())
