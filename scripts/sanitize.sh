#!/usr/bin/env bash
# The tests of the layers that parse user files or hold raw arrays (util, coco, data: the file formats and
# generators; go: the board and the search tree) under AddressSanitizer and UndefinedBehaviorSanitizer, in
# build-sanitize/. CI runs it after the main test suite (scripts/test.sh). The harness layer (the result log, the run
# lifecycle) left it for CI's time budget: 150 s of the stage's CPU, for code of standard containers and strings.
# -O0: half the compile time of -O1.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DTRAINBENCH_TORCH_FREE_ONLY=ON \
  -DCMAKE_CXX_FLAGS="-O0 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-sanitize -j"$(nproc)"
# Left to the main build, for code that smaller tests run under the sanitizers too: GPT-3's sample indices held
# to the reference's Python (the mini-scale one over 16.7M tokens, helpers.cpp's float ceil: 17 s here; two seeds
# and both sample lengths, 11 s; the blending indices, 9 s), and MiniGo's 300 resignation games of 100 readouts
# (2 s in the main build, 31 s here).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" \
  -E 'GptSamples.(MiniScaleIndexEquals|IndexAndSamplesEqual|BlendingIndicesEqual)TheReference|GoMcts.SelfPlayResigns'
echo "sanitize.sh: $(( $(date +%s) - start )) s"
