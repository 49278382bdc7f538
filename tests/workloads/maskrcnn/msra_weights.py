"""A small ResNet body under Caffe2's names, pickled as Detectron's MSRA R-50.pkl holds them, for the MSRA weights
test; beside it, by torch.save, the same arrays under the names the reference's utils/c2_model_loading.py gives
them (torchvision's ResNet names: conv1, bn1, layer1..layer4), written here from its renaming rules.

    msra_weights.py OUT.pkl OUT.pt WIDTHS BLOCKS      e.g. msra_weights.py r.pkl r.pt 8,16,32,64 1,2,1,1

The pickle is a plain dict {blob name: float32 array} with protocol 2, and holds what the body does not use:
fc1000_w, fc1000_b and a _momentum blob. Needs Debian's python3-numpy and python3-torch.
"""
import pickle
import sys

import numpy as np
import torch


def main():
    widths = [int(w) for w in sys.argv[3].split(",")]
    blocks = [int(b) for b in sys.argv[4].split(",")]
    rng = np.random.default_rng(7)
    blobs, renamed = {}, {}

    def add(blob, name, shape):
        array = rng.standard_normal(shape).astype(np.float32)
        blobs[blob] = array
        if name:
            renamed[name] = torch.from_numpy(array.copy())

    def conv_and_norm(caffe2, torchvision_conv, torchvision_norm, out_channels, in_channels, kernel):
        add(caffe2 + "_w", torchvision_conv + ".weight", (out_channels, in_channels, kernel, kernel))
        add(caffe2 + "_bn_s", torchvision_norm + ".weight", (out_channels,))
        add(caffe2 + "_bn_b", torchvision_norm + ".bias", (out_channels,))

    add("conv1_w", "conv1.weight", (widths[0], 3, 7, 7))
    add("res_conv1_bn_s", "bn1.weight", (widths[0],))
    add("res_conv1_bn_b", "bn1.bias", (widths[0],))
    channels = widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for block in range(count):
            caffe2, name = f"res{stage + 2}_{block}", f"layer{stage + 1}.{block}"
            for branch, index, out_channels, in_channels, kernel in (
                    ("a", 1, width, channels, 1), ("b", 2, width, width, 3), ("c", 3, 4 * width, width, 1)):
                conv_and_norm(f"{caffe2}_branch2{branch}", f"{name}.conv{index}", f"{name}.bn{index}", out_channels,
                              in_channels, kernel)
            if block == 0:
                conv_and_norm(f"{caffe2}_branch1", f"{name}.downsample.0", f"{name}.downsample.1", 4 * width, channels, 1)
            channels = 4 * width
    add("fc1000_w", None, (10, channels))
    add("fc1000_b", None, (10,))
    add("res2_0_branch2a_w_momentum", None, (widths[0], widths[0], 1, 1))
    with open(sys.argv[1], "wb") as f:
        pickle.dump(blobs, f, protocol=2)
    torch.save(renamed, sys.argv[2])


if __name__ == "__main__":
    main()
