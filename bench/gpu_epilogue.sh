#!/bin/sh
# gpu_epilogue.sh -- what a GEMM's epilogue costs on the GPU: the graphs in
# bench/epilogue/ (BERT-Large, GPT-2 and ViT shapes: a GEMM alone, with a
# bias, a second output, a polynomial, erf-GELU, the GELU gradient with its
# bias sum, a layernorm gradient with its column sums, the q/k/v and output
# projections; *.train.evt are forward graphs whose training graph is
# planned: MLP blocks, a layernorm block, an embedding) each timed by
# `evtc explain --profile 10` (device clock: CUDA events between kernels), once
# per tile config given (EVTC_GEMM_CONFIG; "default": evtc's own choice).
# Prints one line per graph and config: the kernels' kind and mean us, then
# the whole run's time.
#
#   bench/gpu_epilogue.sh run [CONFIG...]   on the GPU machine, from the repo root,
#                                           with the stage of `bench/train.sh prepare`
#                                           (EVTC=path picks another evtc)
#
# In this workplace: run(command="sh bench/gpu_epilogue.sh run default '64x256x64 s4 c2 g16 pp'",
#                        carry=[".gpu-train"]).
set -eu
stage=${EVTC_STAGE:-.gpu-train}

case "${1:-}" in
run)
  shift
  [ $# -gt 0 ] || set -- default
  work=${EVTC_TRAIN_WORK:-/tmp/evtc-train}
  if [ -z "${EVTC:-}" ] && [ -f "$stage/stage.tgz" ]; then
    mkdir -p "$work/bin" && tar -xzf "$stage/stage.tgz" -C "$work/bin"
    export LD_LIBRARY_PATH="$work/bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  evtc=${EVTC:-$work/bin/evtc}
  export EVTC_DATA_DIR="${EVTC_DATA_DIR:-$PWD/data}"
  export XDG_CACHE_HOME="${XDG_CACHE_HOME:-$work/cache}"
  out=${OUT:-/tmp/evtc-epilogue-out}
  mkdir -p "$out"
  for f in bench/epilogue/*.evt; do
    name=$(basename "$f" .evt)
    train=
    case "$name" in *.train) train=--train ;; esac
    for cfg in "$@"; do
      log="$out/$name.$(echo "$cfg" | tr ' ' '_').txt"
      if [ "$cfg" = default ]; then
        timeout 120 "$evtc" explain "$f" $train --target h200 --profile 10 >"$log" 2>&1 || true
      else
        EVTC_GEMM_CONFIG="$cfg" timeout 120 "$evtc" explain "$f" $train --target h200 --profile 10 >"$log" 2>&1 || true
      fi
      printf '%-28s %-24s %s\n' "$name" "$cfg" "$(awk '/^== profile/ {on = 1; next}
        on && $1 ~ /^[0-9]+$/ && $5 > 15 {printf "%s %s us; ", $2, $5}
        /^profile:/ {printf "| run %s us", $(NF - 4); done = 1}
        END {if (!done) printf "failed: see %s", FILENAME}' "$log")"
    done
  done
  ;;
*)
  echo "usage: $0 run [CONFIG...]" >&2
  exit 2
  ;;
esac
