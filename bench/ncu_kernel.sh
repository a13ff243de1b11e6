#!/bin/sh
# ncu_kernel.sh -- ncu on one kernel of a GPU program, on the GPU machine: its speed-of-light, compute, memory,
# occupancy and warp-state sections (with the L2's reduction sectors), then the 25 SASS lines with the most stall
# samples.  The kernel is the first launch past SKIP (default 5: past the warm-ups) whose name matches REGEX;
# the program runs twice (sections, then the source page).  Logs in $OUT (ncu_TAG.txt, ncu_src_TAG.csv).
#   sh bench/ncu_kernel.sh TAG REGEX PROGRAM [ARGS...]     ($NCU_SKIP: launches to skip)
# e.g., after `sh bench/gpu_attention.sh prepare` here (the wgmma attention at BERT-Large's shape):
#   run(command="LD_LIBRARY_PATH=$PWD/.gpu-attn/lib XDG_CACHE_HOME=$PWD/.gpu-attn/cache sh bench/ncu_kernel.sh dkvq
#       '^attb0_wg1_dkvq$' .gpu-attn/gpu_attention_bench", carry=[".gpu-attn"])
set -u
[ $# -ge 3 ] || { echo "usage: $0 TAG REGEX PROGRAM [ARGS...]" >&2; exit 2; }
tag=$1 regex=$2
shift 2
out=${OUT:-/tmp}
sel="--kernel-name regex:$regex --launch-skip ${NCU_SKIP:-5} --launch-count 1"
# shellcheck disable=SC2086  # $sel: words
ncu --clock-control none $sel --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --metrics lts__t_sectors_op_red.sum "$@" >"$out/ncu_$tag.txt" 2>&1
grep -E "Duration|Throughput|Busy|Issued|Eligible|Active Warps|Occupancy|Registers|Block Size|Grid Size|Warp Cycles|lts__t|Shared Memory" \
  "$out/ncu_$tag.txt" | head -40
# shellcheck disable=SC2086
ncu --clock-control none $sel --section SourceCounters --section WarpStateStats --import-source no --page source --csv \
  --print-source sass "$@" >"$out/ncu_src_$tag.csv" 2>&1
python3 - "$out/ncu_src_$tag.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
h = next((i for i, r in enumerate(rows) if "Source" in r), None)
if h is None:
    sys.exit("no source table in " + sys.argv[1])
hdr, body = rows[h], rows[h + 1:]
si, wi = hdr.index("Source"), hdr.index("Warp Stall Sampling (All Samples)")
num = lambda x: float(x) if x.replace(".", "", 1).isdigit() else 0.0
tot = sum(num(r[wi]) for r in body if len(r) > wi)
print("stall samples", tot)
for r in sorted((r for r in body if len(r) > wi), key=lambda r: -num(r[wi]))[:25]:
    print("%6.1f%%  %s" % (100 * num(r[wi]) / max(tot, 1), r[si][:110]))
PY
