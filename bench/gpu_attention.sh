#!/bin/sh
# gpu_attention.sh -- evtc's flash-attention template on a GPU: builds here, runs there.
#
#   bench/gpu_attention.sh prepare   on the build machine: a build (in $EVTC_BUILD,
#                                    default build-gpu-attn; type $EVTC_BUILD_TYPE, default
#                                    Release), stages test_gpu_attention, gpu_attention_bench,
#                                    gpu_attention_torch.py (with torch_timing.py) and the
#                                    shared libraries they need (beside libc) in .gpu-attn/,
#                                    and compiles every kernel of
#                                    the test and the bench through NVRTC into .gpu-attn/cache
#                                    (same NVRTC and source on the GPU machine: same cache key)
#   bench/gpu_attention.sh run       on the GPU machine, from the repo root: the correctness
#                                    test (float64 interpreter reference), then evtc's bench (mma.sync
#                                    in blocks of 4 warps, wgmma in blocks of 1 and of 2 warpgroups)
#                                    and PyTorch's fused attention (scaled_dot_product_attention:
#                                    FlashAttention-2, and cuDNN's, which torch.compile's models run)
#                                    on BERT-Large and GPT-2 shapes;
#                                    the table (TFLOP/s, ratios) last.
#
# In this workplace: add /.gpu-attn/ to .git/info/exclude and
# run(command="sh bench/gpu_attention.sh run", carry=[".gpu-attn"]).
set -eu
stage=${EVTC_STAGE:-.gpu-attn}

case "${1:-}" in
prepare)
  build=${EVTC_BUILD:-build-gpu-attn}
  cmake -S . -B "$build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE="${EVTC_BUILD_TYPE:-Release}" >/dev/null
  cmake --build "$build" -j2 --target test_gpu_attention >/dev/null
  rm -rf "$stage" && mkdir -p "$stage/lib" "$stage/cache"
  cp "$build/tests/test_gpu_attention" bench/gpu_attention_torch.py bench/torch_timing.py "$stage/"
  cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/gpu_attention_bench.c "$build/libevtc.a" \
    $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o "$stage/gpu_attention_bench"
  for b in "$stage"/test_gpu_attention "$stage"/gpu_attention_bench; do
    strip "$b"
    ldd "$b" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  done
  rc=0
  XDG_CACHE_HOME="$PWD/$stage/cache" "$stage/test_gpu_attention" >/dev/null || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || { echo "test_gpu_attention failed here ($rc)" >&2; exit 1; }
  XDG_CACHE_HOME="$PWD/$stage/cache" "$stage/gpu_attention_bench" --compile-only
  du -sh "$stage"
  ;;
run)
  out=${OUT:-/tmp}
  export LD_LIBRARY_PATH="$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export XDG_CACHE_HOME="$PWD/$stage/cache"
  results="$out/gpu_attention_results.txt"
  : >"$results"
  {
    echo "== $(date -u +%Y-%m-%dT%H:%MZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    echo "== test_gpu_attention"
    rc=0
    timeout "${ATTN_TEST_TIMEOUT:-90}" "$stage/test_gpu_attention" || rc=$?
    echo "== test_gpu_attention exit code $rc"
    echo "== gpu_attention_bench"
    rc=0
    timeout "${ATTN_BENCH_TIMEOUT:-60}" "$stage/gpu_attention_bench" | tee -a "$results" || rc=$?
    echo "== gpu_attention_bench exit code $rc"
    echo "== gpu_attention_torch.py"
    rc=0
    timeout "${ATTN_TORCH_TIMEOUT:-90}" python3 "$stage/gpu_attention_torch.py" | tee -a "$results" || rc=$?
    echo "== gpu_attention_torch.py exit code $rc"
    echo "== table (evtc: mma.sync 4 warps, wgmma 1 and 2 warpgroups; TFLOP/s of the fastest; torch: FlashAttention-2, cudnn: cuDNN's; ratios: their ms / evtc's fastest, > 1: evtc faster)"
    awk '$1 == "RESULT" { key = $3 " " $4; ms[$2, key] = $5; tf[$2, key] = $6; if (!(key in seen)) { seen[key] = 1; order[n++] = key } }
      function show(x) { return x == "" ? "-" : x }
      END {
        printf "%-11s %-8s %9s %9s %9s %8s %9s %6s %9s %6s\n", "shape", "pass", "w4 ms", "wg1 ms", "wg2 ms", "TFLOP/s", "torch ms", "ratio", "cudnn ms", "ratio"
        for (i = 0; i < n; i++) {
          k = order[i]; split(k, p, " ")
          best = ""; bt = ""
          for (j = 0; j < 3; j++) {
            s = j == 0 ? "evtc-w4" : j == 1 ? "evtc-wg1" : "evtc-wg2"; v[j] = ms[s, k]
            if (v[j] != "" && (best == "" || v[j] + 0 < best + 0)) { best = v[j]; bt = tf[s, k] }
          }
          tk = k; sub(/fwd\+bwd1$/, "fwd+bwd", tk); t = ms["torch", tk]; c = ms["torch-cudnn", tk]     # fwd+bwd1: the backward of evtc in one pass
          printf "%-11s %-8s %9s %9s %9s %8s %9s %6s %9s %6s\n", p[1], p[2], show(v[0]), show(v[1]), show(v[2]), show(bt), show(t),
            (best != "" && t != "" && best > 0) ? sprintf("%.2f", t / best) : "-", show(c),
            (best != "" && c != "" && best > 0) ? sprintf("%.2f", c / best) : "-"
        }
      }' "$results"
  } 2>&1 | tee "$out/gpu_attention.log"
  ;;
*)
  echo "usage: $0 prepare|run" >&2
  exit 2
  ;;
esac
