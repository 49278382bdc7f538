#pragma once
// What every optimizer here is given: each parameter with whether weight decay applies to it. The references
// exclude biases and normalisation scales, each recognising them its own way (ResNet by shape, BERT by name),
// so the benchmark decides and the optimizer only reads the flag.
#include <functional>
#include <vector>

#include <torch/torch.h>

namespace trainbench::optim {

struct Parameter {
  torch::Tensor tensor;
  bool decays = true;  // weight decay, and LARS's and LAMB's layer-wise trust ratio, apply
  // A model split over ranks (tensor and pipeline parallelism): `sharded` tensors are slices of one tensor
  // across the tensor-parallel ranks, so their norms are sums over those ranks; a tensor held whole on several
  // ranks (replicated over tensor-parallel ranks, or tied across pipeline stages) counts in the global
  // gradient norm on one of them only.
  bool sharded = false;
  bool counted_in_global_norm = true;
};

// How an optimizer's norms span a model split over ranks: each function sums the squares it is given, element
// by element, over the ranks named (the optimizer layer knows no communicator; parallel/ supplies these).
struct NormReduction {
  std::function<void(std::vector<double>&)> over_tensor_shards;  // the tensor-parallel group
  std::function<void(std::vector<double>&)> over_model;          // every rank holding part of the model
};

// Every tensor decaying: one parameter group, as the RNN-T reference builds its LAMB.
inline std::vector<Parameter> all_decaying(const std::vector<torch::Tensor>& tensors) {
  std::vector<Parameter> parameters;
  for (const auto& tensor : tensors) parameters.push_back({tensor, true});
  return parameters;
}

}  // namespace trainbench::optim
