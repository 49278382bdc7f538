#!/usr/bin/env bash
# The figures of docs/parallelism.md: BERT under tensor x pipeline x data parallelism on this machine — the dry
# plans of BERT-Large's reference step, measured per-rank memory beside the dry plan's, each group's traffic per
# step counted in the communicator beside the formulas, the pipeline's idle time beside (p-1)/m, and the mini
# step's time at each layout. Timings share the cores: run it alone. Usage: scripts/measure-parallelism.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
tb=build/bin/trainbench
out=${1:-/tmp/trainbench-parallelism}
mkdir -p "$out"

# $1 tensor_parallel, $2 pipeline_parallel, $3 data-parallel ranks, then the command's own arguments.
on_layout() {
  local t=$1 p=$2 d=$3
  shift 3
  local ranks=$((t * p * d)) plan="--set tensor_parallel=$t --set pipeline_parallel=$p"
  echo "## (tp, pp, dp) = ($t, $p, $d): $*"
  if [ "$ranks" -eq 1 ]; then $tb "$@" $plan; else $tb launch --nproc "$ranks" -- "$@" $plan; fi
}

layouts_of_eight=("1 1 8" "8 1 1" "2 4 1" "4 2 1")
{
  echo "# Dry plans: BERT-Large's reference step (batch 448, fp16 activations)"
  for layout in "1 1 1" "${layouts_of_eight[@]}"; do
    read -r t p d <<<"$layout"
    $tb bench bert --preset reference --shard-plan $((t * p * d)) --set tensor_parallel="$t" --set pipeline_parallel="$p"
  done
} | tee "$out/dry-plans.txt"

# BERT-Large's layers at a size eight ranks of this machine hold: 4 of its 24 layers, seq 128, 8 sequences, fp32.
large4="bench bert --preset reference --set layers=4 --set seq_length=128 --set max_predictions=20 --set batch_size=8
        --set precision=fp32 --threads 1"
{
  for layout in "1 1 1" "${layouts_of_eight[@]}"; do
    read -r t p d <<<"$layout"
    $tb bench bert --preset reference --shard-plan $((t * p * d)) --set tensor_parallel="$t" \
      --set pipeline_parallel="$p" --set layers=4 --set seq_length=128 --set max_predictions=20 --set batch_size=8 \
      --set precision=fp32
    on_layout "$t" "$p" "$d" $large4 --memory
  done
} 2>&1 | tee "$out/memory.txt"

mini="bench bert --preset mini --steps 5 --warmup 2"
{
  on_layout 2 2 1 $mini --set gradient_accumulation_steps=4
  on_layout 2 2 2 $mini --set gradient_accumulation_steps=4
} 2>&1 | tee "$out/traffic.txt"
{
  for schedule in 1f1b gpipe; do
    for m in 4 8; do on_layout 1 2 1 $mini --set gradient_accumulation_steps=$m --set pipeline_schedule=$schedule; done
  done
} 2>&1 | tee "$out/bubble.txt"
# Stages of nearly equal work (BERT-Large's 4 layers, seq 128: the last stage's decoder is about a fifth of a
# stage), where the idle time is the bubble rather than imbalance.
{
  for schedule in 1f1b gpipe; do
    for m in 4 8; do
      on_layout 1 2 1 $large4 --set batch_size=16 --steps 2 --warmup 1 --set gradient_accumulation_steps=$m \
        --set pipeline_schedule=$schedule
    done
  done
} 2>&1 | tee "$out/bubble-balanced.txt"
{
  for layout in "1 1 1" "1 1 2" "2 1 1" "1 2 1" "2 2 1"; do
    read -r t p d <<<"$layout"
    on_layout "$t" "$p" "$d" $mini --set gradient_accumulation_steps=2
  done
} 2>&1 | tee "$out/step-times.txt"
