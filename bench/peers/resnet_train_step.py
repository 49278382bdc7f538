"""Same-machine peer for `trainbench bench resnet`: the same model, batch, optimizer and thread count in
Debian's python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch).

    /usr/bin/python3 bench/peers/resnet_train_step.py --preset reference --threads 2 --steps 5 --warmup 2 \
        --set batch_size=32 --set image_size=224

The model and LARS come from the parity test's independent reference (tests/workloads/resnet/), and the
settings from presets/resnet.json, so both sides train exactly the same network.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "workloads", "resnet"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from resnet_reference import ResNet, lars_step  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="mini")
    parser.add_argument("--set", action="append", default=[], help="key=value override, as in trainbench")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    with open(os.path.join(ROOT, "presets", "resnet.json")) as f:
        config = json.load(f)[args.preset]
    for assignment in args.set:
        key, value = assignment.split("=", 1)
        config[key] = json.loads(value)

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = ResNet(config["blocks_per_stage"], config["stage_widths"], config["stem_width"], config["stem_kernel"],
                   config["stem_stride"], config["stem_max_pool"], config["expansion"], config["num_classes"])
    model.train()
    batch, size = config["batch_size"], config["image_size"]
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(config["num_classes"], (batch,))
    velocities = {}
    eta = config["lars_eta"] if config["optimizer"] == "lars" else 0.0
    step_seconds = []
    for step in range(args.warmup + args.steps):
        begin = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(images), labels, label_smoothing=config["label_smoothing"])
        loss.backward()
        if eta:
            lars_step(model, velocities, 0.01, config["momentum"], config["weight_decay"], eta)
        else:
            sgd_step(model, velocities, 0.01, config["momentum"], config["weight_decay"])
        loss.item()
        if step >= args.warmup:
            step_seconds.append(time.perf_counter() - begin)
    median = statistics.median(step_seconds)
    print(f"python3-torch {torch.__version__}: training {batch / median:10.1f} img/s  (batch {batch}, {size} px, "
          f"{args.threads} threads, median of {args.steps} steps: {median:.4f} s/step)")


def sgd_step(model, velocities, lr, momentum, weight_decay):
    """The trainbench optimizer with layer adaptation off (opt_name "sgd")."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = velocities.setdefault(name, torch.zeros_like(p))
            grad = p.grad if p.dim() <= 1 else p.grad + weight_decay * p
            v.mul_(momentum).add_(grad, alpha=lr)
            p.sub_(v)


if __name__ == "__main__":
    main()
