// ResNet-50's parameters under the names the v1.1 rules expect in weights_initialization lines.
#include <set>

#include <gtest/gtest.h>

#include "support/accumulation.h"
#include "support/typed_settings.h"
#include "workloads/resnet/model.h"
#include "workloads/resnet/settings.h"

namespace trainbench::resnet {
namespace {

TEST(ResNetModel, Resnet50HasTheReferenceParameterCountAndTensorNames) {
  ResNet model;  // ResNetOptions{} is ResNet-50 v1.5
  int64_t parameters = 0;
  std::set<std::string> names;
  for (const auto& parameter : model->named_parameters()) {
    parameters += parameter.value().numel();
    names.insert(mlperf_tensor_name(parameter.key()));
  }
  EXPECT_EQ(parameters, 25557032);  // torchvision's resnet50
  EXPECT_EQ(names.size(), 161u);    // the v1.1 rules' resnet tensor list
  for (const char* expected : {"conv0_weight", "bn0_gamma", "bn0_beta", "stage1_unit1_conv1sc_weight",
                               "stage1_unit1_bnsc_gamma", "stage3_unit6_conv3_weight", "stage4_unit3_bn3_beta",
                               "fc1_weight", "fc1_bias"})
    EXPECT_EQ(names.count(expected), 1u) << expected;
  EXPECT_EQ(names.count("stage1_unit2_conv1sc_weight"), 0u);  // only the first unit of a stage projects
}

TEST(ResNetModel, ForwardMacsMatchTheKnownResnet50Count) {
  // Counted independently with forward hooks on the python3-torch reference model (conv and linear MACs).
  EXPECT_EQ(ResNet()->forward_macs(224), 4089184256);
}

// The rules let batch norm's statistics span a micro-batch (the reference logs model_bn_span); with them
// fixed (eval mode), every other part of K micro-batches must add up to the full batch's gradient.
TEST(ResNetModel, AccumulatedMicroBatchesGiveTheFullBatchsGradientWithBatchNormStatisticsFixed) {
  torch::manual_seed(5);
  ResNet model(ResNetOptions().blocks_per_stage({1, 1}).stage_widths({4, 8}).stem_width(8).num_classes(5).zero_init_residual(false));
  model->to(torch::kFloat64);
  model->eval();
  Lars lars(optimizer_parameters(model), LarsOptions());
  const auto images = torch::randn({8, 3, 32, 32}, torch::kFloat64);
  const auto labels = torch::randint(5, {8}, torch::kInt64);
  testing::expect_accumulation_matches_full_batch(*model, [&] { return training_step(model, lars, images, labels, 0.1, 0.1); });
}

TEST(ResNetSettings, TheStructReadsEverySettingThatHasARule) {
  testing::expect_settings_struct_matches_rules<Settings>("resnet");
}

}  // namespace
}  // namespace trainbench::resnet
