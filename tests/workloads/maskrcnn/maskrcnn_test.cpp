// Mask R-CNN: one training step's five losses and every gradient against the v1.1 reference's own GeneralizedRCNN
// under python3-torch + torchvision (maskrcnn_reference.py), the test-time post-processing's shape rules, the
// backbone converter, and the quality gate (the tiny preset through the harness, its log reviewed, BBOX and SEGM
// both reached).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "support/quality_gate.h"
#include "support/rules_tensors.h"
#include "support/torch_pickle.h"
#include "support/typed_settings.h"
#include "support/workload_refusal.h"
#include "util/error.h"
#include "workloads/checkpoint.h"
#include "workloads/maskrcnn/model.h"
#include "workloads/maskrcnn/settings.h"

namespace trainbench::maskrcnn {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

// A small model of the reference's shape: every stage, FPN level and head, with few channels.
MaskRcnnOptions small_options() {
  return MaskRcnnOptions()
      .num_classes(4)
      .body_widths({8, 16, 32, 64})
      .blocks_per_stage({1, 1, 1, 1})
      .fpn_channels(16)
      .anchor_sizes({8, 16, 32, 64, 128})
      .rpn_pre_nms_top_n_train(100)
      .rpn_post_nms_top_n_train(60)
      .fpn_post_nms_top_n_train(80)
      .rpn_pre_nms_top_n_test(100)
      .rpn_post_nms_top_n_test(60)
      .fpn_post_nms_top_n_test(50)
      .box_fc_size(32)
      .mask_conv_channels({8, 8, 8, 8});
}

// What no range of settings.json can judge is refused when the workload is built, before the log opens.
TEST(MaskRcnnWorkload, RefusesAWarmupStartingBelowZeroAndTooManyLoaderThreads) {
  EXPECT_EQ(testing::construction_error("maskrcnn", "tiny", {"warmup_factor=0.01"}),
            "maskrcnn/tiny: warmup_factor: warmup_steps x warmup_factor (1.0) must be at most base_learning_rate "
            "(0.02): the warm-up would start at a negative learning rate");
  EXPECT_EQ(testing::construction_error("maskrcnn", "tiny", {"loader_threads=1000"})
                .rfind("maskrcnn/tiny: loader_threads: expected at most ", 0),
            0u);
  // The presets' factors are their base rate over warmup_steps, to decimal rounding (0.12 / 625 = 0.000192).
  for (const char* preset : {"tiny", "mini"})
    EXPECT_EQ(testing::construction_error("maskrcnn", preset, {}), "(no Error thrown)");
  EXPECT_EQ(testing::construction_error("maskrcnn", "reference", {"precision=fp32", "loader_threads=1"}),
            "(no Error thrown)");
}

TEST(MaskRcnnSettings, TheStructReadsEverySettingThatHasARule) {
  testing::expect_settings_struct_matches_rules<Settings>("maskrcnn");
}

TEST(MaskRcnnModel, NamesTheRulesTensorsAndFreezesTheStemAndRes2) {
  const auto names = MaskRcnnImpl::mlperf_tensor_names();
  ASSERT_EQ(names.size(), 21u);
  EXPECT_EQ(names.front(), "FPN_inner_block1");
  EXPECT_EQ(names[8], "RPNHead_conv");
  EXPECT_EQ(names.back(), "ROI_MASK_PREDICTOR_fcn_logits");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), testing::rules_tensor_names("closed_maskrcnn"));
  MaskRcnn model(small_options());
  for (const auto& item : model->named_parameters()) {
    const bool frozen = item.key().rfind("body.conv1", 0) == 0 || item.key().rfind("body.layer1.", 0) == 0;
    EXPECT_EQ(item.value().requires_grad(), !frozen) << item.key();
  }
  // Frozen batch norm holds its four tensors as buffers: nothing of it is trained.
  for (const auto& item : model->named_parameters()) EXPECT_EQ(item.key().find(".bn"), std::string::npos) << item.key();
}

TEST(MaskRcnnModel, DetectsAtMostTheLimitWithMasksOfTheRoiResolution) {
  torch::manual_seed(2);
  MaskRcnn model(small_options().score_threshold(0.0).detections_per_image(7));
  model->eval();
  const auto found = model->detect(torch::randn({2, 3, 64, 64}) * 50, {{64, 56}, {40, 64}});
  ASSERT_EQ(found.size(), 2u);
  for (size_t i = 0; i < found.size(); ++i) {
    const int64_t count = found[i].boxes.size(0);
    EXPECT_GE(count, 1);
    EXPECT_LE(count, 7);  // random scores: no ties at the cut
    EXPECT_EQ(found[i].masks.sizes(), (std::vector<int64_t>{count, 28, 28}));
    EXPECT_TRUE((found[i].labels >= 1).all().item<bool>());
    EXPECT_TRUE((found[i].labels <= 3).all().item<bool>());
    // Clipped to the image (inclusive pixels).
    const int64_t width = i == 0 ? 56 : 64, height = i == 0 ? 64 : 40;
    EXPECT_TRUE((found[i].boxes.select(1, 2) <= width - 1).all().item<bool>());
    EXPECT_TRUE((found[i].boxes.select(1, 3) <= height - 1).all().item<bool>());
    EXPECT_TRUE((found[i].boxes >= 0).all().item<bool>());
  }
}

// --precision bf16 through the training loop, two micro-batches: RoIAlign's sparse product stays in fp32 under
// autocast (it has no bf16 kernel), the weights and their gradients stay fp32, and the update is finite.
TEST(MaskRcnnModel, TrainsAnUpdateInBf16WithTwoMicroBatches) {
  torch::manual_seed(12);
  MaskRcnn model(small_options());
  model->train();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const auto images = torch::randn({2, 3, 64, 64}) * 50;
  std::vector<ImageTarget> targets(2);
  targets[0].boxes = torch::tensor({4.f, 6.f, 33.f, 37.f}).view({1, 4});
  targets[0].labels = torch::tensor({1}, torch::kInt64);
  targets[0].polygons = {{{6, 8, 30, 6, 34, 28, 18, 38, 4, 24}}};
  targets[1].boxes = torch::tensor({10.f, 10.f, 57.f, 43.f}).view({1, 4});
  targets[1].labels = torch::tensor({2}, torch::kInt64);
  targets[1].polygons = {{{10, 10, 58, 12, 50, 40, 12, 44}}};
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const Config config = testing::step_config(2, "bf16");
  TrainingLoop loop(config, torch::kCPU, model->parameters(), nullptr);
  const auto before = model->parameters().back().clone();
  const double loss = loop.update(training_step(model, optimizer, {0.01}, images, {{64, 56}, {48, 64}}, targets, generator));
  EXPECT_TRUE(std::isfinite(loss)) << loss;
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.value().scalar_type(), torch::kFloat) << item.key();
    if (item.value().grad().defined()) {
      EXPECT_EQ(item.value().grad().scalar_type(), torch::kFloat) << item.key();
    }
  }
  EXPECT_FALSE(torch::equal(model->parameters().back(), before));
  EXPECT_EQ(testing::error_message([&] { training_step(model, optimizer, {0.01, 0.02}, images, {{64, 56}, {48, 64}}, targets, generator); }),
            "maskrcnn training step: 2 learning rates for 1 parameter groups");
}

// The reference's own GeneralizedRCNN at full size (R-50-FPN, 81 classes) on two small images.
TEST(MaskRcnnParity, OneStepsFiveLossesAndEveryGradientMatchTheReferencesOwnGeneralizedRcnn) {
  torch::manual_seed(11);
  // Sample sizes above the candidate counts: the samplers take every labelled anchor and RoI, so both sides see
  // the same samples without sharing a random generator.
  const MaskRcnnOptions options = MaskRcnnOptions().rpn_batch_size_per_image(1000000).roi_batch_size_per_image(1000000);
  MaskRcnn model(options);
  model->train();
  {
    // Frozen batch norm with statistics of its own, so its affine map is exercised.
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_buffers()) {
      const std::string& name = item.key();
      auto& value = item.value();
      if (name.size() >= 7 && name.compare(name.size() - 7, 7, ".weight") == 0) value.uniform_(0.5, 1.5);
      if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) value.normal_(0, 0.1);
      if (name.find("running_mean") != std::string::npos) value.normal_(0, 0.1);
      if (name.find("running_var") != std::string::npos) value.uniform_(0.5, 2.0);
    }
  }
  const auto images = torch::randn({2, 3, 64, 64}) * 50;
  const std::vector<ImageSize> sizes{{64, 56}, {48, 64}};
  // Image 0: a pentagon and a quadrilateral; image 1: one large quadrilateral. Boxes are the polygons' bounds.
  const std::vector<std::vector<double>> polygons{
      {6, 8, 30, 6, 34, 28, 18, 38, 4, 24}, {30, 30, 52, 34, 48, 60, 28, 56}, {10, 10, 58, 12, 50, 40, 12, 44}};
  const auto boxes = torch::tensor({4.f, 6.f, 33.f, 37.f, 28.f, 30.f, 51.f, 59.f, 10.f, 10.f, 57.f, 43.f}).view({3, 4});
  const auto labels = torch::tensor({1, 53, 80}, torch::kInt64);
  const std::vector<int64_t> offsets{0, 2, 3};
  std::vector<ImageTarget> targets;
  for (size_t i = 0; i < 2; ++i) {
    ImageTarget target;
    target.boxes = boxes.slice(0, offsets[i], offsets[i + 1]);
    target.labels = labels.slice(0, offsets[i], offsets[i + 1]);
    for (int64_t k = offsets[i]; k < offsets[i + 1]; ++k) target.polygons.push_back({polygons[static_cast<size_t>(k)]});
    targets.push_back(target);
  }

  const fs::path dir = fs::temp_directory_path() / ("trainbench_maskrcnn_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_state_dict(official_state(model), (dir / "initial.pt").string());
  c10::Dict<std::string, torch::Tensor> inputs;
  inputs.insert("images", images);
  inputs.insert("sizes", torch::tensor({64, 56, 48, 64}, torch::kInt64).view({2, 2}));
  inputs.insert("boxes", boxes);
  inputs.insert("labels", labels);
  inputs.insert("object_offsets", torch::tensor(offsets));
  std::vector<double> coords;
  std::vector<int64_t> point_offsets{0};
  for (const auto& polygon : polygons) {
    coords.insert(coords.end(), polygon.begin(), polygon.end());
    point_offsets.push_back(static_cast<int64_t>(coords.size()));
  }
  inputs.insert("polygon_coords", torch::tensor(coords));
  inputs.insert("polygon_offsets", torch::tensor(point_offsets));
  const auto setting = [&](const std::string& key, const torch::Tensor& value) { inputs.insert("setting." + key, value); };
  // The rest of the reference's configuration is e2e_mask_rcnn_R_50_FPN_1x.yaml's, as are these options' defaults.
  setting("rpn_batch_size_per_image", torch::tensor(options.rpn_batch_size_per_image()));
  setting("rpn_positive_fraction", torch::tensor(options.rpn_positive_fraction()));
  setting("roi_batch_size_per_image", torch::tensor(options.roi_batch_size_per_image()));
  setting("roi_positive_fraction", torch::tensor(options.roi_positive_fraction()));
  save_dict(inputs, dir / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_MASKRCNN_REFERENCE_SCRIPT,
      (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string() + " " + TRAINBENCH_REFERENCE_CODE_DIR);
  if (run.missing_reference_code()) GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
  ASSERT_TRUE(testing::succeeded(run)) << "are python3-torch and python3-torchvision installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1);
  const Losses losses = model->losses(images, sizes, targets, generator);
  losses.total().backward();
  const std::pair<const char*, torch::Tensor> terms[] = {{"loss_objectness", losses.objectness},
                                                         {"loss_rpn_box_reg", losses.rpn_box},
                                                         {"loss_classifier", losses.classifier},
                                                         {"loss_box_reg", losses.box_reg},
                                                         {"loss_mask", losses.mask}};
  for (const auto& [name, value] : terms) {
    const double want = reference(name).item<double>();
    EXPECT_GT(want, 0) << name << ": the test must exercise every term";
    EXPECT_NEAR(value.item<double>(), want, 1e-4 * std::abs(want) + 1e-6) << name;
  }
  EXPECT_GE(reference("positive_rois").item<int64_t>(), 3);  // at least the ground truth itself
  int compared = 0, reference_gradients = 0;
  for (const auto& entry : expected) reference_gradients += entry.key().toStringRef().rfind("grad.", 0) == 0;
  for (const NamedTensor& named : official_state(model)) {
    const std::string key = "grad." + named.name;
    if (!named.tensor.requires_grad()) {  // frozen: the stem, res2 and every batch norm
      EXPECT_FALSE(expected.contains(key)) << key;
      continue;
    }
    ASSERT_TRUE(expected.contains(key)) << key;
    ASSERT_TRUE(named.tensor.grad().defined()) << key;
    const auto want = reference(key);
    EXPECT_TRUE(torch::allclose(named.tensor.grad(), want, 1e-3, 1e-4 * want.abs().max().item<double>())) << key;
    ++compared;
  }
  EXPECT_EQ(compared, reference_gradients);
  // res3-res5's 42 convolutions, the FPN's 8, the RPN's 3, the box head's 4 and the mask head's 6 layers.
  EXPECT_EQ(compared, 84);
  fs::remove_all(dir);
}

TEST(MaskRcnnModel, LoadsTorchvisionResNetWeightsConvertedByTheScript) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_maskrcnn_backbone_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // torchvision's ResNet-50 layout with one bottleneck per stage (the converter takes any bottleneck ResNet), so
  // the test stays fast; the body's names and widths are ResNet-50's. Batch-norm statistics are made non-trivial.
  ASSERT_TRUE(testing::succeeded(testing::run_python(
      "-c \"import torch, torchvision; from torchvision.models.resnet import ResNet, Bottleneck; "
      "torch.manual_seed(1); m = ResNet(Bottleneck, [1, 1, 1, 1]); "
      "[b.running_var.uniform_(0.5, 2) for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d)]; "
      "m.bn1.running_var.fill_(1); torch.save(m.state_dict(), '" + (dir / "resnet.pth").string() + "')\"")));
  ASSERT_TRUE(testing::succeeded(testing::run_python_script(
      TRAINBENCH_CONVERT_SCRIPT, (dir / "resnet.pth").string() + " " + (dir / "body.pt").string())));
  MaskRcnn model(small_options().body_widths({64, 128, 256, 512}).backbone_weights(BackboneWeights::kTorchvision));
  model->load_backbone((dir / "body.pt").string());
  // torchvision's ResNet-50 strides each stage in the 3x3 convolution (and the projection).
  const auto& first_res3 = *model->body->layer2[0]->as<Bottleneck>();
  EXPECT_EQ(c10::IntArrayRef(first_res3.conv1->options.stride()).vec(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(c10::IntArrayRef(first_res3.conv2->options.stride()).vec(), (std::vector<int64_t>{2, 2}));
  const auto levels = model->features(torch::zeros({1, 3, 64, 64}));
  for (size_t level = 0; level < levels.size(); ++level)
    EXPECT_EQ(levels[level].size(2), 64 / MaskRcnnOptions::strides()[level]) << "P" << level + 2;
  const auto converted = load_dict(dir / "body.pt");
  for (const char* name : {"conv1.weight", "bn1.running_var", "layer3.0.conv2.weight", "layer4.0.downsample.1.bias"}) {
    torch::Tensor value;
    for (const auto& item : model->body->named_parameters())
      if (item.key() == name) value = item.value();
    for (const auto& item : model->body->named_buffers())
      if (item.key() == name) value = item.value();
    ASSERT_TRUE(value.defined()) << name;
    EXPECT_TRUE(torch::equal(value, converted.at(name).toTensor())) << name;
  }
  // The converter folds torchvision's eps into the variance the frozen batch norm divides by.
  EXPECT_TRUE(torch::allclose(converted.at("bn1.running_var").toTensor(), torch::full({64}, 1 + 1e-5), 0, 1e-7));
  MaskRcnn narrow(small_options().backbone_weights(BackboneWeights::kTorchvision));
  EXPECT_THROW(narrow->load_backbone((dir / "body.pt").string()), Error);  // shapes differ: named, not copied
  fs::remove_all(dir);
}

// Issue 26 (M1): Detectron's Caffe2 pickle of MSRA's R-50 (the reference's catalog://ImageNetPretrained/MSRA/R-50),
// here a small body with two blocks in res3, so that block indices are read too.
TEST(MaskRcnnModel, LoadsMsraCaffe2WeightsUnderTheReferencesNames) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_maskrcnn_msra_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string pickle = (dir / "R-50.pkl").string(), renamed = (dir / "renamed.pt").string();
  ASSERT_TRUE(testing::succeeded(
      testing::run_python_script(TRAINBENCH_MSRA_WEIGHTS_SCRIPT, pickle + " " + renamed + " 8,16,32,64 1,2,1,1")));
  MaskRcnn model(small_options().blocks_per_stage({1, 2, 1, 1}));
  model->load_backbone(pickle);
  const auto expected = load_dict(renamed);
  size_t compared = 0;
  for (const auto& [name, tensor] : module_state(*model->body)) {
    if (name.find("running_mean") != std::string::npos) {
      EXPECT_TRUE(torch::equal(tensor, torch::zeros_like(tensor))) << name;  // Caffe2's affine channel: no statistics
    } else if (name.find("running_var") != std::string::npos) {
      EXPECT_TRUE(torch::equal(tensor, torch::ones_like(tensor))) << name;
    } else {
      ASSERT_TRUE(expected.contains(name)) << name;
      EXPECT_TRUE(torch::equal(tensor, expected.at(name).toTensor())) << name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, expected.size());
  // MSRA's weights stride each stage in the first block's 1x1 convolution (STRIDE_IN_1X1).
  const auto& first_res3 = *model->body->layer2[0]->as<Bottleneck>();
  EXPECT_EQ(c10::IntArrayRef(first_res3.conv1->options.stride()).vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c10::IntArrayRef(first_res3.conv2->options.stride()).vec(), (std::vector<int64_t>{1, 1}));

  MaskRcnn shallower(small_options());
  EXPECT_EQ(testing::error_message([&] { shallower->load_backbone(pickle); }),
            pickle + ": holds 'res3_1_branch2a_w', a block the body (blocks_per_stage [1, 1, 1, 1]) does not have");
  MaskRcnn deeper(small_options().blocks_per_stage({1, 3, 1, 1}));
  EXPECT_EQ(testing::error_message([&] { deeper->load_backbone(pickle); }),
            pickle + ": has no array 'res3_2_branch2a_w' (the body's layer2.2.conv1.weight): expected Detectron's MSRA "
                     "R-50.pkl (docs/maskrcnn.md)");
  MaskRcnn wider(small_options().body_widths({16, 16, 32, 64}).blocks_per_stage({1, 2, 1, 1}));
  EXPECT_EQ(testing::error_message([&] { wider->load_backbone(pickle); }),
            pickle + ": conv1_w: has shape [8, 3, 7, 7], the body's conv1.weight is [16, 3, 7, 7]");
  EXPECT_EQ(testing::error_message([&] { model->load_backbone(renamed); }).rfind(renamed + ": not a pickle of numpy arrays", 0),
            0u);  // a torch.save file is not MSRA's
  fs::remove_all(dir);
}

TEST(MaskRcnnQualityGate, TinyPresetReachesBothTargets) {
  const testing::QualityGateRun gate("maskrcnn", 1234);
  // The weights source the run's pixels and strides follow, in the log (issue 26).
  std::ifstream log(gate.data_dir().parent_path() / "results" / "result_0.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(R"("key": "trainbench_backbone_weights_source", "value": "msra")"), std::string::npos);
}

}  // namespace
}  // namespace trainbench::maskrcnn
