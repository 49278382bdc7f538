// LAMB's fused float32 CPU step against the same arithmetic in tensor ops (optim/lamb.h).
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "optim/lamb.h"

namespace trainbench::optim {
namespace {

TEST(Lamb, FusedCpuStepEqualsTheTensorOpStep) {
  torch::manual_seed(9);
  std::vector<Parameter> a, b;
  std::vector<std::string> names;
  for (const auto& [name, shape, decays] : std::vector<std::tuple<std::string, std::vector<int64_t>, bool>>{
           {"w.weight", {300, 200}, true}, {"w.bias", {300}, false}, {"n.LayerNorm.weight", {200}, false},
           {"odd.weight", {7, 143}, true}, {"zero.weight", {4, 4}, true}}) {
    auto value = name == "zero.weight" ? torch::zeros(shape) : torch::randn(shape);
    a.push_back({value.clone().requires_grad_(), decays});
    b.push_back({value.clone().requires_grad_(), decays});
    names.push_back(name);
  }
  const auto options = LambOptions().weight_decay(0.01).max_grad_norm(1.0);
  Lamb fused(a, options), plain(b, LambOptions(options).fused(false));
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < a.size(); ++i) {
      const auto grad = torch::randn(a[i].tensor.sizes()) * (step + 1);
      a[i].tensor.mutable_grad() = grad.clone();
      b[i].tensor.mutable_grad() = grad.clone();
    }
    fused.step(0.01);
    plain.step(0.01);
    EXPECT_NEAR(fused.last_gradient_norm(), plain.last_gradient_norm(), 1e-3);
    EXPECT_GT(fused.last_gradient_norm(), 1.0);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(torch::allclose(a[i].tensor, b[i].tensor, 1e-5, 1e-6)) << names[i] << " at step " << step;
  }
}

}  // namespace
}  // namespace trainbench::optim
