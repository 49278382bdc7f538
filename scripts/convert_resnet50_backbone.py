#!/usr/bin/env python3
"""Converts torchvision's ImageNet ResNet-50 weights (e.g. resnet50-0676ba61.pth) into the body file
`trainbench run maskrcnn` loads with --set backbone_weights=PATH.

    /usr/bin/python3 scripts/convert_resnet50_backbone.py resnet50-0676ba61.pth resnet50-body.pt

The output is a dict {tensor name: tensor} saved by torch.save, holding torchvision's names for the whole body:
conv1, bn1, layer1..layer4 (weights and batch-norm weight, bias, running_mean, running_var); fc is dropped. The
body's batch norms are the reference's FrozenBatchNorm2d, which has no eps, so the converter folds torchvision's
eps (1e-5) into running_var: the frozen map then equals torchvision's batch norm in eval mode exactly. That change
of values is why this script exists; trainbench reads torchvision's file format as it is (docs/checkpoints.md).

Pass it with --set backbone_weights_source=torchvision: the body then puts each stage's stride in the 3x3
convolution and feeds RGB 0..1 normalised by ImageNet's mean and std, as torchvision's ResNet-50 (v1.5) was
trained. The reference itself starts from MSRA's Caffe2 R-50 (catalog://ImageNetPretrained/MSRA/R-50), which
trainbench reads as it is with backbone_weights_source=msra: docs/maskrcnn.md. Needs Debian's python3-torch
(torchvision itself is not needed).
"""
import sys

import torch

BATCH_NORM_EPS = 1e-5  # torch.nn.BatchNorm2d's default, which torchvision's ResNet uses


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    state = torch.load(sys.argv[1], map_location="cpu")
    if not isinstance(state, dict) or "layer4.0.conv3.weight" not in state:
        sys.exit(f"{sys.argv[1]}: not a torchvision bottleneck ResNet state dict (no layer4.0.conv3.weight)")
    body = {}
    for name, tensor in state.items():
        if name.startswith("fc.") or name.endswith("num_batches_tracked"):
            continue
        tensor = tensor.float()
        if name.endswith("running_var"):
            tensor = tensor + BATCH_NORM_EPS
        body[name] = tensor.contiguous()
    torch.save(body, sys.argv[2])
    print(f"{sys.argv[2]}: {len(body)} tensors")


if __name__ == "__main__":
    main()
