"""State dicts written by Debian's python3-torch for the torch file reader's test (util/torch_file.h).

    torch_file_reference.py write DIR     write DIR/zip.pt (torch.save), DIR/legacy.pt (the pre-zip format) and
                                          DIR/protocol4.pt (pickle protocol 4) of one OrderedDict, and print what
                                          each tensor holds: [{name, dtype, shape, hex}], hex being its elements'
                                          bytes in C order as torch holds them
    torch_file_reference.py model DIR     write DIR/model.pt, torch.save(model.state_dict()) of a small network,
                                          and print the same list
    torch_file_reference.py compare A B   exit 1 naming the first tensor whose name, dtype, shape or bytes differ
                                          between torch.load(A) and torch.load(B) (in any order)

The OrderedDict holds every dtype the benchmarks use, a Parameter, a transposed (non-contiguous) tensor, a tensor
with a storage offset (a row of a matrix another entry also views: two tensors sharing one storage), a 0-d and an
empty tensor.
"""
import collections
import json
import os
import sys

import torch


def described(state):
    return [{"name": name, "dtype": str(tensor.dtype).replace("torch.", ""), "shape": list(tensor.shape),
             "hex": tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex()}
            for name, tensor in state.items()]


def state_dict():
    torch.manual_seed(0)
    state = collections.OrderedDict()
    state["weight"] = torch.nn.Parameter(torch.randn(3, 4))
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        state[str(dtype).replace("torch.", "")] = torch.randn(2, 5).to(dtype)
    state["int64"] = torch.arange(-6, 6, dtype=torch.int64).reshape(3, 4)
    state["int32"] = torch.tensor([-2 ** 31, 7, 2 ** 31 - 1], dtype=torch.int32)
    state["int16"] = torch.tensor([-300, 300], dtype=torch.int16)
    state["int8"] = torch.tensor([-128, 127], dtype=torch.int8)
    state["uint8"] = torch.arange(250, 256, dtype=torch.uint8)
    state["bool"] = torch.tensor([True, False, True])
    matrix = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    state["matrix"] = matrix
    state["transposed"] = matrix.t()
    state["row"] = matrix[2]  # storage offset 12, the same storage as "matrix"
    state["column_slice"] = matrix[1:3, 2:5]
    state["scalar"] = torch.tensor(2.5)
    state["empty"] = torch.zeros(0, 3)
    state["num_batches_tracked"] = torch.tensor(7)
    return state


def compare(first, second):
    described_first = {tensor["name"]: tensor for tensor in described(torch.load(first))}
    described_second = {tensor["name"]: tensor for tensor in described(torch.load(second))}
    if described_first.keys() != described_second.keys():
        sys.exit(f"names differ: {sorted(described_first.keys() ^ described_second.keys())}")
    for name, tensor in described_first.items():
        if tensor != described_second[name]:
            sys.exit(f"{name} differs: {tensor} and {described_second[name]}")


def main():
    command, directory = sys.argv[1], sys.argv[2]
    if command == "compare":
        compare(sys.argv[2], sys.argv[3])
        return
    if command == "write":
        state = state_dict()
        torch.save(state, os.path.join(directory, "zip.pt"))
        torch.save(state, os.path.join(directory, "legacy.pt"), _use_new_zipfile_serialization=False)
        torch.save(state, os.path.join(directory, "protocol4.pt"), pickle_protocol=4)
    else:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(5, 2))
        state = model.state_dict()  # an OrderedDict with _metadata, which pickles as BUILD
        torch.save(state, os.path.join(directory, "model.pt"))
    print(json.dumps(described(state)))


if __name__ == "__main__":
    main()
