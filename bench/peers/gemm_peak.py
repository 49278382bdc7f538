"""Same-machine peer for `trainbench probe compute` on the CPU: the same square fp32 GEMM sweep (and the same
ResNet-50 convolutions) in Debian's python3-torch, timed the same way: a warm-up of a fifth of the budget,
then repetitions of a batch of calls (a twentieth of the budget each) until the budget is spent, and the
median time per call.

    /usr/bin/python3 bench/peers/gemm_peak.py --threads 2 --seconds 1

Prints one row per shape and the best GFLOP/s of each op, in the probe's row format.
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F


def time_calls(call, budget):
    def timed(calls):
        begin = time.perf_counter()
        for _ in range(calls):
            call()
        return time.perf_counter() - begin

    timed(1)
    one_call = timed(1)
    per_rep = min(100000, max(1, round(budget / 20 / max(one_call, 1e-9))))
    warm = one_call
    while warm < budget / 5:
        warm += timed(per_rep)
    per_call, spent = [], 0.0
    while (spent < budget or len(per_call) < 3) and len(per_call) < 1000:
        seconds = timed(per_rep)
        spent += seconds
        per_call.append(seconds / per_rep)
    return statistics.median(per_call), per_rep, len(per_call)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per row, after warm-up")
    parser.add_argument("--sizes", default="256,512,1024,2048", help="square GEMM sizes")
    parser.add_argument("--batch", type=int, default=8, help="convolution batch (the probe's CPU default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    print(f"python3-torch {torch.__version__}, {torch.get_num_threads()} threads, {args.seconds:.2f} s timed per row")
    best = {"gemm": 0.0, "conv": 0.0}

    def report(op, shape, flops, timing):
        seconds, per_rep, reps = timing
        achieved = flops / seconds
        best[op] = max(best[op], achieved)
        print(f"{op:<5} fp32  {shape:<32} {seconds * 1e3:11.4f} ms {reps:8d} x {per_rep:<5d} {achieved / 1e9:.1f} GFLOP/s", flush=True)
        return seconds

    with torch.no_grad():
        for n in (int(size) for size in args.sizes.split(",")):
            a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
            seconds = report("gemm", f"{n}x{n}x{n}", 2.0 * n * n * n, time_calls(lambda: torch.mm(a, b, out=c), args.seconds))
            if seconds > args.seconds:  # the probe's rule: the next size would take 8x longer
                print(f"note: sizes above {n} left out: one call took {seconds:.2f} s")
                break
        # N, C, H, W, K, kernel, stride, padding: the probe's ResNet-50 shapes
        for n, c, h, w, k, r, s, p in [(args.batch, 64, 56, 56, 64, 3, 1, 1), (args.batch, 256, 56, 56, 64, 1, 1, 0),
                                       (args.batch, 128, 28, 28, 128, 3, 1, 1), (args.batch, 256, 14, 14, 256, 3, 1, 1),
                                       (args.batch, 512, 7, 7, 512, 3, 1, 1)]:
            x, weight = torch.randn(n, c, h, w), torch.randn(k, c, r, r)
            out = (h + 2 * p - r) // s + 1
            report("conv", f"N{n} C{c} {h}x{w} -> K{k} {r}x{r}/{s}", 2.0 * n * k * c * r * r * out * out,
                   time_calls(lambda: F.conv2d(x, weight, None, s, p), args.seconds))
    print(f"peak fp32: gemm {best['gemm'] / 1e9:.1f} GFLOP/s, conv {best['conv'] / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
