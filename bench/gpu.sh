#!/bin/sh
# gpu.sh -- the CUDA backend on a GPU: builds here, runs there.
#
#   bench/gpu.sh prepare   on the build machine: Release build in build-cuda2,
#                          stages evtc, the GPU tests, the benchmark and the
#                          shared libraries they need (beside libc) in .gpu-cuda2/
#   bench/gpu.sh run       on the GPU machine, from the repo root: runs the
#                          CTest `gpu` tests' programs (test_gpu_kernels,
#                          test_cuda_runtime: checks against the float64
#                          interpreter; test_gpu_digits: the digits example
#                          trained with --backend cuda reaches the CPU's
#                          accuracy), then the benchmark:
#                          evtc against PyTorch eager and torch.compile on the
#                          same inputs, with the device-to-device copy
#                          bandwidth measured in the same run; a table last.
#
# CUDA is dlopen'ed, so binaries built on Debian 12 run on the GPU machine;
# the non-libc libraries (OpenMP, CBC, protobuf-c, OpenBLAS) travel in
# .gpu-cuda2/lib.  In this workplace: add /.gpu-cuda2/ to .git/info/exclude
# and run(command="sh bench/gpu.sh run", carry=[".gpu-cuda2"]).
set -eu
stage=.gpu-cuda2

case "${1:-}" in
prepare)
  cmake -S . -B build-cuda2 -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-cuda2 -j2 --target evtc_tool test_gpu_kernels test_cuda_runtime >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/lib"
  cp build-cuda2/evtc build-cuda2/tests/test_gpu_kernels build-cuda2/tests/test_cuda_runtime "$stage/"
  if [ -f bench/gpu_bench.c ]; then
    cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/gpu_bench.c build-cuda2/libevtc.a \
      $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o "$stage/gpu_bench"
  fi
  for b in "$stage"/*; do
    [ -f "$b" ] || continue
    strip "$b"
    ldd "$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  du -sh "$stage"
  ;;
run)
  log=${OUT:-/tmp}/gpu.log
  # one test program: its last lines and its exit code (0 passed, 77 skipped)
  gpu_test() {
    echo "== $*"
    rc=0
    "$@" >"${OUT:-/tmp}/test.out" 2>&1 || rc=$?
    grep -E "check failed|FAILED|: got .*, want |SKIP" "${OUT:-/tmp}/test.out" | head -20 || true
    tail -2 "${OUT:-/tmp}/test.out"
    echo "== exit code $rc"
  }
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/evtc-cache}
  export EVTC_DATA_DIR=${EVTC_DATA_DIR:-$PWD/data}
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    gpu_test "$stage/test_gpu_kernels" . "$stage/evtc"
    gpu_test "$stage/test_cuda_runtime" . "$stage/evtc"
    gpu_test python3 tests/test_gpu_digits.py . "$stage/evtc"   # digits: --backend cuda reaches the CPU's accuracy
    if [ -x "$stage/gpu_bench" ]; then
      echo "== benchmark"
      "$stage/gpu_bench" | tee "${OUT:-/tmp}/evtc_bench.txt"
      EVTC_CUDA_SMEM_ROWS=0 "$stage/gpu_bench" softmax cross | tee -a "${OUT:-/tmp}/evtc_bench.txt"
      python3 bench/gpu_torch.py "${OUT:-/tmp}/evtc_bench.txt" || echo "gpu_torch.py failed"
    fi
  } 2>&1 | tee "$log"
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
