#!/usr/bin/env bash
# The whole test suite from a fresh machine: install what is missing, build, run every test
# (GoogleTest suites and the lit/FileCheck suite) through CTest.
#   bash scripts/test.sh              the Release build in ./build (what CI runs)
#   bash scripts/test.sh --sanitize   the same suite built with ASan + UBSan in ./build-asan
#                                     (any memory error, leak or undefined behaviour fails it)
#   bash scripts/test.sh --tsan       the runtime built with ThreadSanitizer in ./build-tsan and
#                                     its test of sessions on several threads (tests/tsan/), on
#                                     artifacts compiled by ./build's tfmc (built first if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZE=0
TSAN=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) SANITIZE=1 ;;
    --tsan) TSAN=1 ;;
    *) echo "usage: scripts/test.sh [--sanitize | --tsan]" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh
if [ "$TSAN" = 1 ]; then
  [ -x build/bin/tfmc ] || bash scripts/build.sh
  TSAN_DIR=${TFMC_BUILD_DIR:-build-tsan}
  if [ ! -f "$TSAN_DIR/build.ninja" ]; then
    cmake -G Ninja -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFMC_TSAN=ON -DTFMC_BUILD_COMPILER=OFF \
      -DTFMC_BUILD_TESTS=OFF -DTFMC_BUILD_BENCH=OFF
  fi
  cmake --build "$TSAN_DIR" -j "${TFMC_BUILD_JOBS:-2}" --target concurrent_sessions_tsan_test
  mkdir -p "$TSAN_DIR/artifacts"
  for variant in fused:--fusion=all unfused:--fusion=none bf16:--precision=bf16 int8:--precision=int8; do
    build/bin/tfmc compile models/tiny-prenorm.yaml --entries=forward,translate "${variant#*:}" \
      -o "$TSAN_DIR/artifacts/${variant%%:*}.tfmx" > /dev/null
  done
  build/bin/tfmc compile models/tiny-prenorm.yaml --entries=forward,train_step -o "$TSAN_DIR/artifacts/train.tfmx" > /dev/null
  # One OpenMP thread per session: TSan does not see libgomp's barriers (teams would be reported).
  OMP_NUM_THREADS=1 TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 exitcode=66}" \
    TFMC_TSAN_ARTIFACTS="$TSAN_DIR/artifacts" "$TSAN_DIR/tests/tsan/concurrent_sessions_tsan_test"
  exit 0
fi
if [ "$SANITIZE" = 1 ]; then
  export TFMC_BUILD_DIR=${TFMC_BUILD_DIR:-build-asan}
  CONFIGURE=(-DTFMC_SANITIZE=ON -DTFMC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  # oneDNN's JIT and OpenMP's runtime are not instrumented; their allocations are still
  # tracked. Reports go to stderr and fail the test that produced them.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=86}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0}
  if [ -f "$TFMC_BUILD_DIR/build.ninja" ]; then bash scripts/build.sh; else bash scripts/build.sh "${CONFIGURE[@]}"; fi
else
  bash scripts/build.sh
fi
BUILD_DIR=${TFMC_BUILD_DIR:-build}
# The runtime library must not depend on LLVM/MLIR (checked here as well as in CTest).
if ldd "$BUILD_DIR"/runtime/libtfmrt.so | grep -Ei 'llvm|mlir'; then
  echo "error: libtfmrt.so links LLVM/MLIR" >&2
  exit 1
fi
# CTest runs two suites at once; spinning OpenMP waiters would starve each other on 2 cores.
export OMP_WAIT_POLICY=PASSIVE
TIMEOUT=900
[ "$SANITIZE" = 1 ] && TIMEOUT=3600
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 --timeout "$TIMEOUT"
