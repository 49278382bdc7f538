"""State dicts for the weights-file tests of the trainbench binary, written by Debian's python3-torch.

    weights_files.py resave OUTDIR IN... torch.load each IN (a state dict `checkpoint export` wrote) and save it
                                         again as Python's own files: OUTDIR/<IN's stem>_ordered.pt, an OrderedDict
                                         (torch.save), and OUTDIR/<stem>_legacy.pt, the same in the legacy format
    weights_files.py nan IN OUT NAME     IN with element 0 of tensor NAME set to NaN, saved to OUT
"""
import collections
import os
import sys

import torch


def main():
    command = sys.argv[1]
    if command == "resave":
        for source in sys.argv[3:]:
            ordered = collections.OrderedDict(torch.load(source).items())
            stem = os.path.join(sys.argv[2], os.path.splitext(os.path.basename(source))[0])
            torch.save(ordered, stem + "_ordered.pt")
            torch.save(ordered, stem + "_legacy.pt", _use_new_zipfile_serialization=False)
    else:
        state = torch.load(sys.argv[2])
        state[sys.argv[4]].view(-1)[0] = float("nan")
        torch.save(state, sys.argv[3])


if __name__ == "__main__":
    main()
