#!/bin/sh
# gpu_gemm_tune.sh -- the GEMM tuner (`evtc tune`, cuda_gemm_tune.h) on a GPU: builds here, runs there.
#
#   bench/gpu_gemm_tune.sh prepare   on the build machine: a build (in $EVTC_BUILD, default
#                                    build-gpu-tune; type $EVTC_BUILD_TYPE, default Release), stages
#                                    evtc (`evtc tune` only: a main over tools/cmd_tune.c),
#                                    test_gpu_gemm_tune and the shared libraries they need
#                                    (beside libc) in .gpu-tune/, and compiles every first-pass
#                                    candidate of the families in $FAMILIES (and the test's) through
#                                    NVRTC into .gpu-tune/cache, packed as cache.tar.gz (the GPU
#                                    machine then loads the CUBINs from that cache: same NVRTC
#                                    version, options and source, same key; a second compile pass
#                                    here must find every kernel in the cache, or prepare fails)
#   bench/gpu_gemm_tune.sh run       on the GPU machine, from the repo root: the tuner's test
#                                    (reduced space on small problems), then `evtc tune` for every
#                                    family in $FAMILIES: progress lines, the count of kernels the
#                                    device had to compile itself (0 expected but the group_m
#                                    variants), and the table last: each family's winner, its TFLOP/s
#                                    and the default config's on every representative size, and the
#                                    tuning time; then the same table read back from the cache
#                                    (`evtc tune --show`).  The log and the tuned files land in $OUT.
#
# In this workplace: add /.gpu-tune/ to .git/info/exclude and
# run(command="sh bench/gpu_gemm_tune.sh run", carry=[".gpu-tune"]).
set -eu
stage=${EVTC_STAGE:-.gpu-tune}
FAMILIES=${FAMILIES:-bf16-mk-nk-store bf16-mk-kn-store bf16-mk-nk-visitor}
fam_args=$(for f in $FAMILIES; do printf -- '--family %s ' "$f"; done)

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-gpu-tune}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE="${EVTC_BUILD_TYPE:-Release}" >/dev/null
  cmake --build "$build" -j2 --target evtc test_gpu_gemm_tune >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/cache"
  cp "$build/tests/test_gpu_gemm_tune" "$stage/"
  # `evtc tune` alone (the whole evtc binary would bring CBC and OpenBLAS: 55 MB of libraries)
  printf '%s\n' '#include <string.h>' 'int evtc_cmd_tune(int argc, char **argv);' \
    'int main(int argc, char **argv) { return argc < 2 || strcmp(argv[1], "tune") ? 2 : evtc_cmd_tune(argc - 2, argv + 2); }' \
    >"$stage/main.c"
  cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc -Itools "$stage/main.c" tools/cmd_tune.c tools/cli_args.c \
    "$build/libevtc.a" -lm -ldl -lpthread -o "$stage/evtc"
  rm "$stage/main.c"
  for b in "$stage/evtc" "$stage/test_gpu_gemm_tune"; do
    strip "$b"
    ldd "$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  export XDG_CACHE_HOME="$PWD/$stage/cache"
  rc=0
  "$stage/test_gpu_gemm_tune" >/dev/null || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "test_gpu_gemm_tune failed here ($rc)" >&2; exit 1; }
  # shellcheck disable=SC2086
  "$stage/evtc" tune --compile-only --jobs "${JOBS:-2}" $fam_args
  # shellcheck disable=SC2086
  again=$("$stage/evtc" tune --compile-only --jobs 1 $fam_args)
  echo "$again" | grep -q -v ' 0 kernels compiled' && { echo "cache keys not stable: $again" >&2; exit 1; }
  rm -f "$stage"/cache/evtc/cuda/*.cu "$stage"/cache/evtc/cuda/*.log   # the device reads .cubin only
  tar -C "$stage" -czf "$stage/cache.tar.gz" cache && rm -rf "$stage/cache"
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cache=/tmp/evtc-tune-cache
  rm -rf "$cache" && mkdir -p "$cache" && tar -C "$cache" -xzf "$stage/cache.tar.gz"
  export XDG_CACHE_HOME="$cache/cache"
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    echo "== test_gpu_gemm_tune"
    rc=0
    timeout "${TUNE_TEST_TIMEOUT:-90}" "$stage/test_gpu_gemm_tune" || rc=$?
    echo "== test_gpu_gemm_tune exit code $rc"
    echo "== evtc tune $fam_args"
    rc=0
    # shellcheck disable=SC2086
    timeout "${TUNE_TIMEOUT:-180}" "$stage/evtc" tune $fam_args || rc=$?
    echo "== evtc tune exit code $rc"
    echo "== evtc tune --show (the cache read back: what code generation will use for any size)"
    # shellcheck disable=SC2086
    "$stage/evtc" tune --show $fam_args || true
  } 2>&1 | tee "$out/gpu_tune.log"
  cp "$XDG_CACHE_HOME"/evtc/tune/*.txt "$out/" 2>/dev/null || true
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
