"""The v1.1 reference's own Mask R-CNN, for the Mask R-CNN parity test, run with Debian's python3-torch and
python3-torchvision.

Builds GeneralizedRCNN (object_detection/pytorch/maskrcnn_benchmark from the directory argv[3], built from
configs/e2e_mask_rcnn_R_50_FPN_1x.yaml as checkpoint_reference.py builds it; exit 77 where it is absent) with the
C++ test's sample sizes, loads the weights trainbench exported (initial.pt beside argv[1]) strictly, and runs one
training forward on argv[1]'s batch: the reference's anchors, RPN loss and proposal selection, box head matching,
sampling and loss, and mask head with its polygon targets (structures/segmentation_mask.py). The sample sizes take
every candidate, so the samplers' random permutations choose nothing. Writes the five losses, every gradient and
the count of positive RoIs to argv[2].

Two compiled dependencies are not in Debian and stand in here: maskrcnn_benchmark's _C (RoIAlign forward and
backward and NMS, which are torchvision's ops with the same legacy alignment) and pycocotools' mask API
(frPyObjects, merge, decode), written from maskApi.c's rleFrPoly and rleDecode.
"""
import math
import os
import sys
import types

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checkpoint_reference import official_maskrcnn  # noqa: E402


def compiled_ops():
    """maskrcnn_benchmark._C's RoIAlign and NMS as layers/roi_align.py and layers/nms.py call them, written with
    torchvision's ops after csrc/cpu/ROIAlign_cpu.cpp and nms_cpu.cpp."""
    ops = types.ModuleType("maskrcnn_benchmark._C")
    ops.roi_align_forward = lambda features, rois, scale, height, width, ratio: torchvision.ops.roi_align(
        features, rois, (height, width), scale, ratio, aligned=False)
    ops.roi_align_backward = lambda grad, rois, scale, height, width, batch, channels, image_h, image_w, ratio: (
        torch.ops.torchvision._roi_align_backward(grad, rois, scale, height, width, batch, channels, image_h, image_w,
                                                  ratio, False))
    ops.nms = nms
    return ops


def nms(boxes, scores, threshold):
    """csrc/cpu/nms_cpu.cpp: boxes in inclusive pixels (x2 - x1 + 1), a float IoU >= threshold suppresses, and the
    survivors come back in index order. torchvision's NMS measures x2 - x1, suppresses above the threshold (the
    float just below it, here) and returns the survivors best first."""
    below = float(np.nextafter(np.float32(threshold), np.float32(0)))
    keep = torchvision.ops.nms(boxes + torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=boxes.dtype), scores, below)
    return keep.sort().values


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


def pycocotools_mask():
    """pycocotools.mask as Polygons.convert("mask") uses it: each polygon's RLE (kept decoded here), their union,
    and the decoded (height, width) mask."""
    api = types.ModuleType("pycocotools.mask")
    api.frPyObjects = lambda polygons, h, w: [rle_from_polygon(np.asarray(p, dtype=np.float64).tolist(), h, w)
                                              for p in polygons]
    api.merge = lambda masks: np.bitwise_or.reduce(masks, axis=0) if len(masks) > 1 else masks[0]
    api.decode = lambda mask: np.ascontiguousarray(mask)
    return api


def main():
    inputs = torch.load(sys.argv[1])
    work_dir = os.path.dirname(os.path.abspath(sys.argv[1]))
    s = {key[len("setting."):]: value.tolist() for key, value in inputs.items() if key.startswith("setting.")}
    sys.modules["pycocotools"] = types.ModuleType("pycocotools")
    sys.modules["pycocotools.mask"] = sys.modules["pycocotools"].mask = pycocotools_mask()
    model = official_maskrcnn(sys.argv[3], compiled=compiled_ops(), overrides={"MODEL": {
        "DEVICE": "cpu",
        "RPN": {"BATCH_SIZE_PER_IMAGE": s["rpn_batch_size_per_image"], "POSITIVE_FRACTION": s["rpn_positive_fraction"]},
        "ROI_HEADS": {"BATCH_SIZE_PER_IMAGE": s["roi_batch_size_per_image"],
                      "POSITIVE_FRACTION": s["roi_positive_fraction"]}}})
    model.load_state_dict(torch.load(os.path.join(work_dir, "initial.pt")), strict=True)
    model.train()
    from maskrcnn_benchmark.modeling.roi_heads.mask_head import loss as mask_loss  # noqa: E402
    from maskrcnn_benchmark.structures.bounding_box import BoxList  # noqa: E402
    from maskrcnn_benchmark.structures.image_list import ImageList  # noqa: E402
    from maskrcnn_benchmark.structures.segmentation_mask import SegmentationMask  # noqa: E402

    positive_rois = []
    project = mask_loss.project_masks_on_boxes

    def counted(masks, proposals, size):
        positive_rois.append(len(proposals))
        return project(masks, proposals, size)
    mask_loss.project_masks_on_boxes = counted

    sizes = inputs["sizes"].tolist()  # (height, width) per image
    offsets = inputs["object_offsets"].tolist()
    coords, point_offsets = inputs["polygon_coords"].tolist(), inputs["polygon_offsets"].tolist()
    polygons = [[coords[point_offsets[k]:point_offsets[k + 1]]] for k in range(len(point_offsets) - 1)]
    targets = []
    for i, (h, w) in enumerate(sizes):
        target = BoxList(inputs["boxes"][offsets[i]:offsets[i + 1]], (w, h), mode="xyxy")
        target.add_field("labels", inputs["labels"][offsets[i]:offsets[i + 1]])
        target.add_field("masks", SegmentationMask(polygons[offsets[i]:offsets[i + 1]], (w, h), mode="poly"))
        targets.append(target)
    losses = model(ImageList(inputs["images"], [tuple(size) for size in sizes]), targets)
    sum(losses.values()).backward()
    out = {name: value.detach() for name, value in losses.items()}
    out["positive_rois"] = torch.tensor(sum(positive_rois))
    for name, p in model.named_parameters():
        if p.grad is not None:
            out["grad." + name] = p.grad
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
