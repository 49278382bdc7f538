"""The RNN-T network and apex's FusedLAMB update for the speed peer (rnnt_train_step.py), written from the
MLPerf v1.1 reference (rnnt/model.py, common/rnn.py) and apex's documented algorithm; the parity test
(tests/workloads/rnnt/) runs the reference's own RNNT, loss and decoder, and takes lamb_step from here (apex is
not in Debian).
"""
import torch
from torch import nn


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
