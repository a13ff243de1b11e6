#!/bin/sh
# ncu_gelu_bias.sh -- where cuBLASLt's GELU_BIAS kernel and evtc's bias + tanh GELU kernel spend their instructions,
# on the GPU machine (issue 8: on 16384 x 4096 x 1024 cuBLASLt's epilogue costs about 5 % over a GEMM, evtc's about
# 20 %).  Three steps, logs in $OUT (default /tmp):
#   1. gpu_evt_bench bias_gelu under ncu, every kernel's duration: the names in launch order (ncu_list.txt).
#      cuBLASLt's GELU_BIAS kernel is the last library kernel launched (the bench calls it after its variants);
#      evtc's kernels are the ones named k_... or kN_... (a plan kernel named after its first node: k_matmul)
#   2. bench/ncu_kernel.sh on the last launch of that kernel (tag lt), and on evtc's kernel of
#      bench/epilogue/bias_gelu_tanh.evt run by `evtc explain --profile` (tag ev): sections and stall hot spots.
#   3. For both, the executed warp-instructions by opcode (MUFU by function) from ncu's source page, and the
#      lines of MUFU and packed 16-bit math.
#
#   sh bench/ncu_gelu_bias.sh EVTC GPU_EVT_BENCH     (both built against the same libraries, e.g. .gpu-ab/b/bin/evtc
#                                                     and .gpu-ab/b/extra/gpu_evt_bench, their libraries on
#                                                     LD_LIBRARY_PATH, a kernel cache in XDG_CACHE_HOME)
set -u
[ $# -eq 2 ] || { echo "usage: $0 EVTC GPU_EVT_BENCH" >&2; exit 2; }
evtc=$1 bench=$2
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
ncu --clock-control none --metrics gpu__time_duration.sum --csv "$bench" bias_gelu >"$out/ncu_list.csv" 2>"$out/ncu_list.err"
python3 - "$out/ncu_list.csv" >"$out/ncu_list.txt" <<'PY'
import csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
if not rows:
    sys.exit("no kernels in " + sys.argv[1])
hdr = rows[0]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
launches = [(r[ki], float(r[vi].replace(",", ""))) for r in rows[1:]]
order, times = [], {}
for name, ns in launches:
    if name not in times:
        order.append(name)
    times.setdefault(name, []).append(ns)
for name in order:
    t = times[name]
    print("%5d launches  %9.1f us mean  %s" % (len(t), sum(t) / len(t) / 1000, name[:160]))
library = [name for name, _ in launches if not re.match(r"k\d*_", name)]
if library:
    print("LT %d %s" % (len(times[library[-1]]) - 1, re.escape(library[-1])))
PY
cat "$out/ncu_list.txt"
lt=$(sed -n 's/^LT //p' "$out/ncu_list.txt")
[ -n "$lt" ] || { echo "no library kernel among the launches" >&2; exit 1; }
OUT=$out NCU_SKIP=${lt%% *} sh "$here/ncu_kernel.sh" lt "^${lt#* }\$" "$bench" bias_gelu
OUT=$out NCU_SKIP=2 sh "$here/ncu_kernel.sh" ev '^k' "$evtc" explain --target h200 --profile 5 \
  "$here/epilogue/bias_gelu_tanh.evt"
for tag in lt ev; do
  echo "== $tag: executed warp-instructions by opcode"
  python3 - "$out/ncu_src_$tag.csv" <<'PY'
import collections, csv, re, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
h = next((i for i, r in enumerate(rows) if "Source" in r), None)
if h is None:
    sys.exit("no source table in " + sys.argv[1])
hdr, body = rows[h], [r for r in rows[h + 1:] if len(r) > 1]
si = hdr.index("Source")
ei = next(i for i, c in enumerate(hdr) if c.startswith("Instructions Executed"))
def count(x):
    x = x.replace(",", "")
    return float(x) if re.match(r"^[\d.]+$", x) else 0.0
ops, lines = collections.Counter(), []
for r in body:
    m = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", r[si])
    if not m:
        continue
    op = m.group(1) + ("." + m.group(2).split(".")[1] if m.group(1) == "MUFU" and m.group(2) else "")
    ops[op] += count(r[ei])
    if m.group(1) in ("MUFU", "HFMA2", "HMUL2", "HADD2", "HMNMX2") and count(r[ei]):
        lines.append("%12.0f  %s" % (count(r[ei]), r[si].strip()[:90]))
total = sum(ops.values())
print("%.0f executed; " % total + ", ".join("%s %.1f %%" % (k, 100 * v / total) for k, v in ops.most_common(24)))
print("\n".join(lines[:16]))
PY
done
