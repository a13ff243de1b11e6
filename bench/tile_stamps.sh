#!/bin/sh
# tile_stamps.sh GRAPH.evt ...: per-tile clock stamps of a pingpong GEMM kernel (a measuring tool), on the GPU
# machine: tile_stamps_run ($RUN) compiles the graph's kernel through NVRTC into a fresh cache, tile_stamps.py
# instruments that source, nvcc builds it under the same cache name, and a second run reads the stamps back.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
RUN=${RUN:-$here/tile_stamps_run}   # cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc bench/tile_stamps_run.c BUILD/libevtc.a $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread
cache=$(mktemp -d)
export XDG_CACHE_HOME="$cache"
for g in "$@"; do
  rm -rf "$cache/evtc"
  "$RUN" "$g" >/dev/null
  cu=$(grep -l setmaxnreg "$cache"/evtc/cuda/*.cu | head -1)
  python3 "$here/tile_stamps.py" instrument "$cu" "$cache/ts.cu"
  # NVRTC's source declares the fixed-width types itself; nvcc takes them from stdint.h
  sed -E -e '/^typedef [a-z ]+ u?int(8|16|32|64)_t;$/d' -e '1a #include <stdint.h>' "$cache/ts.cu" >"$cache/ts2.cu"
  nvcc -std=c++17 -lineinfo -arch=sm_90a -cubin -w -o "${cu%.cu}.cubin" "$cache/ts2.cu"
  "$RUN" "$g" >"$cache/values.txt"
  echo "== $g (cycles; start: since CTA 0's setup barrier)"
  python3 "$here/tile_stamps.py" decode "$cache/values.txt" | sed "s|^MEAN |MEAN $(basename "$g" .evt) |"
done
