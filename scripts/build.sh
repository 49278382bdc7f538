#!/usr/bin/env bash
# Configures and builds trainbench (Release, Ninja, ccache when present) into build/.
# Pass -DTRAINBENCH_BUILD_TESTS=OFF etc. as extra arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
