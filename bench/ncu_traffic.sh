#!/bin/sh
# ncu_traffic.sh -- what each launch of a GPU program's kernels costs in cycles, instructions and memory traffic,
# under ncu at base clock (comparable cycles), on the GPU machine: for why one kernel needs less time than another
# at the power cap, where a kernel's work (issue, L2 and DRAM traffic) sets the clock.  Every launch whose name
# matches REGEX, in launch order: duration, SM cycles, warp-instructions executed, L2 sectors (all, and those from
# the SMs' L1/TEX), DRAM bytes read and written, SM throughput (% of peak).  The table in $OUT/ncu_traffic.txt (the
# raw CSV beside it) and on stdout.
#
#   sh bench/ncu_traffic.sh REGEX PROGRAM [ARGS...]
#
# e.g. evtc's GEMM (every plan kernel of evtc is k_...) against cuBLAS's (nvjet_...) on 8192^3, gpu_evt_bench
# running each of its GEMM variants in its list's order, cuBLASLt's DEFAULT epilogue last:
#   run(command="LD_LIBRARY_PATH=$PWD/.gpu-ab/b/lib sh bench/ncu_traffic.sh 'k_matmul|nvjet'
#       .gpu-ab/b/extra/gpu_evt_bench --shape 8192x8192x8192 --runs 1 gemm", carry=[".gpu-ab"])
set -u
[ $# -ge 2 ] || { echo "usage: $0 REGEX PROGRAM [ARGS...]" >&2; exit 2; }
regex=$1
shift
out=${OUT:-/tmp}
metrics=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_tex.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
ncu --clock-control base --kernel-name "regex:$regex" --metrics "$metrics" --csv "$@" >"$out/ncu_traffic.csv" \
  2>"$out/ncu_traffic.err" || { echo "ncu_traffic.sh: ncu failed: $(tail -1 "$out/ncu_traffic.err")" >&2; exit 1; }
python3 - "$out/ncu_traffic.csv" "$metrics" <<'PY' | tee "$out/ncu_traffic.txt"
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
if not rows or "Metric Name" not in rows[0]:
    sys.exit("ncu_traffic.sh: no launches in " + sys.argv[1])
h = rows[0]
ii, ki, mi, vi = h.index("ID"), h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
launches = collections.OrderedDict()
for r in rows[1:]:
    launches.setdefault(r[ii], {"name": r[ki]})[r[mi]] = r[vi].replace(",", "")
keys = sys.argv[2].split(",")
print("launch | kernel | " + " | ".join(k.rsplit(".", 1)[0] for k in keys))
for i, d in launches.items():
    print(f"{i} | {d['name'][:48]} | " + " | ".join(d.get(k, "-") for k in keys))
PY
