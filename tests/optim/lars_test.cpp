// LARS against values computed by hand from the formulas in optim/lars.h (two steps, so momentum and the
// changed weight norm both count).
#include <gtest/gtest.h>

#include "optim/lars.h"

namespace trainbench::optim {
namespace {

TEST(Lars, TrustRatioMomentumAndWeightDecayOnAWeight) {
  auto weight = torch::tensor({3.0, 4.0}, torch::kFloat64).view({1, 2}).requires_grad_();
  Lars lars({{weight}}, LarsOptions().momentum(0.9).weight_decay(0.01).eta(0.001));
  for (int step = 0; step < 2; ++step) {
    weight.mutable_grad() = torch::tensor({0.6, 0.8}, torch::kFloat64).view({1, 2});
    lars.step(1.0);
  }
  // step 1: trust = 0.001*5/(1+0.01*5) = 0.0047619; v = trust*(g+0.01w) = (0.003, 0.004); w = (2.997, 3.996)
  // step 2: trust = 0.001*4.995/(1+0.04995) = 0.00475737; v = 0.9v + trust*(g+0.01w) = (0.005697, 0.007596)
  EXPECT_NEAR(weight[0][0].item<double>(), 2.991303, 1e-9);
  EXPECT_NEAR(weight[0][1].item<double>(), 3.988404, 1e-9);
}

TEST(Lars, BatchNormAndBiasSkipDecayAndAdaptation) {
  auto bias = torch::tensor({1.0, -2.0}, torch::kFloat64).requires_grad_();
  Lars lars({{bias, /*decays=*/false}}, LarsOptions().momentum(0.9).weight_decay(0.01).eta(0.001));
  for (int step = 0; step < 2; ++step) {
    bias.mutable_grad() = torch::tensor({0.5, 0.25}, torch::kFloat64);
    lars.step(1.0);
  }
  // plain momentum SGD: v1 = g, p1 = (0.5, -2.25); v2 = 1.9g, p2 = (-0.45, -2.725)
  EXPECT_NEAR(bias[0].item<double>(), -0.45, 1e-12);
  EXPECT_NEAR(bias[1].item<double>(), -2.725, 1e-12);
}

TEST(Lars, WithoutLayerAdaptationItIsSgdWithWeightDecay) {
  auto weight = torch::tensor({3.0, 4.0}, torch::kFloat64).view({1, 2}).requires_grad_();
  Lars sgd({{weight}}, LarsOptions().momentum(0.9).weight_decay(0.01).layer_adaptation(false));
  weight.mutable_grad() = torch::tensor({0.6, 0.8}, torch::kFloat64).view({1, 2});
  sgd.step(0.1);
  // v = 0.1*(g + 0.01w) = (0.063, 0.084)
  EXPECT_NEAR(weight[0][0].item<double>(), 3.0 - 0.063, 1e-12);
  EXPECT_NEAR(weight[0][1].item<double>(), 4.0 - 0.084, 1e-12);
}

}  // namespace
}  // namespace trainbench::optim
