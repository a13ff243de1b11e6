#!/bin/sh
# ab.sh -- a change measured against its base in one GPU call: the GPU tests
# of the change, then whole-model steps, gpu_bench workloads and graph files
# timed with both builds alternately, a table of both last.  For kernel
# work, where device time is scarce: one call says whether the change is
# right and whether it is faster, on one machine.
#
#   bench/ab.sh prepare BASE   on the build machine: the working tree as B
#                              (bench/gpu_tests.sh prepare into .gpu-ab/b:
#                              evtc, every GPU test, the libraries, the
#                              pre-compiled kernels) and revision BASE as A (a
#                              git worktree in .gpu-ab/src-a, Release build:
#                              evtc alone), gpu_bench for both (B's bench
#                              program on each library, where A's headers
#                              still build it); about 40 MB
#   bench/ab.sh run [--no-tests] [--models M,...] [--rounds N] [--steps N]
#                   [--bench FILTER,...] [--graph FILE[:train],...] [--graph-runs N] [--graph-args 'ARGS'] [--attn]
#                   [--evt GRAPH,...] [--evt-runs N] [--stamps FILE.evt,...] [--b-env 'VAR=VALUE ...'] [--families M,...]
#                              on the GPU machine, from the repo root: B's GPU
#                              tests (failing checks shown; exit 1 if any),
#                              then for each model (bench/train_models.py,
#                              exported once) N rounds of A's and B's
#                              `evtc train` (default 2 rounds of 10 steps; the
#                              median step each), each gpu_bench workload
#                              matching FILTER with A's and B's gpu_bench
#                              (N rounds), each graph file through A's and B's
#                              `evtc explain --target h200 --profile 5`
#                              (N rounds; ":train" adds --train; the
#                              kernels' measured total; --graph-runs N
#                              profiles N runs instead of 5: 2000 load the
#                              GPU long enough to hit its power cap, as a
#                              training step does; --graph-args: more
#                              explain options for every graph, as
#                              '--loss cross_entropy --labels labels'), with --attn A's and B's
#                              gpu_attention_bench (N rounds: each system,
#                              shape and pass), with --evt A's and B's
#                              gpu_evt_bench on those graphs (N rounds: each
#                              variant's device time over --evt-runs runs,
#                              default 20; 2000 hold the GPU at its power
#                              cap), with --stamps A's and
#                              B's per-tile clock stamps of each graph file's
#                              pingpong GEMM kernel (bench/tile_stamps.sh, N
#                              rounds: main loop (its issue and drain),
#                              epilogue, period, wait until the first
#                              stage a tile,
#                              cycles; needs nvcc), with --families A's and
#                              B's step profile of each model (`explain
#                              --train --profile 3`, A first: B's kernels run
#                              on a warmer GPU, its GEMMs came out 0.5-1 %
#                              slower in such pairs) joined family by family
#                              (bench/ab_families.py: the totals and the
#                              families that moved by 5 us or more; a
#                              change to one kernel shows there when the
#                              step's rounds scatter more than it saves),
#                              and the table: what,
#                              A, B, B / A.  --b-env sets environment
#                              variables for B's runs only: with BASE the
#                              change's own commit, a knob's effect
#                              (EVTC_CUDA_PREFETCH_ALL=1) on one binary.
#
# $PYTHON: the interpreter with torch for the models' export (default python3).
# A and B keep apart kernel caches (XDG_CACHE_HOME): a plan cached by one is
# never the other's, whatever their rules.  Logs go to $OUT (default /tmp).
# In this workplace: add /.gpu-ab/ to .git/info/exclude, then
# run(command="sh bench/ab.sh run --models bert_large --bench bert-ln", carry=[".gpu-ab"]).
set -eu
ab=.gpu-ab

# a bench program from $4 (bench/gpu_bench.c or gpu_attention_bench.c), built with the headers of the tree at $1
# against its Release library in $2, into $3
build_bench() {
  (cd "$1" && cc -O2 -std=gnu11 -fopenmp -Iinclude -Isrc "$4" "$2/libevtc.a" \
     $(pkg-config --libs libprotobuf-c cbc) -lm -ldl -lpthread -o "$3")
  strip "$3"
}

case "${1:-}" in
prepare)
  [ $# -eq 2 ] || { echo "usage: $0 prepare BASE" >&2; exit 2; }
  base=$(git rev-parse --verify "$2^{commit}")
  rm -rf "$ab/a" "$ab/b" && mkdir -p "$ab/a"
  EVTC_STAGE="$ab/b" EVTC_BUILD="${EVTC_BUILD:-build-ab}" sh bench/gpu_tests.sh prepare
  mkdir -p "$ab/b/extra"
  for prog in gpu_bench gpu_attention_bench gpu_evt_bench tile_stamps_run; do
    build_bench . "$PWD/${EVTC_BUILD:-build-ab}" "$PWD/$ab/b/extra/$prog" "bench/$prog.c"
  done
  git worktree remove --force "$ab/src-a" 2>/dev/null || rm -rf "$ab/src-a"
  git worktree add --detach "$ab/src-a" "$base" >/dev/null
  cmake -S "$ab/src-a" -B "$ab/src-a/build" -DEVTC_WERROR=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$ab/src-a/build" -j2 --target evtc_tool evtc >/dev/null
  cp "$ab/src-a/build/evtc" "$ab/a/evtc" && strip "$ab/a/evtc"
  # one instrument: B's bench programs (their workloads) on A's library, where A's headers still build them
  for prog in gpu_bench gpu_attention_bench gpu_evt_bench tile_stamps_run; do
    build_bench "$ab/src-a" "$PWD/$ab/src-a/build" "$PWD/$ab/a/$prog" "$PWD/bench/$prog.c" 2>/dev/null ||
      build_bench "$ab/src-a" "$PWD/$ab/src-a/build" "$PWD/$ab/a/$prog" "bench/$prog.c" ||
      [ "$prog" = tile_stamps_run ]      # a base older than the stamps runs none
  done
  for side in "$ab/a" "$ab/b/extra"; do    # B's bench/tile_stamps.sh on each side's tile_stamps_run
    [ -x "$side/tile_stamps_run" ] || continue
    cat >"$side/tile_stamps" <<'WRAP'
#!/bin/sh
RUN="$(cd "$(dirname "$0")" && pwd)/tile_stamps_run" exec sh bench/tile_stamps.sh "$@"
WRAP
    chmod +x "$side/tile_stamps"
  done
  git -C "$ab/src-a" log --oneline -1 >"$ab/a/COMMIT"
  git log --oneline -1 >"$ab/b/extra/COMMIT"
  (git status --short | grep -q .) && echo "(B has uncommitted changes)" >>"$ab/b/extra/COMMIT"
  git worktree remove --force "$ab/src-a"
  du -sh "$ab"
  ;;
run)
  shift
  tests=1 models="" rounds=2 steps=10 benches="" graphs="" graph_runs=5 graph_args="" attn=0 evt="" evt_runs=20 stamps=""
  b_env=""
  families=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-tests) tests=0; shift; continue ;;
      --attn) attn=1; shift; continue ;;
      --models) models=$2 ;;
      --rounds) rounds=$2 ;;
      --steps) steps=$2 ;;
      --bench) benches=$2 ;;
      --graph) graphs=$2 ;;
      --graph-runs) graph_runs=$2 ;;
      --graph-args) graph_args=$2 ;;
      --evt) evt=$2 ;;
      --evt-runs) evt_runs=$2 ;;
      --stamps) stamps=$2 ;;
      --b-env) b_env=$2 ;;
      --families) families=$2 ;;
      *) echo "ab.sh run: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
  done
  out=${OUT:-/tmp}
  table="$out/ab.table"
  : >"$table"
  echo "== A: $(cat "$ab/a/COMMIT")"
  failed=0
  if [ "$tests" = 1 ]; then
    EVTC_STAGE="$ab/b" GPU_TEST_LIMIT="${GPU_TEST_LIMIT:-200}" sh bench/gpu_tests.sh run || failed=1
  else
    tar -xzf "$ab/b/stage.tgz" -C "$ab/b"
  fi
  echo "== B: $(cat "$ab/b/extra/COMMIT")${b_env:+ with $b_env}"
  export LD_LIBRARY_PATH="$PWD/$ab/b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" EVTC_DATA_DIR="${EVTC_DATA_DIR:-$PWD/data}"
  rm -rf "$out/cache-a" "$out/cache-b" && mkdir -p "$out/cache-a" && cp -r "$ab/b/cache" "$out/cache-b"   # B's tests' kernels
  # B's extra environment (--b-env), split into words for env(1)
  side_env() { [ "$1" = b ] && [ -n "$b_env" ] && echo "$b_env" || true; }
  # bin, cache of side a or b
  bin() { [ "$1" = a ] && echo "$ab/a" || echo "$ab/b/bin"; }
  row() { printf '%-52s %12s %12s %8s\n' "$1" "$2" "$3" \
            "$(awk -v a="$2" -v b="$3" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", b / a; else print "-" }')" >>"$table"; }
  median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
  for m in $(echo "$models" | tr , ' '); do
    "${PYTHON:-python3}" bench/train_models.py "$out/models" --models "$m" --scale full >"$out/$m.export.log" 2>&1 ||
      { echo "== $m: export failed: $(tail -1 "$out/$m.export.log")"; continue; }
    rm -f "$out/$m.a.steps" "$out/$m.b.steps"
    for r in $(seq "$rounds"); do
      for s in a b; do
        # bench/train.sh's training options (SGD, lr 0.02, cross-entropy on the exported labels)
        env $(side_env "$s") XDG_CACHE_HOME="$out/cache-$s" timeout 300 "$(bin $s)/evtc" train "$out/models/$m.onnx" --data "$out/models/$m" \
          --epochs "$steps" --optimizer sgd --lr 0.02 --loss cross_entropy --labels labels --backend cuda \
          >"$out/$m.$s.$r.out" 2>&1 || true
        ms=$(sed -n 's/^steady step: \([0-9.]*\) ms.*/\1/p' "$out/$m.$s.$r.out")
        echo "== $m $s round $r: ${ms:-failed} ms a step, losses $(sed -n 's/^epoch .* loss \([0-9.]*\) .*/\1/p' "$out/$m.$s.$r.out" | tr '\n' ' ')"
        touch "$out/$m.$s.steps" && [ -z "$ms" ] || echo "$ms" >>"$out/$m.$s.steps"
      done
    done
    row "$m: ms a step (median of $rounds runs)" "$(median <"$out/$m.a.steps")" "$(median <"$out/$m.b.steps")"
  done
  # paired PROG TAG LABEL UNIT FILTER PICK ARGS...: N rounds of A's and B's bench program PROG ($ab/a/PROG,
  # $ab/b/extra/PROG) with ARGS; awk program PICK turns each output line matching FILTER into "NAME VALUE"; a row
  # "LABEL NAME: UNIT" per NAME
  paired() {
    prog=$1 tag=$2 label=$3 unit=$4 filter=$5 pick=$6
    shift 6
    rm -f "$out/$tag".*.a "$out/$tag".*.b
    for r in $(seq "$rounds"); do
      for s in a b; do
        [ "$s" = a ] && bp="$ab/a/$prog" || bp="$ab/b/extra/$prog"
        [ -x "$bp" ] || continue
        env $(side_env "$s") XDG_CACHE_HOME="$out/cache-$s" timeout 300 "$bp" "$@" 2>&1 | tee "$out/$tag.$s.$r.log" |
          grep "$filter" | awk "$pick" | while read -r name value; do echo "$value" >>"$out/$tag.$name.$s"; done || true
      done
    done
    found=0
    for f in "$out/$tag".*.b; do
      [ -f "$f" ] || continue
      name=$(basename "$f") && name=${name#"$tag".} && name=${name%.b}
      row "$label $name: $unit" "$(median <"$out/$tag.$name.a" 2>/dev/null || echo -)" "$(median <"$f")"
      found=1
    done
    [ "$found" = 1 ] || row "$label $*: no results (see $tag.*.log)" - -
    rm -f "$out/$tag".*.a "$out/$tag".*.b     # names with '+': they would not come back from $OUT
  }
  for w in $(echo "$benches" | tr , ' '); do
    paired gpu_bench "gpu_bench.$w" gpu_bench ms '^RESULT' '$0 !~ / copy/ { print $2, $4 }' "$w"
  done
  us() { v=$(sed -n 's/.*measured \([0-9.]*\) us kernel by kernel.*/\1/p' "$1"); echo "${v:--}"; }
  for gspec in $(echo "$graphs" | tr , ' '); do
    g=${gspec%:train} train=""
    [ "$g" != "$gspec" ] && train=--train
    rm -f "$out/graph.a" "$out/graph.b"
    for r in $(seq "$rounds"); do
      for s in a b; do
        # shellcheck disable=SC2086  # $graph_args: words
        env $(side_env "$s") XDG_CACHE_HOME="$out/cache-$s" timeout 120 "$(bin $s)/evtc" explain "$g" $train --target h200 \
          --profile "$graph_runs" $graph_args >"$out/$(basename "$g").$s.txt" 2>&1 || true
        us "$out/$(basename "$g").$s.txt" >>"$out/graph.$s"
      done
    done
    row "$(basename "$g")${train:+ (train)}: us of kernels, $graph_runs runs" "$(median <"$out/graph.a")" \
      "$(median <"$out/graph.b")"
  done
  for m in $(echo "$families" | tr , ' '); do   # A's and B's step profile, family by family (bench/ab_families.py)
    [ -f "$out/models/$m.onnx" ] ||
      "${PYTHON:-python3}" bench/train_models.py "$out/models" --models "$m" --scale full >"$out/$m.export.log" 2>&1 ||
      { echo "== $m: export failed: $(tail -1 "$out/$m.export.log")"; continue; }
    for s in a b; do
      env $(side_env "$s") XDG_CACHE_HOME="$out/cache-$s" timeout 300 "$(bin $s)/evtc" explain "$out/models/$m.onnx" \
        --train --target h200 --profile 3 --loss cross_entropy --labels labels >"$out/$m.$s.families.txt" 2>&1 || true
    done
    "${PYTHON:-python3}" bench/ab_families.py "$out/$m.a.families.txt" "$out/$m.b.families.txt" |
      while IFS="$(printf '\t')" read -r what a b; do row "$m step profile: $what, us" "$a" "$b"; done
  done
  [ "$attn" = 1 ] && paired gpu_attention_bench attn attention ms '^RESULT' '{ print $2 "_" $3 "_" $4, $5 }'
  # shellcheck disable=SC2046
  [ -n "$evt" ] && paired gpu_evt_bench evt gpu_evt_bench "dev ms" '^RESULT evt' '{ print $3, $4 }' --runs "$evt_runs" \
    $(echo "$evt" | tr , ' ')
  # shellcheck disable=SC2046
  [ -n "$stamps" ] && paired tile_stamps stamps "tile stamps" cycles '^MEAN ' \
    '{ print $2 "_main", $8; print $2 "_epilogue", $10; print $2 "_period", $12; print $2 "_issue", $14; print $2 "_drain", $16; print $2 "_first", $18 }' \
    $(echo "$stamps" | tr , ' ')
  echo "== A / B table (B / A < 1: B is faster)"
  printf '%-52s %12s %12s %8s\n' "what" "A" "B" "B / A"
  cat "$table"
  exit "$failed"
  ;;
*)
  echo "usage: $0 prepare BASE | run [--no-tests] [--models M,...] [--rounds N] [--steps N] [--bench F,...] [--graph FILE[:train],...] [--graph-runs N] [--graph-args 'ARGS'] [--attn] [--evt GRAPH,...] [--evt-runs N] [--stamps FILE.evt,...] [--b-env 'VAR=VALUE ...'] [--families M,...]" >&2
  exit 2
  ;;
esac
