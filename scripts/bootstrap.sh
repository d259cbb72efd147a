#!/usr/bin/env bash
# Installs every Debian package tfmc needs to build, test and benchmark.
# Idempotent: packages already present are skipped by apt. Run as root (or with sudo).
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build ccache lld git pkg-config python3
  # compiler side: MLIR/LLVM 19 (pinned: APIs differ between majors)
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  # runtime kernels
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN's CMake config requires the OpenCL headers
  # spec parsing
  libyaml-cpp-dev
  # command-line parsing of the tools (header-only)
  libcli11-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # tokenizer and corpus reading (tfmc tokenizer, tfmc train --data)
  libsentencepiece-dev sentencepiece zlib1g-dev
  # reference scripts / peer benchmarks only (never a runtime dependency)
  python3-torch python3-numpy python3-yaml libopenblas0-openmp
  # learning curves of the Multi30k recipe (scripts/plot_metrics.py)
  python3-matplotlib
  # fuzzing campaigns (scripts/fuzz.sh; CI only replays the corpus with the regular build)
  clang-19 libclang-rt-19-dev libomp-19-dev
  # data-parallel training (mpirun -np N tfmc train; tfmc loads libmpi at run time, so it still
  # builds and runs single-process without these)
  openmpi-bin libopenmpi-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
