#!/usr/bin/env python3
"""Loads a state dict that `trainbench checkpoint export` wrote into the official model class with
strict=True, runs it in eval mode on the input the C++ test saved, and compares its output with the one
trainbench's model gave on the same weights.

    /usr/bin/python3 checkpoint_reference.py resnet|ssd|unet3d|rnnt|dlrm|maskrcnn|bert STATE.pt CASE.pt REFERENCE_CODE_DIR

resnet: torchvision's resnet50 (the names the v1.1 reference's ResNet-50 uses). ssd: the v1.1 reference's
SSD300 with its ResNet-34 body (single_stage_detector/ssd/ssd300.py, base_model.py), built from a
torchvision resnet34 file written here so that nothing is downloaded. unet3d: the v1.1 reference's Unet3D
(image_segmentation/pytorch/model/unet3d.py), with stand-ins for the mlperf_logging calls its layers make
while they are built. rnnt: the v1.1 reference's RNNT (rnn_speech_recognition/pytorch/rnnt/model.py) with
the reference preset's sizes; its dense (B, T, U + 1, classes) logits are compared at each utterance's valid
cells, the rows trainbench's packed joint computes. dlrm: the reference's DLRM_Net from the checkout
TRAINBENCH_DLRM_REFERENCE_DIR names, on one id per table and sample, then one step's loss and every gradient.
maskrcnn: the reference's GeneralizedRCNN (object_detection/pytorch/maskrcnn_benchmark, built from
configs/e2e_mask_rcnn_R_50_FPN_1x.yaml with stand-ins for yacs and the compiled ops), its backbone's P2..P6
compared. bert: NVIDIA's v1.1 BertForPretraining (nvidia-v1.1/.../bert/implementations/pytorch/modeling.py,
unfused, with stand-ins for apex and NVIDIA's CUDA extensions). Exit 77 when the reference code is absent.
"""
import ast
import copy
import os
import sys
import types

import torch
import yaml


def official_unet3d(code_dir):
    root = os.path.join(code_dir, "mlcommons-training", "image_segmentation", "pytorch")
    if not os.path.isdir(os.path.join(root, "model")):
        sys.exit(77)
    # The layers log each tensor's weights_initialization through mlperf_logging and runtime.logging while
    # they are built; neither is needed here, so empty stand-ins take those calls.
    constants = types.SimpleNamespace(WEIGHTS_INITIALIZATION="weights_initialization")
    sys.modules["mlperf_logging"] = types.ModuleType("mlperf_logging")
    sys.modules["mlperf_logging.mllog"] = types.ModuleType("mlperf_logging.mllog")
    sys.modules["mlperf_logging.mllog"].constants = constants
    sys.modules["mlperf_logging.mllog.constants"] = constants
    runtime_logging = types.ModuleType("runtime.logging")
    runtime_logging.mllog_event = lambda **kwargs: None
    sys.modules["runtime.logging"] = runtime_logging  # runtime/ itself stays the reference's (inference.py)
    sys.path.insert(0, root)
    from model.unet3d import Unet3D  # noqa: E402  (the reference's own class)
    return Unet3D(1, 3, normalization="instancenorm", activation="relu")


def official_ssd300(code_dir, work_dir):
    root = os.path.join(code_dir, "mlcommons-training", "single_stage_detector", "ssd")
    if not os.path.isfile(os.path.join(root, "ssd300.py")):
        sys.exit(77)
    import torchvision
    # ResNet34(model_path=None) downloads ImageNet weights; any resnet34 file will do, since the export
    # replaces every tensor.
    body = os.path.join(work_dir, "resnet34.pth")
    torch.save(torchvision.models.resnet34().state_dict(), body)
    sys.path.insert(0, root)
    from ssd300 import SSD300  # noqa: E402  (the reference's own class)
    return SSD300(81, model_path=body)


def import_rnnt_reference(code_dir):
    """Makes the v1.1 RNN-T reference (rnn_speech_recognition/pytorch) importable; exit 77 where it is absent."""
    root = os.path.join(code_dir, "mlcommons-training", "rnn_speech_recognition", "pytorch")
    if not os.path.isfile(os.path.join(root, "rnnt", "model.py")):
        sys.exit(77)
    # rnnt/model.py and common/rnn.py log each tensor's weights_initialization through mlperf.logging.
    logging = types.ModuleType("mlperf.logging")
    logging.constants = types.SimpleNamespace(WEIGHTS_INITIALIZATION="weights_initialization")
    logging.log_event = lambda *args, **kwargs: None
    sys.modules["mlperf"] = types.ModuleType("mlperf")
    sys.modules["mlperf"].logging = logging
    sys.modules["mlperf.logging"] = logging
    sys.path.insert(0, root)


def official_rnnt(code_dir):
    import_rnnt_reference(code_dir)
    from rnnt.model import RNNT  # noqa: E402  (the reference's own class)
    # configs/baseline_v3-1023sp.yaml: 1023 pieces and the blank, 80 mel bands x 3 stacked frames.
    return RNNT(n_classes=1024, in_feats=240, enc_n_hid=1024, enc_pre_rnn_layers=2, enc_post_rnn_layers=3,
                enc_stack_time_factor=2, enc_dropout=0.1, pred_dropout=0.3, joint_dropout=0.3, pred_n_hid=512,
                pred_rnn_layers=2, joint_n_hid=512, forget_gate_bias=1.0, hidden_hidden_bias_scale=0.0,
                weights_init_scale=0.5)


class Unused(types.ModuleType):
    """A module the reference imports for what building and running its model does not touch (export, metrics,
    progress bars, logging, compiled ops of other paths)."""
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Unused(name)  # attributes of attributes (apex.amp.half_function), each callable

    def __call__(self, *args, **kwargs):
        return None


class ConfigNode(dict):
    """Stands in for yacs' CfgNode, which Debian does not package: maskrcnn_benchmark's config/defaults.py builds
    its defaults from it and the YAML file overrides them (strings are Python literals, as yacs reads them)."""

    def __init__(self, values=None):
        super().__init__()
        for key, value in (values or {}).items():
            self[key] = ConfigNode(value) if isinstance(value, dict) else value

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name)

    def __setattr__(self, name, value):
        self[name] = value

    def merge(self, overrides):
        for key, value in overrides.items():
            if key not in self:
                raise KeyError(f"{key} is not a maskrcnn_benchmark setting")
            if isinstance(value, dict):
                self[key].merge(value)
                continue
            if isinstance(value, str) and not isinstance(self[key], str):
                value = ast.literal_eval(value)
            self[key] = tuple(value) if isinstance(self[key], tuple) and isinstance(value, list) else value

    def merge_from_file(self, path):
        with open(path) as file:
            self.merge(yaml.safe_load(file))

    def clone(self):
        return copy.deepcopy(self)


def official_maskrcnn(code_dir, compiled=None, overrides=None):
    """GeneralizedRCNN of the v1.1 reference built from configs/e2e_mask_rcnn_R_50_FPN_1x.yaml, then `overrides`
    (a nested dict of settings). `compiled` stands in for maskrcnn_benchmark._C, which only the RoI and NMS
    layers call: building the model and its backbone's forward need none of it."""
    root = os.path.join(code_dir, "mlcommons-training", "object_detection", "pytorch")
    if not os.path.isfile(os.path.join(root, "configs", "e2e_mask_rcnn_R_50_FPN_1x.yaml")):
        sys.exit(77)
    yacs_config = types.ModuleType("yacs.config")
    yacs_config.CfgNode = ConfigNode
    sys.modules["yacs"] = types.ModuleType("yacs")
    sys.modules["yacs.config"] = yacs_config
    sys.modules["maskrcnn_benchmark._C"] = compiled or Unused("maskrcnn_benchmark._C")
    sys.modules["cv2"] = Unused("cv2")  # keypoint and visualisation code only
    import numpy as np
    np.float = float  # anchor_generator.py predates NumPy 1.24, which removed the alias
    sys.path.insert(0, root)
    from maskrcnn_benchmark.config import cfg  # noqa: E402  (the reference's own defaults)
    from maskrcnn_benchmark.modeling.detector import build_detection_model  # noqa: E402
    cfg.merge_from_file(os.path.join(root, "configs", "e2e_mask_rcnn_R_50_FPN_1x.yaml"))
    cfg.merge(overrides or {})
    return build_detection_model(cfg)


def official_bert(code_dir, case, dropout=0.1):
    """NVIDIA's v1.1 BertForPretraining (benchmarks/bert/implementations/pytorch/modeling.py), configured as its
    convert_tf_checkpoint.py configures it (every fused path off, the vocabulary padded to a multiple of 8)."""
    root = os.path.join(code_dir, "nvidia-v1.1", "NVIDIA", "benchmarks", "bert", "implementations", "pytorch")
    if not os.path.isfile(os.path.join(root, "modeling.py")):
        sys.exit(77)
    # modeling.py imports apex's fused layers and NVIDIA's CUDA extensions for the fused paths, and boto3,
    # requests and tqdm for downloads; the unfused model uses none of them. apex.contrib.layer_norm stays
    # missing, so model/layers/layernorm.py takes its own BertLayerNorm.
    for name in ["apex", "apex.contrib", "apex.contrib.multihead_attn", "apex.fused_dense", "mhalib", "fmhalib",
                 "mlp_cuda", "boto3", "botocore", "botocore.exceptions", "requests", "tqdm"]:
        sys.modules[name] = Unused(name)
    torch._C._jit_set_nvfuser_enabled = lambda enabled: False  # a CUDA-only switch activations.py flips
    sys.path.insert(0, root)
    import modeling  # noqa: E402  (NVIDIA's own classes)
    config = modeling.BertConfig.from_dict({
        "vocab_size": int(case["vocab_size"]), "hidden_size": int(case["hidden"]),
        "num_hidden_layers": int(case["layers"]), "num_attention_heads": int(case["heads"]),
        "intermediate_size": int(case["intermediate"]), "hidden_act": "gelu", "hidden_dropout_prob": dropout,
        "attention_probs_dropout_prob": dropout, "max_position_embeddings": int(case["max_positions"]),
        "type_vocab_size": 2, "initializer_range": 0.02})
    config.vocab_size += -config.vocab_size % 8
    for flag in ["pad", "unpad", "dense_seq_output", "fused_mha", "fused_gelu_bias", "fuse_qkv", "fuse_scale",
                 "fuse_mask", "fuse_dropout", "apex_softmax", "unpad_fmha", "pad_fmha", "fused_bias_mha",
                 "fused_dropout_add", "fused_bias_fc", "fused_bias_fc_loss_head"]:
        setattr(config, flag, False)
    config.enable_stream = True  # as convert_tf_checkpoint.py sets it when pad is off
    config.max_seq_length = case["input"].size(1)
    return modeling.BertForPretraining(config)


def bert_logits(model, case):
    """The masked-LM logits at every position (the real vocabulary's columns) and the next-sentence logits."""
    scores, next_sentence = model(case["input"], case["segments"], case["mask"])
    vocab = int(case["vocab_size"])
    return torch.cat([scores[..., :vocab].flatten(), next_sentence.flatten()])


def official_dlrm(case):
    """DLRM_Net of the v1.1 reference (facebookresearch/dlrm, mlperf branch, dlrm_s_pytorch.py), from the
    checkout TRAINBENCH_DLRM_REFERENCE_DIR names: it is not in ../shared."""
    root = os.environ.get("TRAINBENCH_DLRM_REFERENCE_DIR", "")
    if not os.path.isfile(os.path.join(root, "dlrm_s_pytorch.py")):
        sys.exit(77)

    for name in ["onnx", "sklearn", "sklearn.metrics", "tqdm", "mlperf_logger"]:
        sys.modules[name] = Unused(name)
    sys.path.insert(0, root)
    import numpy as np
    from dlrm_s_pytorch import DLRM_Net  # noqa: E402  (the reference's own class)
    tables, bottom, top = (case[key].tolist() for key in ("table_sizes", "bottom_mlp", "top_mlp"))
    dim, vectors = bottom[-1], len(tables) + 1
    # As dlrm_s_pytorch.py's main builds it: the dot interaction without self-pairs, a sigmoid on the top's last layer.
    ln_top = np.array([dim + vectors * (vectors - 1) // 2] + top)
    return DLRM_Net(m_spa=dim, ln_emb=np.array(tables), ln_bot=np.array([13] + bottom), ln_top=ln_top,
                    arch_interaction_op="dot", arch_interaction_itself=False, sigmoid_bot=-1,
                    sigmoid_top=ln_top.size - 2)


def dlrm_probabilities(model, case):
    """DLRM_Net's forward on one id per table and sample, as its data loader hands them over."""
    sparse = case["sparse"]
    batch, tables = sparse.shape
    offsets = torch.arange(batch).repeat(tables, 1)
    return model(case["input"], offsets, [sparse[:, k].contiguous() for k in range(tables)]).view(-1)


def rnnt_valid_cells(model, case):
    """The reference's logits at t < T_b, u <= U_b, utterance after utterance: the packed joint's rows."""
    x = case["input"].transpose(0, 1)  # (B, T, features) -> the reference's (T, B, features)
    logits, steps = model(x, case["frame_counts"], case["tokens"], case["token_counts"])
    return torch.cat([logits[b, :steps[b], :case["token_counts"][b] + 1].reshape(-1, logits.size(-1))
                      for b in range(logits.size(0))])


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    benchmark, state_path, case_path, code_dir = sys.argv[1:]
    if benchmark == "resnet":
        import torchvision
        model = torchvision.models.resnet50()
    elif benchmark == "ssd":
        model = official_ssd300(code_dir, os.path.dirname(os.path.abspath(state_path)))
    elif benchmark == "unet3d":
        model = official_unet3d(code_dir)
    elif benchmark == "rnnt":
        model = official_rnnt(code_dir)
    elif benchmark == "dlrm":
        model = official_dlrm(torch.load(case_path))
    elif benchmark == "maskrcnn":
        model = official_maskrcnn(code_dir)
    elif benchmark == "bert":
        model = official_bert(code_dir, torch.load(case_path))
    else:
        sys.exit(f"unknown benchmark {benchmark}")
    state = torch.load(state_path)
    if not isinstance(state, dict):
        sys.exit(f"{state_path}: torch.load returned a {type(state).__name__}, not a dict")
    model.load_state_dict(state, strict=True)  # same names, same shapes, nothing left over
    model.eval()
    case = torch.load(case_path)
    with torch.no_grad():
        if benchmark == "rnnt":
            output = rnnt_valid_cells(model, case)
        elif benchmark == "dlrm":
            output = dlrm_probabilities(model, case)
        elif benchmark == "bert":
            output = bert_logits(model, case)
        elif benchmark == "maskrcnn":  # the backbone's P2..P6
            output = torch.cat([level.flatten() for level in model.backbone(case["input"])])
        else:
            output = model(case["input"])
    if isinstance(output, (tuple, list)):  # SSD300: (locations, class scores)
        output = torch.cat([part.flatten() for part in output])
    expected = case["output"]
    scale = expected.abs().max().item()
    error = (output - expected).abs().max().item()
    print(f"{benchmark}: {len(state)} tensors loaded strictly; max |difference| {error:.3g} of max |output| {scale:.3g}")
    agrees = error <= 1e-4 * max(scale, 1.0)
    if benchmark == "dlrm":
        agrees = dlrm_step_agrees(model, case) and agrees
    sys.exit(0 if agrees else 1)


def dlrm_step_agrees(model, case):
    """One step's loss, as dlrm_s_pytorch.py's main builds it for --loss-function=bce (BCELoss, mean), and every
    parameter's gradient (the embedding bags' sparse ones read densely), each to 1e-4 of its largest entry."""
    model.train()
    model.zero_grad()
    loss = torch.nn.BCELoss(reduction="mean")(dlrm_probabilities(model, case), case["labels"])
    loss.backward()
    agrees = abs(loss.item() - case["loss"].item()) <= 1e-4 * abs(case["loss"].item())
    print(f"dlrm: loss {loss.item():.6g}, trainbench's {case['loss'].item():.6g}")
    for name, parameter in model.named_parameters():
        gradient = parameter.grad.to_dense() if parameter.grad.is_sparse else parameter.grad
        expected = case["grad." + name]
        error = (gradient - expected).abs().max().item()
        if error > 1e-4 * max(expected.abs().max().item(), 1e-12):
            print(f"dlrm: the gradient of {name} differs by {error:.3g} (largest entry {expected.abs().max().item():.3g})")
            agrees = False
    return agrees


if __name__ == "__main__":
    main()
