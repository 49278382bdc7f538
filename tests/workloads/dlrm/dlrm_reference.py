"""Independent reference for the DLRM parity test, run with Debian's python3-torch.

Reads the C++ test's initial weights, batch and settings from argv[1]. Builds DLRM the way the MLPerf
reference (facebookresearch/dlrm, mlperf branch) does: one nn.EmbeddingBag(mode="sum", sparse=True) per
table, MLPs of nn.Linear + ReLU, the dot interaction Z[:, li, lj] over the strictly lower triangle, sigmoid
and BCELoss, and torch.optim.SGD applying the sparse embedding gradients. Takes two steps and writes the
losses, first probabilities, final weights (tables concatenated like the C++ parameter) and the
reference's LRPolicyScheduler rates to argv[2].
"""
import sys

import torch
from torch import nn


class Dlrm(nn.Module):
    def __init__(self, table_sizes, dim, dense_features, bottom, top):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum", sparse=True) for n in table_sizes)
        self.bottom = nn.ModuleList()
        width = dense_features
        for out in bottom:
            self.bottom.append(nn.Linear(width, out))
            width = out
        vectors = len(table_sizes) + 1
        self.li = [i for i in range(vectors) for j in range(i)]
        self.lj = [j for i in range(vectors) for j in range(i)]
        self.top = nn.ModuleList()
        width = dim + len(self.li)
        for out in top:
            self.top.append(nn.Linear(width, out))
            width = out

    def forward(self, dense, sparse):
        x = dense
        for layer in self.bottom:
            x = torch.relu(layer(x))
        batch = sparse.shape[0]
        offsets = torch.arange(batch, dtype=torch.int64)  # one index per bag
        embedded = [table(sparse[:, t].contiguous(), offsets) for t, table in enumerate(self.tables)]
        T = torch.cat([x] + embedded, dim=1).view(batch, -1, x.shape[1])
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        R = torch.cat([x, Z[:, self.li, self.lj]], dim=1)
        for layer in self.top[:-1]:
            R = torch.relu(layer(R))
        return torch.sigmoid(self.top[-1](R)).view(batch)


def reference_lr(base, warmup, decay_start, decay_steps, steps):
    """LRPolicyScheduler of dlrm_s_pytorch.py, stepped once per optimizer step (step_count from 1)."""
    rates, last = [], base
    for step_count in range(1, steps + 1):
        if step_count < warmup:
            last = base * (1.0 - (warmup - step_count) / warmup)
        elif decay_start <= step_count < decay_start + decay_steps:
            decayed = step_count - decay_start
            last = max(0.0000001, base * ((decay_steps - decayed) / decay_steps) ** 2)
        elif decay_steps <= 0:
            last = base
        rates.append(last)
    return torch.tensor(rates, dtype=torch.float64)


def main():
    inputs = torch.load(sys.argv[1])
    setting = lambda name: inputs["setting." + name]
    table_sizes = [int(n) for n in setting("table_sizes").tolist()]
    bottom = [int(n) for n in setting("bottom_mlp").tolist()]
    top = [int(n) for n in setting("top_mlp").tolist()]
    dim = int(setting("embedding_dim"))
    model = Dlrm(table_sizes, dim, inputs["dense"].shape[1], bottom, top)
    with torch.no_grad():
        start = 0
        for table, n in zip(model.tables, table_sizes):
            table.weight.copy_(inputs["state.embeddings"][start:start + n])
            start += n
        for prefix, layers in (("bottom_mlp_dense", model.bottom), ("top_mlp_dense", model.top)):
            for i, layer in enumerate(layers):
                layer.weight.copy_(inputs[f"state.{prefix}{i + 1}.weight"])
                layer.bias.copy_(inputs[f"state.{prefix}{i + 1}.bias"])
    lr = float(setting("lr"))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.BCELoss(reduction="mean")
    outputs = {}
    for step in range(2):
        optimizer.zero_grad()
        probabilities = model(inputs["dense"], inputs["sparse"])
        loss = loss_fn(probabilities, inputs["labels"])
        loss.backward()
        optimizer.step()
        outputs[f"loss{step}"] = loss.detach()
        if step == 0:
            outputs["probabilities0"] = probabilities.detach()
    outputs["state.embeddings"] = torch.cat([table.weight.detach() for table in model.tables])
    for prefix, layers in (("bottom_mlp_dense", model.bottom), ("top_mlp_dense", model.top)):
        for i, layer in enumerate(layers):
            outputs[f"state.{prefix}{i + 1}.weight"] = layer.weight.detach()
            outputs[f"state.{prefix}{i + 1}.bias"] = layer.bias.detach()
    schedule = [float(v) for v in setting("schedule").tolist()]
    outputs["lr"] = reference_lr(schedule[0], int(schedule[1]), int(schedule[2]), int(schedule[3]), int(schedule[4]))
    torch.save(outputs, sys.argv[2])


if __name__ == "__main__":
    main()
