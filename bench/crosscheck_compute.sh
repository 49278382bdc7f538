#!/usr/bin/env bash
# Same-sitting cross-check of `trainbench probe compute` (CPU, fp32) against Debian's python3-torch running
# the same GEMM sweep and convolutions timed the same way (bench/peers/gemm_peak.py), interleaved round by
# round, and against the theoretical fp32 peak: cores x clock x FLOP/cycle, with the clock /proc/cpuinfo
# reports (on a VM the nominal TSC clock; boost clocks are higher, so a measured figure can exceed it).
#
#   bench/crosscheck_compute.sh [ROUNDS]        environment: THREADS (2), SECONDS_PER_ROW (1)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${THREADS:-2} seconds=${SECONDS_PER_ROW:-1}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mhz=$(awk -F: '/^cpu MHz/ {print $2; exit}' /proc/cpuinfo)
echo "CPU: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) logical CPUs, cpu MHz $mhz; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v mhz="$mhz" -v t="$threads" 'BEGIN {
  printf "theoretical fp32 peak, %d cores x %.0f MHz: AVX2 FMA (2 x 8 lanes x 2 FLOP = 32 FLOP/cycle) %.1f GFLOP/s; ", t, mhz, t * mhz * 32 / 1e3
  printf "AVX-512 with two 512-bit FMA pipes (64 FLOP/cycle) %.1f GFLOP/s\n", t * mhz * 64 / 1e3 }'

declare -a tb_gemm tb_conv py_gemm py_conv
for round in $(seq "$rounds"); do
  trainbench() {
    build/bin/trainbench probe compute --device cpu --threads "$threads" --seconds "$seconds" --json "$scratch/compute.json" >"$scratch/compute.txt"
    jq -r '.peaks.fp32 | "\(.gemm_flops_per_second / 1e9) \(.conv_flops_per_second / 1e9)"' "$scratch/compute.json"
  }
  peer() { /usr/bin/python3 bench/peers/gemm_peak.py --threads "$threads" --seconds "$seconds" | awk '/^peak fp32/ {print $4, $7}'; }
  if ((round % 2)); then t=$(trainbench); p=$(peer); else p=$(peer); t=$(trainbench); fi
  read -r tg tc <<<"$t"
  read -r pg pc <<<"$p"
  printf 'round %d: gemm fp32 peak trainbench %.1f, python3-torch %.1f GFLOP/s; conv fp32 peak trainbench %.1f, python3-torch %.1f GFLOP/s\n' \
    "$round" "$tg" "$pg" "$tc" "$pc"
  tb_gemm+=("$tg") tb_conv+=("$tc") py_gemm+=("$pg") py_conv+=("$pc")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
for op in gemm conv; do
  tb=tb_$op[@] py=py_$op[@]
  a=$(median "${!tb}") b=$(median "${!py}")
  printf 'median %s fp32 peak: trainbench %.1f GFLOP/s, python3-torch %.1f GFLOP/s (ratio %s)\n' "$op" "$a" "$b" "$(ratio "$a" "$b")"
done
echo "last trainbench table:"; cat "$scratch/compute.txt"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
