"""NVIDIA's v1.1 BERT code, for the BERT parity test, run with Debian's python3-torch.

Builds NVIDIA's own BertForPretraining (benchmarks/bert/implementations/pytorch/modeling.py, unfused, as
checkpoint_reference.py builds it) from the C++ test's settings, loads the weights trainbench exported
(argv[1]'s directory, initial.pt) with strict=True, and takes two training steps with the class's own loss
(masked-LM cross entropy over the labels != 0 plus next-sentence cross entropy) and LAMB written from apex
FusedLAMB's algorithm (apex is not in Debian; run_pretraining.py's no-decay names). Saves the losses, the first
step's masked-LM logits and every gradient of the first step to argv[2], and the final weights, NVIDIA's
state_dict's entries, to argv[3]: the checkpoint format of docs/bert-checkpoint.md, which the C++ test loads.
argv[4] is the directory of the v1.1 code; exit 77 where it is absent.

NVIDIA pads the vocabulary to a multiple of 8 and its softmax covers the padding classes too; trainbench's covers
the real vocabulary. Here the padding classes get a bias of -1e4, so that they take no softmax mass
(e^-1e4 is 0 in float64), and the loss is trainbench's; their rows get no gradient and LAMB leaves them as they are.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checkpoint_reference import official_bert  # noqa: E402


def lamb_step(model, state, step, lr, beta1, beta2, eps, weight_decay, max_grad_norm):
    params = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    global_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for _, p in params))
    clip = global_norm / max_grad_norm if global_norm > max_grad_norm else 1.0
    with torch.no_grad():
        for name, p in params:
            decay = 0.0 if any(part in name for part in ("bias", "gamma", "beta", "LayerNorm")) else weight_decay
            m, v = state.setdefault(name, (torch.zeros_like(p), torch.zeros_like(p)))
            g = p.grad / clip
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            update = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps) + decay * p
            ratio = 1.0
            if decay != 0:
                w_norm, u_norm = p.norm(), update.norm()
                if w_norm > 0 and u_norm > 0:
                    ratio = w_norm / u_norm
            p.sub_(lr * ratio * update)


def main():
    inputs_path, expected_path, checkpoint_path, code_dir = sys.argv[1:5]
    inputs = torch.load(inputs_path)
    s = {k[len("setting."):]: float(v) for k, v in inputs.items() if k.startswith("setting.")}
    vocab = int(s["vocab"])
    model = official_bert(code_dir, {"vocab_size": vocab, "hidden": s["hidden"], "layers": s["layers"],
                                     "heads": s["heads"], "intermediate": s["intermediate"],
                                     "max_positions": s["positions"], "input": inputs["input_ids"]}, dropout=0.0)
    model.double()
    initial = torch.load(os.path.join(os.path.dirname(inputs_path), "initial.pt"))
    model.load_state_dict(initial, strict=True)
    padding_bias = model.cls.predictions.bias.data[vocab:]
    padding_bias.fill_(-1e4)

    # The MLPerf format's position lists (0 = unused slot) as the class's (B, S) labels, 0 = not predicted.
    positions, ids = inputs["masked_lm_positions"], inputs["masked_lm_ids"]
    labels = torch.zeros_like(inputs["input_ids"])
    rows, slots = (positions != 0).nonzero(as_tuple=True)
    labels[rows, positions[rows, slots]] = ids[rows, slots]
    model.train()
    outputs, optimizer_state = {}, {}
    for step in range(2):
        model.zero_grad(set_to_none=True)
        if step == 0:
            with torch.no_grad():
                scores, _ = model(inputs["input_ids"], inputs["segment_ids"], inputs["input_mask"])
            outputs["mlm_logits0"] = scores[rows, positions[rows, slots], :vocab]
        loss, _, _ = model(inputs["input_ids"], inputs["segment_ids"], inputs["input_mask"], labels,
                           inputs["next_sentence_labels"])
        loss.backward()
        outputs[f"loss{step}"] = loss.detach().double()
        if step == 0:
            for name, p in model.named_parameters():
                outputs["grad." + name] = p.grad.clone()
        lamb_step(model, optimizer_state, step + 1, s["lr"], s["beta1"], s["beta2"], s["eps"], s["weight_decay"],
                  s["max_grad_norm"])
    torch.save(outputs, expected_path)
    padding_bias.zero_()  # as the class holds padding classes when nobody has switched them off
    # A plain dict: LibTorch 1.13's reader cannot read the OrderedDict state_dict() returns (docs/checkpoints.md).
    torch.save(dict(model.state_dict()), checkpoint_path)


if __name__ == "__main__":
    main()
