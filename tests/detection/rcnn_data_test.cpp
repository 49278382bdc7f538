// Mask R-CNN's torch-free input pipeline (detection/rcnn_data.h): the reference's sample filtering, resize rule,
// flip, padding and aspect-ratio grouping, on small fixtures written here and on a generated COCO set.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/generators/coco_objects.h"
#include "data/image_decode.h"
#include "coco/mask.h"
#include "detection/rcnn_data.h"
#include "detection/rcnn_targets.h"
#include "support/error_message.h"
#include "util/error.h"

namespace trainbench::detection {
namespace {

namespace fs = std::filesystem;

// Values worked by hand from the reference's Resize.get_size (maskrcnn_benchmark/data/transforms/transforms.py).
TEST(RcnnResize, FollowsTheReferenceRule) {
  using Size = std::array<int, 2>;
  // Short side to 800, long side int(800 * 640 / 480) = int(1066.67) = 1066.
  EXPECT_EQ(rcnn_resized_size(640, 480, 800, 1333), (Size{1066, 800}));
  EXPECT_EQ(rcnn_resized_size(480, 640, 800, 1333), (Size{800, 1066}));
  // Truncation: 800 * 500 / 333 = 1201.2.
  EXPECT_EQ(rcnn_resized_size(333, 500, 800, 1333), (Size{800, 1201}));
  // Capped: 1000 / 300 * 800 = 2666.7 > 1333, so the short side is round(1333 * 300 / 1000) = round(399.9) = 400
  // and the long side int(400 * 1000 / 300) = int(1333.3) = 1333.
  EXPECT_EQ(rcnn_resized_size(1000, 300, 800, 1333), (Size{1333, 400}));
  EXPECT_EQ(rcnn_resized_size(300, 1000, 800, 1333), (Size{400, 1333}));
  // Python's round() halves to even: round(25 * 1 / 10) = round(2.5) = 2, round(3.5) = 4.
  EXPECT_EQ(rcnn_resized_size(10, 1, 5, 25), (Size{20, 2}));
  EXPECT_EQ(rcnn_resized_size(10, 1, 5, 35), (Size{40, 4}));
  // Exactly at the cap (96 / 64 * 128 = 192) is not capped; above it is: round(192 * 60 / 100) = 115,
  // int(115 * 100 / 60) = 191.
  EXPECT_EQ(rcnn_resized_size(96, 64, 128, 192), (Size{192, 128}));
  EXPECT_EQ(rcnn_resized_size(100, 60, 128, 192), (Size{191, 115}));
  // A short side already at the size is kept; squares.
  EXPECT_EQ(rcnn_resized_size(800, 1200, 800, 1333), (Size{800, 1200}));
  EXPECT_EQ(rcnn_resized_size(50, 50, 800, 1333), (Size{800, 800}));
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A width x height PNG whose left (or, with `rows`, top) half is `first` and the other half `second` (RGB).
void write_png(const fs::path& path, int width, int height, std::array<uint8_t, 3> first, std::array<uint8_t, 3> second,
               bool rows = false) {
  data::Image image{width, height, {}};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const auto& colour = (rows ? y < height / 2 : x < width / 2) ? first : second;
      image.rgb.insert(image.rgb.end(), colour.begin(), colour.end());
    }
  const std::vector<uint8_t> bytes = data::encode_png(image);
  write_file(path, std::string(bytes.begin(), bytes.end()));
}

class RcnnFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("trainbench_rcnn_data_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "images");
    write_png(root_ / "images/wide.png", 40, 30, {10, 20, 30}, {200, 100, 50});
    write_png(root_ / "images/tall.png", 30, 40, {10, 20, 30}, {0, 255, 0}, true);
    write_png(root_ / "images/square.png", 30, 30, {10, 20, 30}, {10, 20, 30});
    write_png(root_ / "images/flat.png", 30, 20, {10, 20, 30}, {10, 20, 30});
    // Images in file order 7, 3, 5, 1. Categories 9 then 3: category 3 is label 2.
    write_file(root_ / "instances.json", R"({
      "images": [{"id": 7, "file_name": "wide.png", "width": 40, "height": 30},
                 {"id": 3, "file_name": "tall.png", "width": 30, "height": 40},
                 {"id": 5, "file_name": "flat.png", "width": 30, "height": 20},
                 {"id": 1, "file_name": "square.png", "width": 30, "height": 30}],
      "categories": [{"id": 9, "name": "a"}, {"id": 3, "name": "b"}],
      "annotations": [
        {"id": 11, "image_id": 7, "category_id": 3, "bbox": [2, 3, 10, 8], "area": 80, "iscrowd": 0,
         "segmentation": [[2, 3, 12, 3, 12, 11]]},
        {"id": 12, "image_id": 7, "category_id": 9, "bbox": [0, 0, 40, 30], "area": 1200, "iscrowd": 1,
         "segmentation": {"size": [30, 40], "counts": [1200]}},
        {"id": 13, "image_id": 7, "category_id": 9, "bbox": [35, 25, 10, 10], "area": 100, "iscrowd": 0,
         "segmentation": [[35, 25, 44, 25, 44, 34]]},
        {"id": 14, "image_id": 7, "category_id": 9, "bbox": [50, 5, 5, 5], "area": 25, "iscrowd": 0,
         "segmentation": [[50, 5, 55, 5, 55, 10]]},
        {"id": 15, "image_id": 7, "category_id": 9, "bbox": [5, 5, 1, 4], "area": 4, "iscrowd": 0,
         "segmentation": [[5, 5, 6, 5, 6, 9]]},
        {"id": 16, "image_id": 3, "category_id": 9, "bbox": [1, 1, 20, 20], "area": 400, "iscrowd": 1,
         "segmentation": {"size": [40, 30], "counts": [1200]}},
        {"id": 17, "image_id": 1, "category_id": 9, "bbox": [1, 1, 20, 20], "area": 400, "iscrowd": 0,
         "segmentation": {"size": [30, 30], "counts": [900]}}]})");
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static CocoDetectionSet set() {
    return load_coco_detection((root_ / "instances.json").string(), (root_ / "images").string());
  }
  // n samples of the fixture images, cycling through `files` (names without .png), image ids 100, 101, ...
  static std::vector<RcnnSample> samples_of(const std::vector<std::string>& files) {
    static const std::map<std::string, std::array<int, 2>> sizes{
        {"wide", {40, 30}}, {"tall", {30, 40}}, {"square", {30, 30}}, {"flat", {30, 20}}};
    std::vector<RcnnSample> samples;
    for (const std::string& file : files) {
      RcnnSample sample;
      sample.path = (root_ / "images" / (file + ".png")).string();
      sample.image_id = 100 + int64_t(samples.size());
      sample.width = sizes.at(file)[0];
      sample.height = sizes.at(file)[1];
      samples.push_back(sample);
    }
    return samples;
  }
  static std::vector<RcnnBatch> epoch(RcnnLoader& loader, int64_t epoch) {
    loader.start_epoch(epoch);
    std::vector<RcnnBatch> batches;
    while (auto batch = loader.next()) batches.push_back(std::move(*batch));
    return batches;
  }
  static std::vector<std::vector<int64_t>> ids(const std::vector<RcnnBatch>& batches) {
    std::vector<std::vector<int64_t>> result;
    for (const auto& batch : batches) result.push_back(batch.image_ids);
    return result;
  }
  static fs::path root_;
};
fs::path RcnnFixture::root_;

TEST_F(RcnnFixture, TrainingSamplesDropCrowdsEmptyBoxesAndUnusableImages) {
  const std::vector<RcnnSample> samples = rcnn_samples(set(), true).samples;
  // Image 3 has only a crowd, image 5 nothing, image 1 only an RLE object: only image 7 is left.
  ASSERT_EQ(samples.size(), 1u);
  const RcnnSample& wide = samples[0];
  EXPECT_EQ(wide.image_id, 7);
  EXPECT_EQ(wide.path, (root_ / "images/wide.png").string());
  EXPECT_EQ(wide.width, 40);
  EXPECT_EQ(wide.height, 30);
  // Annotation 11: [2, 3, 10, 8] -> (2, 3, 11, 10). 12 is a crowd. 13 sticks out and is clipped to
  // (35, 25, 39, 29). 14 lies outside (clipped to x1 = x2 = 39) and 15 is one pixel wide (x2 = x1): both dropped.
  ASSERT_EQ(wide.objects.size(), 2u);
  EXPECT_EQ(wide.objects[0].box, (std::array<float, 4>{2, 3, 11, 10}));
  EXPECT_EQ(wide.objects[0].label, 2);
  EXPECT_EQ(wide.objects[0].polygons, (std::vector<std::vector<double>>{{2, 3, 12, 3, 12, 11}}));
  EXPECT_EQ(wide.objects[1].box, (std::array<float, 4>{35, 25, 39, 29}));
  EXPECT_EQ(wide.objects[1].label, 1);
}

TEST_F(RcnnFixture, EvalSamplesAreEveryImageInFileOrder) {
  const std::vector<RcnnSample> samples = rcnn_samples(set(), false).samples;
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].image_id, 7);
  EXPECT_EQ(samples[1].image_id, 3);
  EXPECT_EQ(samples[2].image_id, 5);
  EXPECT_EQ(samples[3].image_id, 1);
  EXPECT_EQ(samples[0].objects.size(), 2u);
  EXPECT_TRUE(samples[1].objects.empty());  // its crowd is removed
  EXPECT_TRUE(samples[2].objects.empty());
  EXPECT_EQ(samples[2].path, (root_ / "images/flat.png").string());
  ASSERT_EQ(samples[3].objects.size(), 1u);  // RLE-only objects stay for eval, without polygons
  EXPECT_TRUE(samples[3].objects[0].polygons.empty());
  EXPECT_EQ(samples[3].objects[0].box, (std::array<float, 4>{1, 1, 20, 20}));
}

// The union of `parts` (each an RLE of size x size), row-major as polygon_mask_target gives it.
std::vector<uint8_t> union_mask(const std::vector<coco::Rle>& parts, uint32_t size) {
  const std::vector<uint8_t> column_major = coco::decode(coco::merge(parts));
  std::vector<uint8_t> row_major(column_major.size());
  for (uint32_t x = 0; x < size; ++x)
    for (uint32_t y = 0; y < size; ++y) row_major[y * size + x] = column_major[x * size + y] != 0;
  return row_major;
}

// Issue 26 (M6): what the reference trains on a polygon of fewer than 6 numbers or an odd count, which
// pycocotools' frPyObjects decides by the first part's length.
TEST_F(RcnnFixture, ShortPolygonsAreKeptOrDroppedAsTheReferenceTrainsOnThem) {
  const fs::path file = root_ / "short.json";
  const auto annotation = [](int id, const std::string& segmentation) {
    return R"({"id": )" + std::to_string(id) + R"(, "image_id": 1, "category_id": 1, "bbox": [1, 1, 20, 20], )"
           R"("area": 400, "iscrowd": 0, "segmentation": )" + segmentation + "}";
  };
  write_file(file, R"({"images": [{"id": 1, "file_name": "wide.png", "width": 40, "height": 30}],
    "categories": [{"id": 1, "name": "a"}], "annotations": [)" +
                       annotation(4, "[[1, 1, 19, 1, 19, 19, 5], [3, 3, 12, 12]]") + ", " +  // 7 numbers, then 2 points
                       annotation(5, "[[1, 1, 19, 1, 19]]") + ", " +                         // 5 numbers: 2 points
                       annotation(6, "[[1, 1, 9, 9], [1, 1, 19, 1, 19, 19]]") + ", " +       // frBbox raises
                       annotation(7, "[[1, 1, 9]]") + "]}");                                   // unsupported
  const CocoDetectionSet set = load_coco_detection(file.string(), (root_ / "images").string());
  for (bool training : {true, false}) {
    const RcnnSamples samples = rcnn_samples(set, training);
    EXPECT_EQ(samples.dropped_polygons, 2);
    ASSERT_EQ(samples.samples.size(), 1u);
    const auto& objects = samples.samples[0].objects;
    ASSERT_EQ(objects.size(), 2u);
    EXPECT_EQ(objects[0].polygons, (std::vector<std::vector<double>>{{1, 1, 19, 1, 19, 19, 5}, {3, 3, 12, 12}}));
    EXPECT_EQ(objects[1].polygons, (std::vector<std::vector<double>>{{1, 1, 19, 1, 19}}));
  }
  // The mask target over a box of the mask's own size (no crop, no scaling) is frPoly's: the odd 5 ignored, the
  // 4-number part a 2-point polygon, not the box [3, 3, 12, 12] that frBbox would fill; 5 numbers, 2 points.
  const float box[4] = {0, 0, 28, 28};
  const auto kept = rcnn_samples(set, true).samples[0].objects;
  const auto polygon = [](const std::vector<double>& xy) { return coco::rle_from_polygon(xy, 28, 28, "polygon"); };
  const auto target = polygon_mask_target(kept[0].polygons, box, 28);
  EXPECT_EQ(target, union_mask({polygon({1, 1, 19, 1, 19, 19}), polygon({3, 3, 12, 12})}, 28));
  EXPECT_NE(target, union_mask({polygon({1, 1, 19, 1, 19, 19}), coco::rle_from_box({3, 3, 12, 12}, 28, 28, "box")}, 28));
  EXPECT_EQ(polygon_mask_target(kept[1].polygons, box, 28), union_mask({polygon({1, 1, 19, 1})}, 28));
}

// Issue 32: a polygon coordinate of 1e9 came out of training as -381137952.
TEST_F(RcnnFixture, PolygonCoordinatesBeyondAnyImageAreNamed) {
  const fs::path file = root_ / "far.json";
  write_file(file, R"({"images": [{"id": 1, "file_name": "wide.png", "width": 40, "height": 30}],
    "categories": [{"id": 1, "name": "a"}],
    "annotations": [{"id": 4, "image_id": 1, "category_id": 1, "bbox": [1, 1, 9, 9], "area": 81, "iscrowd": 0,
                     "segmentation": [[1, 1, 1e9, 1, 9, 9]]}]})");
  const CocoDetectionSet far = load_coco_detection(file.string(), (root_ / "images").string());
  EXPECT_EQ(testing::error_message([&] { rcnn_samples(far, true); }),
            file.string() + ": annotations[0] (id 4).segmentation[0][2]: coordinate 1000000000.000000 is not a pixel "
                            "position within +-1e6");
}

TEST_F(RcnnFixture, BatchIsResizedFlippedNormalisedAndPadded) {
  std::vector<RcnnSample> samples = rcnn_samples(set(), true).samples;
  RcnnLoaderOptions options;
  options.min_size = 60;  // 40 x 30 -> 80 x 60 (40 / 30 * 60 = 80 <= 100): coordinates double
  options.max_size = 100;
  options.batch_size = 1;
  options.flip_probability = 1;
  for (bool flip : {false, true}) {
    options.flip_probability = flip ? 1 : 0;
    RcnnLoader loader(samples, options);
    const std::vector<RcnnBatch> batches = epoch(loader, 0);
    ASSERT_EQ(batches.size(), 1u);
    const RcnnBatch& batch = batches[0];
    ASSERT_EQ(batch.size, 1);
    EXPECT_EQ(batch.widths, std::vector<int>{80});
    EXPECT_EQ(batch.heights, std::vector<int>{60});
    EXPECT_EQ(batch.original_widths, std::vector<int>{40});
    EXPECT_EQ(batch.original_heights, std::vector<int>{30});
    EXPECT_EQ(batch.padded_width, 96);
    EXPECT_EQ(batch.padded_height, 64);
    ASSERT_EQ(batch.images.size(), size_t(3 * 64 * 96));
    EXPECT_EQ(batch.object_offsets, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(batch.labels, (std::vector<int64_t>{2, 1}));
    // (2, 3, 11, 10) x 2 = (4, 6, 22, 20); flipped in the 80-wide image: (80 - 22 - 1, 6, 80 - 4 - 1, 20).
    // (35, 25, 39, 29) x 2 = (70, 50, 78, 58); flipped: (1, 50, 9, 58).
    const std::vector<float> boxes = flip ? std::vector<float>{57, 6, 75, 20, 1, 50, 9, 58}
                                          : std::vector<float>{4, 6, 22, 20, 70, 50, 78, 58};
    EXPECT_EQ(batch.boxes, boxes);
    ASSERT_EQ(batch.polygons.size(), 2u);
    // [2, 3, 12, 3, 12, 11] x 2 = [4, 6, 24, 6, 24, 22]; flipped x' = 80 - x - 1.
    const std::vector<double> polygon = flip ? std::vector<double>{75, 6, 55, 6, 55, 22}
                                             : std::vector<double>{4, 6, 24, 6, 24, 22};
    EXPECT_EQ(batch.polygons[0], std::vector<std::vector<double>>{polygon});
    // Pixels: BGR minus the mean, the left half RGB (10, 20, 30) and the right (200, 100, 50), swapped by
    // the flip; the bilinear filter blends only near the seam at x = 40. Zeros right of x = 80 and below y = 60.
    auto pixel = [&](int c, int y, int x) { return batch.images[(size_t(c) * 64 + y) * 96 + x]; };
    const std::array<float, 3> left{30 - 102.9801f, 20 - 115.9465f, 10 - 122.7717f};
    const std::array<float, 3> right{50 - 102.9801f, 100 - 115.9465f, 200 - 122.7717f};
    for (int c = 0; c < 3; ++c)
      for (int y : {0, 30, 59}) {
        EXPECT_NEAR(pixel(c, y, 0), (flip ? right : left)[c], 1e-3);
        EXPECT_NEAR(pixel(c, y, 30), (flip ? right : left)[c], 1e-3);
        EXPECT_NEAR(pixel(c, y, 50), (flip ? left : right)[c], 1e-3);
        EXPECT_NEAR(pixel(c, y, 79), (flip ? left : right)[c], 1e-3);
        EXPECT_EQ(pixel(c, y, 80), 0.0f);
        EXPECT_EQ(pixel(c, y, 95), 0.0f);
      }
    for (int x : {0, 50, 95}) EXPECT_EQ(pixel(1, 60, x), 0.0f);
    EXPECT_EQ(pixel(2, 63, 10), 0.0f);
  }
}

// Issue 26 (M2): MSRA's weights see BGR 0..255 minus the pixel mean (the test above), torchvision's RGB 0..1
// normalised by ImageNet's mean and std.
TEST_F(RcnnFixture, TorchvisionPixelsAreRgbNormalisedByImageNetStatistics) {
  RcnnLoaderOptions options;
  options.min_size = 60;
  options.max_size = 100;
  options.batch_size = 1;
  options.flip_probability = 0;
  options.pixels = RcnnPixels::kRgbImageNet;
  RcnnLoader loader(rcnn_samples(set(), true).samples, options);
  const std::vector<RcnnBatch> batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 1u);
  auto pixel = [&](int c, int y, int x) { return batches[0].images[(size_t(c) * 64 + y) * 96 + x]; };
  const std::array<float, 3> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
  const std::array<float, 3> left{10, 20, 30}, right{200, 100, 50};
  for (int c = 0; c < 3; ++c)
    for (int y : {0, 59}) {
      EXPECT_NEAR(pixel(c, y, 0), (left[c] / 255 - mean[c]) / std[c], 1e-4);
      EXPECT_NEAR(pixel(c, y, 79), (right[c] / 255 - mean[c]) / std[c], 1e-4);
      EXPECT_EQ(pixel(c, y, 80), 0.0f);
    }
}

TEST_F(RcnnFixture, MixedBatchPadsToTheLargestSides) {
  RcnnLoaderOptions options;
  options.mode = data::LoaderMode::Eval;
  options.drop_last = false;
  options.group_by_aspect_ratio = false;
  options.min_size = 33;  // wide 40x30 -> 44x33, tall 30x40 -> 33x44, flat 30x20 -> 49x33
  options.max_size = 100;
  options.batch_size = 3;
  RcnnLoader loader(samples_of({"wide", "tall", "flat"}), options);
  const std::vector<RcnnBatch> batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].widths, (std::vector<int>{44, 33, 49}));
  EXPECT_EQ(batches[0].heights, (std::vector<int>{33, 44, 33}));
  EXPECT_EQ(batches[0].padded_width, 64);
  EXPECT_EQ(batches[0].padded_height, 64);
  EXPECT_EQ(batches[0].images.size(), size_t(3 * 3 * 64 * 64));
  // The tall image (second): RGB (10, 20, 30) above (0, 255, 0), its pixels up to row 43 and column 32,
  // zeros from column 33 and row 44.
  const float* tall = batches[0].images.data() + 3 * 64 * 64;
  const size_t green = 64 * 64;
  EXPECT_NEAR(tall[0 * 64 + 32], 30 - 102.9801f, 1e-3);
  EXPECT_NEAR(tall[green + 0 * 64 + 32], 20 - 115.9465f, 1e-3);
  EXPECT_NEAR(tall[43 * 64 + 32], 0 - 102.9801f, 1e-3);
  EXPECT_NEAR(tall[green + 43 * 64 + 0], 255 - 115.9465f, 1e-3);
  EXPECT_EQ(tall[43 * 64 + 33], 0.0f);
  EXPECT_EQ(tall[44 * 64 + 0], 0.0f);
  EXPECT_EQ(tall[green + 44 * 64 + 5], 0.0f);
  options.size_divisibility = 0;
  RcnnLoader unpadded(samples_of({"wide", "tall", "flat"}), options);
  const std::vector<RcnnBatch> tight = epoch(unpadded, 0);
  EXPECT_EQ(tight[0].padded_width, 49);
  EXPECT_EQ(tight[0].padded_height, 44);
}

// Files: w = wide (group 0), t = tall and s = square (group 1, height / width >= 1).
const std::vector<std::string> kGroupingFiles{"wide", "wide", "tall", "wide", "square", "tall", "tall", "wide", "square"};

TEST_F(RcnnFixture, GroupsByAspectRatioInTheOrderOfFirstImages) {
  RcnnLoaderOptions options;
  options.mode = data::LoaderMode::Eval;  // file order, so the batches can be worked out by hand
  options.min_size = 6;
  options.max_size = 10;
  options.batch_size = 2;
  options.drop_last = false;
  // Group 0 at positions 0, 1, 3, 7 -> [0, 1], [3, 7]; group 1 at 2, 4, 5, 6, 8 -> [2, 4], [5, 6], [8];
  // taken by first position.
  RcnnLoader loader(samples_of(kGroupingFiles), options);
  EXPECT_EQ(loader.batches_per_epoch(), 5);
  EXPECT_EQ(loader.samples_per_epoch(), 9);
  const std::vector<std::vector<int64_t>> expected{{100, 101}, {102, 104}, {103, 107}, {105, 106}, {108}};
  EXPECT_EQ(ids(epoch(loader, 0)), expected);
  // drop_last drops the group's leftover.
  options.drop_last = true;
  RcnnLoader dropping(samples_of(kGroupingFiles), options);
  EXPECT_EQ(dropping.batches_per_epoch(), 4);
  EXPECT_EQ(dropping.samples_per_epoch(), 8);
  EXPECT_EQ(ids(epoch(dropping, 0)), std::vector<std::vector<int64_t>>(expected.begin(), expected.end() - 1));
  // Without grouping: consecutive pairs.
  options.group_by_aspect_ratio = false;
  RcnnLoader plain(samples_of(kGroupingFiles), options);
  EXPECT_EQ(ids(epoch(plain, 0)), (std::vector<std::vector<int64_t>>{{100, 101}, {102, 103}, {104, 105}, {106, 107}}));
}

TEST_F(RcnnFixture, TwoRanksShareEachGlobalBatch) {
  RcnnLoaderOptions options;
  options.mode = data::LoaderMode::Eval;
  options.min_size = 6;
  options.max_size = 10;
  options.batch_size = 1;
  options.drop_last = false;
  options.world = 2;
  // Global batches of 2 as above: [0, 1], [2, 4], [3, 7], [5, 6], [8]; rank r takes element r of each.
  options.rank = 0;
  RcnnLoader rank0(samples_of(kGroupingFiles), options);
  options.rank = 1;
  RcnnLoader rank1(samples_of(kGroupingFiles), options);
  EXPECT_EQ(rank0.batches_per_epoch(), 5);
  EXPECT_EQ(rank1.batches_per_epoch(), 4);
  EXPECT_EQ(rank1.samples_per_epoch(), 4);
  EXPECT_EQ(ids(epoch(rank0, 0)), (std::vector<std::vector<int64_t>>{{100}, {102}, {103}, {105}, {108}}));
  EXPECT_EQ(ids(epoch(rank1, 0)), (std::vector<std::vector<int64_t>>{{101}, {104}, {107}, {106}}));

  // Training: shuffled, every step of both ranks from one group, disjoint images, equal batch counts.
  options.mode = data::LoaderMode::Train;
  options.drop_last = true;
  options.batch_size = 2;
  std::vector<std::string> files;
  for (int i = 0; i < 4; ++i) files.insert(files.end(), kGroupingFiles.begin(), kGroupingFiles.end());
  const std::vector<RcnnSample> samples = samples_of(files);  // 16 group 0, 20 group 1
  options.rank = 0;
  RcnnLoader train0(samples, options);
  options.rank = 1;
  RcnnLoader train1(samples, options);
  EXPECT_EQ(train0.batches_per_epoch(), 4 + 5);  // 16 / 4 + 20 / 4 global batches
  for (int64_t e : {0, 1}) {
    const auto a = epoch(train0, e), b = epoch(train1, e);
    ASSERT_EQ(a.size(), 9u);
    ASSERT_EQ(b.size(), 9u);
    std::set<int64_t> seen;
    for (size_t k = 0; k < a.size(); ++k) {
      std::set<bool> tall;
      for (const RcnnBatch* batch : {&a[k], &b[k]})
        for (int64_t i = 0; i < batch->size; ++i) {
          EXPECT_TRUE(seen.insert(batch->image_ids[i]).second);
          tall.insert(batch->heights[i] >= batch->widths[i]);
        }
      EXPECT_EQ(tall.size(), 1u) << "step " << k << " mixes aspect-ratio groups";
    }
    EXPECT_EQ(seen.size(), 36u);
  }
}

TEST_F(RcnnFixture, TrainingIsSeededAndIndependentOfWorkers) {
  std::vector<std::string> files;
  for (int i = 0; i < 3; ++i) files.insert(files.end(), kGroupingFiles.begin(), kGroupingFiles.end());
  std::vector<RcnnSample> samples = samples_of(files);
  for (RcnnSample& sample : samples) sample.objects.push_back({{1, 2, 5, 7}, 1, {{1, 2, 5, 2, 5, 7}}});
  RcnnLoaderOptions options;
  options.min_size = 6;
  options.max_size = 10;
  options.batch_size = 3;
  auto run = [&](int workers, uint64_t seed, int64_t e) {
    options.workers = workers;
    options.seed = seed;
    RcnnLoader loader(samples, options);
    return epoch(loader, e);
  };
  auto same = [](const std::vector<RcnnBatch>& a, const std::vector<RcnnBatch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (a[k].image_ids != b[k].image_ids || a[k].images != b[k].images || a[k].boxes != b[k].boxes ||
          a[k].polygons != b[k].polygons)
        return false;
    return true;
  };
  const auto one = run(1, 4, 2);
  EXPECT_TRUE(same(one, run(3, 4, 2)));
  EXPECT_FALSE(same(one, run(1, 5, 2)));
  EXPECT_FALSE(same(one, run(1, 4, 3)));
  // Every image is scaled by 0.2; in the 30-wide ones (now 6 wide) the box's x1 becomes 0.2 unflipped and
  // 6 - 1 - 1 = 4 flipped: both occur.
  std::set<float> first_x;
  for (const auto& batch : one)
    for (int64_t i = 0; i < batch.size; ++i)
      if (batch.original_widths[i] == 30) first_x.insert(batch.boxes[4 * batch.object_offsets[i]]);
  EXPECT_EQ(first_x, (std::set<float>{1 * 0.2f, 4}));
}

// Sharded evaluation: the ranks' batches together are one rank's batches, each whole (the same images, so the
// same padding), dealt out in turn.
TEST_F(RcnnFixture, EvaluationShardsDealOutOneRanksWholeBatches) {
  RcnnLoaderOptions options;
  options.mode = data::LoaderMode::Eval;
  options.min_size = 6;
  options.max_size = 10;
  options.batch_size = 2;
  options.drop_last = false;
  options.shard_whole_batches = true;
  RcnnLoader one(samples_of(kGroupingFiles), options);
  options.world = 2;
  options.rank = 0;
  RcnnLoader rank0(samples_of(kGroupingFiles), options);
  options.rank = 1;
  RcnnLoader rank1(samples_of(kGroupingFiles), options);
  // One rank's batches, as in GroupsByAspectRatioInTheOrderOfFirstImages.
  EXPECT_EQ(ids(epoch(one, 0)), (std::vector<std::vector<int64_t>>{{100, 101}, {102, 104}, {103, 107}, {105, 106}, {108}}));
  const auto batches0 = epoch(rank0, 0), batches1 = epoch(rank1, 0);
  EXPECT_EQ(ids(batches0), (std::vector<std::vector<int64_t>>{{100, 101}, {103, 107}, {108}}));
  EXPECT_EQ(ids(batches1), (std::vector<std::vector<int64_t>>{{102, 104}, {105, 106}}));
  EXPECT_EQ(rank0.batches_per_epoch(), 3);
  EXPECT_EQ(rank0.samples_per_epoch(), 5);
  EXPECT_EQ(rank1.batches_per_epoch(), 2);
  EXPECT_EQ(rank1.samples_per_epoch(), 4);
  const auto batches_one = epoch(one, 0);
  EXPECT_EQ(batches0[1].images, batches_one[2].images);
  EXPECT_EQ(batches1[0].padded_width, batches_one[1].padded_width);
  // More ranks than batches: the last ones evaluate nothing.
  options.world = 6;
  options.rank = 5;
  RcnnLoader idle(samples_of(kGroupingFiles), options);
  EXPECT_EQ(idle.batches_per_epoch(), 0);
  EXPECT_TRUE(epoch(idle, 0).empty());
}

TEST_F(RcnnFixture, BadInputIsNamed) {
  std::vector<RcnnSample> samples = samples_of({"wide", "wide"});
  RcnnLoaderOptions options;
  options.batch_size = 1;
  options.rank = 2;
  options.world = 2;
  EXPECT_NE(testing::error_message([&] { RcnnLoader loader(samples, options); }).find("rank"), std::string::npos);
  options.rank = 0;
  options.batch_size = 2;
  EXPECT_NE(testing::error_message([&] { RcnnLoader loader(samples, options); }).find("batch_size"),
            std::string::npos);
  options.world = 1;
  options.min_size = 6;
  options.max_size = 10;
  samples[1].width = 41;  // the file is 40 wide
  RcnnLoader loader(samples, options);
  loader.start_epoch(0);
  const std::string message = testing::error_message([&] { loader.next(); });
  EXPECT_NE(message.find("wide.png: is 40x30 but the annotation file says 41x30"), std::string::npos) << message;
  options.shard_whole_batches = true;  // training mode
  EXPECT_NE(testing::error_message([&] { RcnnLoader sharded(samples, options); }).find("shard_whole_batches"),
            std::string::npos);
}

TEST(RcnnGenerated, CrowdsAndEmptyImagesOfTheGeneratedSet) {
  const fs::path root = fs::temp_directory_path() / ("trainbench_rcnn_generated_" + std::to_string(::getpid()));
  fs::remove_all(root);
  data::CocoObjectsOptions generator;
  generator.train_images = 10;
  generator.val_images = 1;
  generator.min_image_size = 48;
  generator.max_image_size = 64;
  generator.min_object_size = 12;
  generator.max_object_size = 32;
  generator.max_objects = 2;
  generator.classes = {1, 3};
  generator.crowd_fraction = 0.5;
  generator.empty_fraction = 0.3;
  data::make_coco_objects_dataset(root.string(), generator);
  const CocoDetectionSet set =
      load_coco_detection((root / "annotations/instances_train2017.json").string(), (root / "train2017").string());
  int crowds = 0;
  for (const auto& annotation : set.ground_truth.annotations) crowds += annotation.iscrowd;
  ASSERT_GT(crowds, 0);
  const std::vector<RcnnSample> train = rcnn_samples(set, true).samples, eval = rcnn_samples(set, false).samples;
  ASSERT_EQ(eval.size(), set.ground_truth.images.size());
  for (size_t i = 0; i < eval.size(); ++i) EXPECT_EQ(eval[i].image_id, set.ground_truth.images[i].id);
  EXPECT_LT(train.size(), eval.size());
  size_t objects = 0;
  for (const RcnnSample& sample : train) {
    ASSERT_FALSE(sample.objects.empty());
    objects += sample.objects.size();
    for (const RcnnObject& object : sample.objects) EXPECT_FALSE(object.polygons.empty());
  }
  EXPECT_EQ(objects, set.ground_truth.annotations.size() - size_t(crowds));

  RcnnLoaderOptions options;
  options.min_size = 32;
  options.max_size = 48;
  options.batch_size = 2;
  options.group_by_aspect_ratio = false;
  RcnnLoader loader(train, options);
  loader.start_epoch(0);
  int64_t seen = 0;
  while (auto batch = loader.next()) {
    EXPECT_EQ(batch->padded_height % 32, 0);
    EXPECT_EQ(batch->padded_width % 32, 0);
    for (int64_t i = 0; i < batch->size; ++i)
      for (int64_t k = batch->object_offsets[i]; k < batch->object_offsets[i + 1]; ++k) {
        // Not clipped again after resizing, as in the reference: shrinking moves x2 = W0 - 1 to W - W / W0.
        EXPECT_GT(batch->boxes[4 * k], -1.0f);
        EXPECT_LT(batch->boxes[4 * k + 2], float(batch->widths[i]));
        EXPECT_LT(batch->boxes[4 * k + 3], float(batch->heights[i]));
      }
    seen += batch->size;
  }
  EXPECT_EQ(seen, loader.samples_per_epoch());
  fs::remove_all(root);
}

}  // namespace
}  // namespace trainbench::detection
