#!/usr/bin/env bash
# Same-sitting speed comparison of one DLRM training step: trainbench (C++/LibTorch) against Debian's
# python3-torch running the same model, batch and thread count (bench/peers/dlrm_train_step.py: per-table
# EmbeddingBag(sparse=True) + torch.optim.SGD, as the MLPerf reference trains). Runs are interleaved
# (C++, Python, C++, Python, ...) so drifting machine load hits both sides alike; prints every run, the
# median of each side and their ratio.
#
#   bench/compare_dlrm_step.sh [ROUNDS] [-- extra settings, e.g. --preset reference --set batch_size=2048]
# Defaults: 5 rounds of the mini preset (its batch), 2 threads, 200 timed steps after 20 warm-up steps.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
shift || true
[ "${1:-}" = "--" ] && shift
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(--preset mini)
threads=${THREADS:-2}
common=(--threads "$threads" --steps "${STEPS:-200}" --warmup 20 "${settings[@]}")

cpp=() py=()
for round in $(seq "$rounds"); do
  c=$(build/bin/trainbench bench dlrm --device cpu "${common[@]}" | awk '/^training/ {print $2}')
  p=$(/usr/bin/python3 bench/peers/dlrm_train_step.py "${common[@]}" | awk '{for (i=1;i<=NF;i++) if ($i=="training") print $(i+1)}')
  echo "round $round: trainbench $c samples/s, python3-torch $p samples/s"
  cpp+=("$c") py+=("$p")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cpp[@]}") mp=$(median "${py[@]}")
echo "median: trainbench $mc samples/s, python3-torch $mp samples/s (ratio $(awk -v a="$mc" -v b="$mp" 'BEGIN {printf "%.3f", a/b}'))"
