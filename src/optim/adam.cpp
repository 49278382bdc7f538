#include "optim/adam.h"

#include <cmath>

namespace trainbench::optim {

Adam::Adam(const std::vector<Parameter>& parameters, const AdamOptions& options) : options_(options) {
  for (const auto& parameter : parameters)
    slots_.push_back({parameter.tensor, torch::zeros_like(parameter.tensor, torch::MemoryFormat::Contiguous),
                      torch::zeros_like(parameter.tensor, torch::MemoryFormat::Contiguous), parameter.decays});
}

void Adam::step(double learning_rate) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double beta1 = options_.beta1(), beta2 = options_.beta2();
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(steps_));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(steps_));
  for (auto& slot : slots_) {
    torch::Tensor gradient = slot.parameter.grad();
    if (!gradient.defined()) continue;
    const double decay = slot.decay ? options_.weight_decay() : 0.0;
    if (decay != 0 && !options_.decoupled_weight_decay()) gradient = gradient.add(slot.parameter, decay);
    slot.exp_avg.mul_(beta1).add_(gradient, 1.0 - beta1);
    slot.exp_avg_sq.mul_(beta2).addcmul_(gradient, gradient, 1.0 - beta2);
    if (decay != 0 && options_.decoupled_weight_decay()) slot.parameter.mul_(1.0 - learning_rate * decay);
    const torch::Tensor denominator = (slot.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(options_.epsilon());
    slot.parameter.addcdiv_(slot.exp_avg, denominator, -learning_rate / bias_correction1);
  }
}

}  // namespace trainbench::optim
