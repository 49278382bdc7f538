"""Seeds for the torch file fuzz target (torch_file_fuzzer.cpp), written by Debian's python3-torch.

    /usr/bin/python3 fuzz/torch_file_seeds.py OUTDIR

scripts/fuzz.sh runs it into build-fuzz/seeds/torch_file/ (generated, never committed): small state dicts in the
zip format (pickle protocols 2 and 4) and the legacy one, an OrderedDict of every dtype the benchmarks use, a
module's state_dict (with its _metadata), views sharing one storage (a transpose, a row, a slice), a Parameter,
0-d and empty tensors, and a state dict under "model"; and each zip file's data.pkl alone (<name>.pkl), which the
target also reads as the pickle of an archive of its own.
"""
import collections
import os
import sys
import zipfile

import torch


def state_dicts():
    torch.manual_seed(0)
    dtypes = collections.OrderedDict()
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
                  torch.int16, torch.int8, torch.uint8, torch.bool):
        dtypes[str(dtype)] = (torch.randn(2, 3) * 10).to(dtype)
    matrix = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    views = collections.OrderedDict(matrix=matrix, transposed=matrix.t(), row=matrix[1], slice=matrix[1:, 1:3],
                                    scalar=torch.tensor(1.5), empty=torch.zeros(0, 2),
                                    parameter=torch.nn.Parameter(torch.ones(2)))
    module = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2), torch.nn.Linear(2, 2))
    return {"dtypes": dtypes, "views": views, "module": module.state_dict(),
            "wrapped": {"model": collections.OrderedDict(w=torch.ones(3))}}


def main():
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    for name, state in state_dicts().items():
        torch.save(state, os.path.join(directory, name + ".pt"))
        with zipfile.ZipFile(os.path.join(directory, name + ".pt")) as archive, \
                open(os.path.join(directory, name + ".pkl"), "wb") as pickle:
            pickle.write(archive.read(name + "/data.pkl"))
        torch.save(state, os.path.join(directory, name + "_protocol4.pt"), pickle_protocol=4)
        torch.save(state, os.path.join(directory, name + "_legacy.pt"), _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()
