"""Independent reference for the RNN-T tests, run with Debian's python3-torch and python3-torchaudio.

    rnnt_reference.py loss INPUTS OUTPUTS   torchaudio.functional.rnnt_loss (log-softmax inside, reduction
                                            "none") on the C++ test's logits: losses and d(sum)/d(logits)
    rnnt_reference.py step INPUTS OUTPUTS CODE_DIR
                                            the v1.1 reference's own RNNT, RNNTLoss and RNNTGreedyDecoder (from
                                            CODE_DIR; exit 77 without it) on the C++ test's weights: two training
                                            steps with an apex-FusedLAMB update written here from apex's documented
                                            algorithm (apex is not in Debian), the EMA update, and the greedy
                                            decoding of the updated EMA model

INPUTS is a pickled dict (torch.save format) of tensors; OUTPUTS receives one.
"""
import os
import sys
import types

import torch
import torchaudio

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from checkpoint_reference import import_rnnt_reference  # noqa: E402  (the reference's code, its logging stood in)
# apex's FusedLAMB update, shared with the speed peer.
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "peers"))
from rnnt_model import lamb_step  # noqa: E402


def loss_mode(inputs):
    logits = inputs["logits"].clone().requires_grad_()
    losses = torchaudio.functional.rnnt_loss(
        logits, inputs["tokens"].int(), inputs["frame_counts"].int(), inputs["token_counts"].int(),
        blank=int(inputs["blank"]), reduction="none")  # log-softmax is applied inside
    losses.sum().backward()
    return {"losses": losses.detach(), "grad": logits.grad}


def official_code(code_dir):
    """The v1.1 reference's RNNT (rnnt/model.py, common/rnn.py), RNNTLoss (rnnt/loss.py) and RNNTGreedyDecoder
    (rnnt/decoder.py), with stand-ins for its MLPerf logging and for warprnnt_pytorch, which Debian does not
    package: torchaudio's rnnt_loss computes the same transducer loss (the loss test checks ours against it),
    averaged over the batch. Exit 77 where the code is absent."""
    import_rnnt_reference(code_dir)

    class TransducerLoss:
        def __init__(self, blank):
            self.blank = blank

        def __call__(self, acts, labels, act_lens, label_lens):
            return torchaudio.functional.rnnt_loss(acts, labels, act_lens, label_lens, blank=self.blank,
                                                   reduction="mean")

    sys.modules["warprnnt_pytorch"] = types.SimpleNamespace(RNNTLoss=TransducerLoss)
    from rnnt.model import RNNT  # noqa: E402  (the reference's own)
    from rnnt.loss import RNNTLoss  # noqa: E402
    from rnnt.decoder import RNNTGreedyDecoder  # noqa: E402
    return RNNT, RNNTLoss, RNNTGreedyDecoder


def step_mode(inputs, code_dir):
    RNNT, RNNTLoss, RNNTGreedyDecoder = official_code(code_dir)
    features, hidden, pre, post, stack, pred_hidden, pred_layers, joint_hidden, vocab = inputs["setting.shape"].tolist()

    def build():
        return RNNT(n_classes=vocab + 1, in_feats=features, enc_n_hid=hidden, enc_pre_rnn_layers=pre,
                    enc_post_rnn_layers=post, enc_stack_time_factor=stack, enc_dropout=0.0, pred_dropout=0.0,
                    joint_dropout=0.0, pred_n_hid=pred_hidden, pred_rnn_layers=pred_layers, joint_n_hid=joint_hidden,
                    forget_gate_bias=1.0, hidden_hidden_bias_scale=0.0, weights_init_scale=1.0)

    model, ema = build(), build()
    model.load_state_dict({k[len("state."):]: v for k, v in inputs.items() if k.startswith("state.")}, strict=True)
    ema.load_state_dict(model.state_dict())
    blank = vocab  # train.py: n_classes = tokenizer.num_labels + 1, the blank last
    loss_fn = RNNTLoss(blank_idx=blank)
    x = inputs["features"].transpose(0, 1)  # the reference's (T, B, features)
    lens, tokens, token_counts = inputs["frame_counts"], inputs["tokens"], inputs["token_counts"]
    lr, beta1, beta2, eps, wd, max_norm, decay = inputs["setting.optimizer"].tolist()
    params = list(model.parameters())
    state = {}
    outputs = {}
    model.train()
    for step in (1, 2):
        for p in params:
            p.grad = None
        logits, enc_lens = model(x, lens, tokens, token_counts)
        loss = loss_fn(logits, enc_lens, tokens, token_counts)
        loss.backward()
        outputs["loss%d" % step] = loss.detach()
        lamb_step(params, state, lr, step, beta1, beta2, eps, wd, max_norm)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
    outputs.update({"state." + k: v for k, v in model.state_dict().items()})
    outputs.update({"ema." + k: v for k, v in ema.state_dict().items()})
    limits = inputs["setting.limits"].tolist()
    decoder = RNNTGreedyDecoder(blank, max_symbols_per_step=limits[0], max_symbol_per_sample=limits[1])
    decoded = decoder.decode(ema, x, lens)
    outputs["decoded"] = torch.stack([torch.tensor(label + [-1] * (1000 - len(label))) for label in decoded])
    return outputs


def main():
    mode, inputs_path, outputs_path = sys.argv[1:4]
    inputs = torch.load(inputs_path)
    torch.save(loss_mode(inputs) if mode == "loss" else step_mode(inputs, sys.argv[4]), outputs_path)


if __name__ == "__main__":
    main()
