#pragma once
// Model weights in and out as PyTorch state dicts: what Python's torch.load returns as a dict of name ->
// tensor, under the names and layouts of the official implementation (torchvision's ResNet-50, the v1.1
// reference's Unet3D, ...), so a model trained here can be handed to the reference's own code and the
// official starting points can be read in. docs/checkpoints.md says which file each benchmark reads and writes.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace trainbench {

struct NamedTensor {
  std::string name;      // the official implementation's state_dict key
  torch::Tensor tensor;  // the model's own tensor: loading into it loads the model
};
using StateDict = std::vector<NamedTensor>;

// Every parameter and buffer of `module` under its LibTorch name, in registration order: the official
// state_dict for a module built with the official module names.
StateDict module_state(const torch::nn::Module& module);

// `state` with each name that begins with one of `prefixes`' first strings begun with its second instead
// (the first prefix that matches), for a model whose module tree differs from the official one's.
StateDict with_renamed_prefixes(StateDict state, const std::vector<std::pair<std::string, std::string>>& prefixes);

// Writes `state` (on the CPU, contiguous) as torch.save writes a dict of tensors; the file appears whole or
// not at all.
void save_state_dict(const StateDict& state, const std::string& path);

// The tensors of the state dict torch.save (Python's or save_state_dict) wrote at `path`, by name, on the CPU:
// read by util/torch_file.h, which refuses an unsafe or damaged file naming it and the cause. A NaN or an
// infinity is refused naming the file and the tensor: training would only diverge from it.
std::map<std::string, torch::Tensor> read_state_dict_file(const std::string& path);

// Reads a dict of tensors written by torch.save or save_state_dict (read_state_dict_file) and copies it into
// `targets`, converting device and dtype. A file whose names or shapes differ from the targets' is refused, listing the
// missing, unexpected and mis-shaped tensors, before any tensor is changed.
void load_state_dict(const std::string& path, const StateDict& targets);

}  // namespace trainbench
