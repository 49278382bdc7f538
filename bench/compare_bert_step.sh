#!/usr/bin/env bash
# Same-sitting speed comparison of one BERT training step: trainbench (C++/LibTorch) against Debian's
# python3-torch running the same model, batch, optimizer and thread count. Runs are interleaved
# (C++, Python, C++, Python, ...) so drifting machine load hits both sides alike; prints every run and the
# median of each side and their ratio. The peer runs twice per round: as Debian ships it, and with glibc
# malloc set the way trainbench sets it for itself (util/allocator.h), so the gain from that setting and
# the rest of the difference can be told apart.
#
#   bench/compare_bert_step.sh [ROUNDS] [-- extra settings, e.g. --set batch_size=128]
# Defaults: 3 rounds of the mini preset, THREADS=2 threads, STEPS=30 timed steps after 3 warm-up steps.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
[ "${1:-}" = "--" ] && shift
settings=("$@")
threads=${THREADS:-2}
steps=${STEPS:-30}
common=(--preset mini --threads "$threads" --steps "$steps" --warmup 3 "${settings[@]}")

peer() { /usr/bin/python3 bench/peers/bert_train_step.py "${common[@]}" | awk '{for (i=1;i<=NF;i++) if ($i=="training") print $(i+1)}'; }
cpp=() py=() pytuned=()
for round in $(seq "$rounds"); do
  c=$(build/bin/trainbench bench bert --device cpu "${common[@]}" | awk '/^training/ {print $2}')
  p=$(peer)
  t=$(GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824 peer)
  echo "round $round: trainbench $c seq/s, python3-torch $p seq/s, python3-torch with trainbench's malloc setting $t seq/s"
  cpp+=("$c") py+=("$p") pytuned+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cpp[@]}") mp=$(median "${py[@]}") mt=$(median "${pytuned[@]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
echo "median: trainbench $mc seq/s, python3-torch $mp seq/s (ratio $(ratio "$mc" "$mp")), python3-torch with trainbench's malloc setting $mt seq/s (ratio $(ratio "$mc" "$mt"))"
