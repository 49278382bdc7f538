#pragma once
// What every optimizer here is given: each parameter with whether weight decay applies to it. The references
// exclude biases and normalisation scales, each recognising them its own way (ResNet by shape, BERT by name),
// so the benchmark decides and the optimizer only reads the flag.
#include <vector>

#include <torch/torch.h>

namespace trainbench::optim {

struct Parameter {
  torch::Tensor tensor;
  bool decays = true;  // weight decay, and LARS's and LAMB's layer-wise trust ratio, apply
};

// Every tensor decaying: one parameter group, as the RNN-T reference builds its LAMB.
inline std::vector<Parameter> all_decaying(const std::vector<torch::Tensor>& tensors) {
  std::vector<Parameter> parameters;
  for (const auto& tensor : tensors) parameters.push_back({tensor, true});
  return parameters;
}

}  // namespace trainbench::optim
