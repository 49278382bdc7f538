#include "parallel/gradient_sync.h"

#include <algorithm>
#include <functional>
#include <map>

#include "util/error.h"

namespace trainbench::parallel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs `collective` on one flat copy of `tensors` per dtype and device, then writes the result back.
void on_flat_groups(const std::vector<torch::Tensor>& tensors, const std::function<void(torch::Tensor&)>& collective) {
  std::map<std::pair<int, std::string>, std::vector<torch::Tensor>> groups;
  for (const auto& tensor : tensors)
    groups[{static_cast<int>(tensor.scalar_type()), tensor.device().str()}].push_back(tensor);
  torch::NoGradGuard no_grad;
  for (auto& [key, members] : groups) {
    std::vector<torch::Tensor> flat_views;
    for (const auto& member : members) flat_views.push_back(member.reshape(-1));
    torch::Tensor flat = torch::cat(flat_views);
    collective(flat);
    int64_t offset = 0;
    for (auto& member : members) {
      member.copy_(flat.narrow(0, offset, member.numel()).view_as(member));
      offset += member.numel();
    }
  }
}

}  // namespace

void broadcast_from_rank0(Communicator& communicator, const std::vector<torch::Tensor>& tensors) {
  if (communicator.world() == 1) return;
  on_flat_groups(tensors, [&](torch::Tensor& flat) { communicator.broadcast(flat, 0).wait(); });
}

GradientSync::GradientSync(Communicator& communicator, std::vector<torch::Tensor> parameters,
                           std::vector<torch::Tensor> buffers, GradientSyncOptions options)
    : communicator_(communicator), buffers_(std::move(buffers)) {
  broadcast_from_rank0(communicator_, parameters);
  broadcast_from_rank0(communicator_, buffers_);
  if (communicator_.world() == 1) return;

  const auto bucket_bytes = static_cast<int64_t>(options.bucket_megabytes * 1024 * 1024);
  std::map<std::pair<int, std::string>, int> open_bucket;  // (dtype, device) -> bucket being filled
  for (auto& parameter : parameters) {
    if (parameter.requires_grad()) slots_.push_back({parameter});
  }
  // Reverse registration order: the last layers' gradients are ready first.
  for (int index = static_cast<int>(slots_.size()) - 1; index >= 0; --index) {
    Slot& slot = slots_[index];
    const std::pair<int, std::string> key{static_cast<int>(slot.parameter.scalar_type()), slot.parameter.device().str()};
    auto found = open_bucket.find(key);
    if (found == open_bucket.end() ||
        (buckets_[found->second].flat.numel() + slot.parameter.numel()) * slot.parameter.element_size() > bucket_bytes) {
      buckets_.emplace_back();
      buckets_.back().flat = torch::empty({0}, slot.parameter.options());
      found = open_bucket.insert_or_assign(key, static_cast<int>(buckets_.size()) - 1).first;
    }
    Bucket& bucket = buckets_[found->second];
    slot.bucket = found->second;
    slot.offset = bucket.flat.numel();
    bucket.slots.push_back(index);
    bucket.flat = torch::empty({slot.offset + slot.parameter.numel()}, slot.parameter.options());
  }
  for (auto& bucket : buckets_) {
    bucket.pending = static_cast<int>(bucket.slots.size());
    stats_.bytes_per_step += bucket.flat.numel() * bucket.flat.element_size();
  }
  stats_.buckets = static_cast<int>(buckets_.size());
  for (int index = 0; index < static_cast<int>(slots_.size()); ++index)
    hook_handles_.push_back(slots_[index].parameter.register_hook(
        [this, index](const torch::Tensor& gradient) { on_gradient(index, gradient); }));
}

GradientSync::~GradientSync() {
  for (size_t index = 0; index < hook_handles_.size(); ++index) slots_[index].parameter.remove_hook(hook_handles_[index]);
}

// Called once per parameter per backward, with the gradient summed over all its uses in the graph.
void GradientSync::on_gradient(int index, const torch::Tensor& gradient) {
  Slot& slot = slots_[index];
  if (!exchange_ || slot.ready) return;
  slot.ready = true;
  if (gradient.is_sparse())
    fail("gradient of a " + std::to_string(slot.parameter.dim()) + "-d parameter",
         "is sparse; GradientSync averages dense gradients (exchange touched rows with parallel::allgather_concat)");
  Bucket& bucket = buckets_[slot.bucket];
  // Pre-divide so the sum over ranks is the mean.
  torch::NoGradGuard no_grad;
  torch::Tensor destination = bucket.flat.narrow(0, slot.offset, slot.parameter.numel()).view_as(slot.parameter);
  // .grad() holds the earlier micro-batches' sum when gradients are accumulated; autograd adds this
  // backward's gradient to it only after the hook.
  const torch::Tensor& accumulated = slot.parameter.grad();
  torch::div_out(destination, accumulated.defined() ? gradient + accumulated : gradient, communicator_.world());
  if (--bucket.pending == 0) launch_ready_buckets();
}

// Buckets are launched in index order on every rank, whatever order they fill in, because collectives
// must be issued in the same order everywhere.
void GradientSync::launch_ready_buckets() {
  while (next_bucket_to_launch_ < static_cast<int>(buckets_.size()) && buckets_[next_bucket_to_launch_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_to_launch_++];
    bucket.reduction = communicator_.allreduce_sum(bucket.flat);
  }
}

void GradientSync::finish() {
  if (communicator_.world() == 1) return;
  torch::NoGradGuard no_grad;
  // Parameters that took no part in the last backward still owe their bucket their gradient: what earlier
  // micro-batches accumulated, or zeros.
  for (auto& slot : slots_) {
    if (slot.ready) continue;
    torch::Tensor destination = buckets_[slot.bucket].flat.narrow(0, slot.offset, slot.parameter.numel());
    if (slot.parameter.grad().defined())
      torch::div_out(destination, slot.parameter.grad().reshape(-1), communicator_.world());
    else
      destination.zero_();
    slot.ready = true;
    --buckets_[slot.bucket].pending;
  }
  launch_ready_buckets();
  double last_wait = 0;
  const auto finish_start = Clock::now();
  for (auto& bucket : buckets_) {
    const auto wait_start = Clock::now();
    bucket.reduction.wait();
    last_wait = seconds_since(wait_start);
  }
  stats_.exposed_wait_seconds += seconds_since(finish_start);
  stats_.last_bucket_wait_seconds += last_wait;
  for (auto& bucket : buckets_) {
    for (const int index : bucket.slots) {
      Slot& slot = slots_[index];
      torch::Tensor averaged = bucket.flat.narrow(0, slot.offset, slot.parameter.numel()).view_as(slot.parameter);
      if (slot.parameter.grad().defined()) slot.parameter.mutable_grad().copy_(averaged);
      else slot.parameter.mutable_grad() = averaged.clone();
    }
    bucket.pending = static_cast<int>(bucket.slots.size());
  }
  for (auto& slot : slots_) slot.ready = false;
  next_bucket_to_launch_ = 0;
  exchange_ = true;
  ++stats_.steps;
}

void GradientSync::broadcast_buffers() { broadcast_from_rank0(communicator_, buffers_); }

void average_over_ranks(Communicator& communicator, const std::vector<torch::Tensor>& tensors) {
  if (communicator.world() == 1) return;
  for (const auto& tensor : tensors)
    if (!tensor.is_floating_point())
      fail("average_over_ranks", std::string("expected floating-point tensors, got ") + c10::toString(tensor.scalar_type()));
  const double world = communicator.world();
  on_flat_groups(tensors, [&](torch::Tensor& flat) {
    communicator.allreduce_sum(flat).wait();
    flat.div_(world);
  });
}

}  // namespace trainbench::parallel
