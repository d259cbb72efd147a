#!/usr/bin/env bash
# Configures (once) and builds tfmc into ./build (Ninja, Release, ccache). Pass extra CMake
# arguments through, e.g. `scripts/build.sh -DTFMC_BUILD_BENCH=OFF`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TFMC_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
fi
# Two jobs: MLIR translation units take up to ~1 GB each and the machines have 2 cores.
cmake --build "$BUILD_DIR" -j "${TFMC_BUILD_JOBS:-2}"
