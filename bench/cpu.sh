#!/bin/sh
# cpu.sh -- the CPU benchmark: builds evtc (Release), checks the CPU backend
# against the interpreter (test_cpu_kernels), then times in one run evtc's
# compiled CPU kernels (the ILP partitioner's plan, as `evtc train` runs;
# EVTC_BENCH_PARTITIONER=builtin|greedy|none to compare), its float64
# interpreter, OpenBLAS sgemm and PyTorch CPU (eager) on the same workloads
# -- training steps of the digits MLP, a 1024-wide MLP, the MLP block
# 1024->4096->1024 + LayerNorm and a transformer encoder layer (d 256, 4
# heads, batch 8, seq 128); linear + bias + GELU 4096x1024x1024 forward and
# the bare matmul against sgemm -- all on every core, each figure the median
# of about a second of runs.  It does that ROUNDS times (default 3), evtc's
# bench and PyTorch's in turn, and prints a table last: per workload and
# implementation the median over the rounds, and ratio = peer time / evtc-cpu
# time (> 1: evtc is faster) taken within each round, their median and each
# round's.  Rounds, because on a virtual machine the speed drifts by tens of
# percent between one minute and the next (RESULTS.md, twenty-fifth session):
# a ratio of two figures timed minutes apart can be that drift.
#
#   bench/cpu.sh            (Debian python3 at /usr/bin; needs libopenblas-dev and python3-torch:
#                            apt-get install -y libopenblas-dev python3-torch)
#   ROUNDS=1 bench/cpu.sh   one round
set -e
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# OpenBLAS (the sgemm peer, and PyTorch's BLAS on Debian) picks its kernels from the CPU model; on a virtual
# machine's generic "Intel Xeon Processor" it fell back to Prescott's SSE3 kernels (sgemm 4096x1024x1024: 128 ms
# against 28 ms with SkylakeX's, 2026-11-30).  The peers get the kernels the CPU's flags allow unless the caller
# chose (OPENBLAS_CORETYPE).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
  fi
fi

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target evtc test_cpu_kernels >/dev/null
(cd "$BUILD/tests" && ./test_cpu_kernels "$ROOT" >/dev/null 2>&1) || { echo "cpu.sh: test_cpu_kernels failed" >&2; exit 1; }
cc -O2 -std=gnu11 -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/cpu_bench.c" "$BUILD/libevtc.a" \
   $(pkg-config --libs libprotobuf-c cbc) -lopenblas -lm -ldl -o "$BUILD/cpu_bench"

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; OpenBLAS kernels: ${OPENBLAS_CORETYPE:-its own choice}"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)"
for round in $(seq 1 "${ROUNDS:-3}"); do
  echo "round $round"
  "$BUILD/cpu_bench" "$ROOT" | sed "s/^RESULT /RESULT $round /" | tee -a "$OUT"
  /usr/bin/python3 "$ROOT/bench/cpu_torch.py" | sed "s/^RESULT /RESULT $round /" | tee -a "$OUT"
done

/usr/bin/python3 - "$OUT" <<'EOF'
import statistics, sys
rows = {}   # work -> impl -> round -> ms
for line in open(sys.argv[1]):
    if line.startswith("RESULT"):
        _, rnd, work, impl, ms = line.split()
        rows.setdefault(work, {}).setdefault(impl, {})[rnd] = float(ms)
print()
print(f"| {'workload':36} | {'impl':22} | {'ms/step':>10} | {'ratio (peer/evtc-cpu)':>21} | {'ratio, each round':>22} |")
print(f"|{'-'*38}|{'-'*24}|{'-'*12}|{'-'*23}|{'-'*24}|")
for work, impls in rows.items():
    base = impls.get("evtc-cpu", {})
    for impl, by_round in impls.items():
        ms = statistics.median(by_round.values())
        each = [by_round[r] / base[r] for r in by_round if r in base] if impl != "evtc-cpu" else []
        ratio = f"{statistics.median(each):.2f}" if each else ""
        rounds = " / ".join(f"{x:.2f}" for x in each)
        print(f"| {work:36} | {impl:22} | {ms:10.3f} | {ratio:>21} | {rounds:>22} |")
EOF
