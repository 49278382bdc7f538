"""Same-machine peer for `trainbench bench resnet`: the same model, batch, optimizer and thread count in
Debian's python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch).

    /usr/bin/python3 bench/peers/resnet_train_step.py --preset reference --threads 2 --steps 5 --warmup 2 \
        --set batch_size=32 --set image_size=224

The model and LARS come from the parity test's independent reference (tests/workloads/resnet/), and the
settings from src/workloads/resnet/presets.json, so both sides train exactly the same network.
"""
import torch
import torch.nn.functional as F

import step_timing

step_timing.use_reference("resnet")
from resnet_reference import ResNet, lars_step  # noqa: E402


def main():
    args, config = step_timing.setup("resnet", __doc__)
    model = ResNet(config["blocks_per_stage"], config["stage_widths"], config["stem_width"], config["stem_kernel"],
                   config["stem_stride"], config["stem_max_pool"], config["expansion"], config["num_classes"])
    model.train()
    batch, size = config["batch_size"], config["image_size"]
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(config["num_classes"], (batch,))
    velocities = {}
    eta = config["lars_eta"] if config["optimizer"] == "lars" else 0.0

    def steps():
        while True:
            model.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(images), labels, label_smoothing=config["label_smoothing"])
            loss.backward()
            if eta:
                lars_step(model, velocities, 0.01, config["momentum"], config["weight_decay"], eta)
            else:
                sgd_step(model, velocities, 0.01, config["momentum"], config["weight_decay"])
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "img/s", [f"{size} px"])


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
