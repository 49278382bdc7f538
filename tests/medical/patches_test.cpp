// Training patches (connected components, foreground crops, flips) and the sliding-window geometry and
// Gaussian importance patch of the U-Net3D reference; the patch against an independent numpy computation.
#include "medical/patches.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "medical/python_reference.h"

namespace trainbench::medical {
namespace {

size_t at(const Shape3& shape, int64_t i, int64_t j, int64_t k) { return static_cast<size_t>((i * shape[1] + j) * shape[2] + k); }

TEST(Patches, ForegroundBoxesUseSixConnectivityAndKeepTheTwoLargest) {
  const Shape3 shape{10, 10, 10};
  std::vector<uint8_t> label(static_cast<size_t>(voxel_count(shape)));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) label[at(shape, i, j, 0)] = 1;  // 3x3x1 block
  label[at(shape, 3, 3, 1)] = 1;                                     // touches the block only diagonally
  for (int64_t k = 5; k < 10; ++k) label[at(shape, 8, 8, k)] = 1;    // a 1x1x5 line
  label[at(shape, 5, 5, 5)] = 2;
  const ForegroundBoxes boxes = foreground_boxes(label, shape);
  ASSERT_EQ(boxes.classes, (std::vector<uint8_t>{1, 2}));
  ASSERT_EQ(boxes.largest[0].size(), 2u) << "three components of class 1, the two largest kept";
  EXPECT_EQ(boxes.largest[0][0].volume(), 5);
  EXPECT_EQ(boxes.largest[0][1].volume(), 9);
  EXPECT_EQ(boxes.largest[0][1].high, (std::array<int64_t, 3>{3, 3, 1}));
  EXPECT_EQ(boxes.largest[1][0].low, (std::array<int64_t, 3>{5, 5, 5}));
}

TEST(Patches, ForegroundCropsHoldTheComponentAndImageFollowsLabel) {
  const Shape3 shape{40, 30, 50}, patch{16, 16, 16};
  std::vector<uint8_t> label(static_cast<size_t>(voxel_count(shape)));
  std::vector<float> image(label.size());
  for (int64_t i = 30; i < 34; ++i)
    for (int64_t j = 2; j < 5; ++j)
      for (int64_t k = 44; k < 48; ++k) label[at(shape, i, j, k)] = 2;
  for (size_t v = 0; v < image.size(); ++v) image[v] = static_cast<float>(label[v]) * 10.0f;
  const ForegroundBoxes boxes = foreground_boxes(label, shape);
  data::Rng rng(7);
  std::vector<float> image_patch(static_cast<size_t>(voxel_count(patch)));
  std::vector<uint8_t> label_patch(image_patch.size());
  int brightened = 0;
  const int draws = 200;
  for (int draw = 0; draw < draws; ++draw) {
    sample_training_patch(image.data(), label.data(), shape, boxes, {patch, 1.0}, rng, image_patch.data(), label_patch.data());
    int64_t tumour = 0;
    bool follows = true;
    for (size_t v = 0; v < label_patch.size(); ++v) {
      tumour += label_patch[v] == 2;
      follows &= label_patch[v] == 2 ? image_patch[v] > 15 : std::abs(image_patch[v]) < 1;
    }
    EXPECT_EQ(tumour, 4 * 3 * 4) << "draw " << draw << ": a foreground crop holds the whole component";
    EXPECT_TRUE(follows) << "draw " << draw << ": image and label cropped and flipped alike";
    brightened += *std::max_element(image_patch.begin(), image_patch.end()) > 30;  // 20 x (1.7 .. 2.3)
  }
  EXPECT_GT(brightened, draws / 40) << "brightness applies with probability 0.1";
  EXPECT_LT(brightened, draws / 5);
}

TEST(Patches, SlidingWindowPlanCropsAndPadsAsTheReference) {
  // 130: remainder 2 < 32 is cropped; 100: padded to 128; 200: 200 % 64 = 8 cropped to 192, windows at 0, 64.
  const WindowPlan plan = plan_sliding_windows({130, 100, 200}, {128, 128, 128}, 0.5);
  EXPECT_EQ(plan.stride, (Shape3{64, 64, 64}));
  EXPECT_EQ(plan.crop_low, (Shape3{1, 0, 4}));
  EXPECT_EQ(plan.cropped, (Shape3{128, 100, 192}));
  EXPECT_EQ(plan.pad_low, (Shape3{0, 14, 0}));
  EXPECT_EQ(plan.padded, (Shape3{128, 128, 192}));
  ASSERT_EQ(plan.origins.size(), 2u);
  EXPECT_EQ(plan.origins[1], (std::array<int64_t, 3>{0, 0, 64}));
  // 170: remainder 42 >= 32 is kept and padded up to 192 (11 before, 11 after).
  const WindowPlan padded = plan_sliding_windows({170, 128, 128}, {128, 128, 128}, 0.5);
  EXPECT_EQ(padded.cropped[0], 170);
  EXPECT_EQ(padded.pad_low[0], 11);
  EXPECT_EQ(padded.padded[0], 192);
  // The stride the workload checks against the patch before a run: 16 x (1 - 0.95) truncates to 0 voxels.
  EXPECT_EQ(window_stride(16, 0.5), 8);
  EXPECT_EQ(window_stride(16, 0.95), 0);
}

TEST(Patches, GaussianImportanceMatchesNumpy) {
  const std::vector<float> weights = gaussian_importance({16, 12, 8});
  EXPECT_EQ(*std::max_element(weights.begin(), weights.end()), 1.0f);
  if (!testing::python_has("numpy")) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  const auto expected = testing::run_reference_json("gaussian 16 12 8").get<std::vector<float>>();
  ASSERT_EQ(expected.size(), weights.size());
  for (size_t v = 0; v < weights.size(); ++v) ASSERT_NEAR(weights[v], expected[v], 1e-6) << "at " << v;
}

}  // namespace
}  // namespace trainbench::medical
