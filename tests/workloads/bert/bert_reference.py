"""Independent reference for the BERT parity test, run with Debian's python3-torch.

Reads the C++ test's initial weights, batch and settings from argv[1], builds BERT for pre-training with its
own module code (Hugging Face / MLPerf PyTorch naming, separate query/key/value projections, decoder tied to
the word embeddings), takes two steps of LAMB written from apex FusedLAMB's algorithm (global-norm clipping,
bias-corrected moments, decoupled weight decay, trust ratio for the decayed tensors), and saves the losses,
the first step's logits to argv[2], and the final weights to argv[3] as a plain dict {name: tensor} written
with torch.save: the checkpoint format of docs/bert-checkpoint.md, so the C++ test also loads a real one.
"""
import math
import sys

import torch
from torch import nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, hidden, heads, intermediate, eps, dropout):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        self.attention.self.query = nn.Linear(hidden, hidden)
        self.attention.self.key = nn.Linear(hidden, hidden)
        self.attention.self.value = nn.Linear(hidden, hidden)
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(hidden, hidden)
        self.attention.output.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(hidden, intermediate)
        self.output = nn.Module()
        self.output.dense = nn.Linear(intermediate, hidden)
        self.output.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, mask_bias):
        b, s, h = x.shape
        d = h // self.heads
        split = lambda t: t.view(b, s, self.heads, d).permute(0, 2, 1, 3)
        q = split(self.attention.self.query(x))
        k = split(self.attention.self.key(x))
        v = split(self.attention.self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_bias
        probabilities = F.dropout(scores.softmax(-1), self.dropout, self.training)
        context = (probabilities @ v).permute(0, 2, 1, 3).reshape(b, s, h)
        x = self.attention.output.LayerNorm(F.dropout(self.attention.output.dense(context), self.dropout, self.training) + x)
        out = F.dropout(self.output.dense(F.gelu(self.intermediate.dense(x))), self.dropout, self.training)
        return self.output.LayerNorm(out + x)


class BertForPreTraining(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, intermediate, positions, eps=1e-12, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.bert = nn.Module()
        self.bert.embeddings = nn.Module()
        self.bert.embeddings.word_embeddings = nn.Embedding(vocab, hidden)
        self.bert.embeddings.position_embeddings = nn.Embedding(positions, hidden)
        self.bert.embeddings.token_type_embeddings = nn.Embedding(2, hidden)
        self.bert.embeddings.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        self.bert.encoder = nn.Module()
        self.bert.encoder.layer = nn.ModuleList([Layer(hidden, heads, intermediate, eps, dropout) for _ in range(layers)])
        self.bert.pooler = nn.Module()
        self.bert.pooler.dense = nn.Linear(hidden, hidden)
        self.cls = nn.Module()
        self.cls.predictions = nn.Module()
        self.cls.predictions.transform = nn.Module()
        self.cls.predictions.transform.dense = nn.Linear(hidden, hidden)
        self.cls.predictions.transform.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        self.cls.predictions.bias = nn.Parameter(torch.zeros(vocab))
        self.cls.seq_relationship = nn.Linear(hidden, 2)

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions):
        e = self.bert.embeddings
        positions = torch.arange(input_ids.shape[1])
        x = e.LayerNorm(e.word_embeddings(input_ids) + e.position_embeddings(positions)[None] + e.token_type_embeddings(segment_ids))
        x = F.dropout(x, self.dropout, self.training)
        mask_bias = (1.0 - input_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.bert.encoder.layer:
            x = layer(x, mask_bias)
        nsp = self.cls.seq_relationship(torch.tanh(self.bert.pooler.dense(x[:, 0])))
        # Gather the masked positions per sample (the MLPerf format: zero-padded position lists).
        rows, slots = (masked_lm_positions != 0).nonzero(as_tuple=True)
        picked = x[rows, masked_lm_positions[rows, slots]]
        t = self.cls.predictions.transform
        h = t.LayerNorm(F.gelu(t.dense(picked)))
        mlm = h @ e.word_embeddings.weight.t() + self.cls.predictions.bias
        return mlm, nsp, (rows, slots)


def lamb_step(model, state, step, lr, beta1, beta2, eps, weight_decay, max_grad_norm):
    params = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    global_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for _, p in params))
    clip = global_norm / max_grad_norm if global_norm > max_grad_norm else 1.0
    with torch.no_grad():
        for name, p in params:
            decay = 0.0 if ("LayerNorm" in name or name.endswith("bias")) else weight_decay
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
    inputs = torch.load(sys.argv[1])
    s = {k[len("setting."):]: float(v) for k, v in inputs.items() if k.startswith("setting.")}
    model = BertForPreTraining(int(s["vocab"]), int(s["hidden"]), int(s["layers"]), int(s["heads"]),
                               int(s["intermediate"]), int(s["positions"])).double()
    state = {k[len("state."):]: v for k, v in inputs.items() if k.startswith("state.")}
    model.load_state_dict(state, strict=True)  # same names and shapes, or the architectures differ
    model.train()
    outputs, optimizer_state = {}, {}
    for step in range(2):
        model.zero_grad(set_to_none=True)
        mlm, nsp, (rows, slots) = model(inputs["input_ids"], inputs["segment_ids"], inputs["input_mask"],
                                        inputs["masked_lm_positions"])
        loss = F.cross_entropy(mlm, inputs["masked_lm_ids"][rows, slots]) + F.cross_entropy(nsp, inputs["next_sentence_labels"])
        loss.backward()
        lamb_step(model, optimizer_state, step + 1, s["lr"], s["beta1"], s["beta2"], s["eps"], s["weight_decay"], s["max_grad_norm"])
        outputs[f"loss{step}"] = loss.detach()
        if step == 0:
            outputs["mlm_logits0"] = mlm.detach()
    torch.save(outputs, sys.argv[2])
    torch.save({name: tensor for name, tensor in model.state_dict().items()}, sys.argv[3])


if __name__ == "__main__":
    main()
