#!/usr/bin/env bash
# README command 2 (and CI): install, build and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/install-deps.sh
scripts/format-check.sh  # the C++ lines changed since .clang-format came in (seconds, so before the build)
scripts/build.sh
echo "test.sh: install and build took $(( $(date +%s) - start )) s"
ctest --test-dir build --output-on-failure -j"$(nproc)"
scripts/sanitize.sh
echo "test.sh: total $(( $(date +%s) - start )) s"
