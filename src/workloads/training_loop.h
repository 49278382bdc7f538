#pragma once
// The one training loop every benchmark's step goes through. A benchmark writes only its step: the loss of
// a slice of the batch it holds, and the optimizer update. The loop owns what every step shares:
//   - gradient accumulation: the rank's batch (global batch / ranks) is cut into
//     gradient_accumulation_steps micro-batches; each one's loss is weighted by its share of the batch's
//     samples, so for a per-sample mean loss the accumulated gradient is the whole batch's, as the
//     references' --batch-splits (SSD), GRAD_ACCUMULATION_STEPS (BERT) and --ga_steps (RNN-T) compute it;
//     ranks exchange gradients once, with the last micro-batch's backward;
//   - precision: fp32, or autocast to bf16 (CPU and CUDA) or fp16 (CUDA, with dynamic loss scaling) around
//     the forward and loss, with the weights, their gradients and the update kept in fp32;
//   - the block's loss meter and divergence check, the progress report and the time the step waited for
//     its input and for other ranks.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "harness/workload.h"
#include "workloads/common.h"

namespace trainbench {

namespace parallel {
class GradientSync;
}

// Rows [begin, begin + size) of the batch a rank holds: one micro-batch.
struct BatchSlice {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t batch = 0;  // rows in the whole batch
  torch::Tensor of(const torch::Tensor& rows) const { return rows.narrow(0, begin, size); }
  // The micro-batch's share of the batch: its loss's weight in the accumulated gradient.
  double weight() const { return static_cast<double>(size) / static_cast<double>(batch); }
};
// `batch` rows cut into `parts` slices that differ by at most one row; an Error when parts > batch.
std::vector<BatchSlice> slice_batch(int64_t batch, int64_t parts);

// Autocast to `precision` on `device` for as long as it lives (nothing for fp32). Written once for both
// LibTorch 1.13 (per-device setters) and 2.4+ (device-generic setters); it clears the cast cache on exit as
// Python's torch.autocast does, so no stale low-precision copy of a weight outlives an optimizer step.
class AutocastGuard {
 public:
  AutocastGuard(Precision precision, const torch::Device& device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool was_enabled_ = false;
  torch::ScalarType previous_dtype_ = torch::kFloat;
};

// fp16's dynamic loss scaling, as torch.cuda.amp.GradScaler does it: the loss is multiplied by the scale
// before backward; the gradients are divided by it before the update; an update whose gradients hold an
// inf or NaN is skipped and the scale backs off; after growth_interval good updates in a row it grows.
struct LossScalerOptions {
  TORCH_ARG(double, initial_scale) = 65536.0;
  TORCH_ARG(double, growth_factor) = 2.0;
  TORCH_ARG(double, backoff_factor) = 0.5;
  TORCH_ARG(int64_t, growth_interval) = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});
  double scale() const { return scale_; }
  // Divides every defined gradient by the scale in place; true when all of them are finite.
  bool unscale(const std::vector<torch::Tensor>& parameters) const;
  // After an update attempt: back off on a non-finite one, grow after growth_interval finite ones.
  void update(bool finite);
  int64_t skipped_updates() const { return skipped_; }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_in_a_row_ = 0;
  int64_t skipped_ = 0;
};

// A loader's batch that counts the unreadable files it skipped (ImageLoader's with --skip-corrupt).
template <typename Batch, typename = void>
constexpr bool counts_skipped_files = false;
template <typename Batch>
constexpr bool counts_skipped_files<Batch, std::void_t<decltype(std::declval<Batch>().skipped)>> = true;

// What a benchmark writes for one update.
struct TrainingStep {
  int64_t samples = 0;  // rows in the batch this rank holds (its share of the global batch)
  // Forward and loss of one slice of the batch, the mean over its samples (a scalar). Runs under the
  // precision's autocast; the loop weights it and calls backward.
  std::function<torch::Tensor(const BatchSlice&)> loss;
  // Pipeline parallelism: forward and backward of all the micro-batches, in the pipeline's schedule, each
  // micro-batch's loss weighted by slice.weight() and multiplied by `loss_scale` before its backward; returns
  // the batch's loss (the weighted sum), the same on every rank. When set it replaces `loss`, under the same
  // autocast, and the ranks exchange gradients after it.
  std::function<double(const std::vector<BatchSlice>& slices, double loss_scale)> micro_batches;
  // A model split over ranks: whether every rank's unscaled gradients are finite, given this rank's, so that
  // fp16's loss scaling skips or takes the update on all of them. Unset: this rank's shard is the whole model.
  std::function<bool(bool)> finite_everywhere;
  // The optimizer update, once the gradients are accumulated and averaged over the ranks. Not called when
  // fp16's loss scaling found a non-finite gradient (the update is skipped, as GradScaler skips it).
  std::function<void()> update;
};

class TrainingLoop {
 public:
  // `parameters`: what backward writes gradients to (zeroed before each update, unscaled for fp16);
  // `gradients`: their averaging over the ranks (null: this process trains alone).
  TrainingLoop(const Config& config, const torch::Device& device, std::vector<torch::Tensor> parameters,
               parallel::GradientSync* gradients);

  const StepSettings& settings() const { return settings_; }
  const LossScaler& loss_scaler() const { return scaler_; }
  // What the gradients backward produced are multiplied by: fp16's loss scale, else 1. A step that takes
  // gradients outside the parameters (DLRM's looked-up rows) divides them by it in its update.
  double gradient_scale() const { return settings_.precision == Precision::kFp16 ? scaler_.scale() : 1.0; }

  // One update: zero the gradients, forward and backward each micro-batch, average over the ranks, update.
  // Returns the batch's loss (the weighted mean of the micro-batches' losses, as one full-batch forward
  // would give it); it waits for the device.
  double update(const TrainingStep& step);

  // Starts a block: a fresh loss meter, and the rank wait measured from here. `control` must outlive
  // end_block().
  void begin_block(RunControl& control);
  // Fetches input through `fetch` counted as input wait (see fetch_input) during a block.
  template <typename Fetch>
  auto fetch(Fetch&& fetcher) -> decltype(fetcher()) {
    return fetch_input(*control_, std::forward<Fetch>(fetcher));
  }
  // One update inside a block: meter, divergence check and progress.
  void train(const TrainingStep& step);
  // Whether this rank reports its rows to the harness's sample counts (throughput, progress). Every rank of a
  // model split over ranks holds the same rows, so only one of them may count them.
  void count_samples(bool counts) { counts_samples_ = counts; }
  // Unreadable inputs the loader skipped (--skip-corrupt), for the block's report.
  void count_skipped(int64_t files) { report_.skipped_files += files; }
  // The block's report: samples trained and mean loss. Adds the block's rank wait to the time split.
  BlockReport end_block();
  int64_t updates() const { return updates_; }

  // The epochs of `block` from a loader with start_epoch(epoch) and next() -> optional<batch with .size>:
  // `make_step(batch, epoch)` gives each batch's TrainingStep; empty batches (every image skipped) train
  // nothing.
  template <typename Loader, typename MakeStep>
  BlockReport train_epochs(const Block& block, RunControl& control, Loader& loader, MakeStep&& make_step) {
    begin_block(control);
    for (auto epoch = static_cast<int64_t>(block.first_epoch_num);
         epoch < static_cast<int64_t>(block.first_epoch_num + block.epoch_count); ++epoch) {
      loader.start_epoch(epoch);
      while (auto batch = fetch([&] { return loader.next(); })) {
        if constexpr (counts_skipped_files<decltype(*batch)>) count_skipped(batch->skipped);
        if (batch->size > 0) train(make_step(*batch, epoch));
      }
    }
    return end_block();
  }

 private:
  double pipelined_update(const TrainingStep& step, const std::vector<BatchSlice>& slices);
  // The optimizer's update, or under fp16 its skip when the unscaled gradients are not finite.
  void apply_update(const TrainingStep& step);

  const Config& config_;
  torch::Device device_;
  StepSettings settings_;
  std::vector<torch::Tensor> parameters_;
  parallel::GradientSync* gradients_;
  LossScaler scaler_;
  int64_t updates_ = 0;
  bool counts_samples_ = true;
  RunControl* control_ = nullptr;
  std::optional<LossMeter> losses_;
  BlockReport report_;
  double rank_wait_before_ = 0;
};

}  // namespace trainbench
