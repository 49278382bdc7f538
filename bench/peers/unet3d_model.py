"""The U-Net3D network, loss and sliding-window inference for the speed peer (unet3d_train_step.py), written
from the MLPerf v1.1 reference (image_segmentation/pytorch/model/{unet3d,layers,losses}.py, runtime/inference.py)
with the preset's filter widths, which the reference's own Unet3D fixes at 32..320: conv blocks Conv3d(no bias)
+ InstanceNorm3d(affine) + ReLU, stride-2 downsampling stages, a bottleneck, transposed-convolution upsampling
with the skip concatenated after the upsampled tensor, a 1x1x1 output convolution; DiceCELoss; the
Gaussian-weighted sliding window. The parity test (tests/workloads/unet3d/) runs the reference's own code.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.InstanceNorm3d(cout, affine=True), nn.ReLU())


class Two(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = block(cin, cout, stride)
        self.conv2 = block(cout, cout)

    def forward(self, x):
        return self.conv2(self.conv1(x))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.upsample_conv = nn.Sequential(nn.ConvTranspose3d(cin, cout, 2, stride=2, bias=True))
        self.conv1 = block(2 * cout, cout)
        self.conv2 = block(cout, cout)

    def forward(self, x, skip):
        return self.conv2(self.conv1(torch.cat((self.upsample_conv(x), skip), dim=1)))


class Output(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        self.conv = nn.Conv3d(cin, classes, 1, bias=True)  # OutputLayer's name: output.conv.weight

    def forward(self, x):
        return self.conv(x)


class Unet3d(nn.Module):
    def __init__(self, filters):
        super().__init__()
        self.input_block = Two(1, filters[0], 1)
        self.downsample = nn.ModuleList([Two(i, o, 2) for i, o in zip(filters[:-1], filters[1:])])
        self.bottleneck = Two(filters[-1], filters[-1], 2)
        ups = [Up(filters[-1], filters[-1])]
        ups += [Up(i, o) for i, o in zip(reversed(filters[1:]), reversed(filters[:-1]))]
        self.upsample = nn.ModuleList(ups)
        self.output = Output(filters[0], 3)

    def forward(self, x):
        x = self.input_block(x)
        skips = [x]
        for stage in self.downsample:
            x = stage(x)
            skips.append(x)
        x = self.bottleneck(x)
        for stage, skip in zip(self.upsample, reversed(skips)):
            x = stage(x, skip)
        return self.output(x)


def dice(prediction, target):
    prediction, target = prediction[:, 1:], target[:, 1:]
    axes = [2, 3, 4]
    return (2.0 * (prediction * target).sum(axes) + 1e-6) / (target.sum(axes) + prediction.sum(axes) + 1e-6)


def one_hot(labels):
    return F.one_hot(labels.long(), num_classes=3).permute(0, 4, 1, 2, 3).float()


def dice_ce(logits, labels):
    ce = nn.CrossEntropyLoss()(logits, labels)
    return (torch.mean(1.0 - dice(torch.softmax(logits, dim=1), one_hot(labels))) + ce) / 2


def gaussian_patch(n):
    std = 0.125 * n
    k = np.arange(0, n) - (n - 1.0) / 2.0
    g = np.exp(-k ** 2 / (2 * std * std))
    g3 = np.cbrt(np.outer(np.outer(g, g), g).reshape(n, n, n))
    return torch.from_numpy(g3 / g3.max())


def sliding_window(model, inputs, labels, roi, overlap):
    shape = list(inputs.shape[2:])
    strides = [int(r * (1 - overlap)) for r in roi]
    bounds = [s % st for s, st in zip(shape, strides)]
    bounds = [b if b < st // 2 else 0 for b, st in zip(bounds, strides)]
    crop = tuple(slice(b // 2, s - (b - b // 2)) for b, s in zip(bounds, shape))
    inputs, labels = inputs[(..., *crop)], labels[(..., *crop)]
    cropped = list(inputs.shape[2:])
    pads = [(st - c % st) % st for c, st in zip(cropped, strides)]
    pads = [p if c + p >= r else p + st for p, c, r, st in zip(pads, cropped, roi, strides)]
    paddings = [pads[2] // 2, pads[2] - pads[2] // 2, pads[1] // 2, pads[1] - pads[1] // 2, pads[0] // 2,
                pads[0] - pads[0] // 2]
    inputs = F.pad(inputs, paddings, mode="constant", value=-2.2)
    padded = inputs.shape[2:]
    counts = [(p - r) // st + 1 for p, r, st in zip(padded, roi, strides)]
    result = torch.zeros((1, 3, *padded))
    norm = torch.zeros_like(result)
    patch = gaussian_patch(roi[0]).float()
    for i in range(0, strides[0] * counts[0], strides[0]):
        for j in range(0, strides[1] * counts[1], strides[1]):
            for k in range(0, strides[2] * counts[2], strides[2]):
                window = (..., slice(i, i + roi[0]), slice(j, j + roi[1]), slice(k, k + roi[2]))
                result[window] += model(inputs[window]) * patch
                norm[window] += patch
    result /= norm
    back = (..., slice(paddings[4], paddings[4] + cropped[0]), slice(paddings[2], paddings[2] + cropped[1]),
            slice(paddings[0], paddings[0] + cropped[2]))
    return result[back], labels
