#include "workloads/bert/lamb.h"

#include <algorithm>
#include <cmath>

#include "workloads/bert/model.h"

namespace trainbench::bert {

namespace {

constexpr int64_t kGrain = 32768;  // elements per parallel task: big enough to amortise the task overhead

struct NormSums {
  double parameter = 0, update = 0;
};

template <typename scalar_t>
double squared_sum(const torch::Tensor& tensor) {
  const scalar_t* data = tensor.data_ptr<scalar_t>();
  return at::parallel_reduce(
      int64_t{0}, tensor.numel(), kGrain, 0.0,
      [data](int64_t begin, int64_t end, double sum) {
        for (int64_t i = begin; i < end; ++i) sum += static_cast<double>(data[i]) * data[i];
        return sum;
      },
      std::plus<double>());
}

// The step's per-element constants, shared by the moment pass and the apply pass.
template <typename scalar_t>
struct Coefficients {
  scalar_t beta1, beta2, one_minus_beta1, one_minus_beta2, grad_scale, bias_correction1, sqrt_bias_correction2, epsilon,
      decay;
  // The update direction from the already-updated moments, as apex computes it.
  scalar_t update(scalar_t m, scalar_t v, scalar_t p) const {
    return (m / bias_correction1) / (std::sqrt(v) / sqrt_bias_correction2 + epsilon) + decay * p;
  }
};

template <typename scalar_t>
NormSums update_moments(const torch::Tensor& parameter, const torch::Tensor& grad, torch::Tensor& exp_avg,
                        torch::Tensor& exp_avg_sq, const Coefficients<scalar_t>& c) {
  const scalar_t* p = parameter.data_ptr<scalar_t>();
  const scalar_t* g = grad.data_ptr<scalar_t>();
  scalar_t* m = exp_avg.data_ptr<scalar_t>();
  scalar_t* v = exp_avg_sq.data_ptr<scalar_t>();
  return at::parallel_reduce(
      int64_t{0}, parameter.numel(), kGrain, NormSums{},
      [&](int64_t begin, int64_t end, NormSums sums) {
        for (int64_t i = begin; i < end; ++i) {
          const scalar_t gi = g[i] * c.grad_scale;
          m[i] = c.beta1 * m[i] + c.one_minus_beta1 * gi;
          v[i] = c.beta2 * v[i] + c.one_minus_beta2 * gi * gi;
          const scalar_t u = c.update(m[i], v[i], p[i]);
          sums.parameter += static_cast<double>(p[i]) * p[i];
          sums.update += static_cast<double>(u) * u;
        }
        return sums;
      },
      [](NormSums a, NormSums b) { return NormSums{a.parameter + b.parameter, a.update + b.update}; });
}

template <typename scalar_t>
void apply_update(torch::Tensor& parameter, const torch::Tensor& exp_avg, const torch::Tensor& exp_avg_sq,
                  const Coefficients<scalar_t>& c, scalar_t step_size) {
  scalar_t* p = parameter.data_ptr<scalar_t>();
  const scalar_t* m = exp_avg.data_ptr<scalar_t>();
  const scalar_t* v = exp_avg_sq.data_ptr<scalar_t>();
  at::parallel_for(int64_t{0}, parameter.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] -= step_size * c.update(m[i], v[i], p[i]);
  });
}

}  // namespace

Lamb::Lamb(const std::vector<std::pair<std::string, torch::Tensor>>& parameters, const LambOptions& options)
    : options_(options) {
  for (const auto& [name, parameter] : parameters)
    slots_.push_back({parameter, torch::zeros_like(parameter, torch::MemoryFormat::Contiguous),
                      torch::zeros_like(parameter, torch::MemoryFormat::Contiguous), !excluded_from_weight_decay(name)});
}

Lamb::Lamb(const std::vector<torch::Tensor>& parameters, const LambOptions& options) : options_(options) {
  for (const auto& parameter : parameters)
    slots_.push_back({parameter, torch::zeros_like(parameter, torch::MemoryFormat::Contiguous),
                      torch::zeros_like(parameter, torch::MemoryFormat::Contiguous), true});
}

void Lamb::zero_grad() {
  for (auto& slot : slots_) slot.parameter.mutable_grad().reset();
}

bool Lamb::can_fuse() const {
  if (!options_.fused()) return false;
  for (const auto& slot : slots_) {
    const auto& p = slot.parameter;
    if (!p.device().is_cpu() || !p.is_contiguous() || (p.scalar_type() != torch::kFloat && p.scalar_type() != torch::kDouble))
      return false;
    if (p.grad().defined() && (!p.grad().is_contiguous() || p.grad().scalar_type() != p.scalar_type() || p.grad().is_sparse()))
      return false;
  }
  return true;
}

void Lamb::step(double learning_rate) {
  ++steps_;
  torch::NoGradGuard no_grad;
  if (can_fuse())
    fused_step(learning_rate);
  else
    tensor_step(learning_rate);
}

void Lamb::fused_step(double learning_rate) {
  double squared = 0;
  for (const auto& slot : slots_) {
    const torch::Tensor& grad = slot.parameter.grad();
    if (grad.defined())
      squared += AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "lamb_grad_norm", [&] { return squared_sum<scalar_t>(grad); });
  }
  last_gradient_norm_ = std::sqrt(squared);
  const double clip = last_gradient_norm_ > options_.max_grad_norm() ? last_gradient_norm_ / options_.max_grad_norm() : 1.0;
  const double bias_correction1 = 1 - std::pow(options_.beta1(), static_cast<double>(steps_));
  const double bias_correction2 = 1 - std::pow(options_.beta2(), static_cast<double>(steps_));
  for (auto& slot : slots_) {
    const torch::Tensor& grad = slot.parameter.grad();
    if (!grad.defined()) continue;
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "lamb_step", [&] {
      const Coefficients<scalar_t> c{static_cast<scalar_t>(options_.beta1()),
                                     static_cast<scalar_t>(options_.beta2()),
                                     static_cast<scalar_t>(1 - options_.beta1()),
                                     static_cast<scalar_t>(1 - options_.beta2()),
                                     static_cast<scalar_t>(1 / clip),
                                     static_cast<scalar_t>(bias_correction1),
                                     static_cast<scalar_t>(std::sqrt(bias_correction2)),
                                     static_cast<scalar_t>(options_.epsilon()),
                                     static_cast<scalar_t>(slot.decay ? options_.weight_decay() : 0.0)};
      const NormSums norms = update_moments<scalar_t>(slot.parameter, grad, slot.exp_avg, slot.exp_avg_sq, c);
      double ratio = 1;
      if (slot.decay && options_.weight_decay() != 0 && norms.parameter > 0 && norms.update > 0)
        ratio = std::sqrt(norms.parameter) / std::sqrt(norms.update);
      apply_update<scalar_t>(slot.parameter, slot.exp_avg, slot.exp_avg_sq, c, static_cast<scalar_t>(learning_rate * ratio));
    });
  }
}

void Lamb::tensor_step(double learning_rate) {
  std::vector<torch::Tensor> norms;
  for (const auto& slot : slots_)
    if (slot.parameter.grad().defined()) norms.push_back(slot.parameter.grad().norm().to(torch::kDouble));
  if (norms.empty()) return;
  // The clip factor stays a tensor, so the update itself needs no host synchronisation.
  const torch::Tensor global_norm = torch::stack(norms).norm();
  const torch::Tensor grad_scale = 1.0 / torch::clamp_min(global_norm / options_.max_grad_norm(), 1.0);
  const double bias_correction1 = 1 - std::pow(options_.beta1(), static_cast<double>(steps_));
  const double bias_correction2 = 1 - std::pow(options_.beta2(), static_cast<double>(steps_));
  for (auto& slot : slots_) {
    if (!slot.parameter.grad().defined()) continue;
    const torch::Tensor grad = slot.parameter.grad() * grad_scale.to(slot.parameter.scalar_type());
    slot.exp_avg.mul_(options_.beta1()).add_(grad, 1 - options_.beta1());
    slot.exp_avg_sq.mul_(options_.beta2()).addcmul_(grad, grad, 1 - options_.beta2());
    torch::Tensor update =
        (slot.exp_avg / bias_correction1) / (slot.exp_avg_sq.sqrt() / std::sqrt(bias_correction2) + options_.epsilon());
    if (slot.decay && options_.weight_decay() != 0) {
      update.add_(slot.parameter, options_.weight_decay());
      const torch::Tensor parameter_norm = slot.parameter.norm(), update_norm = update.norm();
      const torch::Tensor ratio = torch::where((parameter_norm > 0).logical_and(update_norm > 0),
                                               parameter_norm / update_norm, torch::ones_like(parameter_norm));
      update.mul_(ratio);
    }
    slot.parameter.sub_(update, learning_rate);
  }
  last_gradient_norm_ = global_norm.item<double>();
}

double BertLrSchedule::at(int64_t step) const {
  const int64_t warmup_progress = step - start_warmup_step;
  if (warmup_steps > 0 && warmup_progress < warmup_steps)
    return base_lr * static_cast<double>(std::max<int64_t>(0, warmup_progress)) / static_cast<double>(warmup_steps);
  const double done = std::min(static_cast<double>(step), static_cast<double>(total_steps)) / static_cast<double>(total_steps);
  return base_lr * std::pow(1.0 - done, power);
}

}  // namespace trainbench::bert
