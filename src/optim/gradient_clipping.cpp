#include "optim/gradient_clipping.h"

#include <cmath>

namespace trainbench::optim {

double clip_gradient_norm(const std::vector<Parameter>& parameters, double max_norm,
                          const std::function<void(std::vector<double>&)>& over_model) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> squares;
  for (const auto& parameter : parameters) {
    const torch::Tensor& gradient = parameter.tensor.grad();
    if (gradient.defined() && parameter.counted_in_global_norm)
      squares.push_back(gradient.to(torch::kDouble).pow(2).sum());
  }
  std::vector<double> squared{squares.empty() ? 0.0 : torch::stack(squares).sum().item<double>()};
  if (over_model) over_model(squared);
  const double norm = std::sqrt(squared[0]);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0)
    for (const auto& parameter : parameters)
      if (parameter.tensor.grad().defined()) parameter.tensor.mutable_grad().mul_(coefficient);
  return norm;
}

}  // namespace trainbench::optim
