"""Independent computations for the medical layer's tests, run with Debian's /usr/bin/python3 (nibabel, numpy,
torch). Each subcommand prints JSON on stdout or writes files:

  nifti-data-dir                 nibabel's own test data folder
  nifti PATH...                  what nibabel reads: shape, pixdim, version, byte order, sum and sample voxels
  npy-write DIR                  .npy files written by numpy (including ones the C++ reader must refuse)
  npy-read PATH                  what numpy reads from a file the C++ side wrote
  preprocess IN_DIR OUT_DIR D H W  the U-Net3D reference's preprocess_dataset.py steps, written from its
                                 description (nibabel load, torch interpolate, numpy clip/normalise/edge pad)
  gaussian D H W                 the sliding-window importance patch: scipy.signal.gaussian's formula (scipy is
                                 not installed), outer product, cube root, divided by its maximum, float32
"""
import json
import os
import sys

import numpy as np


def nifti(paths):
    import nibabel
    out = {}
    for path in paths:
        image = nibabel.load(path)
        data = np.asarray(image.get_fdata(), dtype=np.float64)
        flat = data.reshape(-1)  # C order
        picks = sorted({0, flat.size // 3, flat.size // 2, flat.size - 1, 12345 % flat.size})
        header = image.header
        ndim = data.ndim
        out[path] = {
            "shape": list(data.shape),
            "spacing": [float(v) for v in header["pixdim"][1:ndim + 1]],
            "version": 2 if isinstance(image, nibabel.Nifti2Image) else 1,
            "big_endian": header.endianness == ">",
            "sum": float(data.sum()),
            "samples": {str(i): float(flat[i]) for i in picks},
        }
    print(json.dumps(out))


def npy_write(folder):
    rng = np.random.default_rng(3)
    np.save(os.path.join(folder, "float32.npy"), rng.standard_normal((1, 3, 4, 5)).astype(np.float32))
    np.save(os.path.join(folder, "uint8.npy"), rng.integers(0, 3, (1, 3, 4, 5)).astype(np.uint8))
    np.save(os.path.join(folder, "vector.npy"), np.arange(7, dtype=np.float32))
    np.save(os.path.join(folder, "float64.npy"), np.zeros((2, 2)))
    np.save(os.path.join(folder, "fortran.npy"), np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))
    with open(os.path.join(folder, "version2.npy"), "wb") as f:
        np.lib.format.write_array(f, np.arange(6, dtype=np.float32).reshape(2, 3), version=(2, 0))
    print(json.dumps({"float32_sum": float(np.load(os.path.join(folder, "float32.npy")).astype(np.float64).sum()),
                      "uint8_sum": int(np.load(os.path.join(folder, "uint8.npy")).astype(np.int64).sum())}))


def npy_read(path):
    array = np.load(path, allow_pickle=False)
    print(json.dumps({"shape": list(array.shape), "dtype": array.dtype.str, "sum": float(array.astype(np.float64).sum()),
                      "first": float(array.reshape(-1)[0]), "last": float(array.reshape(-1)[-1])}))


def preprocess(in_dir, out_dir, min_shape):
    import nibabel
    import torch
    import torch.nn.functional as F
    target_spacing = [1.6, 1.2, 1.2]
    for case in sorted(c for c in os.listdir(in_dir) if c.startswith("case_")):
        image = nibabel.load(os.path.join(in_dir, case, "imaging.nii.gz"))
        label = nibabel.load(os.path.join(in_dir, case, "segmentation.nii.gz"))
        spacing = image.header["pixdim"][1:4].tolist()
        x = image.get_fdata().astype(np.float32)[None]
        y = label.get_fdata().astype(np.uint8)[None]
        if spacing != target_spacing:
            shape = (np.array(spacing) / np.array(target_spacing) * np.array(x.shape[1:])).astype(int).tolist()
            x = F.interpolate(torch.from_numpy(x[None]), size=shape, mode="trilinear", align_corners=True)[0].numpy()
            y = F.interpolate(torch.from_numpy(y[None]), size=shape, mode="nearest")[0].numpy()
        x = (np.clip(x, -79.0, 304.0) - 101.0) / 76.9
        missing = [max(0, m - s) for m, s in zip(min_shape, x.shape[1:])]
        pads = [(0, 0)] + [(m // 2, m - m // 2) for m in missing]
        np.save(os.path.join(out_dir, case + "_x.npy"), np.pad(x, pads, mode="edge").astype(np.float32))
        np.save(os.path.join(out_dir, case + "_y.npy"), np.pad(y, pads, mode="edge").astype(np.uint8))


def gaussian(shape):
    axes = []
    for n in shape:
        std = 0.125 * n
        k = np.arange(0, n) - (n - 1.0) / 2.0
        axes.append(np.exp(-k ** 2 / (2 * std * std)))
    weights = np.cbrt(np.einsum("i,j,k->ijk", *axes))
    weights /= weights.max()
    print(json.dumps([float(v) for v in weights.astype(np.float32).reshape(-1)]))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "nifti-data-dir":
        import nibabel
        print(os.path.join(os.path.dirname(nibabel.__file__), "tests", "data"))
    elif command == "nifti":
        nifti(args)
    elif command == "npy-write":
        npy_write(args[0])
    elif command == "npy-read":
        npy_read(args[0])
    elif command == "preprocess":
        preprocess(args[0], args[1], [int(v) for v in args[2:5]])
    elif command == "gaussian":
        gaussian([int(v) for v in args])
    else:
        sys.exit("unknown command " + command)
