"""Independent reference for the MiniGo model-file tests, run with Debian's python3-torch.

Evaluates a MiniGo frozen TensorFlow graph (a `.minigo` container, cc/model/loader.cc's layout, or a bare
GraphDef `.pb`) the way TensorFlow would run it: every node by its op's semantics (Conv2D with SAME
padding in the node's data_format, FusedBatchNorm in inference mode, MatMul, BiasAdd, Reshape, ...), with
no knowledge of the network's architecture. The protobuf wire format is decoded here from TensorFlow's field
numbers (graph.proto, node_def.proto, attr_value.proto, tensor.proto), independently of the C++ reader.

argv[1]: the model file; argv[2]: a torch.save'd dict with "planes" (batch, planes, N, N, channels first);
argv[3]: where to torch.save {"policy": (batch, N*N + 1), "value": (batch)}.
"""
import struct
import sys

import torch
import torch.nn.functional as F


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def fields(data):
    """(field number, wire type, value) of each field of a message."""
    at, out = 0, []
    while at < len(data):
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.append((number, wire, value))
    return out


def shape_of(data):
    dims = []
    for number, _, value in fields(data):
        if number == 2:
            size = 0
            for dim_number, _, dim_value in fields(value):
                if dim_number == 1:
                    size = dim_value - (1 << 64) if dim_value >= 1 << 63 else dim_value
            dims.append(size)
    return dims


def tensor_of(data):
    dtype, dims, content, floats, ints = 0, [], b"", [], []
    for number, wire, value in fields(data):
        if number == 1:
            dtype = value
        elif number == 2:
            dims = shape_of(value)
        elif number == 4:
            content = value
        elif number == 5:
            floats += [struct.unpack("<f", value)[0]] if wire == 5 else list(struct.unpack("<%df" % (len(value) // 4), value))
        elif number == 7:  # int_val: int32s as (sign-extended) varints, one or packed
            packed = [value] if wire == 0 else []
            at = 0
            while wire == 2 and at < len(value):
                item, at = varint(value, at)
                packed.append(item)
            ints += [item - (1 << 64) if item >= 1 << 63 else item for item in packed]
    count = 1
    for dim in dims:
        count *= dim
    if dtype == 1:  # DT_FLOAT
        if content:
            return torch.tensor(struct.unpack("<%df" % count, content)).view(dims)
        return torch.tensor(floats * (count if len(floats) == 1 else 1)).view(dims)
    if dtype == 3:  # DT_INT32: shapes
        values = struct.unpack("<%di" % count, content) if content else ints * (count if len(ints) == 1 else 1)
        return torch.tensor(values, dtype=torch.int64).view(dims)
    raise ValueError("dtype %d" % dtype)


def attr_of(data):
    for number, _, value in fields(data):
        if number == 2:
            return value.decode()
        if number == 4:
            return struct.unpack("<f", value)[0]
        if number == 8:
            return tensor_of(value)
    return None


def read_graph(path):
    data = open(path, "rb").read()
    if data[:8] == b"<minigo>":
        version, size, metadata = struct.unpack("<QQQ", data[8:32])
        assert version == 1 and size == len(data)
        data = data[32 + metadata:]
    nodes = {}
    for number, _, value in fields(data):
        if number != 1:
            continue
        name, op, inputs, attrs = "", "", [], {}
        for node_number, _, node_value in fields(value):
            if node_number == 1:
                name = node_value.decode()
            elif node_number == 2:
                op = node_value.decode()
            elif node_number == 3:
                inputs.append(node_value.decode())
            elif node_number == 5:
                entry = dict((n, v) for n, _, v in fields(node_value))
                attrs[entry[1].decode()] = attr_of(entry.get(2, b""))
        nodes[name] = (op, inputs, attrs)
    return nodes


def channels_first(tensor, fmt):
    return tensor if fmt == "NCHW" else tensor.permute(0, 3, 1, 2)


def back(tensor, fmt):
    return tensor if fmt == "NCHW" else tensor.permute(0, 2, 3, 1)


def evaluate(nodes, name, feeds, memo):
    name = name.split(":")[0].lstrip("^")
    if name in memo:
        return memo[name]
    op, inputs, attrs = nodes[name]
    args = [evaluate(nodes, i, feeds, memo) for i in inputs]
    if op == "Placeholder":
        out = feeds[name]
    elif op == "Const":
        out = attrs["value"]
    elif op in ("Identity", "Cast"):
        out = args[0].float() if op == "Cast" else args[0]
    elif op == "Conv2D":
        fmt = attrs.get("data_format", "NHWC")
        kernel = args[1]  # HWIO
        out = back(F.conv2d(channels_first(args[0], fmt), kernel.permute(3, 2, 0, 1), padding=kernel.shape[0] // 2), fmt)
    elif op.startswith("FusedBatchNorm"):
        fmt = attrs.get("data_format", "NHWC")
        x, gamma, beta, mean, variance = args
        out = back(F.batch_norm(channels_first(x, fmt), mean, variance, gamma, beta, training=False, eps=attrs["epsilon"]), fmt)
    elif op == "Relu":
        out = torch.relu(args[0])
    elif op in ("Add", "AddV2"):
        out = args[0] + args[1]
    elif op == "Reshape":
        out = args[0].reshape([int(d) for d in args[1]])
    elif op == "MatMul":
        out = args[0] @ args[1]
    elif op == "BiasAdd":
        out = args[0] + args[1]
    elif op == "Softmax":
        out = torch.softmax(args[0], dim=-1)
    elif op == "Tanh":
        out = torch.tanh(args[0])
    else:
        raise ValueError("op %s (%s)" % (op, name))
    memo[name] = out
    return out


def main():
    nodes = read_graph(sys.argv[1])
    planes = torch.load(sys.argv[2])["planes"].float()
    # The placeholder is NCHW when the first conv reads channels first, else NHWC.
    first_conv = next(n for n, (op, _, _) in nodes.items() if op == "Conv2D")
    feed = planes if nodes[first_conv][2].get("data_format") == "NCHW" else planes.permute(0, 2, 3, 1)
    memo = {}
    with torch.no_grad():
        policy = evaluate(nodes, "policy_output", {"pos_tensor": feed.contiguous()}, memo)
        value = evaluate(nodes, "value_output", {"pos_tensor": feed.contiguous()}, memo)
    torch.save({"policy": policy.contiguous(), "value": value.contiguous()}, sys.argv[3])


if __name__ == "__main__":
    main()
