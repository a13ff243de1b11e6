#!/bin/sh
# gpu_graph.sh -- CUDA graph replay of a program's runs (runtime/program_replay.c): builds here, runs there.
#
#   bench/gpu_graph.sh prepare   on the build machine: a build (in $EVTC_BUILD, default build-gpu-graph;
#                                type $EVTC_BUILD_TYPE, default Release), stages test_gpu_kernels,
#                                test_gpu_attention, test_program_replay, gpu_graph_bench and the shared
#                                libraries they need (beside libc) in .gpu-graph/, and runs the GPU tests once
#                                without a GPU, which compiles their kernels through NVRTC into
#                                .gpu-graph/cache (same NVRTC and source on the GPU machine: same cache key)
#   bench/gpu_graph.sh run       on the GPU machine, from the repo root: gpu_graph_bench (a chain of 1000
#                                one-node kernels and a training block, replayed against launched one by one:
#                                bit for bit, and the time saved per kernel), then the tests (every program
#                                output against the interpreter; the graph-replay checks of replay_check.h).
#
# In this workplace: add /.gpu-graph/ to .git/info/exclude and
# run(command="sh bench/gpu_graph.sh run", carry=[".gpu-graph"]).
set -eu
stage=${EVTC_STAGE:-.gpu-graph}
tests="test_gpu_kernels test_gpu_attention test_program_replay"

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-gpu-graph}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE="${EVTC_BUILD_TYPE:-Release}" >/dev/null
  for t in $tests; do cmake --build "$build" -j2 --target "$t" >/dev/null; done
  rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/cache"
  for t in $tests; do cp "$build/tests/$t" "$stage/"; done
  cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/gpu_graph_bench.c "$build/libevtc.a" \
    $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o "$stage/gpu_graph_bench"
  for b in $tests gpu_graph_bench; do
    strip "$stage/$b"
    ldd "$stage/$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  for t in $tests; do
    rc=0
    XDG_CACHE_HOME="$PWD/$stage/cache" "$stage/$t" . >/dev/null || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "$t failed here ($rc)" >&2; exit 1; }
  done
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME="$PWD/$stage/cache"
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    rc=0
    timeout "${GRAPH_BENCH_TIMEOUT:-120}" "$stage/gpu_graph_bench" || rc=$?
    echo "== gpu_graph_bench exit code $rc"
    for t in $tests; do
      echo "== $t"
      rc=0
      timeout "${GRAPH_TEST_TIMEOUT:-300}" "$stage/$t" . >"$out/$t.log" 2>&1 || rc=$?
      tail -n 40 "$out/$t.log"
      echo "== $t exit code $rc (whole output: $out/$t.log)"
    done
  } 2>&1 | tee "$out/gpu_graph.log"
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
