// Mask R-CNN's operators. RoIAlign (forward and the features' gradient) against torchvision.ops.roi_align, and
// anchors, box coding and the mask paste against rcnn_reference.py's re-implementations of the reference's
// formulas, all in one python run; the matcher, sampler, level assignment, inclusive-pixel box helpers and mask
// targets against values worked out by hand and the COCO polygon rasteriser.
#include <unistd.h>

#include <filesystem>
#include <map>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "coco/mask.h"
#include "detection/rcnn_ops.h"
#include "detection/rcnn_targets.h"
#include "support/error_message.h"
#include "support/python_script.h"
#include "support/torch_pickle.h"

namespace trainbench::detection {
namespace {

namespace fs = std::filesystem;

torch::Tensor rows_of_four(std::vector<float> values) { return torch::tensor(values).view({-1, 4}); }
torch::Tensor indices(std::vector<int64_t> values) { return torch::tensor(values); }

// RoIAlign configurations: (spatial scale, pooled height, pooled width, sampling ratio, aligned).
const std::vector<std::array<double, 5>> kRoiConfigs = {
    {0.5, 7, 7, 2, 0},   // the reference's box head
    {0.5, 7, 7, 0, 0},   // adaptive sampling
    {0.25, 5, 4, 3, 0},  // non-square bins, 3x3 samples
    {0.5, 7, 7, 2, 1},   // aligned
    {0.5, 3, 3, 0, 1},   // aligned and adaptive: a zero-size RoI has no samples
    {1.0, 1, 1, 1, 0},   // one sample per RoI: the last boxes put it exactly on -1, on the size, and past it
};
const std::vector<double> kAnchorRatios = {0.5, 1.0, 2.0};
// (stride, size): the reference's five levels, then two of the mini preset's.
const std::vector<std::array<double, 2>> kAnchorLevels = {{4, 32}, {8, 64}, {16, 128}, {32, 256}, {64, 512},
                                                          {4, 8},  {64, 128}};
const std::vector<std::array<int64_t, 2>> kAnchorFeatureSizes = {{5, 7}, {3, 4}, {2, 2}, {1, 2}, {1, 1},
                                                                 {3, 2}, {1, 1}};

// The inputs of every comparison with python, and python's results: one python run (importing torch costs
// seconds of CPU), so one test checks them all.
struct ReferenceRun {
  c10::Dict<std::string, torch::Tensor> inputs;
  std::map<std::string, torch::Tensor> results;
  torch::Tensor input(const std::string& name) const { return inputs.at(name); }
  torch::Tensor expected(const std::string& name) const { return results.at(name); }
};

ReferenceRun run_reference() {
  ReferenceRun run;
  torch::manual_seed(11);
  run.inputs.insert("features", torch::randn({2, 3, 13, 17}));
  // Random RoIs over and around the 34 x 26 px image (scale 0.5), then hand-picked ones: the whole image, boxes
  // on and past every border, fully outside, zero-size, zero-width, tiny, and far larger than the image.
  const auto corner = torch::rand({20, 2}) * torch::tensor({44.0f, 34.0f}) - 6;
  const auto random_boxes = torch::cat({corner, corner + torch::rand({20, 2}) * 20}, 1);
  const auto special_boxes = rows_of_four({0, 0, 33, 25,    0, 0, 34, 26,    -4, -4, 3, 3,     30, 20, 40, 30,
                                           50, 50, 60, 60,  5, 5, 5, 5,      7, 3, 7, 9,       12.2f, 8.7f, 12.9f, 9.1f,
                                           -20, -20, 60, 50, -2.5f, 10, 1, 14,
                                           0, -2, 2, 0,     16, 12, 18, 14,  16.5f, 12.5f, 18.5f, 14.5f});
  const auto boxes = torch::cat({random_boxes, special_boxes});
  const auto batch = torch::randint(0, 2, {boxes.size(0), 1}).to(torch::kFloat32);
  run.inputs.insert("rois", torch::cat({batch, boxes}, 1));
  std::vector<double> configs;
  for (size_t i = 0; i < kRoiConfigs.size(); ++i) {
    configs.insert(configs.end(), kRoiConfigs[i].begin(), kRoiConfigs[i].end());
    run.inputs.insert("roi_grad_output." + std::to_string(i),
                   torch::randn({boxes.size(0), 3, static_cast<int64_t>(kRoiConfigs[i][1]),
                                 static_cast<int64_t>(kRoiConfigs[i][2])}));
  }
  run.inputs.insert("roi_configs", torch::tensor(configs, torch::kFloat64).view({-1, 5}));

  run.inputs.insert("anchor_ratios", torch::tensor(kAnchorRatios, torch::kFloat64));
  std::vector<double> levels;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < kAnchorLevels.size(); ++i) {
    levels.insert(levels.end(), kAnchorLevels[i].begin(), kAnchorLevels[i].end());
    sizes.insert(sizes.end(), kAnchorFeatureSizes[i].begin(), kAnchorFeatureSizes[i].end());
  }
  run.inputs.insert("anchor_levels", torch::tensor(levels, torch::kFloat64).view({-1, 2}));
  run.inputs.insert("anchor_feature_sizes", torch::tensor(sizes).view({-1, 2}));

  // Box coder: proposals and targets of 8 to 120 px (size ratios within the clamp, so encode and decode round
  // trip), deltas with some dw/dh past the clamp (log(1000/16) = 4.14 with weights 1; 20.7 with weights 5).
  const auto proposal_corner = torch::rand({64, 2}) * 200;
  run.inputs.insert("coder_proposals", torch::cat({proposal_corner, proposal_corner + 7 + torch::rand({64, 2}) * 112}, 1));
  const auto target_corner = proposal_corner + torch::randn({64, 2}) * 10;
  run.inputs.insert("coder_targets", torch::cat({target_corner, target_corner + 7 + torch::rand({64, 2}) * 112}, 1));
  auto deltas = torch::randn({64, 8});
  deltas.index_put_({torch::indexing::Slice(0, 8), torch::indexing::Slice(2, 4)}, 25.0f);
  run.inputs.insert("coder_deltas", deltas);

  // Paste: boxes inside, over the top-left and bottom-right borders, tiny, the whole image, and thin.
  run.inputs.insert("paste_masks", torch::rand({7, 28, 28}));
  run.inputs.insert("paste_boxes", rows_of_four({10.3f, 5.7f, 30.2f, 25.9f, -5, -3, 12, 9,    40, 30, 70, 52,
                                              20, 20, 20.5f, 21,     0, 0, 59, 49, 3, 10, 50, 12,
                                              33.5f, 1.25f, 58.75f, 47.5f}));
  run.inputs.insert("paste_image_size", torch::tensor({50, 60}));

  const fs::path dir = fs::temp_directory_path() / ("trainbench_rcnn_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  testing::save_dict(run.inputs, dir / "inputs.pt");
  const testing::PythonRun reference = testing::run_python_script(
      TRAINBENCH_RCNN_REFERENCE_SCRIPT, (dir / "inputs.pt").string() + " " + (dir / "expected.pt").string());
  if (reference.ok())
    for (const auto& entry : testing::load_dict(dir / "expected.pt"))
      run.results[entry.key().toStringRef()] = entry.value().toTensor();
  fs::remove_all(dir);
  testing::or_throw(reference);
  return run;
}

void check_roi_align(const ReferenceRun& run) {
  const auto rois = run.input("rois");
  for (size_t i = 0; i < kRoiConfigs.size(); ++i) {
    const auto& [scale, pooled_height, pooled_width, ratio, aligned] = kRoiConfigs[i];
    const auto features = run.input("features").clone().requires_grad_(true);
    const auto pooled = roi_align(features, rois, scale, static_cast<int64_t>(pooled_height),
                                  static_cast<int64_t>(pooled_width), static_cast<int64_t>(ratio), aligned != 0);
    (pooled * run.input("roi_grad_output." + std::to_string(i))).sum().backward();
    const auto name = std::to_string(i);
    EXPECT_TRUE(torch::allclose(pooled, run.expected("roi_forward." + name), 1e-5, 1e-6))
        << "config " << i << ": max difference " << (pooled - run.expected("roi_forward." + name)).abs().max().item<float>();
    EXPECT_TRUE(torch::allclose(features.grad(), run.expected("roi_grad." + name), 1e-5, 1e-5))
        << "config " << i << ": max difference " << (features.grad() - run.expected("roi_grad." + name)).abs().max().item<float>();
  }
  // Not vacuous: the RoI fully outside the features pools to zeros, the others do not.
  const auto pooled = roi_align(run.input("features"), rois, 0.5, 7, 7, 2);
  EXPECT_EQ(pooled[24].abs().max().item<float>(), 0.0f);
  EXPECT_GT(pooled[20].abs().min().item<float>(), 0.0f);
  // One sample at the centre: (1, -1) reads pixel (1, 0); (17, 13), on the 17 x 13 map's far edges, reads its last
  // pixel; (17.5, 13.5) is past them and reads nothing.
  const auto single = roi_align(run.input("features"), rois, 1.0, 1, 1, 1).flatten(1);
  const auto image = [&](int64_t roi) { return run.input("features")[rois[roi][0].item<int64_t>()]; };
  EXPECT_TRUE(torch::equal(single[30], image(30).index({torch::indexing::Slice(), 0, 1})));
  EXPECT_TRUE(torch::equal(single[31], image(31).index({torch::indexing::Slice(), 12, 16})));
  EXPECT_EQ(single[32].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(roi_align(run.input("features"), rois.narrow(0, 0, 0), 0.5, 7, 7, 2).sizes(), (std::vector<int64_t>{0, 3, 7, 7}));
}

void check_anchors(const ReferenceRun& run) {
  AnchorGeneratorOptions options;
  options.strides.clear();
  options.sizes.clear();
  options.aspect_ratios = kAnchorRatios;
  for (size_t level = 0; level < kAnchorLevels.size(); ++level) {
    const auto [stride, size] = kAnchorLevels[level];
    options.strides.push_back(static_cast<int64_t>(stride));
    options.sizes.push_back(size);
    EXPECT_TRUE(torch::equal(cell_anchors(static_cast<int64_t>(stride), size, kAnchorRatios),
                             run.expected("cell_anchors." + std::to_string(level))))
        << "level " << level;
  }
  const auto grid = grid_anchors(options, kAnchorFeatureSizes, torch::kCPU);
  ASSERT_EQ(grid.size(), kAnchorLevels.size());
  for (size_t level = 0; level < grid.size(); ++level)
    EXPECT_TRUE(torch::equal(grid[level], run.expected("grid_anchors." + std::to_string(level)))) << "level " << level;
  // py-faster-rcnn's stride-16 table (its docstring prints the same boxes 1-based), sizes 128, 256, 512.
  const auto table = rows_of_four({-84, -40, 99, 55,    -56, -56, 71, 71,    -36, -80, 51, 95,
                                   -176, -88, 191, 103, -120, -120, 135, 135, -80, -168, 95, 183,
                                   -360, -184, 375, 199, -248, -248, 263, 263, -168, -344, 183, 359});
  EXPECT_TRUE(torch::equal(torch::cat({cell_anchors(16, 128, kAnchorRatios), cell_anchors(16, 256, kAnchorRatios),
                                       cell_anchors(16, 512, kAnchorRatios)}),
                           table));
  EXPECT_THROW(grid_anchors(options, {{2, 2}}, torch::kCPU), Error);
}

void check_box_coder(const ReferenceRun& run) {
  const auto proposals = run.input("coder_proposals"), targets = run.input("coder_targets");
  for (const auto& [name, weights] : {std::pair<std::string, std::array<double, 4>>{"1111", {1, 1, 1, 1}},
                                      std::pair<std::string, std::array<double, 4>>{"101055", {10, 10, 5, 5}}}) {
    const DetectronBoxCoder coder{weights};
    const auto deltas = coder.encode(targets, proposals);
    EXPECT_TRUE(torch::allclose(deltas.to(torch::kFloat64), run.expected("encode." + name), 1e-4, 1e-4)) << name;
    const auto decoded = coder.decode(run.input("coder_deltas"), proposals);
    ASSERT_EQ(decoded.sizes(), (std::vector<int64_t>{64, 8}));
    EXPECT_TRUE(torch::allclose(decoded.to(torch::kFloat64), run.expected("decode." + name), 1e-4, 1e-2)) << name;
    EXPECT_TRUE(torch::allclose(coder.decode(deltas, proposals), targets, 1e-5, 1e-3)) << name;
  }
  // The clamp: dw of 25 decodes as log(1000/16), a width of 62.5 times the proposal's.
  const auto proposal = rows_of_four({0, 0, 9, 19});
  const auto wide = DetectronBoxCoder{}.decode(torch::tensor({0.0f, 0.0f, 25.0f, 0.0f}).view({1, 4}), proposal);
  EXPECT_NEAR((wide[0][2] - wide[0][0] + 1).item<float>(), 625.0f, 1e-2);
  EXPECT_NEAR((wide[0][3] - wide[0][1] + 1).item<float>(), 20.0f, 1e-4);
}

void check_paste(const ReferenceRun& run) {
  const auto [height, width] = std::make_pair(50, 60);
  const auto pasted = paste_masks(run.input("paste_masks"), run.input("paste_boxes"), height, width);
  ASSERT_EQ(pasted.sizes(), (std::vector<int64_t>{7, height, width}));
  ASSERT_EQ(pasted.scalar_type(), torch::kUInt8);
  EXPECT_TRUE(torch::equal(pasted, run.expected("pasted")))
      << (pasted != run.expected("pasted")).sum().item<int64_t>() << " pixels differ";
  EXPECT_GT(pasted.sum().item<int64_t>(), 1000);
  EXPECT_EQ(paste_masks(torch::ones({1, 28, 28}), rows_of_four({100, 100, 120, 120}), height, width).sum().item<int64_t>(), 0);
  EXPECT_THROW(paste_masks(run.input("paste_masks"), run.input("paste_boxes"), height, width, -1), Error);
}

TEST(RcnnOps, MatchTorchvisionAndTheReferenceFormulas) {
  const auto run = run_reference();
  {
    SCOPED_TRACE("roi_align forward and backward against torchvision.ops.roi_align");
    check_roi_align(run);
  }
  {
    SCOPED_TRACE("cell and grid anchors against generate_anchors.py");
    check_anchors(run);
  }
  {
    SCOPED_TRACE("box coder against the reference's BoxCoder");
    check_box_coder(run);
  }
  {
    SCOPED_TRACE("paste_masks against the reference's Masker");
    check_paste(run);
  }
}

TEST(RcnnBoxes, InclusiveIouClipAndMinSize) {
  const auto a = rows_of_four({0, 0, 9, 9, 3, 3, 3, 3});
  const auto b = rows_of_four({5, 5, 14, 14});
  const auto iou = box_iou_inclusive(a, b);
  EXPECT_FLOAT_EQ(iou[0][0].item<float>(), 25.0f / 175.0f);  // 5x5 pixels shared, 100 + 100 - 25
  EXPECT_FLOAT_EQ(iou[1][0].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(box_iou_inclusive(a, a)[1][1].item<float>(), 1.0f);  // a one-pixel box is 1x1, not empty
  EXPECT_TRUE(torch::equal(clip_boxes_inclusive(rows_of_four({-3, 2, 20, 30}), 10, 8), rows_of_four({0, 2, 9, 7})));
  const auto boxes = rows_of_four({0, 0, 0, 0, 0, 0, 4, 1, 2, 2, 1.5f, 8});
  EXPECT_TRUE(torch::equal(keep_boxes_of_min_size(boxes, 1), torch::tensor({0, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(keep_boxes_of_min_size(boxes, 2), torch::tensor({1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(keep_boxes_of_min_size(boxes, 0), torch::tensor({0, 1, 2}, torch::kInt64)));
}

TEST(RcnnAnchors, VisibilityWithStraddleThreshold) {
  const auto anchors = rows_of_four({-1, 0, 5, 5, 0, 0, 9, 7, 0, 0, 10, 7, 2, 2, 4, 8});
  const auto visible = [&](double threshold) { return visible_anchors(anchors, 10, 8, threshold).to(torch::kInt64); };
  EXPECT_TRUE(torch::equal(visible(0), torch::tensor({0, 1, 0, 0}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(visible(1), torch::tensor({1, 1, 1, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(visible(-1), torch::tensor({1, 1, 1, 1}, torch::kInt64)));
}

TEST(RcnnMatcher, ThresholdsTiesAndLowQualityMatches) {
  // Ground truths x predictions. Prediction 3 ties between both ground truths (the first wins, as max does);
  // ground truth 1's best IoU 0.65 is shared by predictions 1 and 4; ground truth 2's best (0.35) is prediction
  // 0, whose own best stays ground truth 0.
  const auto iou = torch::tensor({0.9f, 0.4f, 0.1f, 0.2f, 0.2f,
                                  0.1f, 0.65f, 0.25f, 0.2f, 0.65f,
                                  0.35f, 0.0f, 0.0f, 0.0f, 0.0f}).view({3, 5});
  EXPECT_TRUE(torch::equal(match_predictions(iou, 0.7, 0.3, false),
                           indices({0, kBetweenThresholds, kBelowLowThreshold, kBelowLowThreshold, kBetweenThresholds})));
  EXPECT_TRUE(torch::equal(match_predictions(iou, 0.7, 0.3, true),
                           indices({0, 1, kBelowLowThreshold, kBelowLowThreshold, 1})));
  // The box head's single threshold: IoU 0.5 is foreground, anything below background.
  EXPECT_TRUE(torch::equal(match_predictions(torch::tensor({0.5f, 0.49f}).view({1, 2}), 0.5, 0.5, false),
                           indices({0, kBelowLowThreshold})));
  // A ground truth that overlaps nothing ties every prediction at 0, so each takes its own best ground truth
  // whatever its IoU: the reference's set_low_quality_matches_ does the same.
  EXPECT_TRUE(torch::equal(match_predictions(torch::tensor({0.8f, 0.0f, 0.0f, 0.0f}).view({2, 2}), 0.7, 0.3, true),
                           torch::tensor({0, 0}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(match_predictions(torch::zeros({0, 3}), 0.7, 0.3, true),
                           torch::full({3}, kBelowLowThreshold, torch::kInt64)));
}

TEST(RcnnSampler, CountsAndDeterminism) {
  const auto labels_with = [](int64_t positives, int64_t negatives, int64_t ignored) {
    return torch::cat({torch::randint(1, 5, {positives}, torch::kInt64), torch::zeros({negatives}, torch::kInt64),
                       torch::full({ignored}, -1, torch::kInt64)})
        .index_select(0, torch::randperm(positives + negatives + ignored));
  };
  struct Case {
    int64_t positives, negatives, ignored, batch;
    double fraction;
    int64_t expected_positives, expected_negatives;
  };
  for (const auto& c : {Case{10, 300, 50, 256, 0.5, 10, 246}, Case{200, 300, 0, 256, 0.25, 64, 192},
                        Case{5, 3, 7, 256, 0.5, 5, 3}, Case{600, 20, 0, 512, 0.25, 128, 20}}) {
    const auto labels = labels_with(c.positives, c.negatives, c.ignored);
    const auto [positive, negative] = sample_positive_negative(labels, c.batch, c.fraction, at::detail::createCPUGenerator(3));
    ASSERT_EQ(positive.numel(), c.expected_positives);
    ASSERT_EQ(negative.numel(), c.expected_negatives);
    EXPECT_TRUE((labels.index_select(0, positive) >= 1).all().item<bool>());
    EXPECT_TRUE((labels.index_select(0, negative) == 0).all().item<bool>());
    EXPECT_EQ(std::get<0>(torch::_unique(torch::cat({positive, negative}))).numel(), positive.numel() + negative.numel());
    const auto again = sample_positive_negative(labels, c.batch, c.fraction, at::detail::createCPUGenerator(3));
    EXPECT_TRUE(torch::equal(again.first, positive) && torch::equal(again.second, negative));
  }
  // Another seed draws other anchors.
  const auto labels = labels_with(100, 1000, 0);
  EXPECT_FALSE(torch::equal(sample_positive_negative(labels, 256, 0.5, at::detail::createCPUGenerator(1)).second,
                            sample_positive_negative(labels, 256, 0.5, at::detail::createCPUGenerator(2)).second));
}

TEST(RcnnPooler, LevelsAndMultilevelRoiAlign) {
  // sqrt(area) with +1 sizes: 224 -> level 4, 112 -> 3, 448 -> 5, 896 -> 6 (clamped to 5), 11 -> -1 (clamped
  // to 2), 223 -> 3.99 -> 3.
  const auto boxes = rows_of_four({0, 0, 223, 223, 0, 0, 111, 111, 0, 0, 447, 447, 0, 0, 895, 895,
                                   0, 0, 10, 10, 10, 10, 232, 232});
  EXPECT_TRUE(torch::equal(roi_levels(boxes), torch::tensor({4, 3, 5, 5, 2, 3}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(roi_levels(boxes, 2, 6), torch::tensor({4, 3, 5, 6, 2, 3}, torch::kInt64)));
  const auto rois = torch::cat({torch::tensor({0.0f, 1.0f, 0.0f, 0.0f, 1.0f, 0.0f}).view({-1, 1}), boxes}, 1);
  EXPECT_TRUE(torch::equal(roi_levels(rois), roi_levels(boxes)));

  torch::manual_seed(5);
  std::vector<torch::Tensor> features;
  const std::vector<double> scales = {1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32};
  for (const int64_t size : {64, 32, 16, 8}) features.push_back(torch::randn({2, 2, size, size}).requires_grad_(true));
  const auto multilevel = multilevel_roi_align(features, rois, scales, 7, 2);
  ASSERT_EQ(multilevel.sizes(), (std::vector<int64_t>{6, 2, 7, 7}));
  const auto levels = roi_levels(rois);
  for (int64_t k = 0; k < rois.size(0); ++k) {
    const int64_t level = levels[k].item<int64_t>() - 2;
    EXPECT_TRUE(torch::allclose(multilevel[k], roi_align(features[level], rois.narrow(0, k, 1), scales[level], 7, 7, 2)[0]))
        << "roi " << k;
  }
  multilevel.sum().backward();
  for (const auto& level : features) EXPECT_GT(level.grad().abs().sum().item<float>(), 0.0f);  // each level has a RoI
  EXPECT_THROW(multilevel_roi_align(features, rois, {0.25}, 7, 2), Error);
}

// A mask target as a height-major grid, from the COCO rasteriser's column-major decode.
std::vector<uint8_t> row_major(const coco::Rle& rle) {
  const auto column_major = coco::decode(rle);
  std::vector<uint8_t> rows(column_major.size());
  for (uint32_t x = 0; x < rle.width; ++x)
    for (uint32_t y = 0; y < rle.height; ++y) rows[y * rle.width + x] = column_major[x * rle.height + y];
  return rows;
}

TEST(RcnnMaskTargets, PolygonsCroppedScaledAndRasterised) {
  const std::vector<std::vector<double>> square = {{10, 10, 24, 10, 24, 24, 10, 24}};
  // The square fills its own 14-px box: scaled by 2 to (0,0)-(28,28), every pixel.
  const float own_box[4] = {10, 10, 24, 24};
  const auto full = polygon_mask_target(square, own_box, 28);
  ASSERT_EQ(full.size(), 28u * 28u);
  EXPECT_EQ(std::count(full.begin(), full.end(), 1), 28 * 28);
  // A box twice as wide: x scaled by 1 and y by 2, the left 14 columns.
  const float wide_box[4] = {10, 10, 38, 24};
  const auto left = polygon_mask_target(square, wide_box, 28);
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) ASSERT_EQ(left[y * 28 + x], x < 14 ? 1 : 0) << x << "," << y;
  // The part left of the box is cut off: the square's right half fills the left half of the target.
  const float shifted_box[4] = {17, 10, 31, 24};
  EXPECT_EQ(polygon_mask_target(square, shifted_box, 28), left);
  // Boxes smaller than 1 px count as 1: a 0.5-px square in a 0.5-px box fills 14x14, not the whole 28x28.
  const float tiny_box[4] = {10, 10, 10.5f, 10.5f};
  const auto tiny = polygon_mask_target({{10, 10, 10.5, 10, 10.5, 10.5, 10, 10.5}}, tiny_box, 28);
  EXPECT_EQ(std::count(tiny.begin(), tiny.end(), 1), 14 * 14);
  // Two parts, a triangle and a square, are rasterised by COCO's polygon rule and merged.
  const auto merged = polygon_mask_target({{10, 10, 24, 10, 10, 24}, {20, 20, 24, 20, 24, 24, 20, 24}}, own_box, 28);
  const auto expected = coco::merge({coco::rle_from_polygon({0, 0, 28, 0, 0, 28}, 28, 28, "triangle"),
                                     coco::rle_from_polygon({20, 20, 28, 20, 28, 28, 20, 28}, 28, 28, "square")});
  EXPECT_EQ(merged, row_major(expected));
  EXPECT_EQ(std::count(merged.begin(), merged.end(), 1), coco::area(expected));
  EXPECT_NE(testing::error_message([&] { polygon_mask_target(square, own_box, 0); }).find("size"), std::string::npos);
}

// Under --precision bf16 the FPN's features arrive in bf16: RoIAlign pools them in fp32 (sparse products
// have no bf16 kernel) and returns bf16, with a gradient back to the bf16 features.
TEST(RcnnOps, RoiAlignOfBf16FeaturesPoolsInFp32AndReturnsBf16) {
  torch::manual_seed(21);
  const auto features = torch::randn({2, 3, 12, 10}).to(torch::kBFloat16).requires_grad_();
  const auto rois = torch::tensor({{0.0, 1.0, 1.5, 8.0, 9.0}, {1.0, 0.0, 0.0, 9.5, 11.0}});
  const auto pooled = roi_align(features, rois, 1.0, 4, 4, 2, true);
  EXPECT_EQ(pooled.scalar_type(), torch::kBFloat16);
  const auto reference = roi_align(features.detach().to(torch::kFloat), rois, 1.0, 4, 4, 2, true);
  EXPECT_TRUE(torch::allclose(pooled.to(torch::kFloat), reference, 1e-2, 1e-2));
  pooled.to(torch::kFloat).sum().backward();
  ASSERT_TRUE(features.grad().defined());
  EXPECT_EQ(features.grad().scalar_type(), torch::kBFloat16);
  EXPECT_GT(features.grad().abs().sum().item<double>(), 0);
}

}  // namespace
}  // namespace trainbench::detection
