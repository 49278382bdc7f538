"""Independent reference for the RNN-T tests, run with Debian's python3-torch and python3-torchaudio.

    rnnt_reference.py loss INPUTS OUTPUTS   torchaudio.functional.rnnt_loss (log-softmax inside, reduction
                                            "none") on the C++ test's logits: losses and d(sum)/d(logits)
    rnnt_reference.py step INPUTS OUTPUTS   the MLPerf reference model (rnnt/model.py, common/rnn.py) written
                                            again in PyTorch from the C++ test's weights, one training step with
                                            torchaudio's loss, an apex-FusedLAMB update written from apex's
                                            documented algorithm, the EMA update, and the reference's per-utterance
                                            greedy decoder (GreedyDecoder) on the updated EMA model

INPUTS is a pickled dict (torch.save format) of tensors; OUTPUTS receives one.
"""
import sys

import torch
import torchaudio
from torch import nn


def loss_mode(inputs):
    logits = inputs["logits"].clone().requires_grad_()
    losses = torchaudio.functional.rnnt_loss(
        logits, inputs["tokens"].int(), inputs["frame_counts"].int(), inputs["token_counts"].int(),
        blank=int(inputs["blank"]), reduction="none")  # log-softmax is applied inside
    losses.sum().backward()
    return {"losses": losses.detach(), "grad": logits.grad}


class Rnnt(nn.Module):
    """The reference RNN-T; dropouts (encoder, prediction, joint) between LSTM layers, after each LSTM
    stack and in the joint, as common/rnn.py and model.py place them (the parity test uses none)."""

    def __init__(self, s, dropouts=(0.0, 0.0, 0.0)):
        super().__init__()
        features, enc, pre, post, stack, pred, pred_layers, joint, vocab = [int(v) for v in s]
        self.stack = stack
        self.pre_rnn = nn.LSTM(features, enc, pre, dropout=dropouts[0])
        self.post_rnn = nn.LSTM(enc * stack, enc, post, dropout=dropouts[0])
        self.pred_embed = nn.Embedding(vocab, pred)
        self.dec_rnn = nn.LSTM(pred, pred, pred_layers, dropout=dropouts[1])
        self.joint_pred = nn.Linear(pred, joint)
        self.joint_enc = nn.Linear(enc, joint)
        self.joint_net = nn.Linear(joint, vocab + 1)
        self.enc_dropout, self.pred_dropout, self.joint_dropout = (nn.Dropout(p) for p in dropouts)
        self.blank = vocab

    def encode(self, x, lens):  # x (B, T, F), as model.py's encode with StackTime
        x = self.enc_dropout(self.pre_rnn(x.transpose(0, 1))[0])
        r = x.transpose(0, 1)
        zeros = torch.zeros(r.shape[0], (-r.shape[1]) % self.stack, r.shape[2])
        r = torch.cat([r, zeros], 1)
        r = r.reshape(r.shape[0], r.shape[1] // self.stack, r.shape[2] * self.stack)
        x = self.enc_dropout(self.post_rnn(r.transpose(0, 1))[0])
        return x.transpose(0, 1), torch.ceil(lens.float() / self.stack).long()

    def predict(self, y, state=None, add_sos=True):
        y = self.pred_embed(y) if y is not None else torch.zeros(1, 1, self.pred_embed.embedding_dim)
        if add_sos:
            y = torch.cat([torch.zeros(y.shape[0], 1, y.shape[2]), y], dim=1)
        g, hidden = self.dec_rnn(y.transpose(0, 1), state)
        return self.pred_dropout(g).transpose(0, 1), hidden

    def joint(self, f, g):
        return self.joint_net(self.joint_dropout(torch.relu(self.joint_enc(f).unsqueeze(2) + self.joint_pred(g).unsqueeze(1))))


def lamb_step(params, state, lr, step, beta1, beta2, eps, wd, max_norm):
    """apex FusedLAMB (bias correction, global grad-norm clipping, decoupled weight decay, trust ratio)."""
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params))
    clip = max(norm.item() / max_norm, 1.0)
    for p in params:
        m, v = state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
        g = p.grad / clip
        m.mul_(beta1).add_(g, alpha=1 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        update = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + eps) + wd * p
        w_norm, u_norm = p.norm(), update.norm()
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        p.data.add_(update, alpha=-lr * float(ratio))


def greedy_decode(model, x, lens, max_symbols, max_symbols_per_sample):
    """The reference's GreedyDecoder._greedy_decode, one utterance at a time."""
    enc, enc_lens = model.encode(x, lens)
    out = []
    for b in range(x.shape[0]):
        hidden, label = None, []
        for t in range(int(enc_lens[b])):
            if len(label) > max_symbols_per_sample:
                break
            f = enc[b, t].view(1, 1, -1)
            not_blank, symbols_added = True, 0
            while not_blank and symbols_added < max_symbols:
                y = None if not label else torch.tensor([[label[-1]]])
                g, hidden_prime = model.predict(y, hidden, add_sos=False)
                k = int(model.joint(f, g)[0, 0, 0].argmax())
                if k == model.blank:
                    not_blank = False
                else:
                    label.append(k)
                    hidden = hidden_prime
                symbols_added += 1
        out.append(torch.tensor(label + [-1] * (1000 - len(label))))
    return torch.stack(out)


def step_mode(inputs):
    model = Rnnt(inputs["setting.shape"].tolist())
    model.load_state_dict({k[len("state."):]: v for k, v in inputs.items() if k.startswith("state.")})
    ema = Rnnt(inputs["setting.shape"].tolist())
    ema.load_state_dict(model.state_dict())
    x, lens, tokens, token_counts = inputs["features"], inputs["frame_counts"], inputs["tokens"], inputs["token_counts"]
    lr, beta1, beta2, eps, wd, max_norm, decay = inputs["setting.optimizer"].tolist()
    params = list(model.parameters())
    state = {}
    outputs = {}
    for step in (1, 2):
        for p in params:
            p.grad = None
        enc, enc_lens = model.encode(x, lens)
        enc = enc[:, : int(enc_lens.max())]
        logits = model.joint(enc, model.predict(tokens)[0])
        loss = torchaudio.functional.rnnt_loss(logits, tokens.int(), enc_lens.int(), token_counts.int(),
                                               blank=model.blank, reduction="mean")
        loss.backward()
        outputs["loss%d" % step] = loss.detach()
        lamb_step(params, state, lr, step, beta1, beta2, eps, wd, max_norm)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
    outputs.update({"state." + k: v for k, v in model.state_dict().items()})
    outputs.update({"ema." + k: v for k, v in ema.state_dict().items()})
    limits = inputs["setting.limits"].tolist()
    with torch.no_grad():
        outputs["decoded"] = greedy_decode(ema, x, lens, limits[0], limits[1])
    return outputs


def main():
    mode, inputs_path, outputs_path = sys.argv[1:4]
    inputs = torch.load(inputs_path)
    torch.save(loss_mode(inputs) if mode == "loss" else step_mode(inputs), outputs_path)


if __name__ == "__main__":
    main()
