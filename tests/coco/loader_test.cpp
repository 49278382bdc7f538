// The JSON readers: COCO instances ground truth and results files under pycocotools' loadRes rules, and the
// errors for bad input, which name the file, the object index and the field.
#include <gtest/gtest.h>

#include "coco/annotations.h"
#include "coco/evaluator.h"
#include "coco/results.h"
#include "support/error_message.h"
#include "test_support.h"

namespace trainbench::coco {
namespace {

using testing::fixture_path;
using testing::stat;
using trainbench::testing::error_message;

constexpr double kTolerance = 1e-12;

TEST(GroundTruthFile, ReadsImagesCategoriesAndAnnotations) {
  const GroundTruth truth = load_ground_truth(fixture_path("instances_small.json"));
  ASSERT_EQ(truth.images.size(), 2u);
  EXPECT_EQ(truth.images[0].id, 2);
  EXPECT_EQ(truth.images[0].height, 100u);
  ASSERT_EQ(truth.categories.size(), 3u);
  EXPECT_EQ(truth.categories[2].name, "empty");
  ASSERT_EQ(truth.annotations.size(), 3u);
  const Annotation& cat = truth.annotations[0];
  EXPECT_EQ(cat.bbox, (Box{10, 10, 20, 20}));
  EXPECT_EQ(cat.area, 400);
  EXPECT_FALSE(cat.iscrowd);
  EXPECT_EQ(cat.segmentation.polygons, (std::vector<std::vector<double>>{{10, 10, 30, 10, 30, 30, 10, 30}}));
  const Annotation& crowd = truth.annotations[2];
  EXPECT_TRUE(crowd.iscrowd);
  ASSERT_TRUE(crowd.segmentation.has_rle);  // given as uncompressed counts
  EXPECT_EQ(area(crowd.segmentation.rle), 2500u);
  EXPECT_EQ(to_box(crowd.segmentation.rle), (Box{50, 50, 50, 50}));
}

TEST(GroundTruthFile, ErrorsNameTheFileObjectAndField) {
  const auto message = [](const std::string& json) {
    return error_message([&] { parse_ground_truth(json, "gt.json"); });
  };
  const std::string head = R"({"images": [{"id": 1, "height": 10, "width": 10}], "categories": [{"id": 1}], )";
  EXPECT_EQ(message(head + R"("annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1],
             "iscrowd": 0}]})"),
            "gt.json: annotations[0].area: missing");
  EXPECT_EQ(message(head + R"("annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1],
             "area": 1, "iscrowd": 0}]})"),
            "gt.json: annotations[0].bbox: expected [x, y, width, height], got [0,0,1]");
  EXPECT_EQ(message(head + R"("annotations": [{"id": 1, "image_id": 1.5, "category_id": 1, "bbox": [0,0,1,1],
             "area": 1, "iscrowd": 0}]})"),
            "gt.json: annotations[0].image_id: expected an integer, got 1.5");
  EXPECT_EQ(message(head + R"("annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1],
             "area": 1, "iscrowd": 0, "segmentation": {"size": [10, 10], "counts": "0ac0"}}]})"),
            "gt.json: annotations[0].segmentation.counts: RLE counts add up to 625 pixels, not height*width = 10*10");
  EXPECT_EQ(message(head + R"("annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0,0,1,1],
             "area": 1, "iscrowd": 0, "segmentation": [[1, 2], "x"]}]})"),
            "gt.json: annotations[0].segmentation[1]: expected a polygon [x1, y1, x2, y2, ...]");
  EXPECT_EQ(message(R"({"images": [], "categories": []})"), "gt.json: expected a list \"annotations\"");
  EXPECT_EQ(message(R"({"images": [{"id": 1, "height": -4}], "categories": [], "annotations": []})"),
            "gt.json: images[0].height: expected a positive size of at most 2147483647 pixels, got -4");
  EXPECT_NE(message(R"({"images": [)").find("gt.json: not valid JSON"), std::string::npos);
}

// Issue 32: a width of 4e9 came out of training as -294967296, and a segm ground-truth image of 4e9 x 4e9
// took over 60 s of evaluation; deep nesting crashed the reader.
TEST(GroundTruthFile, RefusesImagesNoMaskCanHoldAndDeepNesting) {
  const auto message = [](const std::string& json) {
    return error_message([&] { parse_ground_truth(json, "gt.json"); });
  };
  const std::string tail = R"(], "categories": [], "annotations": []})";
  EXPECT_EQ(message(R"({"images": [{"id": 1, "height": 10, "width": 4000000000})" + tail),
            "gt.json: images[0].width: expected a positive size of at most 2147483647 pixels, got 4000000000");
  EXPECT_EQ(message(R"({"images": [{"id": 1, "height": 65536, "width": 65536})" + tail),
            "gt.json: images[0]: height 65536 x width 65536 is more than the 4294967295 pixels a COCO mask can hold "
            "(32-bit run lengths)");
  EXPECT_EQ(message(std::string(100000, '[') + std::string(100000, ']')), "gt.json: JSON nested deeper than 64 levels");
}

// Issue 32: 100,000 nested brackets crashed coco-eval (SIGSEGV) and 20,000 levels echoed 40 KB in the message.
TEST(ResultsFile, RefusesDeepNestingAndQuotesBadValuesBriefly) {
  const auto message = [](const std::string& json) { return error_message([&] { parse_results(json, "r.json"); }); };
  EXPECT_EQ(message(std::string(100000, '[') + std::string(100000, ']')), "r.json: JSON nested deeper than 64 levels");
  const std::string deep_box = std::string(20000, '[') + std::string(20000, ']');
  EXPECT_EQ(message(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": )" + deep_box + "}]"),
            "r.json: JSON nested deeper than 64 levels");
  std::string long_box = "[0";
  for (int i = 0; i < 20000; ++i) long_box += ", 1";
  const std::string long_box_message =
      message(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": )" + long_box + "]}]");
  EXPECT_EQ(long_box_message.rfind("r.json: [0].bbox: expected [x, y, width, height], got [0,1,1,", 0), 0u);
  EXPECT_LT(long_box_message.size(), 200u);
  // A number beyond double (the fuzzer's first find, and issue 32's score of 1e400) is named, not rc 3.
  EXPECT_EQ(message(R"([{"image_id": 1, "category_id": 1, "score": 1e400, "bbox": [0, 0, 1, 1]}])")
                .rfind("r.json: [0].score: not valid JSON: ", 0),
            0u);
  EXPECT_EQ(error_message([] { parse_ground_truth(R"({"images": [{"id": 5e05181}]})", "gt.json"); })
                .rfind("gt.json: not valid JSON: ", 0),
            0u);
}

TEST(ResultsFile, BoxResultsFollowLoadRes) {
  const std::vector<Detection> detections = load_results(fixture_path("results_bbox.json"));
  ASSERT_EQ(detections.size(), 4u);
  EXPECT_EQ(detections[2].image_id, 2);
  EXPECT_EQ(detections[2].category_id, 2);
  EXPECT_EQ(detections[2].score, 0.95);
  EXPECT_EQ(detections[2].bbox, (Box{60, 60, 20, 20}));
  EXPECT_EQ(detections[2].area, 400);  // w*h
  EXPECT_TRUE(detections[2].segmentation.empty());
}

TEST(ResultsFile, RowsAreBoxResults) {
  const std::vector<Detection> rows = load_results(fixture_path("results_rows.json"));
  const std::vector<Detection> objects = load_results(fixture_path("results_bbox.json"));
  ASSERT_EQ(rows.size(), objects.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].image_id, objects[i].image_id);
    EXPECT_EQ(rows[i].category_id, objects[i].category_id);
    EXPECT_EQ(rows[i].score, objects[i].score);
    EXPECT_EQ(rows[i].bbox, objects[i].bbox);
    EXPECT_EQ(rows[i].area, objects[i].area);
  }
}

TEST(ResultsFile, MaskResultsTakeAreaAndBoxFromTheRle) {
  const std::vector<Detection> detections = load_results(fixture_path("results_segm.json"));
  ASSERT_EQ(detections.size(), 4u);
  EXPECT_EQ(detections[1].area, 2500);
  EXPECT_EQ(detections[1].bbox, (Box{0, 0, 50, 50}));
  EXPECT_TRUE(detections[1].segmentation.has_rle);
}

TEST(ResultsFile, TheFirstResultDecidesTheRule) {
  // The first result has a box, so every result is a box result: area w*h even with an RLE alongside.
  const std::string rle = R"({"size": [25, 25], "counts": "T8:?00000000000000000c3"})";
  auto detections = parse_results(
      R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [0, 0, 4, 5], "segmentation": )" + rle + "}]",
      "r.json");
  EXPECT_EQ(detections[0].area, 20);
  EXPECT_TRUE(detections[0].segmentation.has_rle);
  // The first has no box (an empty one counts as none): mask results, whose given boxes are kept.
  detections = parse_results(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [], "segmentation": )" + rle +
                                 R"(}, {"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [1, 2, 3, 4],
                                 "segmentation": )" +
                                 rle + "}]",
                             "r.json");
  EXPECT_EQ(detections[0].area, 100);
  EXPECT_EQ(detections[0].bbox, (Box{10, 10, 10, 10}));
  EXPECT_EQ(detections[1].bbox, (Box{1, 2, 3, 4}));
  EXPECT_TRUE(parse_results("[]", "r.json").empty());
}

TEST(ResultsFile, ErrorsNameTheFileResultAndField) {
  const auto message = [](const std::string& json) { return error_message([&] { parse_results(json, "r.json"); }); };
  const std::string good = R"({"image_id": 1, "category_id": 1, "score": 0.5, "bbox": [0, 0, 1, 1]})";
  EXPECT_EQ(message("[" + good + R"(, {"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}])"),
            "r.json: [1].score: missing");
  // Python's json.dump writes NaN; it is not JSON, and the error says where it was met.
  EXPECT_NE(message("[" + good + R"(, {"image_id": 1, "category_id": 1, "score": NaN, "bbox": [0, 0, 1, 1]}])")
                .find("r.json: [1].score: not valid JSON: "),
            std::string::npos);
  EXPECT_EQ(message(R"([{"image_id": 1, "category_id": 1, "score": 0.5,
                         "segmentation": {"size": [25, 25], "counts": "T8:?0000000000 0000000c3"}}])"),
            "r.json: [0].segmentation.counts: RLE string has character ' ' at offset 14, outside '0'..'o'");
  EXPECT_EQ(message(R"([{"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": [[0, 0, 1, 0, 1, 1]]}])"),
            "r.json: [0].segmentation: a mask result must be an RLE object (pycocotools' loadRes takes its area)");
  EXPECT_EQ(message(R"([{"image_id": 1, "category_id": 1, "score": 0.5}])"),
            "r.json: [0]: a result needs a \"bbox\" or a \"segmentation\"");
  EXPECT_EQ(message(R"([[1, 0, 0, 1, 1, 0.5, 1], [1, 0, 0, 1, 1, 0.5]])"),
            "r.json: [1]: expected a row [image_id, x, y, w, h, score, category_id], got [1,0,0,1,1,0.5]");
  EXPECT_EQ(message(R"([[1.5, 0, 0, 1, 1, 0.5, 1]])"), "r.json: [0][0]: expected an integer, got 1.5");
  EXPECT_EQ(message("[" + good + ", [1, 0, 0, 1, 1, 0.5, 1]]"),
            "r.json: [1]: expected a result object, like the first result");
  EXPECT_EQ(message(R"({"annotations": []})"), "r.json: expected a JSON list of results");
}

// The fixture: category 1 has one small object, found (AP 1). Category 2 has a medium object and a crowd region in
// image 2; image 1 has a category-2 false positive (score .99, area 100), image 2 a detection inside the crowd
// (.95, ignored) and the medium object's (.8). Category 2 ranks FP, ignored, TP: rc = [0, 0, 1], pr = [0, 0, .5]
// -> AP 0.5 in "all"; in "medium" the small FP is ignored: AP 1. Category 3 has no ground truth and is left out.
// With maxDets 1, image 2 keeps only the ignored detection, so category 2's AR1 is 0.
const std::map<std::string, double> kFixtureStats{{"AP", 0.75}, {"AP50", 0.75}, {"AP75", 0.75}, {"APs", 1},
                                                  {"APm", 1},   {"APl", -1},    {"AR1", 0.5},   {"AR10", 1},
                                                  {"AR100", 1}, {"ARs", 1},     {"ARm", 1},     {"ARl", -1}};

void expect_fixture_stats(IouType type, const std::string& results) {
  const Evaluator evaluator(load_ground_truth(fixture_path("instances_small.json")), type);
  const auto stats = evaluator.evaluate(load_results(fixture_path(results))).stats;
  for (const auto& [name, value] : kFixtureStats)
    EXPECT_NEAR(stats[stat(name)], value, kTolerance) << iou_type_name(type) << " " << results << " " << name;
}

TEST(FixtureFiles, BoxResults) { expect_fixture_stats(IouType::bbox, "results_bbox.json"); }
TEST(FixtureFiles, RowResults) { expect_fixture_stats(IouType::bbox, "results_rows.json"); }
// The masks are the boxes' pixels, and the ground truth polygons are the boxes' outlines, so segm equals bbox.
TEST(FixtureFiles, MaskResults) { expect_fixture_stats(IouType::segm, "results_segm.json"); }
TEST(FixtureFiles, BoxResultsAsMasks) { expect_fixture_stats(IouType::segm, "results_bbox.json"); }
TEST(FixtureFiles, MaskResultsAsBoxes) { expect_fixture_stats(IouType::bbox, "results_segm.json"); }

}  // namespace
}  // namespace trainbench::coco
