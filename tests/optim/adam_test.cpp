// Adam (optim/adam.h) against LibTorch's own torch::optim::AdamW and torch::optim::Adam, an independent
// implementation of the same update, over three steps in float64; and one step computed by hand.
#include <vector>

#include <gtest/gtest.h>

#include "optim/adam.h"

namespace trainbench::optim {
namespace {

struct Twins {
  std::vector<torch::Tensor> ours, theirs;
};

Twins random_parameters() {
  torch::manual_seed(3);
  Twins twins;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{5, 7}, {7}, {3, 2, 2}}) {
    const auto value = torch::randn(shape, torch::kFloat64);
    twins.ours.push_back(value.clone().requires_grad_());
    twins.theirs.push_back(value.clone().requires_grad_());
  }
  return twins;
}

void set_equal_gradients(Twins& twins, int step) {
  for (size_t i = 0; i < twins.ours.size(); ++i) {
    const auto gradient = torch::randn(twins.ours[i].sizes(), torch::kFloat64) * (step + 1);
    twins.ours[i].mutable_grad() = gradient.clone();
    twins.theirs[i].mutable_grad() = gradient.clone();
  }
}

void expect_equal(const Twins& twins, int step) {
  for (size_t i = 0; i < twins.ours.size(); ++i)
    EXPECT_TRUE(torch::allclose(twins.ours[i], twins.theirs[i], 1e-12, 1e-14)) << "tensor " << i << ", step " << step;
}

TEST(Adam, DecoupledWeightDecayEqualsLibTorchsAdamW) {
  Twins twins = random_parameters();
  Adam ours(all_decaying(twins.ours), AdamOptions().beta1(0.9).beta2(0.95).epsilon(1e-8).weight_decay(0.1));
  torch::optim::AdamW theirs(twins.theirs,
                             torch::optim::AdamWOptions(2e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 3; ++step) {
    set_equal_gradients(twins, step);
    ours.step(2e-3);
    theirs.step();
    expect_equal(twins, step);
  }
}

TEST(Adam, L2WeightDecayEqualsLibTorchsAdam) {
  Twins twins = random_parameters();
  Adam ours(all_decaying(twins.ours), AdamOptions().weight_decay(0.01).decoupled_weight_decay(false));
  torch::optim::Adam theirs(twins.theirs, torch::optim::AdamOptions(1e-3).weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    set_equal_gradients(twins, step);
    ours.step(1e-3);
    theirs.step();
    expect_equal(twins, step);
  }
}

TEST(Adam, AParameterThatDoesNotDecayTakesThePlainUpdate) {
  auto bias = torch::tensor({1.0, -2.0}, torch::kFloat64).requires_grad_();
  Adam adam({{bias, /*decays=*/false}}, AdamOptions().weight_decay(0.5));
  bias.mutable_grad() = torch::tensor({0.5, -0.25}, torch::kFloat64);
  adam.step(0.1);
  // Step 1: m/(1-b1) = g and v/(1-b2) = g^2, so the update is lr * g / (|g| + eps) = 0.1 * sign(g), no decay.
  EXPECT_NEAR(bias[0].item<double>(), 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
  EXPECT_NEAR(bias[1].item<double>(), -2.0 + 0.1 * 0.25 / (0.25 + 1e-8), 1e-12);
  EXPECT_EQ(adam.steps(), 1);
}

}  // namespace
}  // namespace trainbench::optim
