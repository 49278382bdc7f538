"""Same-machine peer for `trainbench bench dlrm`: the same model, batch and thread count in Debian's
python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch with rows
drawn uniformly per table).

    /usr/bin/python3 bench/peers/dlrm_train_step.py --preset mini --threads 2 --steps 200 --warmup 20

The model is the parity test's independent reference (tests/workloads/dlrm/dlrm_reference.py), written as
the MLPerf reference writes it: one nn.EmbeddingBag(mode="sum", sparse=True) per table, nn.Linear MLPs,
the Z[:, li, lj] dot interaction, sigmoid + BCELoss, and torch.optim.SGD applying the sparse gradients.
Settings come from presets/dlrm.json, so both sides train exactly the same network.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads", "dlrm"))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from dlrm_reference import Dlrm  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--set", action="append", default=[], help="key=value override, as in trainbench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    with open(os.path.join(ROOT, "presets", "dlrm.json")) as f:
        config = json.load(f)[args.preset]
    for assignment in args.set:
        key, value = assignment.split("=", 1)
        config[key] = json.loads(value)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tables = config["table_sizes"]
    model = Dlrm(tables, config["embedding_dim"], 13, config["bottom_mlp"], config["top_mlp"])
    model.train()
    batch = config["batch_size"]
    dense = torch.rand(batch, 13) * 5
    sparse = torch.cat([torch.randint(n, (batch, 1)) for n in tables], dim=1)
    labels = torch.randint(2, (batch,)).float()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCELoss(reduction="mean")
    step_seconds = []
    for step in range(args.warmup + args.steps):
        begin = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(dense, sparse), labels)
        loss.backward()
        optimizer.step()
        loss.item()
        if step >= args.warmup:
            step_seconds.append(time.perf_counter() - begin)
    median = statistics.median(step_seconds)
    print(f"python3-torch {torch.__version__}: training {batch / median:10.1f} samples/s  (batch {batch}, "
          f"{args.threads} threads, median of {args.steps} steps: {median:.5f} s/step)")


if __name__ == "__main__":
    main()
