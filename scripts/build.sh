#!/usr/bin/env bash
# Configures and builds trainbench (Release, Ninja, ccache when present) into build/: everything, tests
# included, or only the targets named with --target (e.g. `scripts/build.sh --target trainbench`).
# Other arguments go to CMake's configure step (e.g. -DTRAINBENCH_BUILD_TESTS=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
configure_args=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure_args+=("$1"); shift ;;
  esac
done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${configure_args[@]}" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
