"""Peer for `trainbench probe comm`: Gloo all-reduce through python3-torch's torch.distributed, timed the
way the probe times it (warm-up, barrier, mean over iterations of launch + wait, slowest rank), over the same
geometric sweep, with one compute thread per rank.

  torchrun is not in Debian's python3-torch, so this script starts its own ranks:
  /usr/bin/python3 bench/peers/gloo_allreduce.py --nproc 2 -b 8M -e 256M -f 2 -n 20 -w 5
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def rank_main(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    size = args.minbytes
    while size <= args.maxbytes:
        count = size // 4
        tensor = torch.arange(count, dtype=torch.float32) % 11 + 3 * (rank + 1)
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        dist.barrier()
        begin = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(tensor)
        mean = (time.perf_counter() - begin) / args.iters
        slowest = torch.tensor([mean], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            algbw = size / slowest.item() / 1e9
            busbw = algbw * 2 * (args.nproc - 1) / args.nproc
            print(f"{size:13d} {count:13d}  float  time(us) {slowest.item() * 1e6:10.1f}  algbw {algbw:7.3f}  busbw {busbw:7.3f} GB/s",
                  flush=True)
        size = int(size * args.stepfactor)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("8M"))
    parser.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"))
    parser.add_argument("-f", "--stepfactor", type=float, default=2)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("--port", type=int, default=29611)
    args = parser.parse_args()
    print(f"# python3-torch {torch.__version__} torch.distributed gloo all_reduce, {args.nproc} ranks, in place")
    mp.spawn(rank_main, args=(args, args.port), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
