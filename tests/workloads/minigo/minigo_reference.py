"""Independent reference for the MiniGo parity test, run with Debian's python3-torch.

Reads the C++ test's initial weights (named as the C++ module names them), batch and settings from
argv[1]. Builds MiniGo's dual network the way minigo's dual_net.py describes it, in functional PyTorch:
conv3x3 + BN + ReLU, residual blocks, a policy head (conv1x1 -> 2, BN without scale/offset, ReLU, dense)
and a value head (conv1x1 -> 1, BN without scale/offset, ReLU, dense, ReLU, dense, tanh). Loss: softmax
cross-entropy against pi + value_weight * MSE + l2 * sum(w^2)/2 over kernels and BN gammas. Takes two
torch.optim.SGD(momentum) steps with the rate of TF's piecewise_constant at global steps 0 and 1 and writes
the losses, first outputs and final weights and BN statistics to argv[2].
"""
import sys

import torch
import torch.nn.functional as F


def piecewise_constant(step, boundaries, values):
    """tf.compat.v1.train.piecewise_constant: values[i] for boundaries[i-1] < step <= boundaries[i]."""
    for boundary, value in zip(boundaries, values):
        if step <= boundary:
            return value
    return values[-1]


def batch_norm(x, state, name, affine):
    """Training-mode BN (batch statistics) updating the running ones with TF momentum 0.95."""
    weight = state[name + ".weight"] if affine else None
    bias = state[name + ".bias"] if affine else None
    return F.batch_norm(x, state[name + ".running_mean"], state[name + ".running_var"], weight, bias,
                        training=True, momentum=1 - 0.95, eps=1e-5)


def forward(state, planes, blocks):
    x = F.relu(batch_norm(F.conv2d(planes, state["initial_conv.weight"], padding=1), state, "initial_bn", True))
    for block in range(1, blocks + 1):
        y = F.conv2d(x, state[f"block{block}_1_conv.weight"], padding=1)
        y = F.relu(batch_norm(y, state, f"block{block}_1_bn", True))
        y = F.conv2d(y, state[f"block{block}_2_conv.weight"], padding=1)
        y = batch_norm(y, state, f"block{block}_2_bn", True)
        x = F.relu(x + y)
    p = F.relu(batch_norm(F.conv2d(x, state["policy_conv.weight"]), state, "policy_bn", False)).flatten(1)
    logits = F.linear(p, state["policy_fc.weight"], state["policy_fc.bias"])
    v = F.relu(batch_norm(F.conv2d(x, state["value_conv.weight"]), state, "value_bn", False)).flatten(1)
    v = F.relu(F.linear(v, state["value_fc1.weight"], state["value_fc1.bias"]))
    value = torch.tanh(F.linear(v, state["value_fc2.weight"], state["value_fc2.bias"])).squeeze(1)
    return logits, value


def main():
    inputs = torch.load(sys.argv[1])
    state = {k[len("state."):]: v.clone() for k, v in inputs.items() if k.startswith("state.")}
    planes = inputs["planes"].float()
    pi, outcome = inputs["pi"], inputs["outcome"]
    blocks = int(inputs["setting.blocks"])
    value_weight = float(inputs["setting.value_weight"])
    l2 = float(inputs["setting.l2"])
    momentum = float(inputs["setting.momentum"])
    rates = inputs["setting.lr_rates"].tolist()
    boundaries = [int(b) for b in inputs["setting.lr_boundaries"].tolist()]
    trainable = [k for k in state if not (k.endswith("running_mean") or k.endswith("running_var")
                                          or k.endswith("num_batches_tracked"))]
    for k in trainable:
        state[k].requires_grad_(True)
    # TF variable names: kernels, gammas ("weight" of an affine BN) and dense kernels; no bias, no beta.
    penalized = [k for k in trainable if k.endswith(".weight")]
    optimizer = torch.optim.SGD([state[k] for k in trainable], lr=rates[0], momentum=momentum)
    out = {}
    for step in range(2):
        for group in optimizer.param_groups:
            group["lr"] = piecewise_constant(step, boundaries, rates)
        optimizer.zero_grad()
        logits, value = forward(state, planes, blocks)
        if step == 0:
            out["logits0"] = logits.detach()
            out["value0"] = value.detach()
        policy_loss = -(pi * F.log_softmax(logits, dim=1)).sum(dim=1).mean()
        value_loss = value_weight * F.mse_loss(value, outcome)
        l2_loss = l2 * sum((state[k] ** 2).sum() / 2 for k in penalized)
        loss = policy_loss + value_loss + l2_loss
        out[f"loss{step}"] = loss.detach()
        loss.backward()
        optimizer.step()
    for k, v in state.items():
        out["state." + k] = v.detach()
    out["lr"] = torch.tensor([piecewise_constant(s, boundaries, rates) for s in range(0, 40)], dtype=torch.float64)
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
