"""Same-machine peer for `trainbench bench maskrcnn`: Mask R-CNN in Debian's python3-torch + python3-torchvision
(torchvision.models.detection.MaskRCNN, with torchvision's RoIAlign and NMS kernels) at the preset's image size,
batch, RoI counts, head sizes and thread count, timed the same way (median step time after warm-up, a synthetic
in-memory batch with three square objects per image, target matching, sampling and mask targets in the step),
then inference on the same batch (detection and mask paste, 100 detections per image, as trainbench's bench).

    /usr/bin/python3 bench/peers/maskrcnn_train_step.py --preset mini --threads 2 --steps 10 --warmup 2

The body is torchvision's ResNet-50 (maskrcnn_resnet50_fpn's, frozen BN, stem and res2 frozen) for the
reference preset, and for the scaled presets maskrcnn_model.py's body (the preset's bottleneck widths and
depths, stride in the 1x1) with batch norm or frozen
batch norm as the preset says; FPN, anchors, RPN, box and mask heads are torchvision's, sized from the preset.
What torchvision does differently from trainbench (and the MLPerf reference): its post-NMS proposal count is
per image over all levels (the reference keeps post-NMS per level, then the top N over the whole batch in
training); its boxes have no +1 (no Detectron inclusive pixels); its mask targets are RoIAligned from bitmap
masks instead of rasterised from polygons; its frozen batch norm has an eps. The work per step is the same
to within those details.
"""
import torch
from torch import nn
from torchvision.models.detection import maskrcnn_resnet50_fpn
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNN, MaskRCNNHeads, MaskRCNNPredictor
from torchvision.ops import FeaturePyramidNetwork
from torchvision.ops.feature_pyramid_network import LastLevelMaxPool

import step_timing

import maskrcnn_model


class ScaledBackbone(nn.Module):
    """The preset's body with torchvision's FPN (P2..P5 and the max-pooled P6), as MaskRCNN expects."""

    def __init__(self, config):
        super().__init__()
        if not config["frozen_batch_norm"]:
            maskrcnn_model.FrozenBatchNorm2d = lambda n: nn.BatchNorm2d(n)  # noqa: E731
        self.body = maskrcnn_model.Body(config["body_widths"], config["blocks_per_stage"])
        self.out_channels = config["fpn_channels"]
        self.fpn = FeaturePyramidNetwork([4 * w for w in config["body_widths"]], self.out_channels,
                                         extra_blocks=LastLevelMaxPool())

    def forward(self, x):
        return self.fpn({str(i): c for i, c in enumerate(self.body(x))})


def build(config):
    classes, fpn, fc = config["num_classes"], config["fpn_channels"], config["box_fc_size"]
    mask_channels = config["mask_conv_channels"]
    batch = config["batch_size"]
    sizes = dict(
        min_size=config["min_image_size"], max_size=config["max_image_size"],
        image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0],  # the batch is already normalised
        rpn_pre_nms_top_n_train=config["rpn_pre_nms_top_n_train"],
        rpn_post_nms_top_n_train=config["proposals_per_image_train"],
        rpn_pre_nms_top_n_test=config["rpn_pre_nms_top_n_test"],
        rpn_post_nms_top_n_test=config["proposals_per_image_test"],
        rpn_batch_size_per_image=config["rpn_batch_size_per_image"],
        box_batch_size_per_image=config["roi_batch_size_per_image"],
        rpn_anchor_generator=AnchorGenerator(tuple((s,) for s in config["anchor_sizes"]), ((0.5, 1.0, 2.0),) * 5))
    if config["body_widths"] == [64, 128, 256, 512] and config["blocks_per_stage"] == [3, 4, 6, 3]:
        # torchvision's own heads are the reference's sizes (fc 1024, mask head 4 x 256).
        model = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, trainable_backbone_layers=3,
                                      num_classes=classes, **sizes)
    else:
        model = MaskRCNN(ScaledBackbone(config), box_head=TwoMLPHead(fpn * 7 * 7, fc),
                         box_predictor=FastRCNNPredictor(fc, classes), mask_head=MaskRCNNHeads(fpn, mask_channels, 1),
                         mask_predictor=MaskRCNNPredictor(mask_channels[-1], mask_channels[-1], classes), **sizes)
    return model, batch


def main():
    args, config = step_timing.setup("maskrcnn", __doc__)
    model, batch = build(config)
    model.train()
    base = config["base_learning_rate"]
    weights = [p for n, p in model.named_parameters() if p.requires_grad and not n.endswith("bias")]
    biases = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("bias")]
    optimizer = torch.optim.SGD([{"params": weights, "weight_decay": config["weight_decay"]},
                                 {"params": biases, "lr": base * config["bias_lr_factor"], "weight_decay": 0}],
                                lr=base, momentum=config["momentum"])
    # The image size trainbench's bench uses: a 4:3 image resized by the preset's rule, padded to 32.
    height = config["min_image_size"]
    width = min(int(height * 4 / 3), config["max_image_size"])
    images = [torch.randn(3, height, width) * 50 for _ in range(batch)]
    targets = []
    for i in range(batch):
        boxes, labels, masks = [], [], torch.zeros(3, height, width, dtype=torch.uint8)
        for k in range(3):
            side = height * (0.2 + 0.1 * k)
            left, top = width * 0.25 * k, height * 0.1
            boxes.append([left, top, left + side, top + side])
            labels.append(1 + (i + k) % (config["num_classes"] - 1))
            masks[k, int(top):int(top + side), int(left):int(left + side)] = 1
        targets.append({"boxes": torch.tensor(boxes), "labels": torch.tensor(labels), "masks": masks})

    def steps():
        while True:
            optimizer.zero_grad()
            losses = model(images, targets)
            loss = sum(losses.values())
            loss.backward()
            optimizer.step()
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "img/s", [f"{width}x{height} px"])

    # Inference as trainbench's bench times it: detection, per-class NMS, top 100 and the masks pasted into the
    # image, with score threshold 0 so that every image keeps 100 detections even from untrained weights.
    # trainbench's line also RLE-encodes the pasted masks; torchvision stops at the pasted masks.
    model.eval()
    model.roi_heads.score_thresh = 0.0
    detections_per_batch = []

    def infer():
        with torch.no_grad():
            detections = model(images)
        detections_per_batch.append(sum(len(d["masks"]) for d in detections))

    median = step_timing.median_call_seconds(args, infer)
    print(f"python3-torch {torch.__version__}: inference {batch / median:10.1f} img/s  (batch {batch}, {width}x{height} px, "
          f"{args.threads} threads, median of {args.steps} steps: {median:.5f} s/step, "
          f"{detections_per_batch[-1]} detections per batch)")


if __name__ == "__main__":
    main()
