#!/usr/bin/env bash
# The whole test suite from a fresh machine: install what is missing, build, run every test
# (GoogleTest suites and the lit/FileCheck suite) through CTest.
#   bash scripts/test.sh              the Release build in ./build (what CI runs)
#   bash scripts/test.sh --sanitize   the same suite built with ASan + UBSan in ./build-asan
#                                     (any memory error, leak or undefined behaviour fails it)
set -euo pipefail
cd "$(dirname "$0")/.."
SANITIZE=0
for arg in "$@"; do
  case "$arg" in
    --sanitize) SANITIZE=1 ;;
    *) echo "usage: scripts/test.sh [--sanitize]" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh
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
