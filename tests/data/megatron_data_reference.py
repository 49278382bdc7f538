#!/usr/bin/env python3
"""Runs the MLPerf GPT-3 reference's own data code (Megatron-LM's megatron/data: indexed_dataset.py,
gpt_dataset.py, blendable_dataset.py, dataset_utils.py and the C++ helpers.cpp) for trainbench's data tests
(tests/data/megatron_indexed_test.cpp, gpt_samples_test.cpp), under Debian's /usr/bin/python3 (numpy, torch).

    /usr/bin/python3 megatron_data_reference.py MEGATRON_LM_DIR HELPERS_DIR COMMAND ARGUMENTS...

    read OUT.json PREFIX...               MMapIndexedDataset(PREFIX) of each: dtype code, sizes, doc_idx, every
                                          sequence
    write IN.json                         MMapIndexedDatasetBuilder: IN.json lists {prefix, dtype_code,
                                          documents}, each document a list of sequences (add_item each, then
                                          end_document)
    index PREFIX CASES.json OUT.json      GPTDataset(...) per case: doc_idx, sample_idx, shuffle_idx, num_epochs
                                          and the samples asked for (__getitem__)
    blend CASES.json OUT.json             get_datasets_weights_and_num_samples and BlendableDataset's indices
    numpy_random CASES.json OUT.json      np.random.RandomState(seed): permutation(n), then shuffles of arange(m)

Exit 77 when MEGATRON_LM_DIR/megatron/data is absent, or numpy or torch (the tests skip, saying which).

helpers.cpp is a pybind11 module that Megatron compiles with its Makefile at run time; it is compiled here with
g++ into HELPERS_DIR (once: reused while newer than helpers.cpp), which needs Debian's pybind11-dev and
python3-dev. What stands in for what the reference needs but a CPU machine without the training stack lacks
(the data code itself runs unchanged):
- the `megatron` package's __init__, which imports the whole training stack (global_vars, initialize, apex,
  mlperf_common): a bare package over the same directory with print_rank_0 (to stderr) and get_args;
- megatron.mpu, only named by the data code for the groups of the barrier after the index is built: a module
  whose group getters return None;
- torch.distributed.get_rank / get_world_size (0 and 1: this process is rank 0 of one) and all_reduce (a no-op,
  the barrier), and torch.cuda.LongTensor (a CPU tensor), which _build_index_mappings and BlendableDataset call.
"""
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import types

try:
    import numpy as np
    import torch
except ImportError as missing:  # python3-numpy / python3-torch: a skip, like absent reference code
    print("/usr/bin/python3 lacks %s (apt-get install python3-numpy python3-torch)" % missing.name, file=sys.stderr)
    sys.exit(77)


def install_stand_ins(megatron_lm_dir):
    package = types.ModuleType("megatron")
    package.__path__ = [os.path.join(megatron_lm_dir, "megatron")]
    package.print_rank_0 = lambda message: print(message, file=sys.stderr)
    package.get_args = lambda: None
    mpu = types.ModuleType("megatron.mpu")
    for getter in ("get_data_parallel_group", "get_pipeline_model_parallel_group",
                   "get_tensor_model_parallel_group"):
        setattr(mpu, getter, lambda: None)
    package.mpu = mpu
    sys.modules["megatron"] = package
    sys.modules["megatron.mpu"] = mpu
    torch.distributed.get_rank = lambda group=None: 0
    torch.distributed.get_world_size = lambda group=None: 1
    torch.distributed.all_reduce = lambda tensor, group=None, **kwargs: None
    torch.cuda.LongTensor = lambda values: torch.tensor(values, dtype=torch.int64)


def load_helpers(megatron_lm_dir, helpers_dir):
    """Compiles megatron/data/helpers.cpp as its Makefile does (into helpers_dir) and imports it as
    megatron.data.helpers, where gpt_dataset.py and blendable_dataset.py import it from."""
    source = os.path.join(megatron_lm_dir, "megatron", "data", "helpers.cpp")
    library = os.path.join(helpers_dir, "helpers" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.exists(library) or os.path.getmtime(library) < os.path.getmtime(source):
        os.makedirs(helpers_dir, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=helpers_dir, suffix=".so.partial")
        os.close(handle)
        command = ["g++", "-O2", "-Wall", "-shared", "-std=c++11", "-fPIC",
                   "-I" + sysconfig.get_paths()["include"], source, "-o", partial]
        built = subprocess.run(command, capture_output=True, text=True)
        if built.returncode != 0:
            os.remove(partial)
            sys.exit("compiling helpers.cpp failed (are pybind11-dev and python3-dev installed?):\n"
                     + " ".join(command) + "\n" + built.stderr[-3000:])
        os.replace(partial, library)  # concurrent test processes each build and move a whole file
    spec = importlib.util.spec_from_file_location("megatron.data.helpers", library)
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    sys.modules["megatron.data.helpers"] = helpers
    import megatron.data
    megatron.data.helpers = helpers


def read(out_path, *prefixes):
    from megatron.data import indexed_dataset
    results = []
    for prefix in prefixes:
        dataset = indexed_dataset.MMapIndexedDataset(prefix, skip_warmup=True)
        results.append({
            "dtype_code": indexed_dataset.code(dataset._index.dtype),
            "sizes": dataset.sizes.tolist(),
            "doc_idx": dataset.doc_idx.tolist(),
            "sequences": [np.asarray(dataset[i], dtype=np.int64).tolist() for i in range(len(dataset))],
        })
    with open(out_path, "w") as out:
        json.dump(results, out)


def write(in_path):
    from megatron.data import indexed_dataset
    with open(in_path) as datasets_file:
        datasets = json.load(datasets_file)
    for dataset in datasets:
        dtype = indexed_dataset.dtypes[dataset["dtype_code"]]
        builder = indexed_dataset.MMapIndexedDatasetBuilder(dataset["prefix"] + ".bin", dtype=dtype)
        for document in dataset["documents"]:
            for sequence in document:
                builder.add_item(torch.tensor(sequence, dtype=torch.int64))
            builder.end_document()
        builder.finalize(dataset["prefix"] + ".idx")


def index(prefix, cases_path, out_path):
    from megatron.data import gpt_dataset, indexed_dataset
    with open(cases_path) as cases_file:
        cases = json.load(cases_file)
    dataset = indexed_dataset.make_dataset(prefix, "mmap", skip_warmup=True)
    results = []
    for case in cases:
        documents = np.arange(case["first_document"], case["end_document"], dtype=np.int32)
        gpt = gpt_dataset.GPTDataset(case["name"], prefix, documents, dataset, case["num_samples"],
                                     case["seq_length"], case["seed"], case["plus_one"])
        tokens_per_epoch = gpt_dataset._num_tokens(documents, dataset.sizes)
        samples = range(len(gpt)) if case["samples"] == "all" else case["samples"]
        results.append({
            "num_epochs": gpt_dataset._num_epochs(tokens_per_epoch, case["seq_length"], case["num_samples"],
                                                  gpt.add_extra_token),
            "doc_idx": np.asarray(gpt.doc_idx).tolist(),
            "sample_idx": np.asarray(gpt.sample_idx).reshape(-1).tolist(),
            "shuffle_idx": np.asarray(gpt.shuffle_idx).tolist(),
            "samples": {str(i): gpt[i]["text"].tolist() for i in samples},
        })
    with open(out_path, "w") as out:
        json.dump(results, out)


def blend(cases_path, out_path):
    from megatron.data import blendable_dataset, dataset_utils
    with open(cases_path) as cases_file:
        cases = json.load(cases_file)

    class Sized:
        def __init__(self, size):
            self.size = size

        def __len__(self):
            return self.size

    results = []
    for case in cases:
        prefix_list = []
        for i, weight in enumerate(case["weights"]):
            prefix_list += [repr(weight), "dataset%d" % i]  # the command line's words; float() reads them back
        _, weights, num_samples = dataset_utils.get_datasets_weights_and_num_samples(prefix_list, case["num_samples"])
        blended = blendable_dataset.BlendableDataset([Sized(size) for size in case["sizes"]], weights)
        results.append({
            "num_samples": num_samples,
            "dataset_index": blended.dataset_index.tolist(),
            "dataset_sample_index": blended.dataset_sample_index.tolist(),
        })
    with open(out_path, "w") as out:
        json.dump(results, out)


def numpy_random(cases_path, out_path):
    with open(cases_path) as cases_file:
        cases = json.load(cases_file)
    results = []
    for case in cases:
        random = np.random.RandomState(seed=case["seed"])
        permutation = random.permutation(case["permutation"])
        shuffled = np.arange(case["shuffle"], dtype=np.uint32)  # the shuffle index's dtype
        random.shuffle(shuffled)
        results.append({"permutation": permutation.tolist(), "shuffle": shuffled.tolist()})
    with open(out_path, "w") as out:
        json.dump(results, out)


def main():
    megatron_lm_dir, helpers_dir, command = sys.argv[1:4]
    arguments = sys.argv[4:]
    if command != "numpy_random":
        if not os.path.isfile(os.path.join(megatron_lm_dir, "megatron", "data", "indexed_dataset.py")):
            print("no Megatron-LM data code under " + megatron_lm_dir, file=sys.stderr)
            sys.exit(77)
        install_stand_ins(megatron_lm_dir)
    if command in ("index", "blend"):
        load_helpers(megatron_lm_dir, helpers_dir)
    {"read": read, "write": write, "index": index, "blend": blend, "numpy_random": numpy_random}[command](*arguments)


if __name__ == "__main__":
    main()
