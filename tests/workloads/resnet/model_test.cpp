// ResNet-50's parameters under the names the v1.1 rules expect in weights_initialization lines.
#include <set>

#include <gtest/gtest.h>

#include "workloads/resnet/model.h"

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

}  // namespace
}  // namespace trainbench::resnet
