#!/bin/sh
# ncu_clocks.sh -- whether a kernel's time over another's is cycles or clock: every kernel launch of a GPU program
# under ncu twice, once with the SM clock locked at base (ncu's --clock-control base: no boost, so no power cap
# either) and once free (--clock-control none: boost and the power cap, as a run without ncu sees them).  Each
# launch's duration and elapsed SM cycles (their ratio: the SM clock); consecutive launches of one kernel (name, grid, block,
# registers) are one run, cut into pieces of $CHUNK launches when CHUNK is set, and runs of at least 4 launches
# are printed in launch order with their means and, for each run, the ratio of its cycles to those of the first
# run (the base: a GEMM alone, say), and what a launch of each run does: warp-instructions executed, L2 sectors and
# DRAM bytes (read and written) -- at the power cap the kernel that does less work a flop runs at the higher clock
# (evtc's 8192^3 GEMM against cuBLAS's, 3.4 % behind it there; bench/RESULTS.md, thirty-fourth session).  With
# gpu_evt_bench and CHUNK=43, every variant is one run (its 3 + 20 timed runs and its 20 profiled ones: 3 + 2 R with
# --runs R; cuBLASLt's direct calls 3 + R, which a threshold of 5 dropped at --runs 1), in the variants' order (tile
# configs alike at launch would otherwise merge); a variant of two kernels a run (a cuBLAS GEMM and evtc's epilogue)
# breaks into runs of one and is left out.  Logs in $OUT
# (ncu_clocks_base.csv, ncu_clocks_none.csv).
#   CHUNK=43 sh bench/ncu_clocks.sh PROGRAM [ARGS...]   e.g. ... .gpu-ab/b/extra/gpu_evt_bench gemm_one bias_gelu
#   CHUNK=5 sh bench/ncu_clocks.sh .gpu-ab/b/extra/gpu_evt_bench --shape 8192x8192x8192 --runs 1 gemm
set -u
[ $# -ge 1 ] || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
out=${OUT:-/tmp}
for cc in base none; do
  ncu --clock-control $cc --csv --print-units base --metrics \
    gpu__time_duration.sum,sm__cycles_elapsed.avg,launch__grid_size,launch__block_size,launch__registers_per_thread,smsp__inst_executed.sum,lts__t_sectors.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    "$@" >"$out/ncu_clocks_$cc.csv" 2>"$out/ncu_clocks_$cc.err" || echo "ncu ($cc) exit $?: $(tail -2 "$out/ncu_clocks_$cc.err")"
  echo "== clock control $cc: launch runs (us mean, cycles mean, MHz mean, cycles / first run's; a launch's M warp-instructions, M L2 sectors, DRAM MB)"
  python3 - "$out/ncu_clocks_$cc.csv" "${CHUNK:-0}" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
if not rows:
    sys.exit("no kernels in " + sys.argv[1])
hdr = rows[0]
ii, ki, mi, vi = hdr.index("ID"), hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
launches = {}
for r in rows[1:]:
    launches.setdefault(int(r[ii]), {"name": r[ki]})[r[mi]] = r[vi].replace(",", "")
runs = []
for i in sorted(launches):
    x = launches[i]
    key = (x["name"], x.get("launch__grid_size"), x.get("launch__block_size"), x.get("launch__registers_per_thread"))
    if not runs or runs[-1][0] != key or len(runs[-1][1]) == int(sys.argv[2]):
        runs.append((key, []))
    runs[-1][1].append(x)
mean = lambda xs, m: sum(float(x.get(m, 0) or 0) for x in xs) / len(xs)
first = None
for key, xs in runs:
    if len(xs) < 4:
        continue
    us = mean(xs, "gpu__time_duration.sum") / 1000
    cyc = mean(xs, "sm__cycles_elapsed.avg")
    mhz = cyc / us
    first = first or cyc
    print("%4d x %9.1f us %11.0f cyc %6.0f MHz %6.3f %9.2f Minst %9.2f Msec %9.1f MB  %s grid %s block %s regs %s" %
          (len(xs), us, cyc, mhz, cyc / first, mean(xs, "smsp__inst_executed.sum") / 1e6,
           mean(xs, "lts__t_sectors.sum") / 1e6, (mean(xs, "dram__bytes_read.sum") + mean(xs, "dram__bytes_write.sum")) / 1e6,
           key[0][:40], key[1], key[2], key[3]))
PY
done
