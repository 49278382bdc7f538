#pragma once
// Adam with bias correction (Kingma and Ba 2015), its weight decay either decoupled from the gradient (AdamW,
// Loshchilov and Hutter 2019: what Megatron-LM's GPT-3 reference trains with, apex FusedAdam in adam_w_mode)
// or added to it as L2 (torch.optim.Adam's weight_decay):
//   g' = g (+ weight_decay * w with L2);  m <- beta1 m + (1 - beta1) g';  v <- beta2 v + (1 - beta2) g'^2
//   w <- w - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)  (- lr * weight_decay * w decoupled)
// Parameters that do not decay (biases, normalisation scales) take the update without decay.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "optim/parameters.h"

namespace trainbench::optim {

struct AdamOptions {
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, epsilon) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(bool, decoupled_weight_decay) = true;  // AdamW; false: L2 added to the gradient
};

class Adam {
 public:
  Adam(const std::vector<Parameter>& parameters, const AdamOptions& options);
  // One update of every parameter that has a gradient.
  void step(double learning_rate);
  int64_t steps() const { return steps_; }
  // A checkpoint's state: the steps taken (bias correction counts from them) and each parameter's moments, in the
  // order the parameters were given.
  void set_steps(int64_t steps) { steps_ = steps; }
  torch::Tensor& exp_avg(size_t parameter) { return slots_.at(parameter).exp_avg; }
  torch::Tensor& exp_avg_sq(size_t parameter) { return slots_.at(parameter).exp_avg_sq; }
  const torch::Tensor& exp_avg(size_t parameter) const { return slots_.at(parameter).exp_avg; }
  const torch::Tensor& exp_avg_sq(size_t parameter) const { return slots_.at(parameter).exp_avg_sq; }

 private:
  struct Slot {
    torch::Tensor parameter, exp_avg, exp_avg_sq;
    bool decay;
  };
  AdamOptions options_;
  std::vector<Slot> slots_;
  int64_t steps_ = 0;
};

}  // namespace trainbench::optim
