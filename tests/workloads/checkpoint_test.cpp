// State dicts in and out (workloads/checkpoint.h): a round trip, refusals that list what does not fit, and
// the exported ResNet-50, SSD and U-Net3D loading into the official model classes (torchvision's resnet50, the
// v1.1 reference's SSD300 and Unet3D) with strict=True and giving the same output on the same input.
#include "workloads/checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "support/torch_pickle.h"
#include "workloads/registry.h"
#include "workloads/resnet/model.h"
#include "workloads/ssd/model.h"
#include "workloads/unet3d/model.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;
using testing::error_message;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("trainbench_checkpoint_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

torch::nn::Sequential small_net() {
  return torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)), torch::nn::BatchNorm2d(4),
                               torch::nn::Linear(4, 2));
}

TEST_F(CheckpointTest, ARoundTripCopiesEveryParameterAndBuffer) {
  torch::manual_seed(1);
  auto saved = small_net();
  {
    torch::NoGradGuard no_grad;
    saved[1]->as<torch::nn::BatchNorm2d>()->running_mean.uniform_();
  }
  save_state_dict(module_state(*saved), path("net.pt"));
  torch::manual_seed(2);
  auto loaded = small_net();
  load_state_dict(path("net.pt"), module_state(*loaded));
  const auto expected = module_state(*saved), actual = module_state(*loaded);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].name, actual[i].name);
    EXPECT_TRUE(torch::equal(expected[i].tensor, actual[i].tensor)) << expected[i].name;
  }
}

TEST_F(CheckpointTest, AFileThatDoesNotFitIsRefusedListingWhatDiffersAndChangesNothing) {
  auto net = small_net();
  StateDict state = module_state(*net);
  state.erase(state.begin());                                      // 0.weight missing
  state.push_back({"extra.weight", torch::zeros({1})});            // unexpected
  state[0].tensor = torch::zeros({5});                             // 0.bias of another shape
  save_state_dict(state, path("odd.pt"));
  auto target = small_net();
  const auto before = module_state(*target)[1].tensor.clone();
  const std::string message = error_message([&] { load_state_dict(path("odd.pt"), module_state(*target)); });
  EXPECT_NE(message.find("--weights " + path("odd.pt") + ": does not fit this model's 9 tensors (1 missing: 0.weight; "
                         "1 unexpected: extra.weight; 1 of another shape: 0.bias [5] (the model's is [4]))"),
            std::string::npos)
      << message;
  EXPECT_TRUE(torch::equal(module_state(*target)[1].tensor, before)) << "a refused file changed the model";

  std::ofstream(path("text.pt")) << "not a checkpoint";
  EXPECT_NE(error_message([&] { load_state_dict(path("text.pt"), module_state(*target)); }).find("is not a file torch.save wrote"),
            std::string::npos);
  testing::save_dict(c10::Dict<std::string, torch::Tensor>(), path("empty.pt"));
  EXPECT_NE(error_message([&] { load_state_dict(path("empty.pt"), module_state(*target)); }).find("9 missing"), std::string::npos);
}

// Runs checkpoint_reference.py; false (and a skip) where the reference code is absent.
bool official_model_agrees(const std::string& benchmark, const std::string& state, const std::string& case_file) {
  const std::string command = std::string("/usr/bin/python3 ") + TRAINBENCH_CHECKPOINT_REFERENCE_SCRIPT + " " + benchmark + " " +
                              state + " " + case_file + " " + TRAINBENCH_REFERENCE_CODE_DIR;
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return false;
  EXPECT_EQ(status, 0) << "the official model refused the file or disagreed: " << command;
  return true;
}

TEST_F(CheckpointTest, ExportedResnet50LoadsIntoTorchvisionStrictlyAndGivesTheSameLogits) {
  const WorkloadEntry& entry = find_workload("resnet");
  WorkloadSettings settings;
  settings.config = preset_config(entry, "reference", {"precision=fp32"});
  settings.seed = 3;
  entry.export_weights(settings, path("resnet50.pt"));

  resnet::ResNet model;  // ResNet-50, the reference preset's model
  load_state_dict(path("resnet50.pt"), module_state(*model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({2, 3, 64, 64});
  c10::Dict<std::string, torch::Tensor> case_dict;
  case_dict.insert("input", input);
  case_dict.insert("output", model->forward(input).detach());
  testing::save_dict(case_dict, path("resnet_case.pt"));
  EXPECT_TRUE(official_model_agrees("resnet", path("resnet50.pt"), path("resnet_case.pt")));
}

TEST_F(CheckpointTest, ExportedSsdLoadsIntoTheReferenceSsd300StrictlyAndGivesTheSameBoxesAndScores) {
  const WorkloadEntry& entry = find_workload("ssd");
  WorkloadSettings settings;
  settings.config = preset_config(entry, "reference", {"precision=fp32", "pretrained_backbone=false"});
  settings.seed = 3;
  entry.export_weights(settings, path("ssd300.pt"));

  ssd::Ssd model(ssd::SsdOptions{});  // SSD300 with ResNet-34, 81 classes: the reference preset's model
  load_state_dict(path("ssd300.pt"), ssd::official_state(model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({1, 3, 300, 300});
  const auto [locations, scores] = model->forward(input);
  c10::Dict<std::string, torch::Tensor> case_dict;
  case_dict.insert("input", input);
  case_dict.insert("output", torch::cat({locations.flatten(), scores.flatten()}).detach());
  testing::save_dict(case_dict, path("ssd_case.pt"));
  if (!official_model_agrees("ssd", path("ssd300.pt"), path("ssd_case.pt")))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

TEST_F(CheckpointTest, ExportedUnet3dLoadsIntoTheReferenceClassStrictlyAndGivesTheSameLogits) {
  const WorkloadEntry& entry = find_workload("unet3d");
  WorkloadSettings settings;
  settings.config = preset_config(entry, "reference", {"precision=fp32"});
  settings.seed = 3;
  entry.export_weights(settings, path("unet3d.pt"));

  unet3d::Unet3d model;  // filters 32 to 320, the reference preset's model
  load_state_dict(path("unet3d.pt"), module_state(*model));
  model->eval();
  torch::manual_seed(4);
  const auto input = torch::randn({1, 1, 64, 64, 64});  // the bottleneck, 1/32 of it, must keep more than one voxel
  c10::Dict<std::string, torch::Tensor> case_dict;
  case_dict.insert("input", input);
  case_dict.insert("output", model->forward(input).detach());
  testing::save_dict(case_dict, path("unet3d_case.pt"));
  if (!official_model_agrees("unet3d", path("unet3d.pt"), path("unet3d_case.pt")))
    GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
}

}  // namespace
}  // namespace trainbench
