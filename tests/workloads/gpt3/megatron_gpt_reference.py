#!/usr/bin/env python3
"""Runs the MLPerf GPT-3 reference's own GPTModel (Megatron-LM's megatron/model and megatron/mpu) at a tiny width,
in fp32 on the CPU, on the weights and token sequences the C++ test saved, and writes what it computed for the test
to compare with trainbench's workloads/gpt3/model.h.

    /usr/bin/python3 megatron_gpt_reference.py MEGATRON_LM_DIR WORK_DIR

WORK_DIR/inputs.pt (a dict of tensors) in:
  "sequences"        int64 [b, s]: the samples as the dataset gives them (-1 pads a short last sample);
  "setting.<name>"   the shape: vocab, hidden, layers, heads, ffn, seq (int64 scalars);
  "weight.<name>"    every parameter of GPTModel by Megatron's name, as Megatron stores it.
WORK_DIR/reference.pt out, for each recompute granularity "<g>" of {"none", "selective"}:
  "<g>.loss"         loss_func's loss (pretrain_gpt.py);
  "<g>.losses"       the model's per-token losses [b, s] (GPTModel.forward with labels);
  "<g>.grad.<name>"  every parameter's gradient of that loss;
and "tokens", "labels", "loss_mask", "position_ids" as pretrain_gpt.get_batch made them, "padded_vocab" as
Megatron pads the vocabulary. Exit 77 when MEGATRON_LM_DIR/megatron/model/gpt_model.py is absent.

The arguments are Megatron's own parse_args/validate_args on run_gpt3.sh's flags, with the sizes made tiny,
tp = pp = 1, and --use-cpu-initialization (the GPU initialisation draws on the CUDA generator; the drawn weights
are replaced by the test's anyway). run_gpt3.sh sets --recompute-activations, which Megatron turns into
recompute_granularity='selective' (only the core attention is recomputed, through mpu.checkpoint); the script runs
the model that way and once more with no recompute. --sequence-parallel is set as run_gpt3.sh sets it, and
validate_args turns it off at tp = 1, as it does in the reference.

Megatron's own code runs unchanged: GPTModel, TransformerLanguageModel, ParallelTransformer(Layer),
ParallelAttention, CoreAttention, FusedScaleMaskSoftmax, ParallelMLP with bias_gelu_impl (fused_bias_gelu.py's
TorchScript functions run on the CPU as they are), MixedFusedLayerNorm1P (the class megatron/model/__init__.py
exports as LayerNorm), the mpu layers, vocab_parallel_cross_entropy, mpu.checkpoint, broadcast_data,
get_ltor_masks_and_position_ids, average_losses_across_data_parallel_group, and pretrain_gpt.py's get_batch and
loss_func (compiled from the file's own source: the file itself imports the whole training stack). What stands in
for what needs CUDA, apex or packages this machine lacks:
- the `megatron` package's __init__ (it imports mlperf_common and the tokenizers, whose gpt2_tokenization needs
  `regex`): a bare package over the same directory exposing megatron/global_vars.py's own get_args,
  get_global_memory_buffer (its GlobalMemoryBuffer) and the rest; `megatron.tokenizer` is an empty module, since
  global_vars imports build_tokenizer (no tokenizer is built) and _vocab_size_with_padding is compiled from
  tokenizer.py's source; get_tokenizer() gives an object with an `eod` id only (--eod-mask-loss is off, so
  get_batch passes it along unused);
- apex and amp_C (imported at the top of megatron/utils.py for its parameter-norm code, which is not run): empty
  modules; fused_layer_norm.py's optional apex FastLayerNormFN import then fails as without apex, and hidden 64
  is not a persistent-kernel size anyway;
- fused_mix_prec_layer_norm_cuda (apex's CUDA LayerNorm, which MixedFusedLayerNorm imports by name): its
  forward_affine and backward_affine written with torch.nn.functional.layer_norm and autograd, the same
  normalisation (biased variance, eps inside the square root, fp32 here); the module's `weight + 1` of the 1P
  LayerNorm is Megatron's code and runs as it is;
- the fused softmax kernels: not stubbed. FusedScaleMaskSoftmax takes its torch path in fp32 (the kernels need
  fp16/bf16 input), which is the path the reference itself takes in fp32 (run_gpt3.sh's default, USE_BF16=false):
  scores masked_fill'ed with -10000 by attention_mask_func, then torch.nn.Softmax;
- torch.cuda: current_device() -> "cpu" (buffers and the broadcast land on the CPU), Tensor.cuda() -> the tensor
  itself, torch.cuda.LongTensor -> torch.LongTensor (broadcast_data's size exchange), and the CUDA generator's
  get_rng_state / manual_seed / mpu.random._set_cuda_rng_state -> the CPU generator's (the model-parallel RNG
  tracker and mpu.checkpoint save and restore RNG states; dropout is 0, so no random number is drawn).
torch.distributed is a one-rank Gloo group and mpu is initialised at tp = pp = 1 over it.
"""
import ast
import os
import socket
import sys
import types


def compile_function(path, name, namespace):
    """The top-level function `name` of the Python file at `path`, compiled from its own source into `namespace`."""
    with open(path) as source_file:
        tree = ast.parse(source_file.read(), filename=path)
    nodes = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if len(nodes) != 1:
        raise RuntimeError("%s: no single function %s" % (path, name))
    exec(compile(ast.Module(body=nodes, type_ignores=[]), path, "exec"), namespace)
    return namespace[name]


def install_stand_ins(megatron_lm_dir):
    import torch
    import torch.nn.functional as F

    # apex and amp_C: imported by megatron/utils.py for code this script does not run.
    apex = types.ModuleType("apex")
    apex.__path__ = []
    multi_tensor_apply = types.ModuleType("apex.multi_tensor_apply")
    multi_tensor_apply.multi_tensor_applier = None
    apex.multi_tensor_apply = multi_tensor_apply
    sys.modules.update({"apex": apex, "apex.multi_tensor_apply": multi_tensor_apply,
                        "amp_C": types.ModuleType("amp_C")})

    # apex's CUDA LayerNorm extension, as MixedFusedLayerNorm's FusedLayerNormAffineFunction calls it.
    layer_norm = types.ModuleType("fused_mix_prec_layer_norm_cuda")

    def forward_affine(input_, normalized_shape, weight, bias, eps):
        dims = tuple(range(input_.dim() - len(normalized_shape), input_.dim()))
        mean = input_.mean(dim=dims)
        invvar = torch.rsqrt(input_.var(dim=dims, unbiased=False) + eps)
        return F.layer_norm(input_, normalized_shape, weight, bias, eps), mean, invvar

    def backward_affine(grad_output, mean, invvar, input_, normalized_shape, weight, bias, eps):
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in (input_, weight, bias)]
            output = F.layer_norm(leaves[0], normalized_shape, leaves[1], leaves[2], eps)
            return torch.autograd.grad(output, leaves, grad_output)

    layer_norm.forward_affine = forward_affine
    layer_norm.backward_affine = backward_affine
    sys.modules["fused_mix_prec_layer_norm_cuda"] = layer_norm

    # torch.cuda on a machine without CUDA.
    torch.cuda.current_device = lambda: "cpu"
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.cuda.LongTensor = torch.LongTensor
    torch.cuda.get_rng_state = torch.get_rng_state
    torch.cuda.manual_seed = torch.manual_seed

    # The bare package over megatron/, with global_vars' own accessors.
    package = types.ModuleType("megatron")
    package.__path__ = [os.path.join(megatron_lm_dir, "megatron")]
    sys.modules["megatron"] = package
    sys.modules["megatron.tokenizer"] = types.ModuleType("megatron.tokenizer")
    sys.modules["megatron.tokenizer"].build_tokenizer = None
    from megatron import global_vars  # noqa: E402
    for name in ("get_args", "get_timers", "get_global_memory_buffer", "get_adlr_autoresume",
                 "get_num_microbatches", "get_current_global_batch_size"):
        setattr(package, name, getattr(global_vars, name))
    package.get_tokenizer = lambda: types.SimpleNamespace(eod=0)

    def print_rank_0(message):
        print(message, file=sys.stderr)

    package.print_rank_0 = print_rank_0
    package.print_rank_last = print_rank_0
    package.is_last_rank = lambda: True
    return global_vars


def megatron_arguments(settings, padded_vocab_of):
    """Megatron's parse_args and validate_args on run_gpt3.sh's flags at the test's sizes."""
    from megatron.arguments import parse_args, validate_args
    s = {key: str(value) for key, value in settings.items()}
    sys.argv = ["pretrain_gpt.py",
                "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1",
                "--sequence-parallel", "--recompute-activations",
                "--num-layers", s["layers"], "--hidden-size", s["hidden"], "--ffn-hidden-size", s["ffn"],
                "--num-attention-heads", s["heads"], "--seq-length", s["seq"], "--max-position-embeddings", s["seq"],
                "--micro-batch-size", s["batch"], "--global-batch-size", s["batch"],
                "--train-samples", "1000", "--lr-warmup-samples", "0", "--lr-decay-samples", "1000",
                "--lr", "2.0e-5", "--min-lr", "2.0e-6", "--lr-decay-style", "cosine", "--eval-iters", "-1",
                "--eval-interval", "1", "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
                "--do-layernorm-bias-weight-decay", "--no-scaled-init", "--loss-scale", "1.0", "--split", "100,0,0",
                "--clip-grad", "1.0", "--weight-decay", "0.1", "--adam-beta1", "0.9", "--adam-beta2", "0.95",
                "--init-method-std", "0.006", "--DDP-impl", "local", "--no-query-key-layer-scaling",
                "--no-seq-len-plus-one-tokens", "--seed", "1234",
                "--use-cpu-initialization"]
    os.environ["RANK"], os.environ["WORLD_SIZE"] = "0", "1"
    stdout, sys.stdout = sys.stdout, sys.stderr  # the argument listing goes to stderr
    try:
        args = validate_args(parse_args(), {"tokenizer_type": "GPT2BPETokenizer"})  # pretrain_gpt's defaults
        args.padded_vocab_size = padded_vocab_of(int(settings["vocab"]), args)
    finally:
        sys.stdout = stdout
    return args


def main():
    megatron_lm_dir, work_dir = sys.argv[1], sys.argv[2]
    if not os.path.isfile(os.path.join(megatron_lm_dir, "megatron", "model", "gpt_model.py")):
        sys.exit(77)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    global_vars = install_stand_ins(megatron_lm_dir)
    inputs = torch.load(os.path.join(work_dir, "inputs.pt"))
    settings = {key[len("setting."):]: int(value) for key, value in inputs.items() if key.startswith("setting.")}

    tokenizer_py = os.path.join(megatron_lm_dir, "megatron", "tokenizer", "tokenizer.py")
    padded_vocab_of = compile_function(tokenizer_py, "_vocab_size_with_padding", {})
    args = megatron_arguments(settings, padded_vocab_of)
    global_vars.set_args(args)
    global_vars._set_global_memory_buffer()
    global_vars._set_timers(args)

    import megatron
    from megatron import mpu
    from megatron.model import GPTModel, ModelType
    args.model_type = ModelType.encoder_or_decoder  # as training.get_model sets it for pretrain_gpt.py
    from megatron import utils as megatron_utils

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
    mpu.initialize_model_parallel(1, 1)
    mpu.random._set_cuda_rng_state = torch.set_rng_state  # stand-in: the CUDA generator is the CPU one here
    mpu.model_parallel_cuda_manual_seed(args.seed)

    pretrain_gpt = os.path.join(megatron_lm_dir, "pretrain_gpt.py")
    namespace = {"torch": torch, "get_args": megatron.get_args, "get_tokenizer": megatron.get_tokenizer,
                 "mpu": mpu, "get_ltor_masks_and_position_ids": megatron_utils.get_ltor_masks_and_position_ids,
                 "average_losses_across_data_parallel_group":
                     megatron_utils.average_losses_across_data_parallel_group}
    get_batch = compile_function(pretrain_gpt, "get_batch", namespace)
    loss_func = compile_function(pretrain_gpt, "loss_func", namespace)

    sequences = inputs["sequences"]
    samples = iter([{"text": sequences, "dummy_sample": torch.zeros(sequences.size(0), dtype=torch.int64)}])
    tokens, labels, loss_mask, attention_mask, position_ids = get_batch(samples)
    results = {"tokens": tokens, "labels": labels, "loss_mask": loss_mask, "position_ids": position_ids,
               "padded_vocab": torch.tensor(args.padded_vocab_size)}

    weights = {key[len("weight."):]: value for key, value in inputs.items() if key.startswith("weight.")}
    for granularity in ("none", "selective"):
        args.recompute_granularity = None if granularity == "none" else "selective"
        model = GPTModel(num_tokentypes=0, parallel_output=True, pre_process=True, post_process=True)
        names = [name for name, _ in model.named_parameters()]
        if sorted(names) != sorted(weights):
            raise RuntimeError("parameters differ: Megatron has %s, the test gave %s" %
                               (sorted(set(names) - set(weights)), sorted(set(weights) - set(names))))
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if parameter.shape != weights[name].shape:
                    raise RuntimeError("%s: Megatron's shape %s, the test's %s" %
                                       (name, tuple(parameter.shape), tuple(weights[name].shape)))
                parameter.copy_(weights[name])
        model.train()
        losses = model(tokens, position_ids, attention_mask, labels=labels)
        loss, _ = loss_func(loss_mask, losses)
        loss.backward()
        results[granularity + ".loss"] = loss
        results[granularity + ".losses"] = losses
        for name, parameter in model.named_parameters():
            results[granularity + ".grad." + name] = parameter.grad
    results = {key: value.detach().clone().contiguous() for key, value in results.items()}
    torch.save(results, os.path.join(work_dir, "reference.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
