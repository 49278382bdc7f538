#!/usr/bin/env bash
# Same-sitting cross-check of `trainbench probe storage` against fio, the standard I/O tester, on the same
# files and the same checkpoint size. fio lays out a dataset of THREADS x (FILES/THREADS) files of FILE_SIZE;
# then, in each round, both sides read every file whole with THREADS threads from a cold cache (trainbench
# evicts and verifies with mincore; fio --invalidate=1 evicts with the same posix_fadvise call), in random
# file order (fio: --file_service_type=random with one I/O per file), and write a CHECKPOINT_SIZE file in
# 8 MiB writes with fsync at the end (fio: --end_fsync=1, no preallocation) and read it back cold.
# The order of the two sides alternates between rounds; every round and the medians are printed.
#
#   bench/crosscheck_storage.sh [ROUNDS]
# Environment: THREADS (2), FILES (4000), FILE_SIZE (112k: an average ImageNet JPEG), CHECKPOINT_SIZE (1G),
# SCRATCH (a folder on the filesystem to test; default ${TMPDIR:-/tmp}).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
threads=${THREADS:-2} files=${FILES:-4000} file_size=${FILE_SIZE:-112k} checkpoint=${CHECKPOINT_SIZE:-1G}
scratch=$(mktemp -d "${SCRATCH:-${TMPDIR:-/tmp}}/trainbench-crosscheck.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
data=$scratch/data ckpt=$scratch/checkpoint
mkdir -p "$data" "$ckpt"
per_job=$((files / threads))
dataset=(--name=sample --directory="$data" --numjobs="$threads" --nrfiles="$per_job" --filesize="$file_size")
fio "${dataset[@]}" --rw=read --create_only=1 >/dev/null
echo "dataset: $(find "$data" -type f | wc -l) files, $(du -sh "$data" | cut -f1) in $data ($(stat -f -c %T "$data")); load average: $(cut -d' ' -f1-3 /proc/loadavg)"

trainbench_round() {
  build/bin/trainbench probe storage --dir "$data" --threads "$threads" --files-max 0 --checkpoint-size "$checkpoint" \
    --checkpoint-dir "$ckpt" --json "$scratch/trainbench.json" >/dev/null
  jq -r '"\(.dataset_read.megabytes_per_second) \(.dataset_read.files_per_second) \(.dataset_read.latency_seconds.p50 * 1e3) \(.dataset_read.latency_seconds.p99 * 1e3) \(.dataset_read.cache.label) \(.checkpoint.write_megabytes_per_second) \(.checkpoint.read_megabytes_per_second) \(.checkpoint.read_cache.label)"' \
    "$scratch/trainbench.json"
}

fio_round() {
  local reads write read_back begin end
  reads=$(fio "${dataset[@]}" --rw=read --bs="$file_size" --file_service_type=random --ioengine=psync --invalidate=1 \
            --group_reporting --output-format=json |
          jq -r --argjson files "$files" '.jobs[0].read | "\(.bw_bytes / 1e6) \($files / (.runtime / 1e3)) \(.clat_ns.percentile["50.000000"] / 1e6) \(.clat_ns.percentile["99.000000"] / 1e6)"')
  # fio's manual does not say whether its write runtime holds the --end_fsync, so the figure compared is
  # size / wall time of the fio process, less the wall time of a 4 KiB fio write job run just before (fio's
  # start-up and exit, 0.7-0.8 s on this loaded VM); fio's own bandwidth is printed beside it.
  begin=$(date +%s.%N)
  fio --name=startup --filename="$ckpt/startup.fio" --size=4k --rw=write --end_fsync=1 --output-format=json >/dev/null
  end=$(date +%s.%N)
  startup=$(awk -v a="$end" -v b="$begin" 'BEGIN {printf "%.6f", a - b}')
  begin=$(date +%s.%N)
  fio --name=checkpoint --filename="$ckpt/checkpoint.fio" --size="$checkpoint" --bs=8M --rw=write --ioengine=psync \
      --fallocate=none --end_fsync=1 --output-format=json >"$scratch/fio-write.json"
  end=$(date +%s.%N)
  write=$(jq -r --arg wall "$(awk -v a="$end" -v b="$begin" -v c="$startup" 'BEGIN {printf "%.6f", a - b - c}')" '.jobs[0].write | "\(.io_bytes / ($wall | tonumber) / 1e6) \(.bw_bytes / 1e6)"' "$scratch/fio-write.json")
  read_back=$(fio --name=checkpoint --filename="$ckpt/checkpoint.fio" --size="$checkpoint" --bs=8M --rw=read --ioengine=psync \
                --invalidate=1 --output-format=json | jq -r '.jobs[0].read.bw_bytes / 1e6')
  rm -f "$ckpt/checkpoint.fio" "$ckpt/startup.fio"
  echo "$reads $write $read_back"
}

declare -a tb_read tb_files tb_write tb_readback fio_read fio_files fio_write fio_readback
for round in $(seq "$rounds"); do
  if ((round % 2)); then t=$(trainbench_round); f=$(fio_round); else f=$(fio_round); t=$(trainbench_round); fi
  read -r r fs p50 p99 label w rb rblabel <<<"$t"
  printf 'round %d trainbench: reads %.1f MB/s, %.0f files/s, p50 %.3f ms, p99 %.3f ms (%s); checkpoint write %.1f MB/s, read back %.1f MB/s (%s)\n' \
    "$round" "$r" "$fs" "$p50" "$p99" "$label" "$w" "$rb" "$rblabel"
  tb_read+=("$r") tb_files+=("$fs") tb_write+=("$w") tb_readback+=("$rb")
  read -r r fs p50 p99 w wbw rb <<<"$f"
  printf 'round %d fio:        reads %.1f MB/s, %.0f files/s, p50 %.3f ms, p99 %.3f ms (--invalidate=1); checkpoint write %.1f MB/s (fio bw: %.1f), read back %.1f MB/s\n' \
    "$round" "$r" "$fs" "$p50" "$p99" "$w" "$wbw" "$rb"
  fio_read+=("$r") fio_files+=("$fs") fio_write+=("$w") fio_readback+=("$rb")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
for what in read files write readback; do
  ours=tb_$what[@] theirs=fio_$what[@]
  a=$(median "${!ours}") b=$(median "${!theirs}")
  unit=MB/s; [ "$what" = files ] && unit=files/s
  printf 'median %-9s trainbench %10.1f  fio %10.1f %-7s (trainbench/fio %s)\n' "$what" "$a" "$b" "$unit" "$(ratio "$a" "$b")"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
