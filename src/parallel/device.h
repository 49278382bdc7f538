#pragma once
// Resolves the --device setting against what this LibTorch build can use: Debian's CPU build here, a CUDA
// build of PyTorch 2.x on GPU machines.
#include <string>

#include <torch/torch.h>

namespace trainbench {

// "auto" picks CUDA when a GPU is visible, else the CPU; "cuda" without a GPU is an Error naming --device.
torch::Device resolve_device(const std::string& setting);

}  // namespace trainbench
