"""The SSD network, default boxes, matching and loss for the speed peer (ssd_train_step.py), written from the
MLPerf v1.1 reference (single_stage_detector/ssd: ssd300.py, base_model.py, utils.py) for the presets' image
sizes and block counts, which SSD300 fixes: torchvision's own ResNet (BasicBlock) cut after layer3 with
layer3's first stride set to 1, the extra blocks and heads, DefaultBoxes, Encoder.encode and Loss. The parity
test (tests/workloads/ssd/) runs the reference's own SSD300 and box code instead.
"""
import itertools
from math import sqrt

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torchvision.models.resnet import BasicBlock, conv1x1

# The reference's extra blocks for a 38 px backbone output: (1x1 channels, 3x3 channels, stride, padding).
EXTRA_BLOCKS = [(256, 512, 2, 1), (256, 512, 2, 1), (128, 256, 2, 1), (128, 256, 1, 0), (128, 256, 1, 0)]


class DefaultBoxes:
    """utils.DefaultBoxes: xywh boxes, level by level, anchor-major, then rows, then columns; clamped to [0, 1]."""

    def __init__(self, fig_size, feat_size, steps, scales, aspect_ratios):
        fk = fig_size / np.array(steps)
        boxes = []
        for idx, sfeat in enumerate(feat_size):
            sk1 = scales[idx] / fig_size
            sk2 = scales[idx + 1] / fig_size
            sk3 = sqrt(sk1 * sk2)
            all_sizes = [(sk1, sk1), (sk3, sk3)]
            for alpha in aspect_ratios[idx]:
                w, h = sk1 * sqrt(alpha), sk1 / sqrt(alpha)
                all_sizes.append((w, h))
                all_sizes.append((h, w))
            for w, h in all_sizes:
                for i, j in itertools.product(range(sfeat), repeat=2):
                    cx, cy = (j + 0.5) / fk[idx], (i + 0.5) / fk[idx]
                    boxes.append((cx, cy, w, h))
        # float32, the dtype the reference's boxes have in training (its numpy centres would make newer torch
        # infer float64, which the reference's own Encoder then cannot mix with float32 ground truth).
        self.xywh = torch.tensor(boxes, dtype=torch.float32)
        self.xywh.clamp_(min=0, max=1)
        self.ltrb = self.xywh.clone()
        self.ltrb[:, 0] = self.xywh[:, 0] - 0.5 * self.xywh[:, 2]
        self.ltrb[:, 1] = self.xywh[:, 1] - 0.5 * self.xywh[:, 3]
        self.ltrb[:, 2] = self.xywh[:, 0] + 0.5 * self.xywh[:, 2]
        self.ltrb[:, 3] = self.xywh[:, 1] + 0.5 * self.xywh[:, 3]


def calc_iou_tensor(box1, box2):
    """utils.calc_iou_tensor: (N, 4) x (M, 4) ltrb -> (N, M)."""
    N, M = box1.size(0), box2.size(0)
    be1 = box1.unsqueeze(1).expand(-1, M, -1)
    be2 = box2.unsqueeze(0).expand(N, -1, -1)
    lt = torch.max(be1[:, :, :2], be2[:, :, :2])
    rb = torch.min(be1[:, :, 2:], be2[:, :, 2:])
    delta = rb - lt
    delta[delta < 0] = 0
    intersect = delta[:, :, 0] * delta[:, :, 1]
    delta1 = be1[:, :, 2:] - be1[:, :, :2]
    area1 = delta1[:, :, 0] * delta1[:, :, 1]
    delta2 = be2[:, :, 2:] - be2[:, :, :2]
    area2 = delta2[:, :, 0] * delta2[:, :, 1]
    return intersect / (area1 + area2 - intersect)


def encode(dboxes, bboxes_in, labels_in, criteria=0.5):
    """utils.Encoder.encode."""
    ious = calc_iou_tensor(bboxes_in, dboxes.ltrb)
    best_dbox_ious, best_dbox_idx = ious.max(dim=0)
    best_bbox_ious, best_bbox_idx = ious.max(dim=1)
    best_dbox_ious.index_fill_(0, best_bbox_idx, 2.0)
    idx = torch.arange(0, best_bbox_idx.size(0), dtype=torch.int64)
    best_dbox_idx[best_bbox_idx[idx]] = idx
    masks = best_dbox_ious > criteria
    labels_out = torch.zeros(dboxes.ltrb.size(0), dtype=torch.long)
    labels_out[masks] = labels_in[best_dbox_idx[masks]]
    bboxes_out = dboxes.ltrb.clone()
    bboxes_out[masks, :] = bboxes_in[best_dbox_idx[masks], :]
    x, y = 0.5 * (bboxes_out[:, 0] + bboxes_out[:, 2]), 0.5 * (bboxes_out[:, 1] + bboxes_out[:, 3])
    w, h = bboxes_out[:, 2] - bboxes_out[:, 0], bboxes_out[:, 3] - bboxes_out[:, 1]
    return torch.stack([x, y, w, h], dim=1), labels_out


class Loss(nn.Module):
    """base_model.Loss."""

    def __init__(self, dboxes):
        super().__init__()
        self.scale_xy = 1.0 / 0.1
        self.scale_wh = 1.0 / 0.2
        self.dboxes = dboxes.xywh.transpose(0, 1).unsqueeze(dim=0)

    def _loc_vec(self, loc):
        gxy = self.scale_xy * (loc[:, :2, :] - self.dboxes[:, :2, :]) / self.dboxes[:, 2:, :]
        gwh = self.scale_wh * (loc[:, 2:, :] / self.dboxes[:, 2:, :]).log()
        return torch.cat((gxy, gwh), dim=1).contiguous()

    def forward(self, ploc, plabel, gloc, glabel):
        mask = glabel > 0
        pos_num = mask.sum(dim=1)
        vec_gd = self._loc_vec(gloc)
        sl1 = F.smooth_l1_loss(ploc, vec_gd, reduction="none").sum(dim=1)
        sl1 = (mask.float() * sl1).sum(dim=1)
        con = F.cross_entropy(plabel, glabel, reduction="none")
        con_neg = con.clone()
        con_neg[mask] = 0
        _, con_idx = con_neg.sort(dim=1, descending=True)
        _, con_rank = con_idx.sort(dim=1)
        neg_num = torch.clamp(3 * pos_num, max=mask.size(1)).unsqueeze(-1)
        neg_mask = con_rank < neg_num
        closs = (con * (mask.float() + neg_mask.float())).sum(dim=1)
        total_loss = sl1 + closs
        num_mask = (pos_num > 0).float()
        pos_num = pos_num.float().clamp(min=1e-6)
        return (total_loss * num_mask / pos_num).mean(dim=0)


def resnet34_backbone(blocks, divisor):
    """ssd300.ResNet34: torchvision's ResNet-34 stem, layer1..layer3 built from torchvision's BasicBlock, with
    layer3's first block (and its 1x1 shortcut) at stride 1; widths divided by `divisor` for the small presets."""
    widths = [64 // divisor, 64 // divisor, 128 // divisor, 256 // divisor]
    backbone = nn.Module()
    backbone.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
    backbone.bn1 = nn.BatchNorm2d(widths[0])
    backbone.relu = nn.ReLU(inplace=True)
    backbone.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
    inplanes = widths[0]
    for stage in range(3):
        planes = widths[stage + 1]
        layers = []
        for block in range(blocks[stage]):
            stride = 2 if stage == 1 and block == 0 else 1
            downsample = None
            if stride != 1 or inplanes != planes:
                downsample = nn.Sequential(conv1x1(inplanes, planes, stride), nn.BatchNorm2d(planes))
            layers.append(BasicBlock(inplanes, planes, stride, downsample))
            inplanes = planes
        setattr(backbone, f"layer{stage + 1}", nn.Sequential(*layers))
    return backbone, inplanes


class SSD(nn.Module):
    """ssd300.SSD300, generalised to the leading extra blocks a smaller input drops and to divided widths."""

    def __init__(self, num_classes, blocks, backbone_side, boxes_per_location, divisor=1):
        super().__init__()
        self.backbone, backbone_channels = resnet34_backbone(blocks, divisor)
        skipped = {38: 0, 19: 1, 10: 2}[backbone_side]
        channels = [backbone_channels]
        blocks_out = []
        for mid, out, stride, padding in EXTRA_BLOCKS[skipped:]:
            mid, out = mid // divisor, out // divisor
            blocks_out.append(nn.Sequential(nn.Conv2d(channels[-1], mid, kernel_size=1), nn.ReLU(inplace=True),
                                            nn.Conv2d(mid, out, kernel_size=3, padding=padding, stride=stride),
                                            nn.ReLU(inplace=True)))
            channels.append(out)
        self.additional_blocks = nn.ModuleList(blocks_out)
        self.num_classes = num_classes
        self.loc = nn.ModuleList([nn.Conv2d(c, nd * 4, 3, padding=1) for nd, c in zip(boxes_per_location, channels)])
        self.conf = nn.ModuleList([nn.Conv2d(c, nd * num_classes, 3, padding=1)
                                   for nd, c in zip(boxes_per_location, channels)])

    def forward(self, x):
        b = self.backbone
        x = b.layer3(b.layer2(b.layer1(b.maxpool(b.relu(b.bn1(b.conv1(x)))))))
        features = [x]
        for block in self.additional_blocks:
            x = block(x)
            features.append(x)
        locs = [l(f).view(f.size(0), 4, -1) for f, l in zip(features, self.loc)]
        confs = [c(f).view(f.size(0), self.num_classes, -1) for f, c in zip(features, self.conf)]
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()
