#!/usr/bin/env bash
# Same-sitting speed comparison of one ResNet training step: trainbench (C++/LibTorch) against Debian's
# python3-torch running the same model, batch, optimizer and thread count. Runs are interleaved
# (C++, Python, C++, Python, ...) so drifting machine load hits both sides alike; prints every run and the
# median of each side and their ratio. The peer runs twice per round: as Debian ships it, and with glibc
# malloc set the way trainbench sets it for itself (util/allocator.h), so the gain from that setting and
# the rest of the difference can be told apart.
#
#   bench/compare_resnet_step.sh [ROUNDS] [-- extra settings, e.g. --set batch_size=32 --set image_size=224]
# Defaults: 3 rounds of ResNet-50 (preset reference) at 224 px, batch 32, 2 threads, 5 timed steps.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
[ "${1:-}" = "--" ] && shift
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(--set batch_size=32 --set image_size=224)
threads=${THREADS:-2}
common=(--preset reference --threads "$threads" --steps 5 --warmup 2 "${settings[@]}")

peer() { /usr/bin/python3 bench/peers/resnet_train_step.py "${common[@]}" | awk '{for (i=1;i<=NF;i++) if ($i=="training") print $(i+1)}'; }
cpp=() py=() pytuned=()
for round in $(seq "$rounds"); do
  c=$(build/bin/trainbench bench resnet --device cpu "${common[@]}" | awk '/^training/ {print $2}')
  p=$(peer)
  t=$(GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824 peer)
  echo "round $round: trainbench $c img/s, python3-torch $p img/s, python3-torch with trainbench's malloc setting $t img/s"
  cpp+=("$c") py+=("$p") pytuned+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cpp[@]}") mp=$(median "${py[@]}") mt=$(median "${pytuned[@]}")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
echo "median: trainbench $mc img/s, python3-torch $mp img/s (ratio $(ratio "$mc" "$mp")), python3-torch with trainbench's malloc setting $mt img/s (ratio $(ratio "$mc" "$mt"))"
