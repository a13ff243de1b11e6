#!/bin/sh
# gpu_gemm.sh -- evtc's sm_90a GEMM on a GPU: builds here, runs there.
#
#   bench/gpu_gemm.sh prepare   on the build machine: a build (in
#                               $EVTC_BUILD, default build-gpu-gemm; type
#                               $EVTC_BUILD_TYPE, default Release), stages
#                               test_gpu_gemm, gpu_gemm_bench, test_gpu_evt,
#                               gpu_evt_bench and the shared libraries they
#                               need (beside libc) in .gpu-gemm/,
#                               and compiles every kernel through NVRTC into
#                               .gpu-gemm/cache (the GPU machine then loads the
#                               CUBINs from that cache: same NVRTC version and
#                               source, same key) and the bench's source into
#                               .gpu-gemm/gpu_gemm_bench.cu
#   bench/gpu_gemm.sh run       on the GPU machine, from the repo root: the
#                               correctness test (float64 host reference), the
#                               SASS of the bench kernels (HGMMA count), then
#                               the benchmark against cuBLASLt twice (the spread
#                               is the noise), its table last.
#   bench/gpu_gemm.sh run-evt   on the GPU machine: the EVT test (GEMM kernels
#                               with their visitor epilogue against the float64
#                               interpreter), the EVT benchmark through evtc
#                               graphs (bench/gpu_evt_bench.c) and PyTorch's
#                               eager and torch.compile times of the same
#                               workloads (bench/gpu_evt_torch.py; torch.compile
#                               in both modes, default and max-autotune, unless
#                               $EVT_TORCH_MODES names others), tables last;
#                               every time over $EVT_RUNS runs (default 2000:
#                               the GPU held at its power cap, as a training
#                               step holds it; 20: a burst, which ranks the
#                               tile configs differently), gpu_evt_bench's the
#                               medians of 3 interleaved rounds.  $EVT_COMBOS:
#                               the tile configs the test runs with (default
#                               "plan coop cl2"); $EVT_GRAPHS: gpu_evt_bench's
#                               graphs and gpu_evt_torch.py's workloads, which
#                               skips those it has not (comma-separated;
#                               default all); $EVT_SHAPE (gpu_evt_bench's
#                               --shape; gpu_evt_torch.py reads it itself):
#                               both on another M x N x K than 16384x4096x1024 (as
#                               16384x1024x4096 or 8192x8192x8192, the issue's
#                               other GEMM shapes).
#
# In this workplace: add /.gpu-gemm/ to .git/info/exclude and
# run(command="sh bench/gpu_gemm.sh run", carry=[".gpu-gemm"]), then in a call of its own
# run(command="EVT_COMBOS=plan sh bench/gpu_gemm.sh run-evt", carry=[".gpu-gemm"]): a call has 600 s, and on the H200
# (thirty-third session) test_gpu_evt took 147 s on the plan's tiles and 66-71 s on each other config, gpu_evt_bench
# about 5 s a row at 3 x 2000 runs (some 200 s for all), gpu_evt_torch.py 114 s with max-autotune.
set -eu
stage=${EVTC_STAGE:-.gpu-gemm}     # another stage (an ignored path, e.g. build-x/stage) keeps runs apart
# test_gpu_evt runs with the plan's tile config, the cooperative one and pingpong 64x256 on 2x1 clusters
evt_combos=${EVT_COMBOS:-plan coop cl2}
with_combo() (   # with_combo COMBO COMMAND...: COMMAND in a subshell with that combination's tile config
  case "$1" in
  coop) export EVTC_GEMM_CONFIG="128x256x64 s4 c2 g8" ;;
  cl2) export EVTC_GEMM_CONFIG="64x256x64 s4 c2 g8 pp cl2" ;;
  *) unset EVTC_GEMM_CONFIG ;;
  esac
  shift
  "$@"
)

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-gpu-gemm}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE="${EVTC_BUILD_TYPE:-Release}" >/dev/null
  cmake --build "$build" -j2 --target evtc test_gpu_gemm test_gpu_evt >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/cache"
  cp "$build/tests/test_gpu_gemm" "$build/tests/test_gpu_evt" "$stage/"
  for bench in gpu_gemm_bench gpu_evt_bench; do
    cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/$bench.c "$build/libevtc.a" \
      $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o "$stage/$bench"
  done
  for b in "$stage"/test_gpu_gemm "$stage"/gpu_gemm_bench "$stage"/test_gpu_evt "$stage"/gpu_evt_bench; do
    strip "$b"
    ldd "$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  rc=0
  XDG_CACHE_HOME="$PWD/$stage/cache" "$stage/test_gpu_gemm" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "test_gpu_gemm failed here ($rc)" >&2; exit 1; }
  for combo in $evt_combos; do   # every tile config that run-evt tests
    rc=0
    XDG_CACHE_HOME="$PWD/$stage/cache" && export XDG_CACHE_HOME
    with_combo "$combo" "$stage/test_gpu_evt" >/dev/null || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "test_gpu_evt ($combo) failed here ($rc)" >&2; exit 1; }
  done
  XDG_CACHE_HOME="$PWD/$stage/cache" "$stage/gpu_gemm_bench" --compile-only --dump "$stage"
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME="$PWD/$stage/cache"
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    echo "== test_gpu_gemm"
    rc=0
    timeout "${GEMM_TEST_TIMEOUT:-90}" "$stage/test_gpu_gemm" || rc=$?
    echo "== test_gpu_gemm exit code $rc"
    if command -v cuobjdump >/dev/null; then
      echo "== SASS of the bench kernels"
      for c in "$stage"/cache/evtc/cuda/*.cubin; do
        cuobjdump --dump-sass "$c" >/tmp/sass.txt 2>&1 || continue
        grep -q bench_gemm /tmp/sass.txt || continue
        echo "$(grep -c HGMMA /tmp/sass.txt) HGMMA, $(grep -c -E 'LDL|STL' /tmp/sass.txt) local loads/stores in $c"
      done
    fi
    for pass in 1 2; do   # twice: the spread between passes is the noise
      echo "== gpu_gemm_bench, pass $pass"
      rc=0
      timeout "${GEMM_BENCH_TIMEOUT:-100}" "$stage/gpu_gemm_bench" || rc=$?
      echo "== gpu_gemm_bench exit code $rc"
    done
  } 2>&1 | tee "$out/gpu_gemm.log"
  ;;
run-evt)
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME="$PWD/$stage/cache"
  {
    for combo in $evt_combos; do
      echo "== test_gpu_evt ($combo)"
      rc=0
      with_combo "$combo" timeout "${EVT_TEST_TIMEOUT:-240}" "$stage/test_gpu_evt" >/tmp/evt_test.log 2>&1 || rc=$?
      grep -v ": [0-9]* kernels (" /tmp/evt_test.log | tail -40
      echo "== test_gpu_evt ($combo) exit code $rc"
    done
    echo "== gpu_evt_bench"
    rc=0
    # shellcheck disable=SC2046  # the graphs' names, one argument each
    timeout "${EVT_BENCH_TIMEOUT:-420}" "$stage/gpu_evt_bench" --rounds 3 --runs "${EVT_RUNS:-2000}" \
      ${EVT_SHAPE:+--shape "$EVT_SHAPE"} $(echo "${EVT_GRAPHS:-}" | tr ',' ' ') || rc=$?
    echo "== gpu_evt_bench exit code $rc"
    echo "== gpu_evt_torch.py (PyTorch eager and torch.compile on the same workloads)"
    rc=0
    EVT_TORCH_WORKLOADS="${EVT_GRAPHS:-}" EVT_TORCH_MODES="${EVT_TORCH_MODES:-default,max-autotune}" \
      EVT_TORCH_RUNS="${EVT_RUNS:-2000}" timeout "${EVT_TORCH_TIMEOUT:-240}" python3 bench/gpu_evt_torch.py 2>&1 |
      grep -v Warning || rc=$?
    echo "== gpu_evt_torch.py exit code $rc"
  } 2>&1 | tee "$out/gpu_evt.log"
  ;;
*)
  echo "usage: $0 prepare|run|run-evt" >&2
  exit 2
  ;;
esac
