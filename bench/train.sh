#!/bin/sh
# train.sh -- whole-model training steps: evtc against PyTorch eager and torch.compile (issue 9).
#
#   bench/train.sh prepare   on the build machine: a Release build in
#                            $EVTC_BUILD (default build-train), evtc and the
#                            shared libraries it needs (beside libc) packed
#                            into .gpu-train/stage.tgz (about 25 MB; another
#                            stage folder: $EVTC_STAGE, which may also be a
#                            bench/gpu_tests.sh or bench/ab.sh stage, whose
#                            evtc is bin/evtc: EVTC_STAGE=.gpu-ab/b)
#   bench/train.sh run [--models gpt2,bert_large,vit_b16] [--steps N]
#                      [--modes eager,compile,max-autotune] [--scale full|small]
#                      [--lr X] [--backend cuda|cpu] [--deadline S] [--profile N]
#                      [--torch-limit S] [--only evtc|torch]
#                            on the GPU machine, from the repo root.  Per model:
#                            bench/train_models.py writes it as ONNX with one
#                            batch of data (with that machine's torch; models
#                            are not shipped), `evtc train --epochs N` trains N
#                            steps on it (SGD, cross-entropy), then
#                            bench/train_torch.py trains the same weights on the
#                            same batch in each PyTorch mode; last,
#                            bench/train_report.py checks the losses step by
#                            step (PASS/FAIL per model) and prints the table,
#                            and draws the ratios into $OUT/train_ratios.png.
#                            With --profile N, after each model's training
#                            `evtc explain --train --profile N` times the
#                            step's kernels on the same backend: the log gets
#                            its totals, memory lines, time per kernel kind
#                            and its 12 slowest kernel families,
#                            train-logs.tgz the whole table; and
#                            train_torch.py profiles N steps of each PyTorch
#                            mode (kernel time per step by kind).
#
# Defaults: all three models, 10 steps, all three modes, full scale, lr 0.02,
# backend cuda, deadline 540 s: every phase gets at most the time left before
# it (minus a margin for the report), so a slow model cannot take the table
# with it; a model that fails in one phase is reported and the others run.
# PyTorch's phase of a model is capped at --torch-limit s (default 300;
# max-autotune compiles for minutes: give it more).  torch.compile's caches
# (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) default to $EVTC_TRAIN_WORK/
# torch-cache: a second run on the same machine starts from the compiled
# kernels and autotuning choices of the first, and its compile times say so.
# --only torch skips evtc's training (and its profile), --only evtc
# PyTorch's: a mode that compiles for longer than a call allows beside
# evtc's run (max-autotune on BERT-Large, past 480 s in 2026-12) gets a
# call of its own, evtc the next one on the same warm machine, and
# bench/train_report.py here joins the two (each call's train-logs.tgz
# unpacked into a folder of its own):
#   run(command="sh bench/train.sh run --models bert_large --modes max-autotune --only torch
#       --deadline 598 --torch-limit 575", carry=[...]), then at once
#   run(command="sh bench/train.sh run --models bert_large --modes eager,compile", carry=[...]);
#   python3 bench/train_report.py B A --models bert_large --png chart.png
# train.log, the chart and train-logs.tgz (every model's logs and JSON) go
# to $OUT (default /tmp/evtc-train-out), the models to $EVTC_TRAIN_WORK
# (default /tmp/evtc-train: hundreds of MB, kept out of $OUT).
# The kernel and plan caches: the stage's cache/ when it has one, else
# $XDG_CACHE_HOME when set, else $EVTC_TRAIN_WORK/cache, which comes back as
# $OUT/evtc-cache.tar.gz (unpack it into the stage's cache/ to skip NVRTC and
# the ILP next time).  $EVTC overrides the evtc binary,
# $PYTHON the interpreter (default: the first python3 that imports torch).
#
# In this workplace: add /.gpu-train/ to .git/info/exclude and
# run(command="sh bench/train.sh run --models gpt2,bert_large --modes eager,compile",
#     carry=[".gpu-train"], timeout_s=600).
# Locally, at small scale on the CPU: sh bench/train.sh run --scale small --backend cpu --modes eager
set -eu
stage=${EVTC_STAGE:-.gpu-train}

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-train}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j2 --target evtc_tool >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/lib"
  cp "$build/evtc" "$stage/"
  strip "$stage/evtc"
  ldd "$stage/evtc" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  tar -czf "$stage/stage.tgz" -C "$stage" evtc lib && rm -rf "${stage:?}/evtc" "${stage:?}/lib"
  du -sh "$stage"
  ;;
run)
  shift
  models=gpt2,bert_large,vit_b16 steps=10 modes=eager,compile,max-autotune scale=full lr=0.02 backend=cuda
  deadline=540 profile=0 torch_limit=300 only=
  while [ $# -gt 0 ]; do
    case "$1" in
      --models) models=$2 ;;
      --steps) steps=$2 ;;
      --modes) modes=$2 ;;
      --scale) scale=$2 ;;
      --lr) lr=$2 ;;
      --backend) backend=$2 ;;
      --deadline) deadline=$2 ;;
      --profile) profile=$2 ;;
      --torch-limit) torch_limit=$2 ;;
      --only) only=$2 ;;
      *) echo "train.sh run: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
  done
  case "$only" in
    "" | evtc | torch) ;;
    *) echo "train.sh run: --only takes evtc or torch, not '$only'" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  out=${OUT:-/tmp/evtc-train-out}
  work=${EVTC_TRAIN_WORK:-/tmp/evtc-train}
  mkdir -p "$out" "$work"
  export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$work/torch-cache}"
  export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$work/torch-cache/triton}"
  if [ -z "${EVTC:-}" ] && [ -f "$stage/stage.tgz" ]; then   # the staged evtc, unpacked beside the models
    rm -rf "$work/bin" && mkdir -p "$work/bin" && tar -xzf "$stage/stage.tgz" -C "$work/bin"
    export LD_LIBRARY_PATH="$work/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  evtc=${EVTC:-$work/bin/evtc}
  [ -z "${EVTC:-}" ] && [ -x "$work/bin/bin/evtc" ] && evtc=$work/bin/bin/evtc   # a gpu_tests.sh / ab.sh stage
  export EVTC_DATA_DIR="${EVTC_DATA_DIR:-$PWD/data}"    # device files: the staged evtc knows only its build tree
  if [ -d "$stage/cache" ]; then
    export XDG_CACHE_HOME="$PWD/$stage/cache"
  elif [ -z "${XDG_CACHE_HOME:-}" ]; then
    export XDG_CACHE_HOME="$work/cache"
  fi
  if [ -z "${PYTHON:-}" ]; then
    for p in python3 /usr/bin/python3; do
      if "$p" -c "import torch" 2>/dev/null; then PYTHON=$p; break; fi
    done
  fi
  [ -n "${PYTHON:-}" ] || { echo "train.sh: no python3 with torch" >&2; exit 1; }
  # timeout for a phase: at most $1 s, and never past the deadline minus 20 s for the report
  budget() {
    left=$((deadline - ($(date +%s) - start) - 20))
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
  }
  # phase NAME CAP LOG COMMAND...: COMMAND under `timeout`, its output in LOG, its exit code in LOG.rc
  phase() {
    name=$1 cap=$(budget "$2") log=$3
    shift 3
    if [ "$cap" -lt 10 ]; then
      echo "$name skipped: out of time (deadline $deadline s)" >"$log"
      echo 124 >"$log.rc"
      return 0
    fi
    t0=$(date +%s)
    rc=0
    timeout "$cap" "$@" >"$log" 2>&1 || rc=$?
    echo "$rc" >"$log.rc"
    echo "== $name: exit $rc in $(($(date +%s) - t0)) s (limit $cap s)"
  }
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r), models $models, $steps steps, modes $modes, scale $scale, lr $lr, backend $backend"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null || true
    "$PYTHON" -c "import torch; print('torch', torch.__version__)"
    echo "== same seeded bf16 weights and batch for evtc and PyTorch, dropout 0, SGD lr $lr momentum 0.9, cross-entropy"
    for m in $(echo "$models" | tr , ' '); do
      phase "$m: export" 180 "$out/$m.export.log" "$PYTHON" bench/train_models.py "$work" --models "$m" --scale "$scale"
      grep -v -i warn "$out/$m.export.log" | tail -5
      if [ "$(cat "$out/$m.export.log.rc")" != 0 ]; then
        echo "evtc: not run: $(grep -v '^ *$' "$out/$m.export.log" | tail -1)" >"$out/$m.evtc.err"
        echo 1 >"$out/$m.evtc.rc"
        continue
      fi
      if [ "$only" = torch ]; then     # no .evtc.rc: train_report.py takes evtc from another run's folder
        echo "evtc: not run (--only torch)" >"$out/$m.evtc.err"
      else
        rc=0
        t0=$(date +%s)
        cap=$(budget 300)
        if [ "$cap" -lt 10 ]; then
          echo "evtc: skipped: out of time (deadline $deadline s)" >"$out/$m.evtc.err"
          rc=124
        else
          timeout "$cap" "$evtc" train "$work/$m.onnx" --data "$work/$m" --epochs "$steps" --optimizer sgd --lr "$lr" \
            --loss cross_entropy --labels labels --backend "$backend" >"$out/$m.evtc.out" 2>"$out/$m.evtc.err" || rc=$?
        fi
        echo "$rc" >"$out/$m.evtc.rc"
        echo "== $m: evtc exit $rc in $(($(date +%s) - t0)) s (limit $cap s)"
        grep -E "^(partitioner|backend|time to|steady|buffer)" "$out/$m.evtc.out" 2>/dev/null || true
        [ "$rc" = 0 ] || grep -m3 -E "^evtc: |rror" "$out/$m.evtc.err" || true
        if [ "$profile" -gt 0 ] && [ "$rc" = 0 ]; then
          target=h200
          [ "$backend" = cpu ] && target=cpu
          phase "$m: profile" 120 "$out/$m.profile.txt" "$evtc" explain "$work/$m.onnx" --train --target "$target" \
            --loss cross_entropy --labels labels --profile "$profile"
          grep -E "^(profile|memory)" "$out/$m.profile.txt" | cut -c1-400     # with the time per kernel kind
          sed -n '/^profile by family/,/^profile by kind/p' "$out/$m.profile.txt" | sed -n '2,14p' | cut -c1-160
        fi
      fi
      [ "$only" = evtc ] && continue
      phase "$m: PyTorch" "$torch_limit" "$out/$m.torch.log" "$PYTHON" bench/train_torch.py "$work" --model "$m" --steps "$steps" \
        --lr "$lr" --modes "$modes" --profile "$profile" --out "$out/$m.torch.json"
      grep -v -i warn "$out/$m.torch.log" | grep -v "  [0-9.]* ms  *[0-9]* x " | tail -8
    done
    cache_mb=$(du -sm "$XDG_CACHE_HOME" 2>/dev/null | cut -f1)
    if [ "$XDG_CACHE_HOME" = "$work/cache" ] && [ -n "$cache_mb" ] && [ "$cache_mb" -le 40 ]; then
      tar -czf "$out/evtc-cache.tar.gz" -C "$XDG_CACHE_HOME" . && echo "== kernel cache: $out/evtc-cache.tar.gz"
    fi
    echo "== total $(($(date +%s) - start)) s"
    "$PYTHON" bench/train_report.py "$out" --models "$models" --png "$out/train_ratios.png"
  } 2>&1 | tee "$out/train.log"
  # the per-model logs and JSON in one archive beside train.log and the chart (the GPU tool returns few files)
  logs=""
  for m in $(echo "$models" | tr , ' '); do
    for f in "$m.export.log" "$m.export.log.rc" "$m.evtc.out" "$m.evtc.err" "$m.evtc.rc" "$m.torch.log" \
             "$m.torch.log.rc" "$m.torch.json" "$m.profile.txt" "$m.profile.txt.rc"; do
      [ -f "$out/$f" ] && logs="$logs $f"
    done
  done
  if [ -n "$logs" ]; then
    # shellcheck disable=SC2086  # $logs: names without spaces, one word each
    (cd "$out" && tar -czf train-logs.tgz $logs && rm -f $logs)
  fi
  ;;
*)
  echo "usage: $0 prepare | run [--models M,...] [--steps N] [--modes eager,compile,max-autotune]" >&2
  echo "                        [--scale full|small] [--lr X] [--backend cuda|cpu] [--deadline S] [--profile N]" >&2
  echo "                        [--torch-limit S]" >&2
  exit 2
  ;;
esac
