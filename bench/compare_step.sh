#!/usr/bin/env bash
# Same-sitting speed comparison of one training step: trainbench (C++/LibTorch) against Debian's python3-torch
# running the same model, batch, optimizer and thread count (bench/peers/<benchmark>_train_step.py). Runs are
# interleaved (C++, Python, C++, Python, ...) so drifting machine load hits both sides alike; prints every run,
# the median of each side and their ratio. For resnet and bert the peer runs twice per round: as Debian ships
# it, and with glibc malloc set the way trainbench sets it for itself (util/allocator.h), so the gain from that
# setting and the rest of the difference can be told apart.
#
#   bench/compare_step.sh <resnet|ssd|maskrcnn|unet3d|rnnt|bert|dlrm> [ROUNDS] [-- extra settings, e.g. --set batch_size=128]
#
# Environment: THREADS (default 2), STEPS (timed steps; default per benchmark below), TRAINBENCH (the binary;
# default build/bin/trainbench). Defaults per benchmark:
#   resnet  3 rounds of ResNet-50 (preset reference) at 224 px, batch 32; 5 timed steps after 2 warm-up steps
#   bert    3 rounds of the mini preset; 30 timed steps after 3 warm-up steps
#   dlrm    5 rounds of the mini preset (its batch); 200 timed steps after 20 warm-up steps, no malloc run
#   ssd     3 rounds of the mini preset; 10 timed steps after 2 warm-up steps, no malloc run
#   unet3d  3 rounds of the mini preset; 10 timed steps after 2 warm-up steps, no malloc run
#   rnnt    3 rounds of the mini preset; 10 timed steps after 2 warm-up steps, no malloc run
#   maskrcnn 3 rounds of the mini preset (batch 8 at 170x128 px); 5 timed steps after 2 warm-up steps, no malloc
#           run; the peer is torchvision's MaskRCNN (bench/peers/maskrcnn_train_step.py says what differs)
# Extra settings go to both sides after the benchmark's fixed settings, in place of its default settings (the
# last two columns of the table below).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/compare_step.sh <resnet|ssd|maskrcnn|unet3d|rnnt|bert|dlrm> [ROUNDS] [-- extra settings]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
benchmark=$1
shift

# benchmark: unit, rounds, timed steps, warm-up steps, malloc-setting run, fixed settings, default settings.
case $benchmark in
  resnet) unit=img/s;     rounds=3; steps=5;   warmup=2;  tuned=1; fixed=(--preset reference); defaults=(--set batch_size=32 --set image_size=224) ;;
  bert)   unit=seq/s;     rounds=3; steps=30;  warmup=3;  tuned=1; fixed=(--preset mini);      defaults=() ;;
  dlrm)   unit=samples/s; rounds=5; steps=200; warmup=20; tuned=0; fixed=();                   defaults=(--preset mini) ;;
  ssd)    unit=img/s;     rounds=3; steps=10;  warmup=2;  tuned=0; fixed=(--preset mini);      defaults=() ;;
  unet3d) unit=samples/s; rounds=3; steps=10;  warmup=2;  tuned=0; fixed=(--preset mini);      defaults=() ;;
  rnnt)   unit=utt/s;     rounds=3; steps=10;  warmup=2;  tuned=0; fixed=(--preset mini);      defaults=() ;;
  maskrcnn) unit=img/s;   rounds=3; steps=5;   warmup=2;  tuned=0; fixed=();                   defaults=(--preset mini) ;;
  *) echo "compare_step.sh: unknown benchmark '$benchmark'; known: resnet ssd maskrcnn unet3d rnnt bert dlrm" >&2; exit 2 ;;
esac

if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds=$1; shift; fi
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compare_step.sh: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
[ "${1:-}" = "--" ] && shift
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=("${defaults[@]}")
trainbench=${TRAINBENCH:-build/bin/trainbench}
[ -x "$trainbench" ] || { echo "compare_step.sh: no trainbench binary at $trainbench (set TRAINBENCH)" >&2; exit 2; }
common=("${fixed[@]}" --threads "${THREADS:-2}" --steps "${STEPS:-$steps}" --warmup "$warmup" "${settings[@]}")

peer() {
  /usr/bin/python3 "bench/peers/${benchmark}_train_step.py" "${common[@]}" |
    awk '{for (i=1;i<=NF;i++) if ($i=="training" && $(i+1) ~ /^[0-9.]+$/) print $(i+1)}'
}
malloc_setting=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824
cpp=() py=() pytuned=()
for round in $(seq "$rounds"); do
  c=$("$trainbench" bench "$benchmark" --device cpu "${common[@]}" | awk '/^training/ {print $2}')
  p=$(peer)
  line="round $round: trainbench $c $unit, python3-torch $p $unit"
  cpp+=("$c") py+=("$p")
  if [ "$tuned" = 1 ]; then
    t=$(GLIBC_TUNABLES=$malloc_setting peer)
    line+=", python3-torch with trainbench's malloc setting $t $unit"
    pytuned+=("$t")
  fi
  echo "$line"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }
mc=$(median "${cpp[@]}") mp=$(median "${py[@]}")
line="median: trainbench $mc $unit, python3-torch $mp $unit (ratio $(ratio "$mc" "$mp"))"
if [ "$tuned" = 1 ]; then
  mt=$(median "${pytuned[@]}")
  line+=", python3-torch with trainbench's malloc setting $mt $unit (ratio $(ratio "$mc" "$mt"))"
fi
echo "$line"
