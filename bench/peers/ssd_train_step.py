"""Same-machine peer for `trainbench bench ssd`: the same model, batch, loss, optimizer and thread count in
Debian's python3-torch + python3-torchvision, timed the same way (median step time after warm-up, synthetic
in-memory batch with three objects per image, matching included in the step).

    /usr/bin/python3 bench/peers/ssd_train_step.py --preset mini --threads 2 --steps 10 --warmup 2

The model, Encoder.encode and Loss are ssd_model.py's (the network the parity test uses too), written as the
MLPerf reference writes them on torchvision's BasicBlock; settings come from
src/workloads/ssd/presets.json, so both sides train exactly the same network.
"""
import torch

import step_timing

from ssd_model import SSD, DefaultBoxes, Loss, encode

BACKBONE_SIDE = {300: 38, 150: 19, 75: 10}
FEATURE_SIZES = {38: [38, 19, 10, 5, 3, 1], 19: [19, 10, 5, 3, 1], 10: [10, 5, 3, 1]}


def main():
    args, config = step_timing.setup("ssd", __doc__)
    size, batch, classes = config["image_size"], config["batch_size"], config["num_classes"]
    side = BACKBONE_SIDE[size]
    ratios = config["box_aspect_ratios"]
    dboxes = DefaultBoxes(size, FEATURE_SIZES[side], config["box_steps"], config["box_scales"], ratios)
    model = SSD(classes, config["blocks_per_stage"], side, [2 + 2 * len(r) for r in ratios], config["width_divisor"])
    model.train()
    loss_function = Loss(dboxes)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=config["momentum"],
                                weight_decay=config["weight_decay"])
    images = torch.randn(batch, 3, size, size)
    # The same three boxes per image as trainbench's bench.
    truths = []
    for i in range(batch):
        boxes, labels = [], []
        for k in range(3):
            left, top = 0.1 * k, 0.05 * ((i + k) % 5)
            boxes.append([left, top, left + 0.4, top + 0.5])
            labels.append(1 + (i + k) % (classes - 1))
        truths.append((torch.tensor(boxes), torch.tensor(labels)))

    def steps():
        while True:
            matched = [encode(dboxes, boxes, labels) for boxes, labels in truths]
            gloc = torch.stack([m[0] for m in matched]).transpose(1, 2).contiguous()
            glabel = torch.stack([m[1] for m in matched])
            optimizer.zero_grad()
            ploc, plabel = model(images)
            loss = loss_function(ploc, plabel, gloc, glabel)
            loss.backward()
            optimizer.step()
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "img/s", [f"{size} px"])


if __name__ == "__main__":
    main()
