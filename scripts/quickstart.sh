#!/usr/bin/env bash
# README command 1: install, build the trainbench binary (only what it runs), generate the mini image
# dataset and run the image-classification benchmark on its mini preset. Extra arguments go to
# `trainbench run` (e.g. --runs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh --target trainbench
exec build/bin/trainbench run resnet --preset mini "$@"
