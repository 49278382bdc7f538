#include "optim/lars.h"

namespace trainbench::optim {

Lars::Lars(const std::vector<Parameter>& parameters, const LarsOptions& options) : options_(options) {
  for (const auto& parameter : parameters)
    slots_.push_back({parameter.tensor, torch::zeros_like(parameter.tensor), parameter.decays});
}

void Lars::step(double learning_rate) {
  torch::NoGradGuard no_grad;
  const double weight_decay = options_.weight_decay();
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.parameter.grad();
    if (!grad.defined()) continue;
    if (!slot.adapt) {
      slot.velocity.mul_(options_.momentum()).add_(grad, learning_rate);
    } else if (!options_.layer_adaptation()) {
      slot.velocity.mul_(options_.momentum()).add_(grad, learning_rate).add_(slot.parameter, learning_rate * weight_decay);
    } else {
      // The trust ratio stays a tensor so a GPU step never waits for the host.
      const torch::Tensor weight_norm = slot.parameter.norm();
      const torch::Tensor grad_norm = grad.norm();
      const torch::Tensor trust = torch::where(
          weight_norm.gt(0).logical_and(grad_norm.gt(0)),
          options_.eta() * weight_norm / (grad_norm + weight_decay * weight_norm + options_.epsilon()),
          torch::ones_like(weight_norm));
      slot.velocity.mul_(options_.momentum()).add_((grad + weight_decay * slot.parameter) * (trust * learning_rate));
    }
    slot.parameter.sub_(slot.velocity);
  }
}

}  // namespace trainbench::optim
