"""The v1.1 reference's own U-Net3D code, for the U-Net3D parity test, run with Debian's python3-torch.

Builds image_segmentation/pytorch/model/unet3d.py's Unet3D (as checkpoint_reference.py does, with stand-ins
for the logging its layers do while they are built), loads the C++ test's weights strictly, and computes from
argv[1]'s inputs, with the reference's own functions:
  - two training steps of model/losses.py's DiceCELoss (as main.py builds it) with torch.optim.SGD(momentum,
    nesterov=True) at the given rates;
  - runtime/inference.py's sliding_window_inference (gaussian, constant padding -2.2, as the reference
    evaluates) and model/losses.py's DiceScore.
Writes the results to argv[2]. argv[3] is the directory of the v1.1 code; exit 77 where it is absent.
"""
import os
import sys
import types

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checkpoint_reference import official_unet3d  # noqa: E402


def main():
    inputs = torch.load(sys.argv[1])
    torch.set_num_threads(1)
    model = official_unet3d(sys.argv[3])
    sys.modules["tqdm"] = types.SimpleNamespace(tqdm=lambda iterable, **kwargs: iterable)  # inference.py's progress bar
    from model.losses import DiceCELoss, DiceScore  # noqa: E402  (the reference's own)
    from runtime.inference import sliding_window_inference  # noqa: E402
    state = {key[len("state."):]: value for key, value in inputs.items() if key.startswith("state.")}
    model.load_state_dict(state, strict=True)
    out = {}

    model.eval()
    with torch.no_grad():
        logits, cropped_labels = sliding_window_inference(
            inputs["volume"][None, None], inputs["volume_labels"][None, None], inputs["setting.roi"].tolist(), model,
            overlap=0.5, mode="gaussian", padding_mode="constant", padding_val=-2.2)
    out["window_logits"] = logits
    score = DiceScore(to_onehot_y=True, use_argmax=True, layout="NCDHW", include_background=False)
    out["window_scores"] = score(logits, cropped_labels)

    model.train()
    loss_fn = DiceCELoss(to_onehot_y=True, use_softmax=True, layout="NCDHW", include_background=False)
    rates = inputs["setting.lr"].tolist()
    optimizer = torch.optim.SGD(model.parameters(), lr=rates[0], momentum=float(inputs["setting.momentum"]),
                                nesterov=True)
    for step, rate in enumerate(rates):
        for group in optimizer.param_groups:
            group["lr"] = rate
        optimizer.zero_grad()
        logits = model(inputs["images"])
        if step == 0:
            out["logits0"] = logits.detach()
        loss = loss_fn(logits, inputs["labels"][:, None])
        loss.backward()
        optimizer.step()
        out["loss%d" % step] = loss.detach()
    for key, value in model.state_dict().items():
        out["state." + key] = value
    torch.save(out, sys.argv[2])


if __name__ == "__main__":
    main()
