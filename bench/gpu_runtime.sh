#!/bin/sh
# gpu_runtime.sh -- checks and times evtc's CUDA runtime layer on a GPU
# (NVRTC compile + disk cache, device arena, launches, events): an
# elementwise kernel and a row softmax against float64 references, and
# their bandwidth against a device-to-device copy measured in the same run.
#
#   bench/gpu_runtime.sh prepare   on the build machine: builds build-cuda and
#                                  stages the test binary into .gpu-runtime/
#   bench/gpu_runtime.sh run       on the GPU machine, from the repo root
#
# test_cuda_runtime links no shared library beyond libc/libm (CUDA is
# dlopen'ed), so a binary built on Debian 12 (glibc 2.36) runs on the GPU
# machine's newer image.  In this workplace the run was made with the device
# tool: run(command="sh bench/gpu_runtime.sh run", carry=[".gpu-runtime"]),
# after adding /.gpu-runtime/ to .git/info/exclude.
set -eu
stage=.gpu-runtime

case "${1:-}" in
prepare)
  cmake -S . -B build-cuda -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-cuda -j2 --target test_cuda_runtime
  rm -rf "$stage" && mkdir -p "$stage"
  cp build-cuda/tests/test_cuda_runtime "$stage/"
  strip "$stage/test_cuda_runtime"
  ldd "$stage/test_cuda_runtime"
  ;;
run)
  log=${OUT:-/tmp}/gpu_runtime.log
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true
    echo "== CUDA libraries the loader knows:"
    ldconfig -p | grep -E 'libcuda\.so|libnvrtc\.so|libcublasLt\.so' || true
    ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/lib64/libcublasLt.so* 2>/dev/null || true
    echo "== test_cuda_runtime"
    rc=0
    "$stage/test_cuda_runtime" . /nonexistent || rc=$?
    echo "== exit code $rc"
  } 2>&1 | tee "$log"
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
