// One-step parity of the ResNet model and LARS against an independent implementation in Debian's
// python3-torch (resnet_reference.py): same initial weights and batch, two training steps, then losses,
// logits, weights and BatchNorm running statistics must agree. float64 so the tolerance can be tight.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/python_script.h"
#include "support/torch_pickle.h"
#include "workloads/resnet/model.h"

namespace trainbench::resnet {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

TEST(ResNetParity, TwoLarsStepsMatchAnIndependentPyTorchImplementation) {
  torch::manual_seed(3);
  // Small, but exercising every path: 7x7/2 stem with max pool, projection and identity shortcuts, stride 2.
  const auto options = ResNetOptions()
                           .blocks_per_stage({2, 1})
                           .stage_widths({4, 8})
                           .stem_width(8)
                           .num_classes(5)
                           .zero_init_residual(false);
  ResNet model(options);
  model->to(torch::kFloat64);
  {
    torch::NoGradGuard no_grad;  // non-trivial BatchNorm affine parameters
    for (auto& parameter : model->parameters())
      if (parameter.dim() == 1) parameter.uniform_(0.5, 1.5);
  }
  const auto images = torch::randn({6, 3, 32, 32}, torch::kFloat64);
  const auto labels = torch::tensor({0, 1, 2, 3, 4, 1}, torch::kInt64);
  const double lr = 0.5, momentum = 0.9, weight_decay = 1e-4, eta = 0.001, label_smoothing = 0.1;

  const fs::path dir = fs::temp_directory_path() / ("trainbench_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  c10::Dict<std::string, torch::Tensor> inputs;
  for (const auto& item : model->named_parameters()) inputs.insert("state." + item.key(), item.value().clone());
  for (const auto& item : model->named_buffers()) inputs.insert("state." + item.key(), item.value().clone());
  inputs.insert("images", images);
  inputs.insert("labels", labels);
  inputs.insert("setting.blocks_per_stage", torch::tensor(options.blocks_per_stage()));
  inputs.insert("setting.stage_widths", torch::tensor(options.stage_widths()));
  for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
           {"stem_width", 8}, {"stem_kernel", 7}, {"stem_stride", 2}, {"stem_max_pool", 1}, {"expansion", 4},
           {"num_classes", 5}, {"lr", lr}, {"momentum", momentum}, {"weight_decay", weight_decay}, {"eta", eta},
           {"label_smoothing", label_smoothing}})
    inputs.insert("setting." + key, torch::tensor(value, torch::kFloat64));
  save_dict(inputs, dir / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_RESNET_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torch installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  Lars lars(optimizer_parameters(model), LarsOptions().momentum(momentum).weight_decay(weight_decay).eta(eta));
  model->train();
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    const auto logits = model->forward(images);
    auto loss = torch::nn::functional::cross_entropy(
        logits, labels, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
    loss.backward();
    lars.step(lr);
    EXPECT_NEAR(loss.item<double>(), reference("loss" + std::to_string(step)).item<double>(), 1e-10) << "step " << step;
    if (step == 0) {
      EXPECT_TRUE(torch::allclose(logits, reference("logits0"), 1e-9, 1e-10));
    }
  }
  int compared = 0;
  for (const auto& item : model->named_parameters()) {
    EXPECT_TRUE(torch::allclose(item.value(), reference("state." + item.key()), 1e-9, 1e-10)) << item.key();
    ++compared;
  }
  for (const auto& item : model->named_buffers()) {
    EXPECT_TRUE(torch::allclose(item.value().to(torch::kFloat64), reference("state." + item.key()).to(torch::kFloat64), 1e-9, 1e-10))
        << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(expected.size()) - 3);  // everything but loss0, loss1, logits0
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench::resnet
