"""BERT for pre-training for the speed peer (bert_train_step.py), in the layout of NVIDIA's v1.1 modeling.py
(Hugging Face / MLPerf names, separate query/key/value projections, the decoder tied to the word embeddings) and
with the tanh approximation of GELU that NVIDIA's ACT2FN["gelu"] and the MLPerf reference's modeling.py compute.
The masked-LM head runs on the masked positions only, as trainbench's does.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F


def gelu(x):
    return F.gelu(x, approximate="tanh")


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
        out = F.dropout(self.output.dense(gelu(self.intermediate.dense(x))), self.dropout, self.training)
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
        h = t.LayerNorm(gelu(t.dense(picked)))
        mlm = h @ e.word_embeddings.weight.t() + self.cls.predictions.bias
        return mlm, nsp, (rows, slots)
