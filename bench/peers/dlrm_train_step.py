"""Same-machine peer for `trainbench bench dlrm`: the same model, batch and thread count in Debian's
python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch with rows
drawn uniformly per table).

    /usr/bin/python3 bench/peers/dlrm_train_step.py --preset mini --threads 2 --steps 200 --warmup 20

The model is the parity test's independent reference (tests/workloads/dlrm/dlrm_reference.py), written as
the MLPerf reference writes it: one nn.EmbeddingBag(mode="sum", sparse=True) per table, nn.Linear MLPs,
the Z[:, li, lj] dot interaction, sigmoid + BCELoss, and torch.optim.SGD applying the sparse gradients.
Settings come from src/workloads/dlrm/presets.json, so both sides train exactly the same network.
"""
import torch
from torch import nn

import step_timing

step_timing.use_reference("dlrm")
from dlrm_reference import Dlrm  # noqa: E402


def main():
    args, config = step_timing.setup("dlrm", __doc__)
    tables = config["table_sizes"]
    model = Dlrm(tables, config["embedding_dim"], 13, config["bottom_mlp"], config["top_mlp"])
    model.train()
    batch = config["batch_size"]
    dense = torch.rand(batch, 13) * 5
    sparse = torch.cat([torch.randint(n, (batch, 1)) for n in tables], dim=1)
    labels = torch.randint(2, (batch,)).float()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.BCELoss(reduction="mean")

    def steps():
        while True:
            optimizer.zero_grad()
            loss = loss_fn(model(dense, sparse), labels)
            loss.backward()
            optimizer.step()
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "samples/s", digits=5)


if __name__ == "__main__":
    main()
