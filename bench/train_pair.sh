#!/bin/sh
# train_pair.sh -- two bench/train.sh runs at once on a two-GPU machine, each
# alone on one GPU and on half of the CPUs, so that a two-GPU call does the
# work of two one-GPU calls (issue 9: every model against eager and both
# torch.compile modes on one machine, where max-autotune compiles for five to
# seven minutes a model and a call may last ten).
#
#   bench/train_pair.sh "ARGS FOR GPU 0" "ARGS FOR GPU 1"
#
# Each ARGS is what `bench/train.sh run` takes (--models, --modes, --deadline,
# ...), split on spaces.  Run i sees only GPU i (CUDA_VISIBLE_DEVICES) and is
# pinned with taskset to the i-th half of the online CPUs: 16 of 32 on
# nvidia-h200-x2, as many as a one-GPU machine has, so torch.compile's
# compile workers and PyTorch's host-bound steps get what they would get
# there, and neither run's compiling slows the other's timed steps.  The runs
# write to $OUT/gpu0 and $OUT/gpu1 and keep their models and torch caches in
# ${EVTC_TRAIN_WORK:-/tmp/evtc-train}-gpu0 and -gpu1; both logs' tables are
# printed last, GPU 0 first.  One table over several calls' runs (a model's
# modes split over two calls): unpack each run's train-logs.tgz into a folder
# and give them all to bench/train_report.py, the run with evtc's step first.
#
# In this workplace, after `sh bench/train.sh prepare`:
# run(command="sh bench/train_pair.sh '--models bert_large --modes max-autotune' '--models vit_b16'",
#     carry=[".gpu-train"], kind="nvidia-h200-x2", timeout_s=600).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 'train.sh run ARGS for GPU 0' 'ARGS for GPU 1'" >&2; exit 2; }
out=${OUT:-/tmp/evtc-train-out}
work=${EVTC_TRAIN_WORK:-/tmp/evtc-train}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$gpus" -ge 2 ] || { echo "train_pair.sh: needs two GPUs, nvidia-smi lists ${gpus:-none}" >&2; exit 1; }
cpus=$(nproc)
half=$((cpus / 2))
[ "$half" -ge 1 ] || { echo "train_pair.sh: needs two CPUs, nproc says $cpus" >&2; exit 1; }
echo "== $(date -u +%Y-%m-%dT%H:%MZ) two runs at once: GPU 0 on CPUs 0-$((half - 1)), GPU 1 on CPUs $half-$((2 * half - 1))"
nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader
pids=""
for i in 0 1; do
  [ "$i" = 0 ] && args=$1 || args=$2
  first=$((i * half))
  mkdir -p "$out/gpu$i"
  # shellcheck disable=SC2086  # $args: train.sh's options, one word each
  CUDA_VISIBLE_DEVICES=$i OUT="$out/gpu$i" EVTC_TRAIN_WORK="$work-gpu$i" \
    taskset -c "$first-$((first + half - 1))" sh bench/train.sh run $args >"$out/gpu$i/stdout.log" 2>&1 &
  pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
for i in 0 1; do
  echo "==== GPU $i: bench/train.sh run $([ "$i" = 0 ] && echo "$1" || echo "$2")"
  # train.log holds the phases and the report; stdout.log the same plus anything train.sh said before it
  if [ -f "$out/gpu$i/train.log" ]; then cat "$out/gpu$i/train.log"; else tail -20 "$out/gpu$i/stdout.log"; fi
done
exit "$rc"
