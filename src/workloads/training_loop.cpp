#include "workloads/training_loop.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "util/error.h"

// LibTorch 2.4 made autocast's switches device-generic and deprecated the per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TRAINBENCH_DEVICE_GENERIC_AUTOCAST 1
#endif

namespace trainbench {

std::vector<BatchSlice> slice_batch(int64_t batch, int64_t parts) {
  if (parts < 1 || parts > batch)
    fail("gradient_accumulation_steps", std::to_string(parts) + " micro-batches cannot be cut from a batch of " +
                                            std::to_string(batch) + " on this rank");
  std::vector<BatchSlice> slices;
  int64_t begin = 0;
  for (int64_t part = 0; part < parts; ++part) {
    const int64_t size = batch / parts + (part < batch % parts ? 1 : 0);
    slices.push_back({begin, size, batch});
    begin += size;
  }
  return slices;
}

AutocastGuard::AutocastGuard(Precision precision, const torch::Device& device) {
  if (precision == Precision::kFp32) return;
  active_ = true;
  cuda_ = device.is_cuda();
  const torch::ScalarType dtype = precision == Precision::kBf16 ? torch::kBFloat16 : torch::kHalf;
#ifdef TRAINBENCH_DEVICE_GENERIC_AUTOCAST
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
  was_enabled_ = at::autocast::is_autocast_enabled(type);
  previous_dtype_ = at::autocast::get_autocast_dtype(type);
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, true);
#else
  if (cuda_) {
    was_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
  } else {
    was_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef TRAINBENCH_DEVICE_GENERIC_AUTOCAST
  const auto type = cuda_ ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_enabled(type, was_enabled_);
  at::autocast::set_autocast_dtype(type, previous_dtype_);
#else
  if (cuda_) {
    at::autocast::set_enabled(was_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  }
#endif
}

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.initial_scale()) {}

bool LossScaler::unscale(const std::vector<torch::Tensor>& parameters) const {
  torch::NoGradGuard no_grad;
  bool finite = true;
  for (const auto& parameter : parameters) {
    if (!parameter.grad().defined()) continue;
    torch::Tensor gradient = parameter.mutable_grad();
    gradient.div_(scale_);
    if (finite && !torch::isfinite(gradient).all().item<bool>()) finite = false;
  }
  return finite;
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= options_.backoff_factor();
    good_in_a_row_ = 0;
    ++skipped_;
    return;
  }
  if (++good_in_a_row_ == options_.growth_interval()) {
    scale_ *= options_.growth_factor();
    good_in_a_row_ = 0;
  }
}

TrainingLoop::TrainingLoop(const Config& config, const torch::Device& device, std::vector<torch::Tensor> parameters,
                           parallel::GradientSync* gradients)
    : config_(config),
      device_(device),
      settings_(StepSettings::from_config(config, device)),
      parameters_(std::move(parameters)),
      gradients_(gradients) {}

double TrainingLoop::update(const TrainingStep& step) {
  for (auto& parameter : parameters_) parameter.mutable_grad().reset();
  const bool scaled = settings_.precision == Precision::kFp16;
  const std::vector<BatchSlice> slices = slice_batch(step.samples, settings_.accumulation_steps);
  if (step.micro_batches) return pipelined_update(step, slices);
  torch::Tensor batch_loss;
  for (size_t part = 0; part < slices.size(); ++part) {
    const bool last = part + 1 == slices.size();
    // Ranks exchange gradients once per update, during the last micro-batch's backward.
    if (gradients_) gradients_->set_exchange(last);
    torch::Tensor loss;
    {
      const AutocastGuard autocast(settings_.precision, device_);
      loss = step.loss(slices[part]);
    }
    // A bf16 or fp16 loss is weighted and summed in fp32; fp32 and fp64 losses stay as they are.
    const bool low_precision = loss.scalar_type() == torch::kBFloat16 || loss.scalar_type() == torch::kHalf;
    const torch::Tensor weighted = (low_precision ? loss.to(torch::kFloat) : loss) * slices[part].weight();
    (scaled ? weighted * scaler_.scale() : weighted).backward();
    batch_loss = batch_loss.defined() ? batch_loss + weighted.detach() : weighted.detach();
  }
  if (gradients_) gradients_->finish();
  apply_update(step);
  return batch_loss.item<double>();
}

double TrainingLoop::pipelined_update(const TrainingStep& step, const std::vector<BatchSlice>& slices) {
  if (gradients_) gradients_->set_exchange(false);  // the schedule's backwards interleave: exchange after them
  double loss = 0;
  {
    const AutocastGuard autocast(settings_.precision, device_);
    loss = step.micro_batches(slices, gradient_scale());
  }
  if (gradients_) gradients_->finish();
  apply_update(step);
  return loss;
}

void TrainingLoop::apply_update(const TrainingStep& step) {
  ++updates_;
  if (settings_.precision != Precision::kFp16) {
    step.update();
    return;
  }
  // Every data-parallel rank unscales the same averaged gradients, and the shards of a split model agree, so
  // all skip or all update.
  bool finite = scaler_.unscale(parameters_);
  if (step.finite_everywhere) finite = step.finite_everywhere(finite);
  if (finite) step.update();
  scaler_.update(finite);
}

void TrainingLoop::begin_block(RunControl& control) {
  control_ = &control;
  losses_.emplace(config_);
  report_ = BlockReport{};
  rank_wait_before_ = gradients_ ? gradients_->stats().exposed_wait_seconds : 0;
}

void TrainingLoop::train(const TrainingStep& step) {
  if (!control_) fail("TrainingLoop::train", "called outside a block (begin_block first)");
  const double loss = update(step);
  losses_->add(loss, updates_);
  const int64_t counted = counts_samples_ ? step.samples : 0;
  report_.samples += counted;
  control_->step(counted, loss);
}

BlockReport TrainingLoop::end_block() {
  if (!control_) fail("TrainingLoop::end_block", "called outside a block (begin_block first)");
  if (gradients_) control_->add_rank_wait(gradients_->stats().exposed_wait_seconds - rank_wait_before_);
  report_.mean_loss = losses_->mean();
  control_ = nullptr;
  return report_;
}

}  // namespace trainbench
