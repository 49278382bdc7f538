#!/usr/bin/env bash
# Same-sitting all-reduce bandwidth on loopback, 2 ranks: trainbench's `probe comm` (c10d Gloo through
# parallel/communicator.h) against Gloo driven by python3-torch's torch.distributed and against Open MPI's
# MPI_Allreduce. Rounds are interleaved so drifting machine load hits all three alike. Prints each run's
# large-message rows and, per size, the best bus bandwidth of each side over the rounds.
#
#   bench/compare_allreduce.sh [ROUNDS]      (default 3; sizes 8 MiB .. 256 MiB, x2; 20 iterations after 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_allreduce" bench/peers/mpi_allreduce.c
for round in $(seq "$rounds"); do
  build/bin/trainbench launch --nproc 2 -- probe comm --ops all_reduce -b 8M -e 256M -f 2 -n 20 -w 5 2>/dev/null |
    awk -v r="$round" '/^ +[0-9]/ {print "trainbench", r, $1, $13}' >> "$work/trainbench.txt"
  /usr/bin/python3 bench/peers/gloo_allreduce.py --nproc 2 -b 8M -e 256M -f 2 -n 20 -w 5 --port $((29700 + round)) |
    awk -v r="$round" '/^ +[0-9]/ {print "python-gloo", r, $1, $(NF-1)}' >> "$work/python.txt"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$work/mpi_allreduce" 8388608 268435456 2 20 5 |
    awk -v r="$round" '/^ +[0-9]/ {print "openmpi", r, $1, $(NF-1)}' >> "$work/mpi.txt"
done
cat "$work"/trainbench.txt "$work"/python.txt "$work"/mpi.txt
echo "# best in-place bus bandwidth (GB/s) per size over $rounds rounds"
printf "%13s %12s %12s %12s %10s\n" bytes trainbench python-gloo openmpi tb/gloo
awk '{key=$3; side=$1; if ($4 > best[side, key]) best[side, key] = $4; sizes[key] = 1}
     END {for (s in sizes) printf "%13d %12.3f %12.3f %12.3f %10.3f\n", s, best["trainbench", s], best["python-gloo", s],
                                  best["openmpi", s], best["trainbench", s] / best["python-gloo", s]}' \
  "$work"/trainbench.txt "$work"/python.txt "$work"/mpi.txt | sort -n
