#include "workloads/resnet/lars.h"

#include "workloads/resnet/model.h"

namespace trainbench::resnet {

Lars::Lars(std::vector<torch::Tensor> parameters, const LarsOptions& options) : options_(options) {
  for (auto& parameter : parameters)
    slots_.push_back({parameter, torch::zeros_like(parameter), !is_bn_or_bias(parameter)});
}

void Lars::zero_grad() {
  for (auto& slot : slots_)
    if (slot.parameter.grad().defined()) slot.parameter.mutable_grad().zero_();
}

void Lars::step(double learning_rate) {
  torch::NoGradGuard no_grad;
  const double weight_decay = options_.weight_decay();
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.parameter.grad();
    if (!grad.defined()) continue;
    if (!slot.adapt) {
      slot.velocity.mul_(options_.momentum()).add_(grad, learning_rate);
    } else {
      double scaled_lr = learning_rate;
      if (options_.layer_adaptation()) {
        const double weight_norm = slot.parameter.norm().item<double>();
        const double grad_norm = grad.norm().item<double>();
        if (weight_norm > 0 && grad_norm > 0)
          scaled_lr *= options_.eta() * weight_norm / (grad_norm + weight_decay * weight_norm + options_.epsilon());
      }
      slot.velocity.mul_(options_.momentum()).add_(grad, scaled_lr).add_(slot.parameter, scaled_lr * weight_decay);
    }
    slot.parameter.sub_(slot.velocity);
  }
}

}  // namespace trainbench::resnet
