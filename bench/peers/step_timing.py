"""What the python3-torch training-step peers share: their command line (--preset, --set, --threads, --steps,
--warmup, as `trainbench bench` takes them), the preset lookup in src/workloads/<benchmark>/presets.json, and the timing
loop, defined as in trainbench's bench: the warm-up steps run untimed, then the median wall time of the timed
steps, each step ending with loss.item() so the host waits for it. The result line has the shape
bench/compare_step.sh parses:

    python3-torch <version>: training <items/s> <unit>  (batch <n>, ..., median of <steps> steps: <s> s/step)

Each peer keeps only its model and its step.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def use_reference(benchmark):
    """Makes the parity test's independent reference model (tests/workloads/<benchmark>/) importable."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "workloads", benchmark))


def setup(benchmark, doc):
    """Parses the peer's command line, returns it with the preset's settings (--set overrides applied), and
    sets the thread count and seed before the peer builds its model."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--set", action="append", default=[], help="key=value override, as in trainbench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    with open(os.path.join(ROOT, "src", "workloads", benchmark, "presets.json")) as f:
        config = json.load(f)[args.preset]
    for assignment in args.set:
        key, value = assignment.split("=", 1)
        config[key] = json.loads(value)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return args, config


def time_steps(args, steps, batch, unit, details=(), digits=4):
    """Takes args.warmup steps untimed and args.steps steps timed from the generator steps (one training step
    per yield), and prints the median step time and the throughput it gives for this batch. details: what
    else the line names between batch and threads.

    The peer's step is a generator loop rather than a function so that its tensors (loss, outputs) live until
    the next step replaces them, as in a plain training loop. Freeing them at the end of each step instead
    changes what glibc malloc does with the large buffers: BERT mini ran about 4x slower that way."""
    for _ in range(args.warmup):
        next(steps)
    step_seconds = []
    for _ in range(args.steps):
        begin = time.perf_counter()
        next(steps)
        step_seconds.append(time.perf_counter() - begin)
    median = statistics.median(step_seconds)
    described = ", ".join([f"batch {batch}", *details, f"{args.threads} threads"])
    print(f"python3-torch {torch.__version__}: training {batch / median:10.1f} {unit}  ({described}, "
          f"median of {args.steps} steps: {median:.{digits}f} s/step)")


def median_call_seconds(args, call):
    """Calls call() args.warmup times untimed, then args.steps times timed; returns the median seconds of a call.
    For the peers' lines other than training (inference), which print their own result line."""
    for _ in range(args.warmup):
        call()
    seconds = []
    for _ in range(args.steps):
        begin = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - begin)
    return statistics.median(seconds)
