#!/bin/sh
# gpu_tests.sh -- every GPU test (CTest label `gpu`) on a GPU machine that cannot build evtc: builds here, runs there.
#
#   bench/gpu_tests.sh prepare   on the build machine: a Release build in $EVTC_BUILD (default
#                                build-gpu-tests); the evtc binary, every test_gpu_* and test_cuda_*
#                                program and the shared libraries they need (beside libc), with the
#                                kernels the programs compile without a GPU already in the CUBIN
#                                cache (same NVRTC and source on the GPU machine: same key), packed
#                                into .gpu-tests/stage.tgz (about 35 MB; another stage folder:
#                                $EVTC_STAGE)
#   bench/gpu_tests.sh run       on the GPU machine, from the repo root: each program as CTest runs
#                                it (SOURCE_DIR EVTC_BINARY), and tests/test_gpu_*.py with python3,
#                                each under a time limit ($GPU_TEST_LIMIT s, default 300); its
#                                failures and last line as it ends, then a table: test, exit code
#                                (0 passed, 77 skipped, 124 out of time), seconds, last line.  Logs
#                                in $OUT (default /tmp).  Exits 1 when a test failed or ran out of time.
#                                $GPU_TEST_ONLY (names, space-separated, e.g. "test_gpu_evt
#                                test_gpu_kernels"): those tests alone, for a change that touches only them.
#
# In this workplace: run(command="sh bench/gpu_tests.sh run", carry=[".gpu-tests/stage.tgz"]).
set -eu
stage=${EVTC_STAGE:-.gpu-tests}

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-gpu-tests}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j2 >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/cache"
  cp "$build/evtc" "$stage/bin/"
  for t in "$build"/tests/test_gpu_* "$build"/tests/test_cuda_*; do
    [ -x "$t" ] && cp "$t" "$stage/bin/"
  done
  for b in "$stage"/bin/*; do
    strip "$b"
    ldd "$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  for t in "$stage"/bin/test_*; do     # without a GPU they compile what they can through NVRTC, then skip (77)
    rc=0
    XDG_CACHE_HOME="$PWD/$stage/cache" "$t" . "$stage/bin/evtc" >/dev/null 2>&1 || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "$(basename "$t") failed here ($rc)" >&2; exit 1; }
  done
  git log --oneline -1 >"$stage/bin/COMMIT"
  tar -czf "$stage/stage.tgz" -C "$stage" bin lib cache && rm -rf "${stage:?}/bin" "${stage:?}/lib" "${stage:?}/cache"
  du -sh "$stage/stage.tgz"
  ;;
run)
  out=${OUT:-/tmp}
  limit=${GPU_TEST_LIMIT:-300}
  tar -xzf "$stage/stage.tgz" -C "$stage"
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME="$PWD/$stage/cache" EVTC_DATA_DIR="${EVTC_DATA_DIR:-$PWD/data}"
  evtc="$PWD/$stage/bin/evtc"
  table="$out/gpu_tests.table"
  : >"$table"
  failed=0
  # one test: its command after the name; a row of the table
  one() {
    name=$1
    shift
    t0=$(date +%s)
    rc=0
    timeout "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
    last=$(tail -1 "$out/$name.log")
    echo "== $name: exit $rc in $(($(date +%s) - t0)) s: $last"
    grep -E "check failed|FAILED|: got .*, want " "$out/$name.log" | head -10 || true     # tests/check.h, evtc_testlib.py
    printf '%-24s %5s %6s  %s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$last" >>"$table"
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || failed=1
  }
  echo "== $(cat "$stage/bin/COMMIT"); $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
  # whether test $1 runs ($GPU_TEST_ONLY unset: every one)
  wanted() { [ -z "${GPU_TEST_ONLY:-}" ] || case " $GPU_TEST_ONLY " in *" $1 "*) true ;; *) false ;; esac; }
  for t in "$stage"/bin/test_*; do
    wanted "$(basename "$t")" && one "$(basename "$t")" "$t" . "$evtc"
  done
  for p in tests/test_gpu_*.py tests/test_cuda_*.py; do
    [ -f "$p" ] && wanted "$(basename "$p" .py)" && one "$(basename "$p" .py)" python3 "$p" . "$evtc"
  done
  echo "== table (exit 0 passed, 77 skipped, 124 out of time; seconds; last line)"
  cat "$table"
  exit "$failed"
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
