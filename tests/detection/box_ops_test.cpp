// The LibTorch box ops: IoU, conversions, clipping and box coding by hand; NMS and batched NMS against
// torchvision.ops (Debian's python3-torchvision) on a few hundred overlapping boxes of several classes.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "detection/box_ops.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"

namespace trainbench::detection {
namespace {

namespace fs = std::filesystem;

TEST(DetectionBoxOps, IouConversionsAndClipping) {
  const auto a = torch::tensor({0.0f, 0.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f}).view({2, 4});
  const auto b = torch::tensor({1.0f, 1.0f, 3.0f, 3.0f}).view({1, 4});
  const auto iou = box_iou(a, b);
  EXPECT_FLOAT_EQ(iou[0][0].item<float>(), 1.0f / 7.0f);
  EXPECT_FLOAT_EQ(iou[1][0].item<float>(), 0.0f);  // an empty box overlaps nothing
  EXPECT_FLOAT_EQ(box_iou(a.narrow(0, 1, 1), a.narrow(0, 1, 1))[0][0].item<float>(), 0.0f);  // no 0/0
  const auto xywh = ltrb_to_xywh(b);
  EXPECT_TRUE(torch::equal(xywh, torch::tensor({2.0f, 2.0f, 2.0f, 2.0f}).view({1, 4})));
  EXPECT_TRUE(torch::equal(xywh_to_ltrb(xywh), b));
  EXPECT_TRUE(torch::equal(clip_boxes(torch::tensor({-1.0f, 2.0f, 7.0f, 9.0f}).view({1, 4}), 5, 8),
                           torch::tensor({0.0f, 2.0f, 5.0f, 8.0f}).view({1, 4})));
}

TEST(DetectionBoxOps, EncodeDecodeRoundTripWithSsdVariances) {
  torch::manual_seed(2);
  const auto anchors = torch::cat({torch::rand({50, 2}), 0.05 + torch::rand({50, 2}) * 0.5}, 1);
  const auto boxes = torch::cat({torch::rand({50, 2}), 0.05 + torch::rand({50, 2}) * 0.5}, 1);
  const auto offsets = encode_boxes(boxes, anchors);
  // By hand for the first pair: 10 (c - c_a) / w_a and 5 log(w / w_a).
  EXPECT_NEAR(offsets[0][0].item<double>(), 10 * (boxes[0][0] - anchors[0][0]).item<double>() / anchors[0][2].item<double>(), 1e-4);
  EXPECT_NEAR(offsets[0][3].item<double>(), 5 * std::log(boxes[0][3].item<double>() / anchors[0][3].item<double>()), 1e-4);
  EXPECT_TRUE(torch::allclose(decode_boxes(offsets, anchors), boxes, 1e-5, 1e-6));
  // A batch of boxes against one set of anchors.
  EXPECT_TRUE(torch::allclose(decode_boxes(encode_boxes(boxes.unsqueeze(0).repeat({3, 1, 1}), anchors), anchors)[2], boxes, 1e-5, 1e-6));
}

TEST(DetectionBoxOps, NmsMatchesTorchvision) {
  torch::manual_seed(7);
  const int64_t count = 300;
  const auto corner = torch::rand({count, 2}) * 80;
  const auto boxes = torch::cat({corner, corner + 5 + torch::rand({count, 2}) * 30}, 1);
  // Distinct scores: torchvision's unstable sort leaves the order of ties open.
  const auto scores = torch::randperm(count).to(torch::kFloat32) / count;
  const auto classes = torch::randint(0, 4, {count}, torch::kInt64);

  const fs::path dir = fs::temp_directory_path() / ("trainbench_nms_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  c10::Dict<std::string, torch::Tensor> inputs;
  inputs.insert("boxes", boxes);
  inputs.insert("scores", scores);
  inputs.insert("classes", classes);
  testing::save_dict(inputs, dir / "inputs.pt");
  const testing::PythonRun run = testing::run_python_script(
      TRAINBENCH_NMS_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string());
  ASSERT_TRUE(testing::succeeded(run)) << "is python3-torchvision installed?";
  const auto expected = testing::load_dict(dir / "expected.pt");
  fs::remove_all(dir);

  EXPECT_TRUE(torch::allclose(box_iou(boxes, boxes), expected.at("iou").toTensor(), 1e-6, 1e-7));
  for (const char* threshold : {"0.3", "0.5", "0.7"}) {
    const double value = std::stod(threshold);
    const auto kept = nms(boxes, scores, value);
    const auto reference = expected.at(std::string("nms") + threshold).toTensor();
    EXPECT_GT(kept.numel(), 10);
    EXPECT_LT(kept.numel(), count);
    EXPECT_TRUE(torch::equal(kept, reference)) << "threshold " << threshold;
    EXPECT_TRUE(torch::equal(batched_nms(boxes, scores, classes, value), expected.at(std::string("batched") + threshold).toTensor()))
        << "threshold " << threshold;
  }
  EXPECT_EQ(nms(boxes.narrow(0, 0, 0), scores.narrow(0, 0, 0), 0.5).numel(), 0);
}

// The device path's rounds (audit M4), run here on the CPU: the same kept boxes as the greedy walk on random
// boxes at three thresholds, and a chain of N boxes each suppressing the next, which needs about N rounds.
TEST(DetectionBoxOps, NmsInRoundsKeepsWhatTheGreedyWalkKeeps) {
  torch::manual_seed(9);
  const int64_t count = 400;
  const auto corner = torch::rand({count, 2}) * 60;
  const auto boxes = torch::cat({corner, corner + 5 + torch::rand({count, 2}) * 30}, 1);
  const auto scores = torch::rand({count});
  const auto order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true));
  const auto sorted = boxes.index_select(0, order);
  for (const double threshold : {0.3, 0.5, 0.7}) {
    const torch::Tensor keep = greedy_keep_in_rounds(box_iou(sorted, sorted) > threshold, count + 1);
    ASSERT_TRUE(keep.defined());
    EXPECT_TRUE(torch::equal(order.masked_select(keep), nms(boxes, scores, threshold))) << threshold;
  }
  // Boxes 0, 1, 2, ... each overlapping only its neighbours: greedy keeps the even ones.
  const int64_t chain = 20;
  const auto left = torch::arange(chain, torch::kFloat32) * 6;
  const auto line = torch::stack({left, torch::zeros({chain}), left + 10, torch::full({chain}, 10.0f)}, 1);
  const auto suppresses = box_iou(line, line) > 0.2;
  const torch::Tensor settled = greedy_keep_in_rounds(suppresses, chain + 1);
  ASSERT_TRUE(settled.defined());
  EXPECT_TRUE(torch::equal(settled, torch::arange(chain) % 2 == 0));
  EXPECT_FALSE(greedy_keep_in_rounds(suppresses, 3).defined()) << "a long chain does not settle in 3 rounds";
}

}  // namespace
}  // namespace trainbench::detection
