#!/usr/bin/env bash
# libFuzzer campaigns over the tfmc input paths (tests/fuzz/README.md).
#   bash scripts/fuzz.sh                     every target, 10 million executions each
#   RUNS=100000 bash scripts/fuzz.sh fuzz_spec fuzz_artifact
#   SECONDS_PER_TARGET=600 bash scripts/fuzz.sh   a time budget instead of a run count
# Builds ./build-fuzz with clang-19 (-fsanitize=fuzzer,address,undefined). Each target starts
# from its committed seeds (tests/fuzz/corpus/<target>) and grows a working corpus in
# build-fuzz/corpus/<target>; crashes, leaks and timeouts land in build-fuzz/findings/<target>/.
# Commit a minimised finding to tests/fuzz/corpus/<target>/ with its fix: CTest replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10000000}
DIR=build-fuzz
TARGETS=("$@")
# The default set: one target per input path. fuzz_spec_pipeline (slower) runs when named.
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_safetensors fuzz_artifact fuzz_checkpoint fuzz_translate_input fuzz_spec)
if ! command -v clang++-19 > /dev/null; then
  echo "scripts/fuzz.sh: needs clang-19 and libclang-rt-19-dev (bash scripts/bootstrap.sh installs them)" >&2
  exit 2
fi
if [ ! -f "$DIR/build.ninja" ]; then
  # OpenMP calls go to GCC's libgomp, the runtime oneDNN was built against (one OpenMP runtime
  # per process); the header is clang's (libomp-19-dev), whose API libgomp implements.
  gomp=/usr/lib/x86_64-linux-gnu/libgomp.so.1
  ompflags="-fopenmp=libgomp -isystem /usr/lib/llvm-19/lib/clang/19/include"
  CC=clang-19 CXX=clang++-19 cmake -G Ninja -S . -B "$DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFMC_FUZZ=ON \
      -DTFMC_BUILD_BENCH=OFF -DOpenMP_C_FLAGS="$ompflags" -DOpenMP_CXX_FLAGS="$ompflags" \
      -DOpenMP_C_LIB_NAMES=gomp -DOpenMP_CXX_LIB_NAMES=gomp -DOpenMP_gomp_LIBRARY=$gomp > /dev/null
fi
# fuzz_checkpoint's model, compiled by the regular build's tfmc (bash scripts/build.sh).
mkdir -p "$DIR/tests/fuzz"
build/bin/tfmc compile models/tiny.yaml --entries=forward,train_step -o "$DIR/tests/fuzz/tiny_train.tfmx" --quiet
cmake --build "$DIR" -j "${TFMC_BUILD_JOBS:-2}" --target "${TARGETS[@]}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
for t in "${TARGETS[@]}"; do
  mkdir -p "$DIR/corpus/$t" "$DIR/findings/$t"
  budget=(-runs="$RUNS")
  [ -n "${SECONDS_PER_TARGET:-}" ] && budget=(-max_total_time="$SECONDS_PER_TARGET")
  # Seeds are copied in: libFuzzer writes reduced inputs into any corpus directory it is given,
  # and the committed corpus must only change by hand.
  cp -n tests/fuzz/corpus/$t/* "$DIR/corpus/$t/"
  [ "$t" = fuzz_spec ] && cp -n models/*.yaml tests/lit/spec/*.yaml "$DIR/corpus/$t/"
  echo "== $t: ${budget[*]}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  set +e
  "$DIR/fuzz/$t" "${budget[@]}" -max_len=8192 -timeout=20 -rss_limit_mb=6144 -print_final_stats=1 \
      -artifact_prefix="$DIR/findings/$t/" "$DIR/corpus/$t" \
      > "$DIR/findings/$t.log" 2>&1
  rc=$?
  set -e
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+.*DONE" "$DIR/findings/$t.log" | tail -3
  echo "   exit $rc after $(( $(date +%s) - start )) s; findings: $(ls "$DIR/findings/$t" | wc -l); log $DIR/findings/$t.log"
done
