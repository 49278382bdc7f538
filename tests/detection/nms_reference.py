"""torchvision.ops.nms / batched_nms / box_iou on the C++ test's boxes (argv[1]); results to argv[2]."""
import sys

import torch
import torchvision

inputs = torch.load(sys.argv[1])
boxes, scores, classes = inputs["boxes"], inputs["scores"], inputs["classes"]
out = {"iou": torchvision.ops.box_iou(boxes, boxes)}
for threshold in (0.3, 0.5, 0.7):
    out[f"nms{threshold}"] = torchvision.ops.nms(boxes, scores, threshold)
    out[f"batched{threshold}"] = torchvision.ops.batched_nms(boxes, scores, classes, threshold)
torch.save(out, sys.argv[2])
