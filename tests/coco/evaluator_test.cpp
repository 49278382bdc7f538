// COCOeval on cases small enough to compute on paper. Each test states the ranking, the cumulative TP/FP and the
// 101-point sampling that give its numbers. Precision is tp / (tp + fp + eps) as in pycocotools, so a "perfect" AP
// is 1/(1+eps) = 0.9999999999999998; comparisons allow 1e-12.
#include "coco/evaluator.h"

#include <gtest/gtest.h>

#include "support/error_message.h"
#include "test_support.h"

namespace trainbench::coco {
namespace {

using testing::add_box;
using testing::box_stats;
using testing::make_truth;
using testing::stat;
using trainbench::testing::error_message;

constexpr double kTolerance = 1e-12;

void expect_stats(const std::array<double, kSummaryCount>& stats, const std::map<std::string, double>& expected) {
  for (const auto& [name, value] : expected) EXPECT_NEAR(stats[stat(name)], value, kTolerance) << name;
}

TEST(Parameters, ThresholdsAreNumpyLinspaceBitForBit) {
  const auto& iou = iou_thresholds();
  EXPECT_EQ(iou[0], 0.5);
  EXPECT_EQ(iou[5], 0.75);  // summarize() finds AP75 by exact comparison
  EXPECT_EQ(iou[8], 0.8999999999999999);
  EXPECT_EQ(iou[9], 0.95);
  const auto& recall = recall_points();
  EXPECT_EQ(recall[7], 0.07);
  EXPECT_EQ(recall[29], 0.29);
  EXPECT_EQ(recall[100], 1.0);
}

TEST(Evaluate, PerfectDetectionsScoreOne) {
  GroundTruth truth = make_truth(2, 1);
  add_box(truth, 1, 1, {10, 10, 50, 50});  // area 2500: medium
  add_box(truth, 2, 1, {0, 0, 40, 40});    // area 1600: medium
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {10, 10, 50, 50}, 0.9), box_detection(2, 1, {0, 0, 40, 40}, 0.8)});
  expect_stats(stats, {{"AP", 1},
                       {"AP50", 1},
                       {"AP75", 1},
                       {"APs", -1},
                       {"APm", 1},
                       {"APl", -1},
                       {"AR1", 1},
                       {"AR10", 1},
                       {"AR100", 1},
                       {"ARs", -1},
                       {"ARm", 1},
                       {"ARl", -1}});
}

TEST(Evaluate, FalsePositiveAboveTheTruePositiveHalvesPrecision) {
  // Ranking FP, TP: tp = [0, 1], fp = [1, 1], rc = [0, 1], pr = [0, .5] -> [.5, .5] after the right-to-left max,
  // so every recall point reads 0.5. With maxDets 1 only the FP is kept: recall 0.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {10, 10, 50, 50});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {70, 70, 10, 10}, 0.9), box_detection(1, 1, {10, 10, 50, 50}, 0.8)});
  expect_stats(stats, {{"AP", 0.5}, {"AP50", 0.5}, {"AR1", 0}, {"AR10", 1}, {"AR100", 1}});
  // The FP's area is 100, outside the medium range, so there it is ignored rather than counted.
  expect_stats(stats, {{"APm", 1}, {"ARm", 1}});
}

TEST(Evaluate, FalsePositiveBelowTheTruePositiveCostsNothing) {
  // Ranking TP, FP: rc = [1, 1], pr = [1, .5] -> [1, .5]; every recall point finds index 0.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {10, 10, 50, 50});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {70, 70, 10, 10}, 0.7), box_detection(1, 1, {10, 10, 50, 50}, 0.8)});
  expect_stats(stats, {{"AP", 1}, {"AR1", 1}});
}

TEST(Evaluate, FalsePositiveBetweenTwoTruePositives) {
  // Two images, one ground truth each. Ranking TP, FP, TP: rc = [.5, .5, 1], pr = [1, .5, 2/3] -> [1, 2/3, 2/3].
  // Recall points 0.00..0.50 (51 of them) read 1, 0.51..1.00 (50) read 2/3: AP = (51 + 100/3) / 101 = 253/303.
  GroundTruth truth = make_truth(2, 1);
  add_box(truth, 1, 1, {0, 0, 20, 20});
  add_box(truth, 2, 1, {0, 0, 20, 20});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {0, 0, 20, 20}, 0.9), box_detection(2, 1, {50, 50, 20, 20}, 0.8),
                        box_detection(2, 1, {0, 0, 20, 20}, 0.7)});
  expect_stats(stats, {{"AP", 253.0 / 303.0}, {"AR100", 1}, {"AR1", 0.5}});
}

TEST(Evaluate, TiedScoresKeepFileOrderWithinAnImage) {
  // Equal scores: the stable sort keeps the results' order, so FP-then-TP gives 0.5 and TP-then-FP gives 1.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {10, 10, 50, 50});
  const Detection hit = box_detection(1, 1, {10, 10, 50, 50}, 0.5);
  const Detection miss = box_detection(1, 1, {70, 70, 10, 10}, 0.5);
  EXPECT_NEAR(box_stats(truth, {miss, hit})[stat("AP")], 0.5, kTolerance);
  EXPECT_NEAR(box_stats(truth, {hit, miss})[stat("AP")], 1, kTolerance);
}

TEST(Evaluate, TiedScoresAcrossImagesFollowSortedImageIds) {
  // accumulate() concatenates images in sorted id order before its stable sort, whatever the file order.
  GroundTruth truth = make_truth(0, 1);
  truth.images = {{2, 100, 100}, {1, 100, 100}};
  add_box(truth, 1, 1, {10, 10, 50, 50});
  add_box(truth, 2, 1, {10, 10, 50, 50});
  // Image 1: a miss; image 2: a hit; both 0.5. Ranked miss, hit, then image 1's hit at 0.4.
  const std::vector<Detection> detections{box_detection(2, 1, {10, 10, 50, 50}, 0.5),
                                          box_detection(1, 1, {70, 70, 10, 10}, 0.5),
                                          box_detection(1, 1, {10, 10, 50, 50}, 0.4)};
  // tp = [0, 1, 2], fp = [1, 1, 1]: rc = [0, .5, 1], pr = [0, .5, 2/3] -> [2/3, 2/3, 2/3].
  EXPECT_NEAR(box_stats(truth, detections)[stat("AP")], 2.0 / 3.0, kTolerance);
}

TEST(Evaluate, CrowdRegionAbsorbsDetectionsAtEveryThresholdItReaches) {
  // The crowd covers [0,100)^2. The detection at x 90..110 overlaps it by 200 of its own 400 pixels: crowd IoU
  // 0.5, so it is ignored at t = 0.50 and a false positive above. The real object is found at a lower score.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 100, 100}, /*crowd=*/true);
  add_box(truth, 1, 1, {200, 200, 50, 50});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {90, 0, 20, 20}, 0.9), box_detection(1, 1, {200, 200, 50, 50}, 0.8)});
  // t = .5: AP 1; t >= .55: ranking FP, TP gives 0.5.
  expect_stats(stats, {{"AP50", 1}, {"AP75", 0.5}, {"AP", (1 + 9 * 0.5) / 10}, {"AR100", 1}, {"AR1", 0}});
}

TEST(Evaluate, CrowdRegionMatchesManyDetections) {
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 100, 100}, /*crowd=*/true);
  add_box(truth, 1, 1, {200, 200, 50, 50});
  const std::vector<Detection> detections{box_detection(1, 1, {10, 10, 20, 20}, 0.95),
                                          box_detection(1, 1, {50, 50, 20, 20}, 0.9),
                                          box_detection(1, 1, {200, 200, 50, 50}, 0.8)};
  EXPECT_NEAR(box_stats(truth, detections)[stat("AP")], 1, kTolerance);
  // Without the crowd flag the region is an ordinary object that neither detection overlaps enough (IoU 0.04):
  // FP, FP, TP with two objects gives rc = [0, 0, .5], pr = [0, 0, 1/3] -> 1/3 for the 51 points up to 0.5.
  truth.annotations[0].iscrowd = false;
  EXPECT_NEAR(box_stats(truth, detections)[stat("AP")], 51.0 / 101.0 / 3.0, kTolerance);
}

TEST(Evaluate, AreaRangesUseTheAnnotationAreaFieldWithInclusiveEnds) {
  // A 10x10 box whose "area" field says 5000 is medium, not small.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 10, 10}, false, /*area=*/5000);
  expect_stats(box_stats(truth, {box_detection(1, 1, {0, 0, 10, 10}, 0.9)}), {{"APs", -1}, {"APm", 1}});

  // Area exactly 32^2 counts as small and as medium. Image 1's object (area 1024) is missed; image 2's (500) found.
  // Small: two objects, one found at the top: rc = [.5], AP = 51/101. Medium: only the missed one counts; the hit
  // matched an ignored object, so it is ignored: no true positive, AP 0 (not -1).
  truth = make_truth(2, 1);
  add_box(truth, 1, 1, {0, 0, 32, 32});
  add_box(truth, 2, 1, {0, 0, 20, 25});
  const auto stats = box_stats(truth, {box_detection(2, 1, {0, 0, 20, 25}, 0.9)});
  expect_stats(stats, {{"APs", 51.0 / 101.0}, {"ARs", 0.5}, {"APm", 0}, {"ARm", 0}, {"APl", -1}});
  // 96^2 counts as medium and as large.
  truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 96, 96});
  expect_stats(box_stats(truth, {box_detection(1, 1, {0, 0, 96, 96}, 0.9)}), {{"APm", 1}, {"APl", 1}, {"APs", -1}});
}

TEST(Evaluate, UnmatchedDetectionOutsideTheRangeIsIgnored) {
  // A 70x70 false positive (area 4900, medium) above a small true positive: it costs precision in "all" but is
  // ignored in "small".
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 20, 20});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {100, 100, 70, 70}, 0.9), box_detection(1, 1, {0, 0, 20, 20}, 0.8)});
  expect_stats(stats, {{"AP", 0.5}, {"APs", 1}});
}

TEST(Evaluate, MatchStopsAtTheFirstIgnoredObjectAfterACountedMatch) {
  // Object A (area field 500, small) and B (area field 5000, medium) in file order; the detection is B's box,
  // IoU 0.9 with A and 1 with B.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 10, 10}, false, 500);
  add_box(truth, 1, 1, {0, 0, 10, 9}, false, 5000);
  const auto stats = box_stats(truth, {box_detection(1, 1, {0, 0, 10, 9}, 0.9)});
  // Small: B is ignored and sorted last; the detection takes A and stops before B at t <= 0.9 (9 thresholds,
  // AP 1 each); at 0.95 A is too far, so it takes the ignored B and is ignored (AP 0): 9/10.
  // Medium: B first, matched with IoU 1: AP 1. All: both count, the later and better B wins: 51/101.
  expect_stats(stats, {{"APs", 0.9}, {"ARs", 0.9}, {"APm", 1}, {"AP", 51.0 / 101.0}, {"AR100", 0.5}});
}

TEST(Evaluate, EqualIouGoesToTheLaterObject) {
  // The wide detection covers both 10x10 objects: IoU 100/200 = 0.5 with each, and the later one wins the tie, so
  // the second detection (exactly the later object) finds it taken and is a false positive at t = 0.5.
  // t = .5: TP, FP with two objects: rc = [.5, .5], pr = [1, .5] -> 51/101.
  // t >= .55: the wide one misses, then TP: rc = [0, .5], pr = [0, .5] -> [.5, .5]: 51 points of 0.5.
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 10, 10});
  add_box(truth, 1, 1, {10, 0, 10, 10});
  const auto stats =
      box_stats(truth, {box_detection(1, 1, {0, 0, 20, 10}, 0.9), box_detection(1, 1, {10, 0, 10, 10}, 0.8)});
  expect_stats(stats, {{"AP50", 51.0 / 101.0}, {"AP75", 25.5 / 101.0}, {"AP", (51 + 9 * 25.5) / 1010.0}});
}

TEST(Evaluate, CategoriesWithoutGroundTruthAreLeftOut) {
  // Category 2 has only a detection and category 3 nothing: both are -1 and the mean is category 1's 1, not 1/2.
  GroundTruth truth = make_truth(1, 3);
  add_box(truth, 1, 1, {0, 0, 50, 50});
  const Evaluation evaluation =
      Evaluator(truth, IouType::bbox)
          .evaluate({box_detection(1, 1, {0, 0, 50, 50}, 0.9), box_detection(1, 2, {0, 0, 50, 50}, 0.9)});
  EXPECT_NEAR(evaluation.stats[stat("AP")], 1, kTolerance);
  EXPECT_NEAR(evaluation.stats[stat("AR100")], 1, kTolerance);
  for (int k : {1, 2}) {
    EXPECT_EQ(evaluation.precision_at(0, 0, k, 0, 2), -1);
    EXPECT_EQ(evaluation.recall_at(0, k, 0, 2), -1);
  }
  EXPECT_NEAR(evaluation.precision_at(0, 0, 0, 0, 2), 1, kTolerance);
}

TEST(Evaluate, RecallPointsBeyondTheLastReachedReadZero) {
  // 101 objects and 101 exact detections in one image: maxDets 100 keeps the best 100, so recall stops at 100/101
  // = 0.990099 and only the recall point 1.00 reads 0. A second category in the same image keeps its own 100.
  GroundTruth truth = make_truth(1, 2);
  truth.images[0] = {1, 1000, 1000};
  std::vector<Detection> detections;
  for (int i = 0; i < 101; ++i) {
    const Box box{static_cast<double>(i % 10) * 100, static_cast<double>(i / 10) * 50, 40, 40};
    add_box(truth, 1, 1, box);
    add_box(truth, 1, 2, box);
    detections.push_back(box_detection(1, 1, box, 1.0 - i * 0.001));
    detections.push_back(box_detection(1, 2, box, 1.0 - i * 0.001));
  }
  const Evaluation evaluation = Evaluator(truth, IouType::bbox).evaluate(detections);
  expect_stats(evaluation.stats,
               {{"AP", 100.0 / 101.0}, {"AR100", 100.0 / 101.0}, {"AR10", 10.0 / 101.0}, {"AR1", 1.0 / 101.0}});
  EXPECT_EQ(evaluation.precision_at(0, 100, 0, 0, 2), 0);
  EXPECT_NEAR(evaluation.precision_at(0, 99, 0, 0, 2), 1, kTolerance);
}

TEST(Evaluate, NoDetectionsScoreZeroWhereThereIsGroundTruth) {
  GroundTruth truth = make_truth(1, 2);
  add_box(truth, 1, 1, {0, 0, 50, 50});
  expect_stats(box_stats(truth, {}), {{"AP", 0}, {"AR100", 0}, {"APs", -1}, {"APl", -1}});
  EXPECT_EQ(box_stats(make_truth(1, 2), {})[stat("AP")], -1);  // no ground truth at all
}

TEST(Evaluate, ResultsDoNotDependOnTheThreadCount) {
  GroundTruth truth = make_truth(20, 7);
  std::vector<Detection> detections;
  for (int i = 0; i < 20 * 7 * 6; ++i) {
    const int image = 1 + i % 20, category = 1 + (i / 20) % 7;
    const Box box{static_cast<double>((i * 37) % 60), static_cast<double>((i * 53) % 60), 10.0 + i % 30,
                  12.0 + (i * 7) % 25};
    if (i % 3 == 0) add_box(truth, image, category, box, i % 29 == 0);
    detections.push_back(box_detection(image, category, {box.x + i % 5, box.y, box.width, box.height + i % 4},
                                       static_cast<double>((i * 7919) % 97) / 97.0));
  }
  const Evaluator evaluator(truth, IouType::bbox);
  const Evaluation one = evaluator.evaluate(detections, "detections", 1);
  const Evaluation three = evaluator.evaluate(detections, "detections", 3);
  EXPECT_EQ(one.precision, three.precision);
  EXPECT_EQ(one.recall, three.recall);
  EXPECT_EQ(one.stats, three.stats);
  EXPECT_GT(one.stats[stat("AP50")], 0);
}

TEST(Evaluate, SegmentationUsesMaskIou) {
  // The object is the polygon square (1,1)-(3,3), pixels 1..2 x 1..2 of a 5x5 image. The detection covers three of
  // them: IoU 3/4, a match for t <= 0.75 (6 of 10 thresholds).
  GroundTruth truth = make_truth(1, 1);
  truth.images[0] = {1, 5, 5};
  add_box(truth, 1, 1, {1, 1, 2, 2});
  truth.annotations[0].segmentation.polygons = {{1, 1, 3, 1, 3, 3, 1, 3}};
  const Rle three_pixels = encode({0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 5, 5);
  const Detection detection = mask_detection(1, 1, three_pixels, 0.9);
  EXPECT_EQ(detection.area, 3);
  EXPECT_EQ(detection.bbox, (Box{1, 1, 2, 2}));
  const auto stats = Evaluator(truth, IouType::segm).evaluate({detection}).stats;
  expect_stats(stats, {{"AP", 0.6}, {"AP50", 1}, {"AP75", 1}, {"APs", 0.6}, {"AR100", 0.6}});
  // As a crowd (given as an RLE), the union is the detection's own 3 pixels: IoU 1 and the detection is ignored,
  // leaving no counted object at all.
  truth.annotations[0].iscrowd = true;
  truth.annotations[0].segmentation = {{}, true, segmentation_to_rle(truth.annotations[0].segmentation, 5, 5, "s")};
  EXPECT_EQ(Evaluator(truth, IouType::segm).evaluate({detection}).stats[stat("AP")], -1);
}

TEST(Evaluate, SegmentationOfBoxResultsIsTheBoxPolygon) {
  // loadRes gives a box result the polygon of its box; [1,1,2,2] rasterises to the same 2x2 pixels.
  GroundTruth truth = make_truth(1, 1);
  truth.images[0] = {1, 5, 5};
  add_box(truth, 1, 1, {1, 1, 2, 2});
  truth.annotations[0].segmentation.polygons = {{1, 1, 3, 1, 3, 3, 1, 3}};
  expect_stats(Evaluator(truth, IouType::segm).evaluate({box_detection(1, 1, {1, 1, 2, 2}, 0.9)}).stats, {{"AP", 1}});
}

TEST(Checks, GroundTruthErrorsNameTheAnnotationAndField) {
  GroundTruth truth = make_truth(1, 1);
  add_box(truth, 1, 1, {0, 0, 5, 5});
  add_box(truth, 1, 1, {0, 0, 5, 5});
  truth.annotations[1].id = 1;
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::bbox, "gt.json"); }),
            "gt.json: annotations[1].id: id 1 is already used by annotations[0]");
  truth.annotations[1].id = 0;
  EXPECT_NE(error_message([&] { Evaluator(truth, IouType::bbox, "gt.json"); }).find("annotations[1].id: id 0"),
            std::string::npos);
  truth.annotations[1].id = 2;
  truth.annotations[1].image_id = 9;
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::bbox, "gt.json"); }),
            "gt.json: annotations[1].image_id: image 9 is not in images");
  truth.annotations[1].image_id = 1;
  truth.annotations[1].category_id = 4;
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::bbox, "gt.json"); }),
            "gt.json: annotations[1].category_id: category 4 is not in categories");
  truth.annotations[1].category_id = 1;
  truth.images.push_back({1, 5, 5});
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::bbox, "gt.json"); }),
            "gt.json: images[1].id: id 1 is already used by images[0]");
  truth.images.pop_back();
  truth.images[0] = {1, 0, 0};
  truth.annotations[1].segmentation.polygons = {{0, 0, 1, 0, 1, 1}};
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::segm, "gt.json"); }),
            "gt.json: annotations[0].segmentation: no segmentation (polygons or RLE) to evaluate");
  truth.annotations[0].segmentation = truth.annotations[1].segmentation;
  EXPECT_EQ(error_message([&] { Evaluator(truth, IouType::segm, "gt.json"); }),
            "gt.json: annotations[0].segmentation: image 1 has no height and width, which rasterising needs");
}

TEST(Checks, DetectionErrorsNameTheResultAndField) {
  GroundTruth truth = make_truth(2, 2);
  add_box(truth, 1, 1, {0, 0, 5, 5});
  const Evaluator evaluator(truth, IouType::bbox, "gt.json");
  const Detection good = box_detection(1, 1, {0, 0, 5, 5}, 0.5);
  Detection bad = good;
  bad.image_id = 7;
  EXPECT_EQ(error_message([&] {
              evaluator.evaluate({good, bad}, "dt.json");
            }),
            "dt.json: [1].image_id: image 7 is not in the ground truth (gt.json)");
  bad = good;
  bad.category_id = 3;
  EXPECT_EQ(error_message([&] {
              evaluator.evaluate({good, bad}, "dt.json");
            }),
            "dt.json: [1].category_id: category 3 is not in the ground truth (gt.json)");
  bad = good;
  bad.score = NAN;
  EXPECT_EQ(error_message([&] { evaluator.evaluate({bad}, "dt.json"); }), "dt.json: [0].score: not a finite number");
  bad = good;
  bad.bbox.width = INFINITY;
  EXPECT_EQ(error_message([&] { evaluator.evaluate({bad}, "dt.json"); }), "dt.json: [0].bbox: not finite");
}

TEST(Summary, PrintsLikePycocotools) {
  std::array<double, kSummaryCount> stats{};
  for (int i = 0; i < kSummaryCount; ++i) stats[i] = 0.1 * i;
  stats[5] = -1;
  const std::string text = format_summary(stats);
  EXPECT_EQ(text.substr(0, text.find('\n', text.find('\n') + 1) + 1),
            " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.000\n"
            " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.100\n");
  EXPECT_NE(text.find(" Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"),
            std::string::npos);
  EXPECT_NE(text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.600\n"),
            std::string::npos);
  EXPECT_NE(text.find(" Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 1.000\n"),
            std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 12);

  const auto json = summary_json(stats, IouType::segm);
  EXPECT_EQ(json["iou_type"], "segm");
  EXPECT_EQ(json["stats"][2]["name"], "AP75");
  EXPECT_EQ(json["stats"][2]["iou"], "0.75");
  EXPECT_EQ(json["stats"][7]["max_dets"], 10);
  EXPECT_EQ(json["stats"][11]["value"].get<double>(), stats[11]);
}

}  // namespace
}  // namespace trainbench::coco
