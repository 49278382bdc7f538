"""Independent reference for the Mask R-CNN parity test, run with Debian's python3-torch and python3-torchvision.

Written from the MLPerf v1.1 reference (object_detection/pytorch/maskrcnn_benchmark: modeling/backbone/resnet.py
and fpn.py, modeling/rpn/, modeling/roi_heads/box_head/ and mask_head/, modeling/box_coder.py, matcher.py,
poolers.py, structures/segmentation_mask.py) and pycocotools' maskApi.c (rleFrPoly, for the mask targets):
frozen-BN ResNet body with the stride in the 1x1 convolutions, FPN, Detectron anchors, the RPN loss, per-level
proposal selection and the top-N over the batch, the box head's matching and loss, and the mask head's loss on
polygon targets cropped to the positive proposals. RoIAlign is torchvision's (legacy alignment). The test's
sample sizes take every candidate, so no random sampling is involved.

Reads the C++ test's weights, batch and settings from argv[1]; writes the five losses and a few gradients to
argv[2].
"""
import math
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torchvision.ops import roi_align

STRIDES = [4, 8, 16, 32, 64]


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


class MaskRCNN(nn.Module):
    def __init__(self, s):
        super().__init__()
        widths, classes, fpn = s["body_widths"], s["num_classes"], s["fpn_channels"]
        self.body = Body(widths, s["blocks_per_stage"])
        for level in range(4):
            setattr(self, f"fpn_inner{level + 1}", nn.Conv2d(4 * widths[level], fpn, 1))
            setattr(self, f"fpn_layer{level + 1}", nn.Conv2d(fpn, fpn, 3, padding=1))
        a = len(s["aspect_ratios"])
        self.rpn_conv = nn.Conv2d(fpn, fpn, 3, padding=1)
        self.rpn_cls_logits = nn.Conv2d(fpn, a, 1)
        self.rpn_bbox_pred = nn.Conv2d(fpn, 4 * a, 1)
        fc, pooled = s["box_fc_size"], s["box_pooled_size"]
        self.fc6 = nn.Linear(fpn * pooled * pooled, fc)
        self.fc7 = nn.Linear(fc, fc)
        self.cls_score = nn.Linear(fc, classes)
        self.bbox_pred = nn.Linear(fc, 4 * classes)
        channels = fpn
        for layer, out in enumerate(s["mask_conv_channels"]):
            setattr(self, f"mask_fcn{layer + 1}", nn.Conv2d(channels, out, 3, padding=1))
            channels = out
        self.conv5_mask = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.mask_fcn_logits = nn.Conv2d(channels, classes, 1)

    def fpn(self, x):
        c = self.body(x)
        last_inner = self.fpn_inner4(c[3])
        results = [self.fpn_layer4(last_inner)]
        for level in (3, 2, 1):
            inner_top_down = F.interpolate(last_inner, scale_factor=2, mode="nearest")
            last_inner = getattr(self, f"fpn_inner{level}")(c[level - 1]) + inner_top_down
            results.insert(0, getattr(self, f"fpn_layer{level}")(last_inner))
        results.append(F.max_pool2d(results[-1], 1, 2, 0))
        return results


# ---- boxes (Detectron's inclusive pixels) ----

def whctrs(anchor):
    w, h = anchor[2] - anchor[0] + 1, anchor[3] - anchor[1] + 1
    return w, h, anchor[0] + 0.5 * (w - 1), anchor[1] + 0.5 * (h - 1)


def mkanchors(ws, hs, x_ctr, y_ctr):
    ws, hs = ws[:, None], hs[:, None]
    return np.hstack((x_ctr - 0.5 * (ws - 1), y_ctr - 0.5 * (hs - 1), x_ctr + 0.5 * (ws - 1), y_ctr + 0.5 * (hs - 1)))


def generate_anchors(stride, size, ratios):
    """Detectron's generate_anchors for one size: ratio enumeration, then scale enumeration."""
    anchor = np.array([1, 1, stride, stride], dtype=np.float64) - 1
    w, h, x_ctr, y_ctr = whctrs(anchor)
    size_ratios = w * h / np.array(ratios, dtype=np.float64)
    ws = np.round(np.sqrt(size_ratios))
    hs = np.round(ws * np.array(ratios, dtype=np.float64))
    ratio_anchors = mkanchors(ws, hs, x_ctr, y_ctr)
    out = []
    for a in ratio_anchors:
        w, h, x_ctr, y_ctr = whctrs(a)
        scale = np.array([size / stride])
        out.append(mkanchors(w * scale, h * scale, x_ctr, y_ctr))
    return torch.from_numpy(np.vstack(out)).float()


def grid_anchors(sizes_hw, anchor_sizes, ratios):
    result = []
    for (h, w), stride, size in zip(sizes_hw, STRIDES, anchor_sizes):
        base = generate_anchors(stride, size, ratios)
        shifts_x = torch.arange(0, w * stride, step=stride, dtype=torch.float32)
        shifts_y = torch.arange(0, h * stride, step=stride, dtype=torch.float32)
        shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
        shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
        shifts = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)
        result.append((shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
    return result


def iou(a, b):
    area_a = (a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
    area_b = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt + 1).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area_a[:, None] + area_b - inter)


def encode(gt, proposals, weights):
    wx, wy, ww, wh = weights
    ex_w = proposals[:, 2] - proposals[:, 0] + 1
    ex_h = proposals[:, 3] - proposals[:, 1] + 1
    ex_x = proposals[:, 0] + 0.5 * ex_w
    ex_y = proposals[:, 1] + 0.5 * ex_h
    gt_w = gt[:, 2] - gt[:, 0] + 1
    gt_h = gt[:, 3] - gt[:, 1] + 1
    gt_x = gt[:, 0] + 0.5 * gt_w
    gt_y = gt[:, 1] + 0.5 * gt_h
    return torch.stack((wx * (gt_x - ex_x) / ex_w, wy * (gt_y - ex_y) / ex_h, ww * torch.log(gt_w / ex_w),
                        wh * torch.log(gt_h / ex_h)), dim=1)


def decode(codes, boxes, weights):
    wx, wy, ww, wh = weights
    widths = boxes[:, 2] - boxes[:, 0] + 1
    heights = boxes[:, 3] - boxes[:, 1] + 1
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    clamp = math.log(1000.0 / 16)
    dx, dy = codes[:, 0::4] / wx, codes[:, 1::4] / wy
    dw, dh = (codes[:, 2::4] / ww).clamp(max=clamp), (codes[:, 3::4] / wh).clamp(max=clamp)
    x = dx * widths[:, None] + ctr_x[:, None]
    y = dy * heights[:, None] + ctr_y[:, None]
    w = torch.exp(dw) * widths[:, None]
    h = torch.exp(dh) * heights[:, None]
    out = torch.zeros_like(codes)
    out[:, 0::4], out[:, 1::4] = x - 0.5 * w, y - 0.5 * h
    out[:, 2::4], out[:, 3::4] = x + 0.5 * w - 1, y + 0.5 * h - 1
    return out


def clip(boxes, h, w):
    return torch.stack((boxes[:, 0].clamp(0, w - 1), boxes[:, 1].clamp(0, h - 1), boxes[:, 2].clamp(0, w - 1),
                        boxes[:, 3].clamp(0, h - 1)), dim=1)


def nms(boxes, scores, threshold):
    """The reference's greedy nms_cpu: by decreasing score, suppress IoU >= threshold (inclusive areas)."""
    order = scores.argsort(descending=True)
    overlaps = iou(boxes, boxes)
    suppressed = torch.zeros(len(boxes), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        suppressed |= overlaps[i] >= threshold
    return torch.tensor(keep, dtype=torch.int64)


def match(overlaps, high, low, allow_low_quality):
    values, matches = overlaps.max(dim=0)
    all_matches = matches.clone()
    matches[values < low] = -1
    matches[(values >= low) & (values < high)] = -2
    if allow_low_quality:
        highest, _ = overlaps.max(dim=1)
        pairs = torch.nonzero(overlaps == highest[:, None])
        matches[pairs[:, 1]] = all_matches[pairs[:, 1]]
    return matches


def smooth_l1(x, target, beta):
    n = torch.abs(x - target)
    return torch.where(n < beta, 0.5 * n ** 2 / beta, n - 0.5 * beta).sum()


def pool(features, rois, size):
    """poolers.Pooler: each RoI from its FPN level (LevelMapper: canonical scale 224 at level 4)."""
    area = (rois[:, 3] - rois[:, 1] + 1) * (rois[:, 4] - rois[:, 2] + 1)
    levels = torch.floor(4 + torch.log2(torch.sqrt(area) / 224 + 1e-6)).clamp(2, 5).to(torch.int64) - 2
    out = torch.zeros(len(rois), features[0].shape[1], size, size)
    for level in range(4):
        index = torch.nonzero(levels == level).squeeze(1)
        out[index] = roi_align(features[level], rois[index], (size, size), spatial_scale=1.0 / STRIDES[level],
                               sampling_ratio=2, aligned=False)
    return out


def to_rois(boxes_per_image):
    return torch.cat([torch.cat((torch.full((len(b), 1), float(i)), b), dim=1) for i, b in enumerate(boxes_per_image)])


# ---- mask targets: pycocotools' rleFrPoly and decode, then the union of the parts ----

def rle_from_polygon(xy, h, w):
    scale = 5.0
    k = len(xy) // 2
    x = [int(scale * xy[2 * j] + 0.5) for j in range(k)] + [int(scale * xy[0] + 0.5)]
    y = [int(scale * xy[2 * j + 1] + 0.5) for j in range(k)] + [int(scale * xy[1] + 0.5)]
    u, v = [], []
    for j in range(k):
        xs, xe, ys, ye = x[j], x[j + 1], y[j], y[j + 1]
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = (ye - ys) / dx if dx else 0.0
            for d in range(dx + 1):
                t = dx - d if flip else d
                u.append(t + xs)
                v.append(int(ys + s * t + 0.5))
        else:
            s = (xe - xs) / dy
            for d in range(dy + 1):
                t = dy - d if flip else d
                v.append(t + ys)
                u.append(int(xs + s * t + 0.5))
    points = []
    for j in range(1, len(u)):
        if u[j] == u[j - 1]:
            continue
        xd = (min(u[j], u[j - 1]) + 0.5) / scale - 0.5
        if math.floor(xd) != xd or xd < 0 or xd > w - 1:
            continue
        yd = (min(v[j], v[j - 1]) + 0.5) / scale - 0.5
        yd = math.ceil(min(max(yd, 0.0), float(h)))
        points.append(int(xd) * h + int(yd))
    a = sorted(points + [h * w])
    diffs, previous = [], 0
    for t in a:
        diffs.append(t - previous)
        previous = t
    counts, j = [diffs[0]], 1
    while j < len(diffs):
        if diffs[j] > 0:
            counts.append(diffs[j])
            j += 1
        else:
            j += 1
            if j < len(diffs):
                counts[-1] += diffs[j]
                j += 1
    flat = np.zeros(h * w, dtype=np.uint8)
    position, value = 0, 0
    for count in counts:
        flat[position:position + count] = value
        position += count
        value = 1 - value
    return flat.reshape(w, h).T  # column-major runs


def mask_target(polygons, box, size):
    """SegmentationMask.crop(box).resize((size, size)) in float32 as the reference's Polygons, rasterised."""
    box = box.to(torch.float32)
    w = max(float(box[2] - box[0]), 1.0)
    h = max(float(box[3] - box[1]), 1.0)
    mask = np.zeros((size, size), dtype=np.uint8)
    for polygon in polygons:
        p = torch.tensor(polygon, dtype=torch.float32)
        p[0::2] = (p[0::2] - box[0]) * (float(size) / w)
        p[1::2] = (p[1::2] - box[1]) * (float(size) / h)
        mask |= rle_from_polygon(p.double().tolist(), size, size)
    return torch.from_numpy(mask).float()


def main():
    inputs = torch.load(sys.argv[1])
    s = {key[len("setting."):]: value.tolist() for key, value in inputs.items() if key.startswith("setting.")}
    model = MaskRCNN(s)
    state = {key[len("state."):]: value for key, value in inputs.items() if key.startswith("state.")}
    model.load_state_dict(state, strict=True)
    for module in (model.body.conv1, model.body.layer1):  # FREEZE_CONV_BODY_AT 2
        for p in module.parameters():
            p.requires_grad_(False)

    images = inputs["images"]
    sizes = inputs["sizes"].tolist()  # (height, width) per image
    offsets = inputs["object_offsets"].tolist()
    gt_boxes = [inputs["boxes"][offsets[i]:offsets[i + 1]] for i in range(len(sizes))]
    gt_labels = [inputs["labels"][offsets[i]:offsets[i + 1]] for i in range(len(sizes))]
    coords, point_offsets = inputs["polygon_coords"].tolist(), inputs["polygon_offsets"].tolist()
    polygons = [[coords[point_offsets[k]:point_offsets[k + 1]]] for k in range(len(point_offsets) - 1)]
    gt_polygons = [polygons[offsets[i]:offsets[i + 1]] for i in range(len(sizes))]

    features = model.fpn(images)
    n = images.shape[0]
    objectness, deltas = [], []
    for f in features:
        t = F.relu(model.rpn_conv(f))
        logits, boxes = model.rpn_cls_logits(t), model.rpn_bbox_pred(t)
        a, h, w = logits.shape[1:]
        objectness.append(logits.permute(0, 2, 3, 1).reshape(n, -1))
        deltas.append(boxes.view(n, a, 4, h, w).permute(0, 3, 4, 1, 2).reshape(n, -1, 4))
    anchors = grid_anchors([f.shape[2:] for f in features], s["anchor_sizes"], s["aspect_ratios"])
    all_anchors = torch.cat(anchors)
    all_objectness, all_deltas = torch.cat(objectness, 1), torch.cat(deltas, 1)

    # RPN loss: every labelled anchor (the test's sample size takes them all).
    logits, labels, predicted, targets = [], [], [], []
    for i, (h, w) in enumerate(sizes):
        matches = match(iou(gt_boxes[i], all_anchors), 0.7, 0.3, True)
        label = (matches >= 0).float()
        label[matches == -2] = -1
        visible = (all_anchors[:, 0] >= 0) & (all_anchors[:, 1] >= 0) & (all_anchors[:, 2] < w) & (all_anchors[:, 3] < h)
        label[~visible] = -1
        positive = torch.nonzero(label == 1).squeeze(1)
        sampled = torch.nonzero(label >= 0).squeeze(1)
        assert len(positive) <= s["rpn_batch_size_per_image"] * s["rpn_positive_fraction"]
        assert len(sampled) <= s["rpn_batch_size_per_image"]
        logits.append(all_objectness[i][sampled])
        labels.append(label[sampled])
        predicted.append(all_deltas[i][positive])
        targets.append(encode(gt_boxes[i][matches[positive]], all_anchors[positive], (1, 1, 1, 1)))
    sampled_logits = torch.cat(logits)
    loss_objectness = F.binary_cross_entropy_with_logits(sampled_logits, torch.cat(labels))
    loss_rpn_box = smooth_l1(torch.cat(predicted), torch.cat(targets), 1.0 / 9) / len(sampled_logits)

    # Proposals (no gradient): per level top-N, decode, clip, NMS; then the top-N over the whole batch; plus the GT.
    with torch.no_grad():
        per_image = [[] for _ in sizes]
        for level_objectness, level_deltas, level_anchors in zip(objectness, deltas, anchors):
            probabilities = level_objectness.sigmoid()
            top, order = probabilities.topk(min(s["rpn_pre_nms_top_n_train"], probabilities.shape[1]), dim=1)
            for i, (h, w) in enumerate(sizes):
                boxes = clip(decode(level_deltas[i][order[i]], level_anchors[order[i]], (1, 1, 1, 1)), h, w)
                keep = nms(boxes, top[i], s["rpn_nms_threshold"])[:s["rpn_post_nms_top_n_train"]]
                per_image[i].append((boxes[keep], top[i][keep]))
        boxes = [torch.cat([b for b, _ in levels]) for levels in per_image]
        scores = [torch.cat([sc for _, sc in levels]) for levels in per_image]
        all_scores = torch.cat(scores)
        chosen = torch.zeros(len(all_scores), dtype=torch.bool)
        chosen[all_scores.topk(min(s["fpn_post_nms_top_n_train"], len(all_scores)))[1]] = True
        proposals, start = [], 0
        for i in range(n):
            proposals.append(torch.cat((boxes[i][chosen[start:start + len(boxes[i])]], gt_boxes[i])))
            start += len(boxes[i])

    # Box head: every proposal matched at 0.5, in proposal order.
    labels, regression_targets, positive_boxes, positive_labels, positive_objects = [], [], [], [], []
    for i in range(n):
        matches = match(iou(gt_boxes[i], proposals[i]), 0.5, 0.5, False)
        label = gt_labels[i][matches.clamp(min=0)].clone()
        label[matches == -1] = 0
        assert (label > 0).sum() <= s["roi_batch_size_per_image"] * s["roi_positive_fraction"]
        labels.append(label)
        regression_targets.append(encode(gt_boxes[i][matches.clamp(min=0)], proposals[i], (10, 10, 5, 5)))
        positive = torch.nonzero(label > 0).squeeze(1)
        positive_boxes.append(proposals[i][positive])
        positive_labels.append(label[positive])
        positive_objects.append(matches[positive].tolist())
    x = pool(features[:4], to_rois(proposals), s["box_pooled_size"]).flatten(1)
    x = F.relu(model.fc7(F.relu(model.fc6(x))))
    class_logits, box_regression = model.cls_score(x), model.bbox_pred(x)
    labels = torch.cat(labels)
    loss_classifier = F.cross_entropy(class_logits, labels)
    positive = torch.nonzero(labels > 0).squeeze(1)
    columns = 4 * labels[positive][:, None] + torch.tensor([0, 1, 2, 3])
    loss_box_reg = smooth_l1(box_regression[positive[:, None], columns], torch.cat(regression_targets)[positive],
                             1.0) / labels.numel()

    # Mask head on the positives.
    resolution = 2 * s["mask_pooled_size"]
    mask_targets = torch.stack([mask_target(gt_polygons[i][k], box, resolution) for i in range(n)
                                for k, box in zip(positive_objects[i], positive_boxes[i])])
    x = pool(features[:4], to_rois(positive_boxes), s["mask_pooled_size"])
    for layer in range(len(s["mask_conv_channels"])):
        x = F.relu(getattr(model, f"mask_fcn{layer + 1}")(x))
    mask_logits = model.mask_fcn_logits(F.relu(model.conv5_mask(x)))
    mask_labels = torch.cat(positive_labels)
    loss_mask = F.binary_cross_entropy_with_logits(mask_logits[torch.arange(len(mask_labels)), mask_labels], mask_targets)

    total = loss_objectness + loss_rpn_box + loss_classifier + loss_box_reg + loss_mask
    total.backward()
    out = {"loss_objectness": loss_objectness.detach(), "loss_rpn_box_reg": loss_rpn_box.detach(),
           "loss_classifier": loss_classifier.detach(), "loss_box_reg": loss_box_reg.detach(),
           "loss_mask": loss_mask.detach(), "positive_rois": torch.tensor(len(mask_labels)),
           "sampled_rois": torch.tensor(labels.numel()), "mask_target_pixels": mask_targets.sum()}
    for name, p in model.named_parameters():
        if p.grad is not None:
            out["grad." + name] = p.grad
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
