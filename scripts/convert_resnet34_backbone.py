#!/usr/bin/env python3
"""Converts torchvision's ImageNet ResNet-34 weights (resnet34-333f7ec4.pth, the file the MLPerf SSD reference
starts from) into the backbone file `trainbench run ssd` loads with --set backbone_weights=PATH.

    /usr/bin/python3 scripts/convert_resnet34_backbone.py resnet34-333f7ec4.pth resnet34-backbone.pt

The output is a plain dict {tensor name: tensor} saved by torch.save (zip format, which LibTorch's
torch::pickle_load reads), holding torchvision's names for everything SSD keeps: conv1, bn1, layer1..layer3
(weights, biases and batch-norm running statistics). layer4 and fc are dropped, as the reference drops them.
Needs Debian's python3-torch (torchvision itself is not needed).
"""
import sys

import torch


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    state = torch.load(sys.argv[1], map_location="cpu")
    if not isinstance(state, dict) or "layer3.0.conv1.weight" not in state:
        sys.exit(f"{sys.argv[1]}: not a torchvision ResNet state dict (no layer3.0.conv1.weight)")
    backbone = {name: tensor.float().contiguous() for name, tensor in state.items()
                if not name.startswith(("layer4.", "fc.")) and not name.endswith("num_batches_tracked")}
    torch.save(backbone, sys.argv[2])
    print(f"{sys.argv[2]}: {len(backbone)} tensors")


if __name__ == "__main__":
    main()
