#!/usr/bin/env bash
# The whole test suite from a fresh machine: install what is missing, build, run every test
# (GoogleTest suites and the lit/FileCheck suite) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
BUILD_DIR=${TFMC_BUILD_DIR:-build}
# The runtime library must not depend on LLVM/MLIR (checked here as well as in CTest).
if ldd "$BUILD_DIR"/runtime/libtfmrt.so | grep -Ei 'llvm|mlir'; then
  echo "error: libtfmrt.so links LLVM/MLIR" >&2
  exit 1
fi
# CTest runs two suites at once; spinning OpenMP waiters would starve each other on 2 cores.
export OMP_WAIT_POLICY=PASSIVE
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 --timeout 900
