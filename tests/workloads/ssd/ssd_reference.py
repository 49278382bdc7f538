"""Reference for the SSD parity test, run with Debian's python3-torch and python3-torchvision.

The default boxes, the matching (Encoder.encode), the loss and the decoding (Encoder.decode_batch) are the
v1.1 reference's own code (single_stage_detector/ssd/utils.py and base_model.py, from the directory argv[3];
exit 77 where it is absent). The network is written here after ssd300.py, because the test's geometry (75 px,
one block per stage) is not one SSD300 builds: torchvision's own ResNet (BasicBlock) cut after layer3 with
layer3's first stride set to 1, the extra blocks and the heads. torch.optim.SGD takes the step. Reads the C++
test's weights, batch and settings from argv[1]; writes the default boxes (of the test's geometry and of
dboxes300_coco), matched targets, loss, the weights after one SGD step and the decoded detections of the first
image to argv[2].
"""
import os
import sys
import types

import torch

# The reduced network, shared with the speed peer.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "peers"))
from ssd_model import SSD  # noqa: E402

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
    DefaultBoxes, Encoder, Loss = official_box_code(sys.argv[3])
    setting = lambda key: inputs["setting." + key]  # noqa: E731
    image_size = int(setting("image_size"))
    feature_sizes = setting("feature_sizes").tolist()
    ratios = [[float(r) for r in row if r > 0] for row in setting("aspect_ratios").tolist()]
    dboxes = DefaultBoxes(image_size, feature_sizes, setting("steps").tolist(), setting("scales").tolist(), ratios)
    dboxes300 = DefaultBoxes(300, [38, 19, 10, 5, 3, 1], [8, 16, 32, 64, 100, 300], [21, 45, 99, 153, 207, 261, 315],
                             [[2], [2, 3], [2, 3], [2, 3], [2], [2]])
    num_classes = int(setting("num_classes"))
    model = SSD(num_classes, setting("blocks").tolist(), feature_sizes[0], [2 + 2 * len(r) for r in ratios])
    state = {key[len("state."):]: value for key, value in inputs.items() if key.startswith("state.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not missing, missing
    assert all(key.startswith("default_boxes") for key in unexpected), unexpected
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
    optimizer.step()

    with torch.no_grad():
        # decode_batch's scale_back_batch writes into its inputs: copies of the first image's outputs.
        boxes, labels, scores = encoder.decode_batch(inputs["decode.locations"][None].clone(),
                                                     inputs["decode.scores"][None].clone(), criteria=0.5,
                                                     max_output=200)[0]
    out = {"default_boxes": dboxes(order="xywh"), "default_boxes300": dboxes300(order="xywh"), "matched_boxes": torch.stack(matched_boxes),
           "matched_labels": glabel, "loss": loss.detach(), "decoded_boxes": boxes, "decoded_labels": labels,
           "decoded_scores": scores}
    for key, value in model.state_dict().items():
        out["state." + key] = value
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
