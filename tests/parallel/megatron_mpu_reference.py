#!/usr/bin/env python3
"""Runs Megatron-LM's own tensor-parallel layers (megatron/mpu of the MLPerf GPT-3 reference) at tp=2, on two
processes over Gloo, on the inputs and whole weights the C++ test saved, and writes each rank's outputs and
gradients for the test to compare with trainbench's parallel/tensor_parallel.h.

    /usr/bin/python3 megatron_mpu_reference.py MEGATRON_LM_DIR WORK_DIR

WORK_DIR/inputs.pt (a dict of tensors) in; WORK_DIR/rank0.pt and rank1.pt out, keys "<case>.<what>". Every
case feeds the layer the input of its rank (the whole input, or this rank's chunk), sets the layer's shards from
the whole weights, and runs backward from sum(output * upstream), with this rank's chunk of `upstream` where
the output is split. Exit 77 when MEGATRON_LM_DIR/megatron/mpu is absent.

What stands in for what Megatron's code needs but this machine lacks (its own layer, mapping and loss code runs
unchanged):
- the `megatron` package's __init__ (it imports the whole training stack: mlperf_common, tokenizers, apex): a
  bare package over the same directory with get_args() (CPU initialisation, fp32, no gradient-accumulation
  fusion, no async all-reduce, sequence_parallel per case) and get_global_memory_buffer();
- torch.cuda.current_device(): "cpu", so the buffers the mappings allocate land on the CPU;
- torch.distributed._all_gather_base and _reduce_scatter_base, which 1.13's Gloo lacks: the same results through
  all_gather and all_reduce.
Megatron's optimizer sums the gradients of replicated parameters used on sequence-parallel rows over the
tensor-parallel group (allreduce_layernorm_grads, for the row-parallel bias under sequence parallelism); this
script does that sum after backward, as trainbench's layer does it inside backward.
"""
import os
import socket
import sys
import types

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def install_stand_ins(megatron_lm_dir, args):
    package = types.ModuleType("megatron")
    package.__path__ = [os.path.join(megatron_lm_dir, "megatron")]
    package.get_args = lambda: args

    class MemoryBuffer:
        def get_tensor(self, shape, dtype, name):
            return torch.empty(shape, dtype=dtype)

    buffer = MemoryBuffer()
    package.get_global_memory_buffer = lambda: buffer
    sys.modules["megatron"] = package
    torch.cuda.current_device = lambda: "cpu"

    class Done:
        def wait(self):
            pass

    def all_gather_base(output, input_, group=None, async_op=False):
        dist.all_gather(list(output.chunk(dist.get_world_size(group))), input_.contiguous(), group=group)
        return Done() if async_op else None

    def reduce_scatter_base(output, input_, group=None, async_op=False):
        total = input_.clone()
        dist.all_reduce(total, group=group)
        output.copy_(total.chunk(dist.get_world_size(group))[dist.get_rank(group)])
        return Done() if async_op else None

    dist._all_gather_base = all_gather_base
    dist._reduce_scatter_base = reduce_scatter_base


def chunk(tensor, dim, rank):
    return tensor.chunk(WORLD, dim)[rank].contiguous()


def run_linear(mpu, args, inputs, rank, case, kind, options):
    """One Column/RowParallelLinear case; the input and upstream slicing rules match the C++ test."""
    args.sequence_parallel = options.get("sequence_parallel", False)
    if kind == "column":
        layer = mpu.ColumnParallelLinear(8, 12, gather_output=options["gather_output"])
        weight_dim, bias_split = 0, True
        x, upstream = inputs["column.x"], inputs["column.upstream"]
        x = chunk(x, 0, rank) if args.sequence_parallel else x.clone()
        upstream = upstream if options["gather_output"] else chunk(upstream, -1, rank)
    else:
        layer = mpu.RowParallelLinear(12, 8, input_is_parallel=options["input_is_parallel"])
        weight_dim, bias_split = 1, False
        x, upstream = inputs["row.x"], inputs["row.upstream"]
        x = chunk(x, -1, rank) if options["input_is_parallel"] else x.clone()
        upstream = chunk(upstream, 0, rank) if args.sequence_parallel else upstream
    with torch.no_grad():
        layer.weight.copy_(chunk(inputs[kind + ".weight"], weight_dim, rank))
        layer.bias.copy_(chunk(inputs[kind + ".bias"], 0, rank) if bias_split else inputs[kind + ".bias"])
    x.requires_grad_(True)
    output = layer(x)[0]
    (output * upstream).sum().backward()
    if getattr(layer.bias, "sequence_parallel", False):
        dist.all_reduce(layer.bias.grad, group=mpu.get_tensor_model_parallel_group())
    return {case + ".output": output, case + ".input_grad": x.grad, case + ".weight_grad": layer.weight.grad,
            case + ".bias_grad": layer.bias.grad}


def run_embedding(mpu, inputs, rank):
    layer = mpu.VocabParallelEmbedding(48, 6)
    with torch.no_grad():
        layer.weight.copy_(chunk(inputs["embedding.weight"], 0, rank))
    output = layer(inputs["embedding.ids"])
    (output * inputs["embedding.upstream"]).sum().backward()
    return {"embedding.output": output, "embedding.weight_grad": layer.weight.grad}


def run_cross_entropy(mpu, inputs, rank):
    # Megatron's loss knows no padding: the padding columns (global id >= vocab_limit) are set to -inf first,
    # which is what trainbench's vocab_limit means.
    logits = chunk(inputs["cross_entropy.logits"], -1, rank).requires_grad_(True)
    columns = logits.shape[-1]
    padding = torch.arange(rank * columns, (rank + 1) * columns) >= int(inputs["cross_entropy.vocab_limit"])
    loss = mpu.vocab_parallel_cross_entropy(logits.masked_fill(padding, float("-inf")),
                                            inputs["cross_entropy.target"])
    (loss * inputs["cross_entropy.loss_weight"]).sum().backward()
    return {"cross_entropy.loss": loss, "cross_entropy.logits_grad": logits.grad}


def worker(rank, port, megatron_lm_dir, work_dir):
    args = types.SimpleNamespace(use_cpu_initialization=True, perform_initialization=True,
                                 params_dtype=torch.float32, async_tensor_model_parallel_allreduce=False,
                                 sequence_parallel=False, gradient_accumulation_fusion=False)
    install_stand_ins(megatron_lm_dir, args)
    from megatron import mpu  # noqa: E402  (the reference's own package, under the stand-ins above)

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=WORLD)
    mpu.initialize_model_parallel(WORLD)
    torch.manual_seed(1234)
    inputs = torch.load(os.path.join(work_dir, "inputs.pt"))
    results = {}
    for case, kind, options in [("column", "column", {"gather_output": False}),
                                ("column_gathered", "column", {"gather_output": True}),
                                ("column_sp", "column", {"gather_output": False, "sequence_parallel": True}),
                                ("row", "row", {"input_is_parallel": True}),
                                ("row_split", "row", {"input_is_parallel": False}),
                                ("row_sp", "row", {"input_is_parallel": True, "sequence_parallel": True})]:
        results.update(run_linear(mpu, args, inputs, rank, case, kind, options))
    results.update(run_embedding(mpu, inputs, rank))
    results.update(run_cross_entropy(mpu, inputs, rank))
    results = {key: value.detach().clone().contiguous() for key, value in results.items()}
    torch.save(results, os.path.join(work_dir, "rank%d.pt" % rank))
    dist.destroy_process_group()


def main():
    megatron_lm_dir, work_dir = sys.argv[1], sys.argv[2]
    if not os.path.isfile(os.path.join(megatron_lm_dir, "megatron", "mpu", "layers.py")):
        sys.exit(77)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # fork: the children start with torch already imported (spawn would import it twice more).
    mp.start_processes(worker, args=(port, megatron_lm_dir, work_dir), nprocs=WORLD, start_method="fork")


if __name__ == "__main__":
    main()
