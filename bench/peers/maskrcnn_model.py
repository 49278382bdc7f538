"""The Mask R-CNN body for the speed peer (maskrcnn_train_step.py) at the scaled presets' widths and depths, which
the reference's ResNet-50 fixes: written from the MLPerf v1.1 reference (object_detection/pytorch/maskrcnn_benchmark/
modeling/backbone/resnet.py): bottlenecks with the stride in the 1x1 (STRIDE_IN_1X1) and frozen batch norm.
"""
import torch
from torch import nn
import torch.nn.functional as F


class FrozenBatchNorm2d(nn.Module):
    def __init__(self, n):
        super().__init__()
        for name, value in (("weight", torch.ones(n)), ("bias", torch.zeros(n)), ("running_mean", torch.zeros(n)),
                            ("running_var", torch.ones(n))):
            self.register_buffer(name, value)

    def forward(self, x):
        scale = self.weight * self.running_var.rsqrt()
        bias = self.bias - self.running_mean * scale
        return x * scale.reshape(1, -1, 1, 1) + bias.reshape(1, -1, 1, 1)


class Bottleneck(nn.Module):
    """resnet.Bottleneck with STRIDE_IN_1X1 = True."""

    def __init__(self, in_channels, width, stride):
        super().__init__()
        out_channels = 4 * width
        self.conv1 = nn.Conv2d(in_channels, width, 1, stride=stride, bias=False)
        self.bn1 = FrozenBatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = FrozenBatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = FrozenBatchNorm2d(out_channels)
        self.downsample = None
        if in_channels != out_channels or stride != 1:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            FrozenBatchNorm2d(out_channels))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu_(self.bn1(self.conv1(x)))
        out = F.relu_(self.bn2(self.conv2(out)))
        return F.relu_(self.bn3(self.conv3(out)) + identity)


class Body(nn.Module):
    def __init__(self, widths, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False)
        self.bn1 = FrozenBatchNorm2d(widths[0])
        channels = widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            layers = []
            for block in range(count):
                layers.append(Bottleneck(channels, width, 2 if stage > 0 and block == 0 else 1))
                channels = 4 * width
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))

    def forward(self, x):
        x = F.max_pool2d(F.relu_(self.bn1(self.conv1(x))), kernel_size=3, stride=2, padding=1)
        outputs = []
        for stage in range(4):
            x = getattr(self, f"layer{stage + 1}")(x)
            outputs.append(x)
        return outputs
