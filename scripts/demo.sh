#!/usr/bin/env bash
# From a fresh machine: install what is missing, build, and run the main job on the embedded
# default model (compile the small spec, initialise weights from a seed, forward pass + loss over
# a built-in padded sample batch, tokens/s).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/build.sh
exec build/bin/tfmc demo "$@"
