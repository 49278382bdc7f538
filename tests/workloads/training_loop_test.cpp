// The shared training loop: micro-batch slicing, the settings it reads, gradient accumulation against the
// full batch (one process, and two ranks exchanging gradients with the last micro-batch), autocast and
// fp16's loss scaling.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "parallel/communicator.h"
#include "parallel/gradient_sync.h"
#include "support/accumulation.h"
#include "support/error_message.h"
#include "support/two_ranks.h"
#include "util/error.h"
#include "workloads/training_loop.h"

namespace trainbench {
namespace {

using testing::error_message;
using testing::step_config;

TEST(TrainingLoop, SlicesCoverTheBatchAndDifferByAtMostOneRow) {
  const auto slices = slice_batch(10, 4);
  ASSERT_EQ(slices.size(), 4u);
  int64_t next = 0;
  for (const BatchSlice& slice : slices) {
    EXPECT_EQ(slice.begin, next);
    EXPECT_TRUE(slice.size == 2 || slice.size == 3) << slice.size;
    EXPECT_EQ(slice.batch, 10);
    next += slice.size;
  }
  EXPECT_EQ(next, 10);
  EXPECT_DOUBLE_EQ(slices[0].weight(), 0.3);
  EXPECT_NE(error_message([] { slice_batch(3, 4); }).find("4 micro-batches cannot be cut from a batch of 3"),
            std::string::npos);
}

TEST(TrainingLoop, SettingsAreCheckedByName) {
  EXPECT_EQ(StepSettings::from_config(step_config(4, "bf16"), torch::kCPU).accumulation_steps, 4);
  EXPECT_EQ(StepSettings::from_config(step_config(1, "bf16"), torch::kCPU).precision, Precision::kBf16);
  EXPECT_EQ(error_message([] { StepSettings::from_config(step_config(1, "fp8"), torch::kCPU); }),
            "test/step: precision: expected fp32, bf16 or fp16, got \"fp8\"");
  EXPECT_EQ(error_message([] { StepSettings::from_config(step_config(1, "fp16"), torch::kCPU); }),
            "test/step: precision: fp16 (autocast with dynamic loss scaling) needs a CUDA device; on cpu use --precision "
            "bf16 or fp32");
  EXPECT_NE(error_message([] { StepSettings::from_config(step_config(0), torch::kCPU); }).find("gradient_accumulation_steps"),
            std::string::npos);
}

TEST(TrainingLoop, TheGlobalBatchMustDivideIntoRanksTimesMicroBatches) {
  const Config config("test/step", {{"batch_size", 24}, {"gradient_accumulation_steps", 4}, {"precision", "fp32"}});
  EXPECT_EQ(local_batch_size(config, "batch_size", 2), 12);
  EXPECT_EQ(error_message([&] { local_batch_size(config, "batch_size", 4); }),
            "test/step: batch_size: 24 (the global batch) does not divide into 4 rank(s) x 4 (gradient_accumulation_steps) "
            "micro-batches");
}

// A mean-squared-error step of a linear model on `inputs`, whose update is left to the caller.
TrainingStep linear_step(torch::nn::Linear model, torch::Tensor inputs, torch::Tensor targets) {
  TrainingStep step;
  step.samples = inputs.size(0);
  step.loss = [=](const BatchSlice& slice) mutable {
    return torch::mse_loss(model->forward(slice.of(inputs)), slice.of(targets));
  };
  step.update = [] {};
  return step;
}

TEST(TrainingLoop, AccumulatedGradientsEqualTheFullBatchsEvenForUnequalMicroBatches) {
  torch::manual_seed(1);
  torch::nn::Linear model(5, 3);
  const auto inputs = torch::randn({10, 5}), targets = torch::randn({10, 3});
  for (const int64_t steps : {2, 3, 4, 10})
    testing::expect_accumulation_matches_full_batch({"weight", "bias"}, model->parameters(),
                                                    [&] { return linear_step(model, inputs, targets); }, steps);
}

TEST(TrainingLoop, TheLossOfAnUpdateIsTheFullBatchsAndTheUpdateSeesTheSummedGradient) {
  torch::manual_seed(2);
  torch::nn::Linear model(4, 2);
  const auto inputs = torch::randn({8, 4}), targets = torch::randn({8, 2});
  const double full_loss = torch::mse_loss(model->forward(inputs), targets).item<double>();
  const Config config = step_config(4);
  TrainingLoop loop(config, torch::kCPU, model->parameters(), nullptr);
  TrainingStep step = linear_step(model, inputs, targets);
  int updates = 0;
  step.update = [&] { ++updates; };
  EXPECT_NEAR(loop.update(step), full_loss, 1e-6);
  EXPECT_EQ(updates, 1);
  EXPECT_EQ(loop.updates(), 1);
  // The next update starts from zero gradients, not from the last one's.
  const auto first = model->weight.grad().clone();
  loop.update(step);
  EXPECT_TRUE(torch::allclose(model->weight.grad(), first));
}

// Two ranks in two threads over Gloo on loopback: each holds half of the batch and accumulates it in
// micro-batches; the averaged gradient must be the whole batch's, as one process computes it.
TEST(TrainingLoop, TwoRanksAccumulatingMicroBatchesAverageToTheFullBatchsGradient) {
  torch::manual_seed(3);
  const auto inputs = torch::randn({12, 6}), targets = torch::randn({12, 2});
  torch::nn::Linear reference(6, 2);
  const auto expected = testing::update_gradients(reference->parameters(), 1, [&] { return linear_step(reference, inputs, targets); });

  std::vector<std::vector<torch::Tensor>> gradients(2);
  const std::vector<std::string> failures = testing::run_two_ranks([&](parallel::Communicator& communicator) {
    const int rank = communicator.rank();
    torch::nn::Linear model(6, 2);
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < model->parameters().size(); ++i) model->parameters()[i].copy_(reference->parameters()[i]);
    }
    parallel::GradientSync sync(communicator, model->parameters(), {});
    const Config config = step_config(3);
    TrainingLoop loop(config, torch::kCPU, model->parameters(), &sync);
    TrainingStep step = linear_step(model, inputs.narrow(0, 6 * rank, 6), targets.narrow(0, 6 * rank, 6));
    step.update = [&] {
      for (const auto& parameter : model->parameters()) gradients[static_cast<size_t>(rank)].push_back(parameter.grad().clone());
    };
    loop.update(step);
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(failures[static_cast<size_t>(rank)], "") << "rank " << rank;
    ASSERT_EQ(gradients[static_cast<size_t>(rank)].size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_TRUE(torch::allclose(gradients[static_cast<size_t>(rank)][i], expected[i], 1e-5, 1e-7)) << "rank " << rank << " tensor " << i;
  }
}

TEST(TrainingLoop, Bf16AutocastComputesInBf16AndKeepsFp32WeightsAndGradients) {
  torch::manual_seed(4);
  torch::nn::Linear model(8, 4);
  const auto inputs = torch::randn({6, 8}), targets = torch::randn({6, 4});
  torch::Tensor output;
  TrainingStep step;
  step.samples = 6;
  step.loss = [&](const BatchSlice& slice) {
    output = model->forward(slice.of(inputs));
    return torch::mse_loss(output.to(torch::kFloat), slice.of(targets));
  };
  step.update = [] {};
  const Config config = step_config(1, "bf16");
  TrainingLoop loop(config, torch::kCPU, model->parameters(), nullptr);
  const double loss = loop.update(step);
  EXPECT_EQ(output.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(model->weight.scalar_type(), torch::kFloat);
  EXPECT_EQ(model->weight.grad().scalar_type(), torch::kFloat);
  const double full = torch::mse_loss(model->forward(inputs), targets).item<double>();
  EXPECT_NEAR(loss, full, 0.02 * full);  // bf16 keeps 8 bits of mantissa
  // Outside the loop's autocast, nothing is cast.
  EXPECT_EQ(model->forward(inputs).scalar_type(), torch::kFloat);
}

TEST(LossScaler, BacksOffOnAnOverflowSkipsTheUpdateAndGrowsAfterTheInterval) {
  LossScaler scaler(LossScalerOptions().initial_scale(1024).growth_interval(3));
  auto parameter = torch::zeros({2}, torch::requires_grad());
  parameter.mutable_grad() = torch::tensor({2048.0f, -1024.0f});
  EXPECT_TRUE(scaler.unscale({parameter}));
  EXPECT_TRUE(torch::equal(parameter.grad(), torch::tensor({2.0f, -1.0f})));
  parameter.mutable_grad() = torch::tensor({std::numeric_limits<float>::infinity(), 1.0f});
  EXPECT_FALSE(scaler.unscale({parameter}));
  scaler.update(false);
  EXPECT_DOUBLE_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.skipped_updates(), 1);
  parameter.mutable_grad() = torch::tensor({NAN, 1.0f});
  EXPECT_FALSE(scaler.unscale({parameter}));
  for (int good = 0; good < 2; ++good) scaler.update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 512);  // two finite updates: not yet
  scaler.update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 1024);  // the third grows it
  scaler.update(false);
  scaler.update(true);
  scaler.update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 512);  // an overflow restarts the count
}

}  // namespace
}  // namespace trainbench
