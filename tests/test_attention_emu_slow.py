#!/usr/bin/env python3
"""test_attention_emu_slow.py -- the CUDA attention library on a CPU emulation of the GPU.

Extracts the device library from src/backend/cuda/cuda_emit_attention.c
(the C string the emitter writes into every module), replaces its asm
helpers (ldmatrix, mma.sync, cvt packs, cp.async and its waits, atomic adds) with the
emulations of tests/attention_emu/shim.h, builds tests/attention_emu/
harness.cpp with the system C++ compiler and runs it: every kernel of the
family (forward, log-sum-exp, dq, dk with dv in one kernel) on odd shapes, causal and not,
head dims 64 and 128, blocks of 4 and 8 warps, row-major and through strided views, against a float64
reference.  This checks the kernels' fragment layouts, masking, online
softmax and tiling without a GPU (test_gpu_attention.c checks them on one).
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


def library():
    """The device library's lines, unescaped from the C string in cuda_emit_attention.c."""
    text = open(os.path.join(SRC, "src/backend/cuda/cuda_emit_attention.c")).read()
    body = text.split("static const char attention_lib[] =\n", 1)[1].split(";\n\n", 1)[0]
    lines = []
    for m in re.finditer(r'^\s*"(.*)\\n"$', body, re.M):
        lines.append(re.sub(r'\\(.)', r'\1', m.group(1)))
    return lines


def emulated(lines):
    """The library with its asm helpers dropped (shim.h has them) and cp.async emulated."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if (line.startswith("__device__") or line.startswith("template")) and any(h in line for h in HELPERS):
            if not line.rstrip().endswith("}"):
                while lines[i] != "}":
                    i += 1
            i += 1
            continue
        out.append(line)
        i += 1
    text = "\n".join(out).replace("extern __shared__ uint4 evtc_att_smem[];",
                                  "uint4 *evtc_att_smem = (uint4 *)emu_smem_base;")
    text, n = re.subn(r'asm volatile\("cp\.async\.cg\.shared\.global \[%0\], \[%1\], 16, %2;\\n" ::"r"\(dst\), '
                      r'"l"\(src\), "r"\((.*)\)\);', r'emu_cp_async(dst, src, \1);', text)
    assert n == 1 and "asm" not in text, "the library's asm helpers changed: update this test and shim.h"
    return '#include "shim.h"\n' + text + "\n"


def main():
    cxx = shutil.which("g++")
    if not cxx:
        print("SKIPPED: no g++")
        return 77
    emu = os.path.join(SRC, "tests/attention_emu")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "lib_emu.h"), "w") as f:
            f.write(emulated(library()))
        exe = os.path.join(tmp, "harness")
        subprocess.run([cxx, "-O1", "-std=c++17", "-pthread", "-I", tmp, "-I", emu, "-o", exe,
                        os.path.join(emu, "harness.cpp")], check=True)
        return subprocess.run([exe]).returncode


if __name__ == "__main__":
    sys.exit(main())
