#!/bin/sh
# cap_clocks.sh -- whether an epilogue's time over the GEMM alone, held at the power cap as a training step holds
# it, is cycles or clock: each graph file (bench/epilogue/G.evt) profiled by `evtc explain --profile $RUNS` on each
# tile config, in $ROUNDS interleaved rounds, while nvidia-smi samples the SM clock and the board's power every 20
# ms.  Per graph and config: the kernels' us (each round), the mean clock and power over the samples from 40 % into
# each run to its end with the board above 300 W (the run's busy part, past its set-up), cycles = us x MHz, and
# time and cycles against the first row's.  ncu_clocks.sh asks the same of single launches under ncu; this asks
# it under sustained load, where the clock settles at the power the work draws.
#
#   sh bench/cap_clocks.sh EVTC GRAPH... [-- CONFIG...]   CONFIG: an EVTC_GEMM_CONFIG, or "plan" (the default)
#
# $RUNS (default 6000: 1.5 s of a 0.25 ms kernel), $ROUNDS (default 2).  Each graph's kernels are compiled in a
# short run first (NVRTC), outside the sampled ones.  Logs in $OUT (default /tmp): cap_clocks.csv (the samples),
# cap_clocks.runs.  In this workplace, with B's stage of bench/ab.sh unpacked:
#   run(command="tar -xzf .gpu-ab/b/stage.tgz -C .gpu-ab/b && LD_LIBRARY_PATH=.gpu-ab/b/lib
#       XDG_CACHE_HOME=$PWD/.gpu-ab/b/cache sh bench/cap_clocks.sh .gpu-ab/b/bin/evtc gemm bias_gelu_tanh
#       -- plan '128x128x64 s6 c2 g8 pp'", carry=[".gpu-ab"])
set -u
[ $# -ge 2 ] || { echo "usage: $0 EVTC GRAPH... [-- CONFIG...]" >&2; exit 2; }
evtc=$1
shift
graphs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do graphs="$graphs $1"; shift; done
[ $# -gt 0 ] && shift
out=${OUT:-/tmp}
runs=${RUNS:-6000}
samples="$out/cap_clocks.csv" log="$out/cap_clocks.runs"
# one explain run of graph $1 on config $2 with --profile $3: the kernels' us on stdout
profile() {
  if [ "$2" = plan ]; then unset EVTC_GEMM_CONFIG; else export EVTC_GEMM_CONFIG="$2"; fi
  timeout 100 "$evtc" explain "bench/epilogue/$1.evt" --target h200 --profile "$3" 2>&1 |
    sed -n 's/.*measured \([0-9.]*\) us kernel by kernel.*/\1/p'
}
if [ $# -eq 0 ]; then set -- plan; fi
for g in $graphs; do
  for c in "$@"; do profile "$g" "$c" 3 >/dev/null; done
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20 >"$samples" &
smi=$!
: >"$log"
for r in $(seq "${ROUNDS:-2}"); do
  for g in $graphs; do
    for c in "$@"; do
      t0=$(date +%s.%N)
      us=$(profile "$g" "$c" "$runs")
      echo "$r|$g|$c|$us|$t0|$(date +%s.%N)" >>"$log"
    done
  done
done
kill "$smi"
python3 - "$samples" "$log" <<'PY'
import datetime, statistics as st, sys
samples = []
for line in open(sys.argv[1]):
    p = [x.strip() for x in line.split(",")]
    try:   # nvidia-smi's timestamp is local time, as date's epoch seconds are read here
        samples.append((datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(), float(p[1]), float(p[2])))
    except (ValueError, IndexError):
        pass
rows = {}
for line in open(sys.argv[2]):
    _, g, cfg, us, t0, t1 = line.strip().split("|")
    t0, t1 = float(t0), float(t1)
    busy = [x for x in samples if t0 + 0.4 * (t1 - t0) <= x[0] <= t1 and x[2] > 300]
    rows.setdefault((g, cfg), []).append((float(us) if us else float("nan"),
                                          st.mean(x[1] for x in busy) if busy else float("nan"),
                                          st.mean(x[2] for x in busy) if busy else float("nan"), len(busy)))
print("graph | tile | us (each round) | SM MHz | W | samples | Mcycles (us x MHz) | x the first row: time / cycles")
base = None
for (g, cfg), v in rows.items():
    us, mhz, w = (st.median(x[i] for x in v) for i in range(3))
    cyc = us * mhz * 1e-6
    base = base or (us, cyc)
    print(f"{g} | {cfg} | {' / '.join('%.1f' % x[0] for x in v)} | {mhz:.0f} | {w:.0f} | {sum(x[3] for x in v)} | "
          f"{cyc:.4f} | {us / base[0]:.3f} / {cyc / base[1]:.3f}")
PY
