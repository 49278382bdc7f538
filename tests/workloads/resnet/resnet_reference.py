"""Independent reference for the ResNet parity test, run with Debian's python3-torch.

Reads the C++ test's initial weights, batch and settings from argv[1], builds ResNet v1.5 with its own
module code (torchvision naming), takes two LARS steps written from the MLPerf reference formulas, and
writes the losses, first logits and final weights and BatchNorm statistics to argv[2].
"""
import sys

import torch
from torch import nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    def __init__(self, in_channels, width, stride, expansion):
        super().__init__()
        out_channels = width * expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class ResNet(nn.Module):
    def __init__(self, blocks, widths, stem_width, stem_kernel, stem_stride, stem_max_pool, expansion, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem_width, stem_kernel, stride=stem_stride, padding=stem_kernel // 2, bias=False)
        self.bn1 = nn.BatchNorm2d(stem_width)
        self.stem_max_pool = stem_max_pool
        channels = stem_width
        for stage, (count, width) in enumerate(zip(blocks, widths)):
            layers = []
            for block in range(count):
                stride = 2 if stage > 0 and block == 0 else 1
                layers.append(Bottleneck(channels, width, stride, expansion))
                channels = width * expansion
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.stages = len(blocks)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.stem_max_pool:
            x = F.max_pool2d(x, 3, 2, 1)
        for stage in range(self.stages):
            x = getattr(self, f"layer{stage + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def lars_step(model, velocities, lr, momentum, weight_decay, eta):
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = velocities.setdefault(name, torch.zeros_like(p))
            if p.dim() <= 1:  # BatchNorm and bias: no weight decay, no trust ratio
                v.mul_(momentum).add_(p.grad, alpha=lr)
            else:
                w_norm, g_norm = p.norm().item(), p.grad.norm().item()
                trust = eta * w_norm / (g_norm + weight_decay * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
                v.mul_(momentum).add_(p.grad + weight_decay * p, alpha=lr * trust)
            p.sub_(v)


def main():
    inputs = torch.load(sys.argv[1])
    settings = {k[len("setting."):]: v for k, v in inputs.items() if k.startswith("setting.")}
    as_list = lambda t: [int(x) for x in t.tolist()]
    model = ResNet(as_list(settings["blocks_per_stage"]), as_list(settings["stage_widths"]),
                   int(settings["stem_width"]), int(settings["stem_kernel"]), int(settings["stem_stride"]),
                   bool(settings["stem_max_pool"]), int(settings["expansion"]), int(settings["num_classes"]))
    model = model.double()
    state = {k[len("state."):]: v for k, v in inputs.items() if k.startswith("state.")}
    model.load_state_dict(state, strict=True)  # same names and shapes, or the architectures differ
    model.train()
    images, labels = inputs["images"], inputs["labels"]
    outputs = {}
    velocities = {}
    for step in range(2):
        model.zero_grad(set_to_none=True)
        logits = model(images)
        loss = F.cross_entropy(logits, labels, label_smoothing=float(settings["label_smoothing"]))
        loss.backward()
        lars_step(model, velocities, float(settings["lr"]), float(settings["momentum"]),
                  float(settings["weight_decay"]), float(settings["eta"]))
        outputs[f"loss{step}"] = loss.detach()
        if step == 0:
            outputs["logits0"] = logits.detach()
    for name, tensor in model.state_dict().items():
        outputs["state." + name] = tensor
    torch.save(outputs, sys.argv[2])


if __name__ == "__main__":
    main()
