"""Same-machine peer for `trainbench bench bert`: the same model, batch, optimizer and thread count in
Debian's python3-torch, timed the same way (median step time after warm-up, synthetic in-memory batch of
full-length sequences with every prediction slot used).

    /usr/bin/python3 bench/peers/bert_train_step.py --preset mini --threads 2 --steps 30 --warmup 3

The model is bert_model.py's (NVIDIA's modeling.py layout) with the preset's dropout; LAMB is written the way a PyTorch user writes an optimizer (torch.optim style: one loop
over the parameters, tensor ops, no host synchronisation). Settings come from src/workloads/bert/presets.json.
"""
import torch
import torch.nn.functional as F

import step_timing

from bert_model import BertForPreTraining


class Lamb(torch.optim.Optimizer):
    """apex FusedLAMB's algorithm: global-norm clipping, bias-corrected Adam moments, decoupled weight decay,
    trust ratio for the decayed parameters."""

    def __init__(self, groups, lr, betas, eps, max_grad_norm):
        super().__init__(groups, dict(lr=lr, betas=betas, eps=eps, weight_decay=0.0))
        self.max_grad_norm = max_grad_norm

    @torch.no_grad()
    def step(self):
        params = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
        global_norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
        scale = 1.0 / torch.clamp(global_norm / self.max_grad_norm, min=1.0)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                grad = p.grad * scale
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                update = (m / (1 - beta1 ** state["step"])) / ((v / (1 - beta2 ** state["step"])).sqrt() + group["eps"])
                if group["weight_decay"] != 0:
                    update.add_(p, alpha=group["weight_decay"])
                    w_norm, u_norm = p.norm(), update.norm()
                    ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    update.mul_(ratio)
                p.sub_(update, alpha=group["lr"])


def main():
    args, config = step_timing.setup("bert", __doc__)
    model = BertForPreTraining(config["vocab_size"], config["hidden"], config["layers"], config["heads"],
                               config["intermediate"], config["max_positions"], dropout=config["dropout"])
    model.train()
    no_decay = [p for n, p in model.named_parameters() if "LayerNorm" in n or n.endswith("bias")]
    decay = [p for n, p in model.named_parameters() if not ("LayerNorm" in n or n.endswith("bias"))]
    optimizer = Lamb([{"params": decay, "weight_decay": config["weight_decay"]}, {"params": no_decay}], lr=1e-4,
                     betas=(config["beta1"], config["beta2"]), eps=config["epsilon"], max_grad_norm=config["max_grad_norm"])

    # The batch trainbench's bench builds: full-length sequences, every prediction slot used.
    batch, seq, preds = config["batch_size"], config["seq_length"], config["max_predictions"]
    input_ids = (1000 + (torch.arange(batch * seq) * 7919) % 20000).view(batch, seq)
    segment_ids = (torch.arange(seq) >= seq // 2).long().expand(batch, seq)
    input_mask = torch.ones(batch, seq, dtype=torch.long)
    positions = (1 + torch.arange(preds) * (seq - 2) // preds).expand(batch, preds)
    masked_ids = 2000 + torch.arange(batch)[:, None] + torch.arange(preds)[None]
    next_sentence = torch.arange(batch) % 2

    def steps():
        while True:
            optimizer.zero_grad(set_to_none=True)
            mlm, nsp, (rows, slots) = model(input_ids, segment_ids, input_mask, positions)
            loss = F.cross_entropy(mlm, masked_ids[rows, slots]) + F.cross_entropy(nsp, next_sentence)
            loss.backward()
            optimizer.step()
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "seq/s", [f"seq {seq}", f"{preds} predictions"])


if __name__ == "__main__":
    main()
