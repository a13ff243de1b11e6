#!/bin/sh
# epilogue_sass.sh -- what the visitor epilogues compile to, without a GPU: the instructions of each kernel of
# tests/gemm_emu's module (every plain GEMM case, emuN, and every visitor case, evtI_C: the graphs of
# gemm_emu.c planned and emitted as the CUDA backend does, C 0 the plan's tile config, 1 the cooperative one),
# counted by opcode in the SASS that nvcc builds for sm_90a.  A count covers both copies of a kernel's
# epilogue loops (whole tiles and edge tiles), so it compares variants of one epilogue rather than giving a
# per-element figure.  For epilogue work where no GPU is at hand: whether a change removed the instructions it
# meant to (an element's MUFU, FFMA, ...), before the GPU says what they cost.
#
#   bench/epilogue_sass.sh [KERNEL...]     (default: the evt kernels)
#
# Needs a build's libevtc.a ($EVTC_BUILD, default build), nvcc, and cuobjdump ($CUOBJDUMP; the CUDA toolkit's,
# or the one in PyPI's nvidia-cuda-cuobjdump wheel: pip download --no-deps nvidia-cuda-cuobjdump, unzip, bin/).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EVTC_BUILD:-$root/build}
cuobjdump=${CUOBJDUMP:-cuobjdump}
command -v "$cuobjdump" >/dev/null || { echo "epilogue_sass.sh: no cuobjdump (set CUOBJDUMP; see the header)" >&2; exit 2; }
[ -f "$build/libevtc.a" ] || { echo "epilogue_sass.sh: no $build/libevtc.a (set EVTC_BUILD)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O1 -std=gnu11 -fopenmp -I"$root/include" -I"$root/src" -I"$root/tests" -o "$tmp/gemm_emu" \
  "$root/tests/gemm_emu/gemm_emu.c" "$build/libevtc.a" $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread
"$tmp/gemm_emu" emit >"$tmp/module.cu"
# NVRTC's source declares the fixed-width types itself; nvcc takes them from stdint.h (as bench/tile_stamps.sh)
sed -E -e '/^typedef [a-z ]+ u?int(8|16|32|64)_t;$/d' -e '1a #include <stdint.h>' "$tmp/module.cu" >"$tmp/nvcc.cu"
nvcc -std=c++17 -arch=sm_90a -cubin -w -o "$tmp/module.cubin" "$tmp/nvcc.cu"
"$cuobjdump" -sass "$tmp/module.cubin" >"$tmp/module.sass"
python3 - "$tmp/module.sass" "$@" <<'PY'
import collections, re, sys
funcs, cur = collections.OrderedDict(), None
for line in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = funcs.setdefault(m.group(1), collections.Counter())
        continue
    m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", line)
    if m and cur is not None:
        cur[m.group(1) + (m.group(2).split(".")[1] and "." + m.group(2).split(".")[1] if m.group(1) == "MUFU" else "")] += 1
names = sys.argv[2:] or sorted(f for f in funcs if f.startswith("evt") and not f.endswith("_fin"))
cols = ["FFMA", "FMUL", "FADD", "MUFU.EX2", "MUFU.RCP", "MUFU.TANH", "F2FP", "HFMA2", "FSEL", "FSETP", "FMNMX", "STG", "STSM",
        "LDS", "LDG", "HGMMA"]
print("%-10s %6s" % ("kernel", "SASS") + "".join(" %9s" % c for c in cols))
for f in names:
    c = funcs.get(f)
    if c is None:
        sys.exit("no kernel %s in the module (%s)" % (f, " ".join(funcs)))
    print("%-10s %6d" % (f, sum(c.values())) + "".join(" %9d" % c[k] for k in cols))
PY
