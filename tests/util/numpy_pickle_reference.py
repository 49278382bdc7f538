"""Pickles of numpy arrays for the numpy pickle reader's test, written by Debian's /usr/bin/python3 and numpy.

    numpy_pickle_reference.py write OUT PROTOCOL CASE   pickle CASE's dict to OUT with pickle protocol PROTOCOL
    numpy_pickle_reference.py read IN                   print IN's arrays as the reference loads a Caffe2 pickle
                                                        (pickle.load(f, encoding="latin1")): {name: [shape, values]}

Cases: "arrays", a dict of Caffe2-named float32 arrays with a float64, a 0-d and an empty one; "blobs", that dict
under "blobs" beside a "cfg" text, as Detectron's model files keep it; "ordered", an OrderedDict of it; and
"int64", "fortran", "big_endian", each an array the reader refuses.
"""
import collections
import json
import pickle
import sys

import numpy as np

SHAPES = {"conv1_w": (4, 3, 7, 7), "res_conv1_bn_s": (4,), "res_conv1_bn_b": (4,), "res2_0_branch1_w": (8, 4, 1, 1),
          "fc1000_b": (10,), "scalar": (), "empty": (0, 3)}


def values(index, shape, dtype=np.float32):
    """Exactly representable in float32: (k % 17 - 8) / 8 + index for the k-th element in C order."""
    count = int(np.prod(shape))
    return ((np.arange(count) % 17 - 8) * 0.125 + index).astype(dtype).reshape(shape)


def arrays():
    result = {name: values(i, shape) for i, (name, shape) in enumerate(sorted(SHAPES.items()))}
    result["double"] = values(len(SHAPES), (2, 3), np.float64)
    return result


def case(name):
    if name == "arrays":
        return arrays()
    if name == "blobs":
        return {"blobs": arrays(), "cfg": "MODEL:\n  TYPE: generalized_rcnn\n"}
    if name == "ordered":
        return collections.OrderedDict(sorted(arrays().items()))
    if name == "int64":
        return {"conv1_w": np.arange(6, dtype=np.int64)}
    if name == "fortran":
        return {"conv1_w": np.asfortranarray(values(0, (2, 3)))}
    if name == "big_endian":
        return {"conv1_w": values(0, (2, 3)).astype(">f4")}
    sys.exit(f"unknown case {name}")


def main():
    if sys.argv[1] == "write":
        with open(sys.argv[2], "wb") as f:
            pickle.dump(case(sys.argv[4]), f, protocol=int(sys.argv[3]))
    else:
        with open(sys.argv[2], "rb") as f:
            data = pickle.load(f, encoding="latin1")
        print(json.dumps({name: [list(array.shape), array.ravel().tolist()] for name, array in data.items()}))


if __name__ == "__main__":
    main()
