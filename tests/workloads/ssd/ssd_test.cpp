// SSD: the default boxes, matching and box coding, one training step of SSD300 and the evaluation decode against
// the v1.1 reference's own SSD300, boxes, matching, loss and decoding under python3-torch + torchvision
// (ssd_reference.py), and the quality gate (the tiny preset through the harness, its log reviewed).
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/accumulation.h"
#include "detection/box_ops.h"
#include "support/python_script.h"
#include "support/quality_gate.h"
#include "support/rules_tensors.h"
#include "support/torch_pickle.h"
#include "support/typed_settings.h"
#include "support/workload_refusal.h"
#include "util/error.h"
#include "workloads/ssd/model.h"
#include "workloads/ssd/settings.h"

namespace trainbench::ssd {
namespace {

namespace fs = std::filesystem;

using testing::load_dict;
using testing::save_dict;

// The tiny preset's geometry at 75 px: levels 10, 5, 3, 1.
detection::DefaultBoxGeometry geometry75() {
  return {75, {10, 5, 3, 1}, {8, 16, 25, 75}, {11.25, 24.75, 38.25, 51.75, 65.25}, {{2}, {2, 3}, {2}, {2}}};
}

TEST(SsdModel, FeatureSizesAndBoxCountsFollowTheInputSize) {
  EXPECT_EQ(feature_sizes(300), (std::vector<int>{38, 19, 10, 5, 3, 1}));
  EXPECT_EQ(feature_sizes(150), (std::vector<int>{19, 10, 5, 3, 1}));
  EXPECT_EQ(feature_sizes(75), (std::vector<int>{10, 5, 3, 1}));
  EXPECT_EQ(detection::ssd300_geometry().total_boxes(), 8732);
  EXPECT_EQ(geometry75().total_boxes(), 590);
  Ssd model(SsdOptions().image_size(75).blocks_per_stage({1, 1, 1}).width_divisor(8).num_classes(4).geometry(geometry75()));
  const auto [locations, scores] = model->forward(torch::zeros({2, 3, 75, 75}));
  EXPECT_EQ(locations.sizes(), (std::vector<int64_t>{2, 4, 590}));
  EXPECT_EQ(scores.sizes(), (std::vector<int64_t>{2, 4, 590}));
  EXPECT_THROW(Ssd(SsdOptions().image_size(64)), Error);
  // The reference model's 119 tensor names of the rules (87 backbone, 20 extra blocks, 12 predictors).
  Ssd reference(SsdOptions{});
  const auto names = reference->mlperf_tensor_names();
  EXPECT_EQ(names.size(), 119u);
  EXPECT_EQ(names.front(), "ssd0_resnetmlperf0_conv0_weight");
  EXPECT_EQ(names[3 + 3 * 6 + 3 * 8], "ssd0_resnetmlperf0_stage2_conv8_weight");
  EXPECT_EQ(names.back(), "ssd0_convpredictor5_conv0_bias");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), testing::rules_tensor_names("closed_ssd"));
}

// Issue 32: what no range of settings.json can judge is refused when the workload is built, before the log
// opens, naming the setting and its value.
TEST(SsdWorkload, RefusesGeometriesAndLoaderThreadsItCannotRun) {
  const auto refusal = [](const std::string& assignment) {
    return testing::construction_error("ssd", "tiny", {assignment});
  };
  EXPECT_EQ(refusal("width_divisor=3"),
            "ssd/tiny: width_divisor: expected a divisor of every channel count of the reference model (64, 128, 256, "
            "512): 1, 2, 4, 8, 16, 32 or 64, got 3");
  EXPECT_EQ(refusal("image_size=200"), "image_size 200: gives a 25 px backbone output; SSD's extra blocks need 38, 19 "
                                       "or 10 (e.g. 300, 150 or 75 px input)");
  // 150 px has five feature levels; the tiny preset's default boxes describe four.
  EXPECT_EQ(refusal("image_size=150"),
            "ssd/tiny: default boxes: expected one step and one aspect-ratio list per feature level and one scale more "
            "(5 levels; got 4 steps, 4 aspect-ratio lists, 5 scales)");
  EXPECT_EQ(refusal("loader_threads=1000").rfind("ssd/tiny: loader_threads: expected at most ", 0), 0u);
  EXPECT_EQ(testing::construction_error("ssd", "tiny", {}), "(no Error thrown)");
}

TEST(SsdSettings, TheStructReadsEverySettingThatHasARule) {
  testing::expect_settings_struct_matches_rules<Settings>("ssd");
}

TEST(SsdModel, MatchedBoxesSurviveEncodeAndDecode) {
  torch::manual_seed(3);
  const auto xywh = torch::from_blob(detection::default_boxes_xywh(geometry75()).data(), {590, 4}, torch::kFloat32).clone();
  const auto ltrb = detection::xywh_to_ltrb(xywh);
  const auto corner = torch::rand({5, 2}) * 0.6;
  const auto truth = torch::cat({corner, corner + 0.1 + torch::rand({5, 2}) * 0.3}, 1);
  const auto [matched, labels] = match(truth, torch::arange(1, 6), ltrb, xywh);
  for (int64_t k = 0; k < 5; ++k) EXPECT_TRUE((labels == k + 1).any().item<bool>()) << "ground truth " << k << " unmatched";
  const auto offsets = detection::encode_boxes(matched, xywh);
  EXPECT_TRUE(torch::allclose(detection::decode_boxes(offsets, xywh), matched, 1e-5, 1e-6));
  // Positives decode back to their ground truth exactly as given in ltrb.
  const auto positive = labels > 0;
  const auto decoded = detection::xywh_to_ltrb(detection::decode_boxes(offsets, xywh)).index({positive});
  EXPECT_TRUE(torch::allclose(decoded, truth.index({labels.index({positive}) - 1}), 1e-5, 1e-6));
}

// The reference's own SSD300 (ResNet-34 body, 81 classes, 300 px): the reference preset's model at full size.
TEST(SsdParity, OneStepOfSsd300AndTheDecodeMatchTheReferencesOwnCode) {
  torch::manual_seed(11);
  Ssd model(SsdOptions{});
  model->train();
  const int64_t batch = 2;
  const auto images = torch::randn({batch, 3, 300, 300});
  // Image 0: two objects and a large one; image 1: three, two of them overlapping.
  const auto boxes = torch::tensor({0.1f, 0.1f, 0.4f, 0.5f, 0.5f, 0.2f, 0.9f, 0.6f, 0.05f, 0.1f, 0.95f, 0.9f, 0.2f, 0.2f,
                                    0.5f, 0.5f, 0.3f, 0.3f, 0.6f, 0.6f, 0.7f, 0.1f, 0.8f, 0.3f})
                         .view({6, 4});
  const auto labels = torch::tensor({1, 37, 80, 5, 5, 62}, torch::kInt64);
  const std::vector<int64_t> offsets{0, 3, 6};
  const double lr = 0.05, momentum = 0.9, weight_decay = 5e-4;

  const fs::path dir = fs::temp_directory_path() / ("trainbench_ssd_parity_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_state_dict(official_state(model), (dir / "initial.pt").string());
  c10::Dict<std::string, torch::Tensor> inputs;
  inputs.insert("images", images);
  inputs.insert("boxes", boxes);
  inputs.insert("labels", labels);
  inputs.insert("object_offsets", torch::tensor(offsets));
  inputs.insert("setting.lr", torch::tensor(lr, torch::kFloat64));
  inputs.insert("setting.momentum", torch::tensor(momentum, torch::kFloat64));
  inputs.insert("setting.weight_decay", torch::tensor(weight_decay, torch::kFloat64));
  // A confident, peaked output for the decode comparison: many boxes above the score threshold, overlapping.
  const auto decode_locations = torch::randn({4, 8732}) * 0.5;
  const auto decode_scores = torch::randn({81, 8732}) * 3;
  inputs.insert("decode.locations", decode_locations);
  inputs.insert("decode.scores", decode_scores);
  save_dict(inputs, dir / "inputs.pt");

  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_SSD_REFERENCE_SCRIPT,
      (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string() + " " + TRAINBENCH_REFERENCE_CODE_DIR);
  if (run.missing_reference_code()) GTEST_SKIP() << "no v1.1 reference code at " << TRAINBENCH_REFERENCE_CODE_DIR;
  ASSERT_TRUE(testing::succeeded(run)) << "are python3-torch and python3-torchvision installed?";
  const auto expected = load_dict(dir / "expected.pt");
  const auto reference = [&](const std::string& key) { return expected.at(key).toTensor(); };

  // dboxes300_coco's 8732 boxes, from the model and from the geometry alone.
  ASSERT_EQ(reference("default_boxes300").size(0), 8732);
  EXPECT_TRUE(torch::allclose(model->default_boxes_xywh(), reference("default_boxes300"), 0, 1e-7));
  const auto boxes300 = detection::default_boxes_xywh(detection::ssd300_geometry());
  EXPECT_TRUE(torch::allclose(torch::from_blob(const_cast<float*>(boxes300.data()), {8732, 4}), reference("default_boxes300"), 0, 1e-7));

  std::vector<torch::Tensor> matched_boxes, matched_labels;
  for (int64_t i = 0; i < batch; ++i) {
    const auto [matched, matched_label] = match(boxes.slice(0, offsets[i], offsets[i + 1]), labels.slice(0, offsets[i], offsets[i + 1]),
                                                model->default_boxes_ltrb(), model->default_boxes_xywh());
    matched_boxes.push_back(matched);
    matched_labels.push_back(matched_label);
  }
  const auto target_boxes = torch::stack(matched_boxes), target_labels = torch::stack(matched_labels);
  EXPECT_TRUE(torch::equal(target_labels, reference("matched_labels")));
  EXPECT_TRUE(torch::allclose(target_boxes, reference("matched_boxes"), 1e-6, 1e-7));

  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
  optimizer.zero_grad();
  const auto [locations, scores] = model->forward(images);
  const auto loss = ssd_loss(locations, scores, target_boxes, target_labels, model->default_boxes_xywh());
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), reference("loss").item<double>(), 1e-4 * std::abs(reference("loss").item<double>()));
  int gradients = 0;
  for (const NamedTensor& named : official_state(model)) {
    if (!named.tensor.requires_grad()) continue;  // batch-norm statistics
    const auto official = reference("grad." + named.name);  // 1e-4 of the tensor's largest entry
    EXPECT_TRUE(torch::allclose(named.tensor.grad(), official, 1e-4, 1e-4 * official.abs().max().item<double>()))
        << "gradient of " << named.name;
    ++gradients;
  }
  optimizer.step();
  int compared = 0;
  for (const NamedTensor& named : official_state(model)) {
    EXPECT_TRUE(torch::allclose(named.tensor.to(torch::kFloat64), reference("state." + named.name).to(torch::kFloat64), 1e-4, 1e-5))
        << named.name;
    ++compared;
  }
  // Every tensor of the reference's state_dict, every parameter's gradient.
  int reference_state = 0, reference_gradients = 0;
  for (const auto& entry : expected) {
    reference_state += entry.key().toStringRef().rfind("state.", 0) == 0;
    reference_gradients += entry.key().toStringRef().rfind("grad.", 0) == 0;
  }
  EXPECT_EQ(compared, reference_state);
  EXPECT_EQ(gradients, reference_gradients);

  const ImageDetections found = decode(decode_locations, decode_scores, model->default_boxes_xywh(), DecodeOptions{});
  ASSERT_GT(found.scores.numel(), 10);
  ASSERT_EQ(found.scores.numel(), reference("decoded_scores").numel());
  // Same detections; the reference lists them by increasing score, ours by decreasing.
  const auto order = std::get<1>(reference("decoded_scores").sort(/*stable=*/true, 0, /*descending=*/true));
  EXPECT_TRUE(torch::allclose(found.scores, reference("decoded_scores").index_select(0, order), 1e-6, 1e-7));
  EXPECT_TRUE(torch::equal(found.labels, reference("decoded_labels").index_select(0, order)));
  EXPECT_TRUE(torch::allclose(found.boxes_ltrb, reference("decoded_boxes").index_select(0, order), 1e-5, 1e-6));
  fs::remove_all(dir);
}

// torchvision's own file, as resnet34-333f7ec4.pth is (a legacy, pre-zip torch.save of the OrderedDict with
// layer4 and fc), loads as it is; Python's plain-dict copy of it is what the backbone must hold.
TEST(SsdModel, LoadsTorchvisionsResNet34FileAsItIs) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_ssd_backbone_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_TRUE(testing::succeeded(testing::run_python(
      "-c \"import sys, torch, torchvision; torch.manual_seed(1); state = torchvision.models.resnet34().state_dict(); "
      "torch.save(state, sys.argv[1], _use_new_zipfile_serialization=False); torch.save(dict(state), sys.argv[2])\" " +
      (dir / "resnet34.pth").string() + " " + (dir / "expected.pt").string())));
  Ssd model(SsdOptions{});
  model->load_backbone((dir / "resnet34.pth").string());
  const auto expected = load_dict(dir / "expected.pt");
  for (const char* name : {"conv1.weight", "bn1.running_var", "layer3.5.bn2.bias", "layer2.0.downsample.0.weight"}) {
    torch::Tensor value;
    for (const auto& item : model->backbone->named_parameters())
      if (item.key() == name) value = item.value();
    for (const auto& item : model->backbone->named_buffers())
      if (item.key() == name) value = item.value();
    ASSERT_TRUE(value.defined()) << name;
    EXPECT_TRUE(torch::equal(value, expected.at(name).toTensor())) << name;
  }
  Ssd narrow(SsdOptions().width_divisor(4));
  EXPECT_THROW(narrow->load_backbone((dir / "resnet34.pth").string()), Error);  // shapes differ: named, not copied
  fs::remove_all(dir);
}

TEST(SsdQualityGate, TinyPresetReachesItsTarget) { const testing::QualityGateRun gate("ssd", 1234); }

// The reference's loss is a mean over images of each image's loss (--batch-splits chunks the batch the same
// way); with batch norm's statistics fixed (eval mode), K micro-batches give the full batch's gradient.
TEST(SsdModel, AccumulatedMicroBatchesGiveTheFullBatchsGradientWithBatchNormStatisticsFixed) {
  torch::manual_seed(6);
  Ssd model(SsdOptions().image_size(75).blocks_per_stage({1, 1, 1}).width_divisor(8).num_classes(4).geometry(geometry75()));
  model->to(torch::kFloat64);
  model->eval();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  const auto images = torch::randn({4, 3, 75, 75}, torch::kFloat64);
  std::vector<torch::Tensor> boxes, labels;
  for (int64_t i = 0; i < 4; ++i) {
    const auto truth = torch::tensor({{0.1 + 0.1 * i, 0.2, 0.5, 0.7 - 0.05 * i}, {0.5, 0.1, 0.9, 0.4}}, torch::kFloat64);
    auto [matched, matched_labels] = match(truth, torch::tensor({1 + i % 3, int64_t{2}}, torch::kInt64), model->default_boxes_ltrb(),
                                           model->default_boxes_xywh());
    boxes.push_back(matched);
    labels.push_back(matched_labels);
  }
  const auto matched_boxes = torch::stack(boxes), matched_labels = torch::stack(labels);
  testing::expect_accumulation_matches_full_batch(
      *model, [&] { return training_step(model, optimizer, images, matched_boxes, matched_labels, 0.01); });
}

}  // namespace
}  // namespace trainbench::ssd
