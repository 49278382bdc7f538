"""Reference for the SSD parity test, run with Debian's python3-torch and python3-torchvision.

Everything here is the v1.1 reference's own code (single_stage_detector/ssd/ from the directory argv[3]; exit 77
where it is absent): SSD300 with its ResNet-34 body (ssd300.py, base_model.py, built as checkpoint_reference.py
builds it), dboxes300_coco's DefaultBoxes, the matching (Encoder.encode), the loss (base_model.py's Loss) and the
decoding (Encoder.decode_batch); torch.optim.SGD takes the step. Loads the weights trainbench exported
(initial.pt beside argv[1]) strictly, reads the batch and settings from argv[1], and writes the default boxes,
the matched targets, the loss, every gradient, the weights after one SGD step (parameters and batch-norm
statistics, by the reference's names) and the decoded detections of the first image to argv[2].
"""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checkpoint_reference import official_ssd300  # noqa: E402


def official_box_code(code_dir):
    """The reference's own DefaultBoxes and Encoder (utils.py) and Loss (base_model.py); exit 77 without them."""
    root = os.path.join(code_dir, "mlcommons-training", "single_stage_detector", "ssd")
    if not os.path.isfile(os.path.join(root, "utils.py")):
        sys.exit(77)
    # utils.py imports the reference's MLPerf logger, which these classes do not call.
    logging = types.ModuleType("mlperf_logging.mllog")
    logging.constants = types.SimpleNamespace()
    sys.modules["mlperf_logging"] = types.ModuleType("mlperf_logging")
    sys.modules["mlperf_logging.mllog"] = logging
    sys.modules["mlperf_logger"] = types.SimpleNamespace(ssd_print=lambda *args, **kwargs: None)
    sys.path.insert(0, root)
    from utils import DefaultBoxes, Encoder  # noqa: E402  (the reference's own)
    from base_model import Loss  # noqa: E402
    return DefaultBoxes, Encoder, Loss


def main():
    inputs = torch.load(sys.argv[1])
    work_dir = os.path.dirname(os.path.abspath(sys.argv[1]))
    DefaultBoxes, Encoder, Loss = official_box_code(sys.argv[3])
    setting = lambda key: inputs["setting." + key]  # noqa: E731
    # dboxes300_coco, as train.py builds it.
    dboxes = DefaultBoxes(300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300], [21, 45, 99, 153, 207, 261, 315],
                          [[2], [2, 3], [2, 3], [2, 3], [2], [2]])
    model = official_ssd300(sys.argv[3], work_dir)
    model.load_state_dict(torch.load(os.path.join(work_dir, "initial.pt")), strict=True)
    model.train()

    images = inputs["images"]
    offsets = inputs["object_offsets"].tolist()
    matched_boxes, matched_labels = [], []
    encoder = Encoder(dboxes)
    for i in range(images.size(0)):
        boxes, labels = encoder.encode(inputs["boxes"][offsets[i]:offsets[i + 1]],
                                       inputs["labels"][offsets[i]:offsets[i + 1]])
        matched_boxes.append(boxes)
        matched_labels.append(labels)
    gloc = torch.stack(matched_boxes).transpose(1, 2).contiguous()
    glabel = torch.stack(matched_labels)

    optimizer = torch.optim.SGD(model.parameters(), lr=float(setting("lr")), momentum=float(setting("momentum")),
                                weight_decay=float(setting("weight_decay")))
    ploc, plabel = model(images)
    loss = Loss(dboxes)(ploc, plabel, gloc, glabel)
    optimizer.zero_grad()
    loss.backward()
    out = {"grad." + name: p.grad.clone() for name, p in model.named_parameters()}
    optimizer.step()

    with torch.no_grad():
        # decode_batch's scale_back_batch writes into its inputs: copies of the first image's outputs.
        boxes, labels, scores = encoder.decode_batch(inputs["decode.locations"][None].clone(),
                                                     inputs["decode.scores"][None].clone(), criteria=0.5,
                                                     max_output=200)[0]
    out.update({"default_boxes300": dboxes(order="xywh"), "matched_boxes": torch.stack(matched_boxes),
                "matched_labels": glabel, "loss": loss.detach(), "decoded_boxes": boxes, "decoded_labels": labels,
                "decoded_scores": scores})
    for key, value in model.state_dict().items():
        out["state." + key] = value
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
