"""The reference side of zarr_test.cpp and dist_checkpoint_test.cpp, run by Debian's /usr/bin/python3 with
python3-zarr (numcodecs' blosc, zlib, gzip) and python3-torch.

  zarr_reference.py write DIR       python3-zarr writes the cases below into DIR/<case>; prints their values
  zarr_reference.py read DIR        reads every array under DIR; prints {name: {shape, dtype, values}}
  zarr_reference.py torch_save PATH torch.save of a dict of every plain type; prints it tagged
  zarr_reference.py torch_load PATH torch.load of PATH; prints it tagged

Values go out as JSON with NaN as null. Tagged values spell each Python type, so that a tuple is not a list and
a float keeps every bit: ["None"], ["bool", b], ["int", "123"], ["float", float.hex()], ["str", s],
["list", [...]], ["tuple", [...]], ["dict", [[key, value], ...]].
"""
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np


def pattern(count, dtype):
    """The values both sides expect: exact in every dtype used (multiples of 1/8 up to 6.25, or integers)."""
    k = np.arange(count, dtype=np.int64)
    if np.dtype(dtype).kind == 'f':
        return ((k * 37 % 101 - 50) / 8.0).astype(dtype)
    if np.dtype(dtype).kind == 'u':
        return (k * 37 % 101).astype(dtype)
    return (k * 37 % 101 - 50).astype(dtype)


def cases():
    from numcodecs import Blosc, GZip, Zlib
    return {
        'f4_blosc_lz4_shuffle': dict(shape=(7, 10), chunks=(3, 4), dtype='<f4',
                                     compressor=Blosc(cname='lz4', clevel=5, shuffle=Blosc.SHUFFLE)),
        'f8_blosc_zstd_bitshuffle': dict(shape=(5, 6, 7), chunks=(2, 3, 4), dtype='<f8',
                                         compressor=Blosc(cname='zstd', clevel=3, shuffle=Blosc.BITSHUFFLE)),
        'i4_blosc_blosclz_noshuffle': dict(shape=(9,), chunks=(4,), dtype='<i4',
                                           compressor=Blosc(cname='blosclz', clevel=9, shuffle=Blosc.NOSHUFFLE)),
        'u2_blosc_lz4hc_autoshuffle': dict(shape=(6, 7), chunks=(4, 4), dtype='<u2',
                                           compressor=Blosc(cname='lz4hc', clevel=4, shuffle=Blosc.AUTOSHUFFLE)),
        'f2_uncompressed': dict(shape=(6, 5), chunks=(4, 2), dtype='<f2', compressor=None, fill_value=None),
        'u1_zlib': dict(shape=(10,), chunks=(3,), dtype='|u1', compressor=Zlib(level=3)),
        'i8_gzip': dict(shape=(4, 4), chunks=(3, 3), dtype='<i8', compressor=GZip(level=5)),
        'i4_big_endian': dict(shape=(5,), chunks=(2,), dtype='>i4'),
        'f4_slash_separator': dict(shape=(4, 5), chunks=(2, 2), dtype='<f4', dimension_separator='/'),
        'f4_scalar': dict(shape=(), chunks=(), dtype='<f4', compressor=None),
        # As Megatron's checkpoint: layers stacked on axis 0, one chunk per shard, no compressor, fill_value None.
        'f4_megatron_stacked': dict(shape=(4, 6, 8), chunks=(1, 3, 8), dtype='<f4', compressor=None,
                                    fill_value=None),
    }


def write(directory):
    import zarr
    values = {}
    for name, spec in cases().items():
        array = zarr.create(store=os.path.join(directory, name), **spec)
        data = pattern(int(np.prod(spec['shape'], dtype=np.int64)), spec['dtype']).reshape(spec['shape'])
        array[...] = data
        values[name] = data
    # Chunks that are never written read as fill_value: only the top-left chunk of this one exists.
    missing = zarr.create((6, 6), chunks=(3, 3), dtype='<f4', fill_value=7.5,
                          store=os.path.join(directory, 'f4_missing_chunks_fill'))
    missing[0:3, 0:3] = pattern(9, '<f4').reshape(3, 3)
    values['f4_missing_chunks_fill'] = missing[...]
    nan_fill = zarr.create((4,), chunks=(2,), dtype='<f8', fill_value=np.nan,
                           store=os.path.join(directory, 'f8_nan_fill'))
    nan_fill[0:2] = [1.5, -2.0]
    values['f8_nan_fill'] = nan_fill[...]
    print(json.dumps({name: describe(data) for name, data in values.items()}))


def describe(data):
    flat = [None if math.isnan(v) else v for v in np.asarray(data, dtype=np.float64).reshape(-1).tolist()]
    return {'shape': list(data.shape), 'dtype': str(data.dtype), 'values': flat}


def read_bfloat16(path):
    """numpy has no bfloat16 (Megatron relies on tensorstore's): read the bits as <u2 from a copy and widen them."""
    import zarr
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, 'array')
        shutil.copytree(path, copy)
        with open(os.path.join(copy, '.zarray')) as f:
            metadata = json.load(f)
        metadata['dtype'] = '<u2'
        with open(os.path.join(copy, '.zarray'), 'w') as f:
            json.dump(metadata, f)
        bits = zarr.open(copy, 'r')[...].astype(np.uint32) << 16
        return bits.view(np.float32)


def read(directory):
    import zarr
    result = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isfile(os.path.join(path, '.zarray')):
            continue
        with open(os.path.join(path, '.zarray')) as f:
            dtype = json.load(f)['dtype']
        data = read_bfloat16(path) if dtype == 'bfloat16' else zarr.open(path, 'r')[...]
        result[name] = describe(data)
        result[name]['dtype'] = dtype
    print(json.dumps(result))


def tagged(value):
    if value is None:
        return ['None']
    if isinstance(value, bool):
        return ['bool', value]
    if isinstance(value, int):
        return ['int', str(value)]
    if isinstance(value, float):
        return ['float', value.hex()]
    if isinstance(value, str):
        return ['str', value]
    if isinstance(value, (list, tuple)):
        return ['list' if isinstance(value, list) else 'tuple', [tagged(item) for item in value]]
    if isinstance(value, dict):
        return ['dict', [[tagged(k), tagged(v)] for k, v in value.items()]]
    raise TypeError(f'not a plain value: {type(value)}')


def every_plain_type():
    shared = ['shared', 1]  # the pickler writes it once and refers to it through the memo the second time
    return {
        'optimizer': {'param_groups': [{'lr': 5.984178321979609e-05, 'betas': (0.9, 0.95), 'eps': 1e-08,
                                        'weight_decay': 0.1, 'step': 4000, 'bias_correction': True,
                                        'wd_mult': 1.0, 'lr_mult': 1.0}]},
        'ints': [0, 1, 255, 256, 65535, 65536, -1, -2**31, 2**31 - 1, 2**31, -2**63, 2**63 - 1],
        'floats': [0.0, -0.0, 1.5, float('inf'), -float('inf'), 1e-310],
        'text': ['', 'ascii', 'ünïcödé €', 'x' * 300],
        'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],
        'none': None, 'false': False,
        'shared_twice': [shared, shared],
        7: 'int key', (1, 'a'): 'tuple key',
    }


def main():
    command, path = sys.argv[1], sys.argv[2]
    if command == 'write':
        write(path)
    elif command == 'read':
        read(path)
    elif command == 'torch_save':
        import torch
        value = every_plain_type()
        torch.save(value, path)
        print(json.dumps(tagged(value)))
    elif command == 'torch_load':
        import torch
        print(json.dumps(tagged(torch.load(path))))
    else:
        raise SystemExit(f'unknown command {command}')


if __name__ == '__main__':
    main()
