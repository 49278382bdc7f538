#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan and UBSan) in build-fuzz/ and runs TARGET, or every
# target, for SECONDS each:  scripts/fuzz.sh submission 120   |   scripts/fuzz.sh all 600
# New inputs go to build-fuzz/corpus/<target>/ (fuzz/corpus/<target>/ is read as seeds); a crash, a leak or a
# sanitizer report stops the target with its input in build-fuzz/artifacts/<target>/. Copy such an input into
# fuzz/corpus/<target>/ with the fix: the unit tests replay that folder (tests/*/fuzz_corpus_test.cpp).
# A target whose seeds are generated (fuzz/<target>_seeds.py, run with Debian's python3-torch into
# build-fuzz/seeds/<target>/) needs no kept folder. Debian: apt-get install clang libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ne 2 || ! $2 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh TARGET|all SECONDS (targets: $(ls fuzz/corpus | tr '\n' ' '))" >&2
  exit 2
fi
target=$1 seconds=$2
all_targets=$( (ls fuzz/corpus; cd fuzz && ls -- *_seeds.py | sed 's/_seeds\.py$//') | sort -u)
if [[ $target == all ]]; then
  targets=$all_targets
elif [[ -d fuzz/corpus/$target || -f fuzz/${target}_seeds.py ]]; then
  targets=$target
else
  echo "fuzz.sh: no target '$target' (expected one of: $(echo $all_targets) or all)" >&2
  exit 2
fi
cmake -S fuzz -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target $(for t in $targets; do echo "${t}_fuzzer"; done)
for t in $targets; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
  seeds=()
  [[ -d fuzz/corpus/$t ]] && seeds+=("fuzz/corpus/$t")
  if [[ -f fuzz/${t}_seeds.py ]]; then
    /usr/bin/python3 "fuzz/${t}_seeds.py" "build-fuzz/seeds/$t"
    seeds+=("build-fuzz/seeds/$t")
  fi
  dict=()
  [[ -f fuzz/$t.dict ]] && dict=(-dict="fuzz/$t.dict")
  echo "fuzz.sh: $t for $seconds s"
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that needs 2 GB is a runaway allocation.
  "build-fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="build-fuzz/artifacts/$t/" -print_final_stats=1 "${dict[@]}" \
    "build-fuzz/corpus/$t" "${seeds[@]}"
done
