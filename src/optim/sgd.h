#pragma once
// SGD with momentum is LibTorch's own torch::optim::SGD, the update of torch.optim.SGD that the SSD, Mask R-CNN
// and U-Net3D references train with (MiniGo trains with it too). The benchmarks set its rate before each step.
#include <cstddef>

#include <torch/torch.h>

namespace trainbench::optim {

// Every parameter group's learning rate.
inline void set_learning_rate(torch::optim::SGD& optimizer, double learning_rate) {
  for (auto& group : optimizer.param_groups())
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(learning_rate);
}

// One parameter group's learning rate (Mask R-CNN's biases train at twice the rate of the weights).
inline void set_learning_rate(torch::optim::SGD& optimizer, size_t group, double learning_rate) {
  static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[group].options()).lr(learning_rate);
}

}  // namespace trainbench::optim
