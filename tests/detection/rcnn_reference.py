"""Independent results for tests/detection/rcnn_ops_test.cpp: RoIAlign by torchvision.ops.roi_align (forward and
the features' gradient), and numpy / torch re-implementations, written from maskrcnn-benchmark's formulas, of
Detectron's anchors, the box coder and the test-time mask paste. Inputs are the C++ test's tensors (argv[1]);
results go to argv[2]."""
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

inputs = torch.load(sys.argv[1])
out = {}

# RoIAlign: each config row is (spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned).
features, rois = inputs["features"], inputs["rois"]
for i, (scale, ph, pw, ratio, aligned) in enumerate(inputs["roi_configs"].tolist()):
    x = features.clone().requires_grad_(True)
    pooled = torchvision.ops.roi_align(x, rois, (int(ph), int(pw)), spatial_scale=scale,
                                       sampling_ratio=int(ratio), aligned=bool(aligned))
    (pooled * inputs[f"roi_grad_output.{i}"]).sum().backward()
    out[f"roi_forward.{i}"] = pooled.detach()
    out[f"roi_grad.{i}"] = x.grad


# generate_anchors.py: the window (0, 0, stride - 1, stride - 1), ratio anchors of rounded sizes, then scaled.
def whctrs(anchor):
    w, h = anchor[2] - anchor[0] + 1, anchor[3] - anchor[1] + 1
    return w, h, anchor[0] + 0.5 * (w - 1), anchor[1] + 0.5 * (h - 1)


def make_anchors(ws, hs, x_ctr, y_ctr):
    ws, hs = ws[:, None], hs[:, None]
    return np.hstack((x_ctr - 0.5 * (ws - 1), y_ctr - 0.5 * (hs - 1), x_ctr + 0.5 * (ws - 1), y_ctr + 0.5 * (hs - 1)))


def generate_anchors(stride, size, ratios):
    w, h, x_ctr, y_ctr = whctrs(np.array([1, 1, stride, stride], dtype=np.float64) - 1)
    ws = np.round(np.sqrt(w * h / ratios))
    ratio_anchors = make_anchors(ws, np.round(ws * ratios), x_ctr, y_ctr)
    scale = size / stride
    rows = []
    for anchor in ratio_anchors:
        w, h, x_ctr, y_ctr = whctrs(anchor)
        rows.append(make_anchors(np.array([w * scale]), np.array([h * scale]), x_ctr, y_ctr))
    return np.vstack(rows)


ratios = inputs["anchor_ratios"].numpy()
for level, ((stride, size), (height, width)) in enumerate(zip(inputs["anchor_levels"].tolist(),
                                                               inputs["anchor_feature_sizes"].tolist())):
    cell = generate_anchors(int(stride), size, ratios)
    out[f"cell_anchors.{level}"] = torch.from_numpy(cell).float()
    ys, xs = np.meshgrid(np.arange(height) * stride, np.arange(width) * stride, indexing="ij")
    shifts = np.stack([xs.ravel(), ys.ravel(), xs.ravel(), ys.ravel()], axis=1)
    out[f"grid_anchors.{level}"] = torch.from_numpy((shifts[:, None, :] + cell[None]).reshape(-1, 4)).float()


# BoxCoder with TO_REMOVE = 1, in float64 from the float32 inputs.
def encode(gt, proposals, weights):
    wx, wy, ww, wh = weights
    pw, ph = proposals[:, 2] - proposals[:, 0] + 1, proposals[:, 3] - proposals[:, 1] + 1
    px, py = proposals[:, 0] + 0.5 * pw, proposals[:, 1] + 0.5 * ph
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return np.stack([wx * (gx - px) / pw, wy * (gy - py) / ph, ww * np.log(gw / pw), wh * np.log(gh / ph)], 1)


def decode(deltas, boxes, weights, clip=np.log(1000.0 / 16)):
    wx, wy, ww, wh = weights
    widths, heights = boxes[:, 2] - boxes[:, 0] + 1, boxes[:, 3] - boxes[:, 1] + 1
    cx, cy = boxes[:, 0] + 0.5 * widths, boxes[:, 1] + 0.5 * heights
    result = np.zeros_like(deltas)
    for k in range(deltas.shape[1] // 4):
        dx, dy = deltas[:, 4 * k] / wx, deltas[:, 4 * k + 1] / wy
        dw, dh = np.minimum(deltas[:, 4 * k + 2] / ww, clip), np.minimum(deltas[:, 4 * k + 3] / wh, clip)
        x, y = dx * widths + cx, dy * heights + cy
        w, h = np.exp(dw) * widths, np.exp(dh) * heights
        result[:, 4 * k:4 * k + 4] = np.stack([x - 0.5 * w, y - 0.5 * h, x + 0.5 * w - 1, y + 0.5 * h - 1], 1)
    return result


gt, proposals, deltas = (inputs[name].double().numpy() for name in ("coder_targets", "coder_proposals", "coder_deltas"))
for name, weights in (("1111", (1, 1, 1, 1)), ("101055", (10, 10, 5, 5))):
    out[f"encode.{name}"] = torch.from_numpy(encode(gt, proposals, weights))
    out[f"decode.{name}"] = torch.from_numpy(decode(deltas, proposals, weights))


# Masker.forward_single_image / paste_mask_in_image (padding 1, threshold 0.5).
def paste(mask, box, im_h, im_w, thresh=0.5, padding=1):
    m = mask.shape[-1]
    scale = float(m + 2 * padding) / m
    padded = mask.new_zeros((m + 2 * padding, m + 2 * padding))
    padded[padding:-padding, padding:-padding] = mask
    w_half, h_half = (box[2] - box[0]) * .5, (box[3] - box[1]) * .5
    x_c, y_c = (box[2] + box[0]) * .5, (box[3] + box[1]) * .5
    w_half *= scale
    h_half *= scale
    box = torch.stack([x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half]).to(torch.int32).tolist()
    w, h = max(box[2] - box[0] + 1, 1), max(box[3] - box[1] + 1, 1)
    resized = F.interpolate(padded[None, None].float(), size=(h, w), mode="bilinear", align_corners=False)[0][0]
    resized = resized > thresh
    im_mask = torch.zeros((im_h, im_w), dtype=torch.uint8)  # the test's boxes all overlap the image
    x_0, x_1 = max(box[0], 0), min(box[2] + 1, im_w)
    y_0, y_1 = max(box[1], 0), min(box[3] + 1, im_h)
    im_mask[y_0:y_1, x_0:x_1] = resized[(y_0 - box[1]):(y_1 - box[1]), (x_0 - box[0]):(x_1 - box[0])]
    return im_mask


im_h, im_w = inputs["paste_image_size"].tolist()
out["pasted"] = torch.stack([paste(mask, box, im_h, im_w)
                             for mask, box in zip(inputs["paste_masks"], inputs["paste_boxes"])])
torch.save(out, sys.argv[2])
