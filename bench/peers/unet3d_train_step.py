"""Same-machine peer for `trainbench bench unet3d`: the same network, patch, batch and thread count in Debian's
python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch), plus the
sliding-window evaluation of one case of the preset's bench_eval_shape.

    /usr/bin/python3 bench/peers/unet3d_train_step.py --preset mini --threads 2 --steps 20 --warmup 3

The model, loss and inference are unet3d_model.py's, written from the MLPerf reference at the preset's widths: conv + InstanceNorm3d + ReLU blocks, transposed-
convolution upsampling, DiceCELoss, torch.optim.SGD(nesterov=True), Gaussian-weighted sliding windows.
Settings come from src/workloads/unet3d/presets.json, so both sides run exactly the same network.
"""
import time

import torch

import step_timing

from unet3d_model import Unet3d, dice_ce, sliding_window


def main():
    args, config = step_timing.setup("unet3d", __doc__)
    patch = config["patch"]
    batch = config["batch_size"]
    model = Unet3d(config["filters"])
    model.train()
    images = torch.randn(batch, 1, *patch)
    labels = torch.randint(3, (batch, *patch))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=config["momentum"], nesterov=True)

    def steps():
        while True:
            optimizer.zero_grad()
            loss = dice_ce(model(images), labels)
            loss.backward()
            optimizer.step()
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "samples/s", details=["patch " + "x".join(map(str, patch))])

    shape = config["bench_eval_shape"]
    model.eval()
    volume = torch.randn(1, 1, *shape)
    volume_labels = torch.randint(3, (1, *shape))
    begin = time.perf_counter()
    with torch.no_grad():
        logits, _ = sliding_window(model, volume, volume_labels, patch, config["validation_overlap"])
        logits.argmax(1).sum().item()
    print(f"python3-torch {torch.__version__}: evaluation {time.perf_counter() - begin:.2f} s/case  "
          f"({'x'.join(map(str, shape))} case)")


if __name__ == "__main__":
    main()
