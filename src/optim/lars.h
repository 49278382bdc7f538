#pragma once
// LARS as in the MLPerf ResNet reference (You et al. 2017): per-layer trust ratio
//   trust = eta * |w| / (|g| + weight_decay * |w| + epsilon)   (1 when either norm is 0)
//   v <- momentum * v + lr * trust * (g + weight_decay * w);  w <- w - v
// Parameters that do not decay (ResNet's BatchNorm parameters and biases) skip both weight decay and the trust
// ratio. With layer adaptation off the same update is SGD with momentum, which the closed rules also allow
// (opt_name "sgd").
#include <vector>

#include <torch/torch.h>

#include "optim/parameters.h"

namespace trainbench::optim {

struct LarsOptions {
  TORCH_ARG(double, momentum) = 0.9;
  TORCH_ARG(double, weight_decay) = 1e-4;
  TORCH_ARG(double, eta) = 0.001;
  TORCH_ARG(double, epsilon) = 0.0;
  TORCH_ARG(bool, layer_adaptation) = true;
};

class Lars {
 public:
  Lars(const std::vector<Parameter>& parameters, const LarsOptions& options);

  void step(double learning_rate);

  const LarsOptions& options() const { return options_; }

 private:
  struct Slot {
    torch::Tensor parameter;
    torch::Tensor velocity;
    bool adapt;  // weight decay and trust ratio apply
  };
  LarsOptions options_;
  std::vector<Slot> slots_;
};

}  // namespace trainbench::optim
