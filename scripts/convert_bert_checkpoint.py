#!/usr/bin/python3
"""Converts a PyTorch BERT pre-training state dict into trainbench's BERT checkpoint format
(docs/bert-checkpoint.md): a plain dict {parameter name: tensor}, written with torch.save.

    /usr/bin/python3 scripts/convert_bert_checkpoint.py model.ckpt-28252.pt DATA/checkpoint/bert_large.pt

The input is what the MLPerf/NVIDIA BERT converter (convert_tf_checkpoint.py) writes from the public TF
checkpoint: {"model": state_dict} or a bare state_dict with Hugging Face names. This script
  - unwraps "model" and strips a "module." prefix (DataParallel/DDP saves),
  - renames LayerNorm gamma/beta to weight/bias (older converters keep the TF names),
  - drops cls.predictions.decoder.weight (it must equal the word embeddings: trainbench ties them) and a
    decoder bias equal to cls.predictions.bias, and non-parameter buffers such as position_ids,
  - drops the rows NVIDIA's converter pads the 30,522-token vocabulary with (to 30,528),
  - checks that exactly the BERT-Large parameter names remain, with the expected shapes,
and writes float32 contiguous tensors.
"""
import argparse
import collections
import sys

import torch


def expected_shapes(layers=24, hidden=1024, intermediate=4096, vocab=30522, positions=512):
    shapes = {
        "bert.embeddings.word_embeddings.weight": (vocab, hidden),
        "bert.embeddings.position_embeddings.weight": (positions, hidden),
        "bert.embeddings.token_type_embeddings.weight": (2, hidden),
        "bert.embeddings.LayerNorm.weight": (hidden,), "bert.embeddings.LayerNorm.bias": (hidden,),
        "bert.pooler.dense.weight": (hidden, hidden), "bert.pooler.dense.bias": (hidden,),
        "cls.predictions.bias": (vocab,),
        "cls.predictions.transform.dense.weight": (hidden, hidden), "cls.predictions.transform.dense.bias": (hidden,),
        "cls.predictions.transform.LayerNorm.weight": (hidden,), "cls.predictions.transform.LayerNorm.bias": (hidden,),
        "cls.seq_relationship.weight": (2, hidden), "cls.seq_relationship.bias": (2,),
    }
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = (hidden, hidden), (hidden,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (intermediate, hidden), (intermediate,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (hidden, intermediate), (hidden,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[p + norm + ".weight"], shapes[p + norm + ".bias"] = (hidden,), (hidden,)
    return shapes


def convert(state):
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    converted = collections.OrderedDict()
    for name, tensor in state.items():
        name = name[len("module."):] if name.startswith("module.") else name
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        converted[name] = tensor
    decoder = converted.pop("cls.predictions.decoder.weight", None)
    if decoder is not None and not torch.equal(decoder, converted["bert.embeddings.word_embeddings.weight"]):
        sys.exit("cls.predictions.decoder.weight differs from the word embeddings; trainbench ties them")
    decoder_bias = converted.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None and not torch.equal(decoder_bias, converted["cls.predictions.bias"]):
        sys.exit("cls.predictions.decoder.bias differs from cls.predictions.bias")
    converted.pop("bert.embeddings.position_ids", None)
    # NVIDIA's convert_tf_checkpoint.py pads the vocabulary to a multiple of 8 (30,528 rows); the padding rows
    # are not tokens.
    for name in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias"):
        if name in converted and converted[name].shape[0] == 30528:
            converted[name] = converted[name][:30522]
    return converted


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=4096)
    args = parser.parse_args()
    state = convert(torch.load(args.input, map_location="cpu"))
    expected = expected_shapes(args.layers, args.hidden, args.intermediate)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = sorted(n for n in expected if n in state and tuple(state[n].shape) != expected[n])
    if missing or extra or wrong:
        sys.exit(f"not a BERT checkpoint of this shape: missing {missing[:5]}, unexpected {extra[:5]}, "
                 f"wrong shape {wrong[:5]}")
    # A plain dict (not OrderedDict): LibTorch's unpickler reads plain dicts of tensors.
    torch.save({name: state[name].float().contiguous().clone() for name in expected}, args.output)
    print(f"wrote {len(expected)} tensors to {args.output}")


if __name__ == "__main__":
    main()
