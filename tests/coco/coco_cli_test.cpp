// src/cli/coco_commands.cpp driven through CLI11 as main() does, without the trainbench binary.
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "support/cli_runner.h"
#include "support/error_message.h"
#include "test_support.h"
#include "util/atomic_file.h"

namespace trainbench::cli {
namespace {

using coco::testing::fixture_path;
using coco::testing::ScratchFile;
using trainbench::testing::error_message;

// The command's stdout; every run here is expected to succeed with exit code 0.
std::string run(std::vector<std::string> args) {
  const trainbench::testing::CommandOutcome outcome =
      trainbench::testing::run_commands(add_coco_commands, std::move(args));
  EXPECT_EQ(outcome.exit_code, 0);
  return outcome.out;
}

// The fixture's numbers (worked out in loader_test.cpp), printed as pycocotools' summarize() prints them.
const char* const kFixtureSummary =
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.750\n"
    " Average Precision  (AP) @[ IoU=0.50      | area=   all | maxDets=100 ] = 0.750\n"
    " Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 0.750\n"
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 1.000\n"
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 1.000\n"
    " Average Precision  (AP) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 0.500\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets= 10 ] = 1.000\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area= small | maxDets=100 ] = 1.000\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area=medium | maxDets=100 ] = 1.000\n"
    " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n";

TEST(CocoEvalCommand, PrintsTheTwelveSummaryLines) {
  const std::string gt = fixture_path("instances_small.json");
  EXPECT_EQ(run({"coco-eval", "--gt", gt, "--dt", fixture_path("results_bbox.json"), "--type", "bbox"}),
            kFixtureSummary);
  EXPECT_EQ(run({"coco-eval", "--gt", gt, "--dt", fixture_path("results_segm.json"), "--type", "segm"}),
            kFixtureSummary);
  EXPECT_EQ(run({"coco-eval", "--gt", gt, "--dt", fixture_path("results_rows.json")}), kFixtureSummary);
}

TEST(CocoEvalCommand, JsonHasNamedStatsAtFullPrecision) {
  // The fixture's results plus a second category-2 false positive ranked above its true positive: category 2 ranks
  // FP, ignored, FP, TP, so its precision at every recall point is 1/3 and AP = (1 + 1/3) / 2.
  auto results = nlohmann::json::parse(read_file(fixture_path("results_bbox.json")));
  results.push_back({{"image_id", 2}, {"category_id", 2}, {"bbox", {0, 60, 10, 10}}, {"score", 0.9}});
  const ScratchFile results_file(results.dump());
  const std::string text = run({"coco-eval", "--gt", fixture_path("instances_small.json"), "--dt", results_file.path(),
                                "--json", "--threads", "1"});
  const auto json = nlohmann::json::parse(text);
  EXPECT_EQ(json["iou_type"], "bbox");
  ASSERT_EQ(json["stats"].size(), 12u);
  EXPECT_EQ(json["stats"][0]["name"], "AP");
  EXPECT_EQ(json["stats"][0]["iou"], "0.50:0.95");
  EXPECT_NEAR(json["stats"][0]["value"].get<double>(), 2.0 / 3.0, 1e-12);
  EXPECT_NE(text.find("0.66666666666666"), std::string::npos) << text;
  EXPECT_EQ(json["stats"][5]["name"], "APl");
  EXPECT_EQ(json["stats"][5]["value"], -1);
}

TEST(CocoEvalCommand, BadInputIsAnErrorNamingFileIndexAndField) {
  const std::string gt = fixture_path("instances_small.json");
  const ScratchFile unknown_image(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1]},
                                      {"image_id": 3, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1]}])");
  EXPECT_EQ(error_message([&] {
              run({"coco-eval", "--gt", gt, "--dt", unknown_image.path()});
            }),
            unknown_image.path() + ": [1].image_id: image 3 is not in the ground truth (" + gt + ")");
  const ScratchFile unknown_category(R"([{"image_id": 1, "category_id": 4, "score": 0.5, "bbox": [0, 0, 1, 1]}])");
  EXPECT_EQ(error_message([&] {
              run({"coco-eval", "--gt", gt, "--dt", unknown_category.path()});
            }),
            unknown_category.path() + ": [0].category_id: category 4 is not in the ground truth (" + gt + ")");
  const ScratchFile nan_score(R"([{"image_id": 1, "category_id": 1, "score": NaN, "bbox": [0, 0, 1, 1]}])");
  EXPECT_NE(error_message([&] {
              run({"coco-eval", "--gt", gt, "--dt", nan_score.path()});
            }).find(nan_score.path() + ": [0].score: not valid JSON"),
            std::string::npos);
  const ScratchFile bad_gt(R"({"images": [], "categories": [], "annotations": [{"id": 1}]})");
  EXPECT_EQ(error_message([&] {
              run({"coco-eval", "--gt", bad_gt.path(), "--dt", unknown_image.path()});
            }),
            bad_gt.path() + ": annotations[0].image_id: missing");
  EXPECT_THROW(run({"coco-eval", "--gt", gt, "--dt", unknown_image.path(), "--type", "keypoints"}), CLI::ParseError);
  EXPECT_THROW(run({"coco-eval", "--gt", gt}), CLI::ParseError);
}

// Issue 32's reproductions through the command: each is an Error (rc 2 in main) naming the file.
TEST(CocoEvalCommand, Issue32InputsAreNamedErrors) {
  const std::string gt = fixture_path("instances_small.json");
  const ScratchFile nested(std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(error_message([&] { run({"coco-eval", "--gt", gt, "--dt", nested.path()}); }),
            nested.path() + ": JSON nested deeper than 64 levels");
  const ScratchFile result(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1],
                               "segmentation": {"size": [10, 10], "counts": "0ac0"}}])");
  const ScratchFile huge_image(R"({"images": [{"id": 1, "height": 4000000000, "width": 4000000000}],
    "categories": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5],
    "area": 25, "iscrowd": 0, "segmentation": [[0, 0, 5, 0, 5, 5]]}]})");
  EXPECT_EQ(error_message([&] { run({"coco-eval", "--gt", huge_image.path(), "--dt", result.path(), "--type", "segm"}); }),
            huge_image.path() + ": images[0].height: expected a positive size of at most 2147483647 pixels, got 4000000000");
  const ScratchFile one_point(R"({"images": [{"id": 1, "height": 10, "width": 10}],
    "categories": [{"id": 1}], "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5],
    "area": 25, "iscrowd": 0, "segmentation": [[1, 2]]}]})");
  const std::string message =
      error_message([&] { run({"coco-eval", "--gt", one_point.path(), "--dt", result.path(), "--type", "segm"}); });
  EXPECT_NE(message.find("frPyObjects refuses a first part of 2 numbers"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainbench::cli
