#!/bin/sh
# ncu_loss.sh -- ncu on BERT-Large's MLM loss rows kernel (bert_mlm_rows.evt: the padded logits plus the
# head's bias and gemm-pad's mask, trained with --loss cross_entropy), on the GPU machine after
# `sh bench/ab.sh prepare BASE` here: its speed-of-light, occupancy and warp-state sections, then the 25
# SASS lines with the most stall samples.  Logs in $OUT.
#   run(command="sh bench/loss/ncu_loss.sh", carry=[".gpu-ab"])
set -u
ab=.gpu-ab
tar -xzf $ab/b/stage.tgz -C $ab/b
export LD_LIBRARY_PATH="$PWD/$ab/b/lib" XDG_CACHE_HOME=/tmp/cache-ncu
E=$ab/b/bin/evtc
G=bench/loss/bert_mlm_rows.evt
A="explain $G --train --target h200 --loss cross_entropy --labels labels --profile 3"
# the rows kernel is launched as k_add (its first node's op); the first launch is a warm-up
ncu --clock-control none --kernel-name k_add --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis $E $A > "$OUT/ncu1.txt" 2>&1
grep -E "Duration|Throughput|Busy|Issued|Eligible|Active Warps|Occupancy|Registers|Block Size|Warp Cycles|Hit Rate" "$OUT/ncu1.txt" | head -40
ncu --clock-control none --kernel-name k_add --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
  --import-source no --page source --csv --print-source sass $E $A > "$OUT/ncu_src.csv" 2>&1
python3 - "$OUT/ncu_src.csv" <<'PY'
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
