#include "optim/lamb.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace trainbench::optim {

namespace {

constexpr int64_t kGrain = 32768;  // elements per parallel task: big enough to amortise the task overhead

// The fused step's loops run over float32 only and are written so that GCC vectorises them: restrict
// pointers, no reduction inside the element loop (a block's update directions go to a small buffer), and
// norms summed in kLanes float lanes per block, then in double across blocks, which needs no licence to
// reassociate. The project builds for generic x86-64, so on x86-64 each loop is also compiled for
// x86-64-v3 (AVX2, FMA) and the copy the CPU supports is picked when the program loads.
#if defined(__x86_64__) && defined(__GNUC__)
#define LAMB_VECTOR_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LAMB_VECTOR_KERNEL
#endif
constexpr int kLanes = 16;
constexpr int64_t kBlock = 256;

struct NormSums {
  double parameter = 0, update = 0;
};
NormSums operator+(const NormSums& a, const NormSums& b) { return {a.parameter + b.parameter, a.update + b.update}; }

// The step's per-element constants, shared by the moment pass and the apply pass.
struct Coefficients {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, grad_scale, bias_correction1, sqrt_bias_correction2, epsilon,
      decay;
  // The update direction from the already-updated moments, as apex computes it.
  float update(float m, float v, float p) const {
    return (m / bias_correction1) / (std::sqrt(v) / sqrt_bias_correction2 + epsilon) + decay * p;
  }
};

// Sum of squares of at most one block's elements: float lanes, one double at the end.
inline double block_sum_of_squares(const float* __restrict x, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma GCC unroll 16
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * x[i + l];
  for (; i < n; ++i) lanes[0] += x[i] * x[i];
  double sum = 0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

LAMB_VECTOR_KERNEL double squared_sum(const float* __restrict x, int64_t begin, int64_t end) {
  double sum = 0;
  for (int64_t block = begin; block < end; block += kBlock) sum += block_sum_of_squares(x + block, std::min(end - block, kBlock));
  return sum;
}

// Updates the moments of elements [begin, end) and returns the squared norms of the parameter and of its
// update direction over them.
LAMB_VECTOR_KERNEL NormSums update_moments(const float* __restrict p, const float* __restrict g, float* __restrict m,
                                           float* __restrict v, int64_t begin, int64_t end, const Coefficients& c) {
  NormSums sums;
  float update[kBlock];
  for (int64_t block = begin; block < end; block += kBlock) {
    const int64_t n = std::min(end - block, kBlock);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = block + j;
      const float gi = g[i] * c.grad_scale;
      const float mi = c.beta1 * m[i] + c.one_minus_beta1 * gi;
      const float vi = c.beta2 * v[i] + c.one_minus_beta2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      update[j] = c.update(mi, vi, p[i]);
    }
    sums.parameter += block_sum_of_squares(p + block, n);
    sums.update += block_sum_of_squares(update, n);
  }
  return sums;
}

LAMB_VECTOR_KERNEL void apply_update(float* __restrict p, const float* __restrict m, const float* __restrict v,
                                     int64_t begin, int64_t end, const Coefficients& c, float step_size) {
  for (int64_t i = begin; i < end; ++i) p[i] -= step_size * c.update(m[i], v[i], p[i]);
}

// ||w|| / ||update||, or 1 where either is 0, as a tensor on the norms' device.
torch::Tensor trust_ratio(const torch::Tensor& parameter_norm, const torch::Tensor& update_norm) {
  return torch::where((parameter_norm > 0).logical_and(update_norm > 0), parameter_norm / update_norm,
                      torch::ones_like(parameter_norm));
}

}  // namespace

Lamb::Lamb(const std::vector<Parameter>& parameters, const LambOptions& options) : options_(options) {
  for (const auto& parameter : parameters)
    slots_.push_back({parameter.tensor, torch::zeros_like(parameter.tensor, torch::MemoryFormat::Contiguous),
                      torch::zeros_like(parameter.tensor, torch::MemoryFormat::Contiguous), parameter.decays,
                      parameter.sharded, parameter.counted_in_global_norm});
}

void Lamb::sum_over_model(std::vector<double>& squares) const {
  if (reduction_.over_model) reduction_.over_model(squares);
}

// Only the sharded slots' entries travel; `squares` holds two per slot (parameter, update).
void Lamb::sum_over_tensor_shards(std::vector<double>& squares, const std::vector<bool>& sharded) const {
  if (!reduction_.over_tensor_shards) return;
  std::vector<double> shards;
  for (size_t i = 0; i < sharded.size(); ++i)
    if (sharded[i]) shards.insert(shards.end(), {squares[2 * i], squares[2 * i + 1]});
  if (shards.empty()) return;
  reduction_.over_tensor_shards(shards);
  for (size_t i = 0, next = 0; i < sharded.size(); ++i)
    if (sharded[i]) {
      squares[2 * i] = shards[next++];
      squares[2 * i + 1] = shards[next++];
    }
}

bool Lamb::can_fuse() const {
  if (!options_.fused()) return false;
  for (const auto& slot : slots_) {
    const auto& p = slot.parameter;
    if (!p.device().is_cpu() || !p.is_contiguous() || p.scalar_type() != torch::kFloat)
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
  std::vector<double> squared{0};
  for (const auto& slot : slots_) {
    const torch::Tensor& grad = slot.parameter.grad();
    if (!grad.defined() || !slot.counted) continue;
    const float* g = grad.data_ptr<float>();
    squared[0] += at::parallel_reduce(
        int64_t{0}, grad.numel(), kGrain, 0.0,
        [g](int64_t begin, int64_t end, double sum) { return sum + squared_sum(g, begin, end); }, std::plus<double>());
  }
  sum_over_model(squared);
  last_gradient_norm_ = std::sqrt(squared[0]);
  const double clip = last_gradient_norm_ > options_.max_grad_norm() ? last_gradient_norm_ / options_.max_grad_norm() : 1.0;
  const double bias_correction1 = 1 - std::pow(options_.beta1(), static_cast<double>(steps_));
  const double bias_correction2 = 1 - std::pow(options_.beta2(), static_cast<double>(steps_));
  const auto coefficients = [&](const Slot& slot) {
    return Coefficients{static_cast<float>(options_.beta1()),
                        static_cast<float>(options_.beta2()),
                        static_cast<float>(1 - options_.beta1()),
                        static_cast<float>(1 - options_.beta2()),
                        static_cast<float>(1 / clip),
                        static_cast<float>(bias_correction1),
                        static_cast<float>(std::sqrt(bias_correction2)),
                        static_cast<float>(options_.epsilon()),
                        static_cast<float>(slot.decay ? options_.weight_decay() : 0.0)};
  };
  // Every slot's moments and norms first, so that a split model's norms can be summed over its shards in one
  // exchange before any trust ratio is taken.
  std::vector<double> norms(2 * slots_.size(), 0.0);
  std::vector<bool> sharded(slots_.size(), false);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    const torch::Tensor& grad = slot.parameter.grad();
    if (!grad.defined()) continue;
    const Coefficients c = coefficients(slot);
    float* p = slot.parameter.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float* m = slot.exp_avg.data_ptr<float>();
    float* v = slot.exp_avg_sq.data_ptr<float>();
    const NormSums sums = at::parallel_reduce(
        int64_t{0}, slot.parameter.numel(), kGrain, NormSums{},
        [&](int64_t begin, int64_t end, NormSums partial) {
          return partial + update_moments(p, g, m, v, begin, end, c);
        },
        std::plus<NormSums>());
    norms[2 * i] = sums.parameter;
    norms[2 * i + 1] = sums.update;
    sharded[i] = slot.sharded;
  }
  sum_over_tensor_shards(norms, sharded);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.parameter.grad().defined()) continue;
    const Coefficients c = coefficients(slot);
    double ratio = 1;
    if (slot.decay && options_.weight_decay() != 0 && norms[2 * i] > 0 && norms[2 * i + 1] > 0)
      ratio = std::sqrt(norms[2 * i]) / std::sqrt(norms[2 * i + 1]);
    const auto step_size = static_cast<float>(learning_rate * ratio);
    float* p = slot.parameter.data_ptr<float>();
    const float* m = slot.exp_avg.data_ptr<float>();
    const float* v = slot.exp_avg_sq.data_ptr<float>();
    at::parallel_for(int64_t{0}, slot.parameter.numel(), kGrain,
                     [&](int64_t begin, int64_t end) { apply_update(p, m, v, begin, end, c, step_size); });
  }
}

void Lamb::tensor_step(double learning_rate) {
  std::vector<torch::Tensor> norms;
  for (const auto& slot : slots_)
    if (slot.parameter.grad().defined() && slot.counted)
      norms.push_back(slot.parameter.grad().norm().to(torch::kDouble));
  if (norms.empty() && !reduction_.over_model) return;
  // The clip factor stays a tensor, so the update itself needs no host synchronisation (unless the norm is
  // summed over ranks).
  torch::Tensor global_norm = norms.empty() ? torch::zeros({}, torch::kDouble) : torch::stack(norms).norm();
  if (reduction_.over_model) {
    std::vector<double> squared{global_norm.item<double>() * global_norm.item<double>()};
    sum_over_model(squared);
    global_norm = torch::tensor(std::sqrt(squared[0]), torch::kDouble).to(global_norm.device());
  }
  const torch::Tensor grad_scale = 1.0 / torch::clamp_min(global_norm / options_.max_grad_norm(), 1.0);
  const double bias_correction1 = 1 - std::pow(options_.beta1(), static_cast<double>(steps_));
  const double bias_correction2 = 1 - std::pow(options_.beta2(), static_cast<double>(steps_));
  std::vector<torch::Tensor> updates(slots_.size());
  std::vector<double> squares(2 * slots_.size(), 0.0);
  std::vector<bool> sharded(slots_.size(), false);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.parameter.grad().defined()) continue;
    const torch::Tensor grad = slot.parameter.grad() * grad_scale.to(slot.parameter.scalar_type());
    slot.exp_avg.mul_(options_.beta1()).add_(grad, 1 - options_.beta1());
    slot.exp_avg_sq.mul_(options_.beta2()).addcmul_(grad, grad, 1 - options_.beta2());
    updates[i] =
        (slot.exp_avg / bias_correction1) / (slot.exp_avg_sq.sqrt() / std::sqrt(bias_correction2) + options_.epsilon());
    if (slot.decay && options_.weight_decay() != 0) updates[i].add_(slot.parameter, options_.weight_decay());
    // A shard's norms are summed over the ranks on the host; others stay on the device.
    sharded[i] = slot.sharded && reduction_.over_tensor_shards && slot.decay && options_.weight_decay() != 0;
    if (sharded[i]) {  // kept for the second pass, once its norms are summed
      squares[2 * i] = slot.parameter.to(torch::kDouble).square().sum().item<double>();
      squares[2 * i + 1] = updates[i].to(torch::kDouble).square().sum().item<double>();
      continue;
    }
    if (slot.decay && options_.weight_decay() != 0) {
      const torch::Tensor parameter_norm = slot.parameter.norm(), update_norm = updates[i].norm();
      updates[i].mul_(trust_ratio(parameter_norm, update_norm));
    }
    slot.parameter.sub_(std::exchange(updates[i], torch::Tensor()), learning_rate);
  }
  sum_over_tensor_shards(squares, sharded);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!sharded[i]) continue;
    const auto norm = [&](double square) { return torch::tensor(std::sqrt(square)).to(updates[i].device()); };
    updates[i].mul_(trust_ratio(norm(squares[2 * i]), norm(squares[2 * i + 1])).to(updates[i].scalar_type()));
    slots_[i].parameter.sub_(updates[i], learning_rate);
  }
  last_gradient_norm_ = global_norm.item<double>();
}

}  // namespace trainbench::optim
