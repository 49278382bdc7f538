// The torch-free detection layer: SSD's default boxes, the COCO detection samples, SSD's augmentation and the
// threaded loader, on a small generated COCO tree.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "coco/annotations.h"
#include "data/generators/coco_objects.h"
#include "detection/coco_detection.h"
#include "detection/default_boxes.h"
#include "detection/detection_loader.h"
#include "detection/ssd_augment.h"
#include "support/error_message.h"
#include "util/error.h"

namespace trainbench::detection {
namespace {

namespace fs = std::filesystem;

TEST(DetectionDefaultBoxes, Ssd300HasTheReferenceCountAndCorners) {
  const DefaultBoxGeometry geometry = ssd300_geometry();
  EXPECT_EQ(geometry.total_boxes(), 8732);  // 5776 + 2166 + 600 + 150 + 36 + 4
  const std::vector<float> boxes = default_boxes_xywh(geometry);
  ASSERT_EQ(boxes.size(), 8732u * 4);
  auto box = [&](size_t i) { return std::vector<float>(boxes.begin() + 4 * i, boxes.begin() + 4 * i + 4); };
  // Level 0 (38 x 38, step 8: 37.5 cells per image), first anchor (21/300 square) at row 0, column 0 and at row
  // 0, column 1; its second anchor sqrt(21/300 * 45/300) starts after the 1444 locations of the first.
  EXPECT_EQ(box(0), (std::vector<float>{0.5f / 37.5f, 0.5f / 37.5f, 0.07f, 0.07f}));
  EXPECT_EQ(box(1), (std::vector<float>{1.5f / 37.5f, 0.5f / 37.5f, 0.07f, 0.07f}));
  EXPECT_FLOAT_EQ(box(1444)[2], static_cast<float>(std::sqrt(0.07 * 0.15)));
  // Ratio 2 of level 0: (0.07 sqrt 2, 0.07 / sqrt 2), then its transpose.
  EXPECT_FLOAT_EQ(box(2 * 1444)[2], static_cast<float>(0.07 * std::sqrt(2.0)));
  EXPECT_FLOAT_EQ(box(3 * 1444)[3], static_cast<float>(0.07 * std::sqrt(2.0)));
  // The last box: level 5 (one cell, centre 0.5), ratio 2 transposed: height 0.87 sqrt 2 = 1.23, clamped to 1
  // (the clamp applies to (cx, cy, w, h), as in the reference).
  const auto last = box(8731);
  EXPECT_FLOAT_EQ(last[0], 0.5f);
  EXPECT_FLOAT_EQ(last[2], static_cast<float>(0.87 / std::sqrt(2.0)));
  EXPECT_EQ(last[3], 1.0f);
  DefaultBoxGeometry broken = geometry;
  broken.scales.pop_back();
  EXPECT_NE(testing::error_message([&] { broken.check("boxes"); }).find("scales"), std::string::npos);
}

TEST(DetectionAugment, FlipMirrorsBoxes) {
  std::vector<float> boxes{0.1f, 0.2f, 0.4f, 0.6f};
  flip_boxes(boxes);
  EXPECT_FLOAT_EQ(boxes[0], 0.6f);
  EXPECT_FLOAT_EQ(boxes[1], 0.2f);
  EXPECT_FLOAT_EQ(boxes[2], 0.9f);
  EXPECT_FLOAT_EQ(boxes[3], 0.6f);
}

TEST(DetectionAugment, RandomCropKeepsBoxesWhoseCentreIsInside) {
  int kept_whole = 0, cropped = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    Objects objects{{0.1f, 0.1f, 0.3f, 0.4f, 0.5f, 0.5f, 0.9f, 0.8f, 0.35f, 0.05f, 0.45f, 0.15f}, {1, 2, 3}};
    const Objects original = objects;
    data::Rng rng(seed);
    const data::CropBox crop = ssd_random_crop(objects, 200, 100, 1, rng);
    ASSERT_GE(crop.x, 0);
    ASSERT_GE(crop.y, 0);
    ASSERT_LE(crop.x + crop.width, 200);
    ASSERT_LE(crop.y + crop.height, 100);
    if (crop.width == 200 && crop.height == 100) {
      ++kept_whole;
      EXPECT_EQ(objects.boxes, original.boxes);
      continue;
    }
    ++cropped;
    // Crop sides are 0.3..1 of the image with aspect ratio 0.5..2 (in relative units).
    EXPECT_GE(crop.width, 59);
    EXPECT_GE(crop.height, 29);
    ASSERT_FALSE(objects.labels.empty());
    ASSERT_EQ(objects.boxes.size(), 4 * objects.labels.size());
    for (float value : objects.boxes) {
      EXPECT_GE(value, -1e-5f);
      EXPECT_LE(value, 1 + 1e-5f);
    }
  }
  EXPECT_GT(kept_whole, 20);  // 1 mode in 7 keeps the image
  EXPECT_GT(cropped, 100);
}

TEST(DetectionAugment, JitterKeepsRangeAndGreyStaysGreyUnderHueAndSaturation) {
  const int64_t pixels = 64;
  std::vector<float> image(3 * pixels);
  for (int64_t i = 0; i < pixels; ++i) image[i] = image[pixels + i] = image[2 * pixels + i] = static_cast<float>(i * 4);
  data::Rng rng(9);
  color_jitter(image.data(), pixels, ColorJitterOptions{0, 0, 0.5, 0.05}, rng);
  for (int64_t i = 0; i < pixels; ++i) {
    EXPECT_NEAR(image[i], i * 4.0f, 1e-3);
    EXPECT_NEAR(image[pixels + i], i * 4.0f, 1e-3);
  }
  std::vector<float> colour(3 * pixels);
  for (int64_t i = 0; i < 3 * pixels; ++i) colour[i] = static_cast<float>((i * 37) % 256);
  const std::vector<float> before = colour;
  color_jitter(colour.data(), pixels, ColorJitterOptions{}, rng);
  EXPECT_NE(colour, before);
  for (float value : colour) {
    EXPECT_GE(value, 0.0f);
    EXPECT_LE(value, 255.0f);
  }
}

class DetectionSet : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("trainbench_detection_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    data::CocoObjectsOptions options;
    options.train_images = 12;
    options.val_images = 4;
    options.min_image_size = 64;
    options.max_image_size = 96;
    options.min_object_size = 12;
    options.max_object_size = 48;
    options.max_objects = 3;
    options.classes = {7, 2};
    options.empty_fraction = 0.5;
    data::make_coco_objects_dataset(root_.string(), options);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static CocoDetectionSet train() {
    return load_coco_detection((root_ / "annotations/instances_train2017.json").string(), (root_ / "train2017").string());
  }
  static fs::path root_;
};
fs::path DetectionSet::root_;

TEST_F(DetectionSet, SamplesAreTheAnnotatedImagesWithLabelsInCategoryOrder) {
  const CocoDetectionSet set = train();
  EXPECT_EQ(set.category_ids, (std::vector<int64_t>{15, 5}));  // Fashion-MNIST 7 and 2, in the file's order
  std::set<int64_t> annotated;
  for (const auto& annotation : set.ground_truth.annotations) annotated.insert(annotation.image_id);
  ASSERT_EQ(set.samples.size(), annotated.size());
  EXPECT_LT(set.samples.size(), set.ground_truth.images.size()) << "the generator should have left some images empty";
  for (const auto& sample : set.samples) {
    ASSERT_EQ(sample.boxes.size(), 4 * sample.labels.size());
    for (size_t k = 0; k < sample.labels.size(); ++k) {
      const coco::Annotation& annotation = set.ground_truth.annotations[sample.annotations[k]];
      EXPECT_EQ(set.category_ids[sample.labels[k] - 1], annotation.category_id);
      EXPECT_FLOAT_EQ(sample.boxes[4 * k], static_cast<float>(annotation.bbox.x / sample.width));
      EXPECT_FLOAT_EQ(sample.boxes[4 * k + 3],
                      static_cast<float>((annotation.bbox.y + annotation.bbox.height) / sample.height));
    }
  }
}

TEST_F(DetectionSet, UnknownCategoryIsNamed) {
  const fs::path bad = root_ / "bad.json";
  std::string text = "{\"images\": [{\"id\": 1, \"file_name\": \"a.jpg\", \"width\": 4, \"height\": 4}], "
                     "\"categories\": [{\"id\": 1, \"name\": \"x\"}], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
                     "\"category_id\": 2, \"bbox\": [0, 0, 1, 1], \"area\": 1, \"iscrowd\": 0}]}";
  FILE* file = std::fopen(bad.c_str(), "w");
  std::fputs(text.c_str(), file);
  std::fclose(file);
  EXPECT_NE(testing::error_message([&] { load_coco_detection(bad.string(), root_.string()); })
                .find("annotations[0].category_id"),
            std::string::npos);
}

// Issue 32: a file_name of ../../../etc/passwd or an absolute path opened files outside --data.
TEST_F(DetectionSet, FileNamesOutsideTheImageFolderAreRefusedUnlessAllowed) {
  for (const std::string name : {"../../../etc/passwd", "/etc/passwd"}) {
    const fs::path bad = root_ / "escape.json";
    const std::string text = "{\"images\": [{\"id\": 1, \"file_name\": \"" + name +
                             "\", \"width\": 4, \"height\": 4}], \"categories\": [{\"id\": 1, \"name\": \"x\"}], "
                             "\"annotations\": [{\"id\": 1, \"image_id\": 1, \"category_id\": 1, \"bbox\": [0, 0, 2, 2], "
                             "\"area\": 4, \"iscrowd\": 0}]}";
    FILE* file = std::fopen(bad.c_str(), "w");
    std::fputs(text.c_str(), file);
    std::fclose(file);
    const std::string message = testing::error_message([&] { load_coco_detection(bad.string(), root_.string()); });
    EXPECT_EQ(message.rfind(bad.string() + ": images[0].file_name: \"" + name + "\" ", 0), 0u) << message;
    EXPECT_EQ(load_coco_detection(bad.string(), root_.string(), true).ground_truth.images.size(), 1u);
  }
}

// Issue 32: a negative, zero-size or 1e300 box made training diverge, and a box wholly outside its image was
// trained on silently.
TEST_F(DetectionSet, BoxesNoModelCanTrainOnAreDroppedAndCountedAndAbsurdOnesNamed) {
  const fs::path file = root_ / "boxes.json";
  const auto write = [&](const std::string& annotations) {
    const std::string text = R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 40, "height": 30},
      {"id": 2, "file_name": "b.jpg", "width": 40, "height": 30}], "categories": [{"id": 1, "name": "x"}],
      "annotations": [)" + annotations + "]}";
    FILE* out = std::fopen(file.c_str(), "w");
    std::fputs(text.c_str(), out);
    std::fclose(out);
  };
  const auto box = [](int id, int image, const std::string& xywh) {
    return R"({"id": )" + std::to_string(id) + R"(, "image_id": )" + std::to_string(image) +
           R"(, "category_id": 1, "bbox": )" + xywh + R"(, "area": 1, "iscrowd": 0})";
  };
  write(box(1, 1, "[1, 1, 9, 9]") + ", " + box(2, 1, "[5, 5, -3, 4]") + ", " + box(3, 1, "[5, 5, 0, 4]") + ", " +
        box(4, 1, "[5, 5, 4, 0.05]") + ", " + box(5, 1, "[40, 5, 5, 5]") + ", " + box(6, 1, "[-10, 5, 10, 5]") + ", " +
        box(7, 1, "[5, -8, 5, 8]") + ", " + box(8, 1, "[35, 25, 10, 10]") + ", " + box(9, 2, "[2, 30, 5, 5]"));
  const CocoDetectionSet set = load_coco_detection(file.string(), root_.string());
  EXPECT_EQ(set.dropped_boxes, 7);
  ASSERT_EQ(set.samples.size(), 1u);  // image 2 had only a box below its bottom edge
  EXPECT_EQ(set.samples[0].annotations, (std::vector<uint32_t>{0, 7}));  // partly outside is kept (and cropped)
  EXPECT_EQ(set.ground_truth.annotations.size(), 9u);                   // the evaluator still sees the file

  write(box(1, 1, "[1, 1, 9, 9]") + ", " + box(7, 2, "[5, 5, 1e300, 4]"));
  EXPECT_EQ(testing::error_message([&] { load_coco_detection(file.string(), root_.string()); }),
            file.string() + ": annotations[1] (id 7).bbox[2]: 1e+300 is not a pixel position or size within +-1e6");

  // Nothing left to use: named with the file, not as the loader's "no samples to load".
  write(box(2, 1, "[5, 5, -3, 4]"));
  EXPECT_EQ(testing::error_message([&] { load_coco_detection(file.string(), root_.string()); }),
            file.string() + ": has no image with an annotation to use (2 images, 1 annotations, 1 boxes dropped as too "
                            "small or outside their image)");
}

TEST_F(DetectionSet, LoaderIsSeededAndIndependentOfWorkers) {
  CocoDetectionSet set = train();
  const size_t count = set.samples.size();
  DetectionLoaderOptions options;
  options.image_size = 32;
  options.batch_size = 3;
  options.seed = 4;
  auto run = [&](int workers) {
    options.workers = workers;
    DetectionLoader loader(set.samples, options);
    loader.start_epoch(2);
    std::vector<DetectionBatch> batches;
    while (auto batch = loader.next()) batches.push_back(std::move(*batch));
    return batches;
  };
  const auto one = run(1), three = run(3);
  ASSERT_EQ(one.size(), count / 3);
  ASSERT_EQ(one.size(), three.size());
  for (size_t b = 0; b < one.size(); ++b) {
    EXPECT_EQ(one[b].images, three[b].images);
    EXPECT_EQ(one[b].boxes, three[b].boxes);
    EXPECT_EQ(one[b].image_ids, three[b].image_ids);
    EXPECT_EQ(one[b].images.size(), 3u * 3 * 32 * 32);
    EXPECT_EQ(one[b].object_offsets.size(), 4u);
    EXPECT_EQ(one[b].object_offsets.back(), static_cast<int64_t>(one[b].labels.size()));
  }
}

TEST_F(DetectionSet, EvalLoaderKeepsOrderAndBoxes) {
  CocoDetectionSet set = train();
  DetectionLoaderOptions options;
  options.mode = data::LoaderMode::Eval;
  options.drop_last = false;
  options.image_size = 32;
  options.batch_size = 5;
  DetectionLoader loader(set.samples, options);
  loader.start_epoch(0);
  size_t seen = 0;
  while (auto batch = loader.next()) {
    for (int64_t i = 0; i < batch->size; ++i, ++seen) {
      const DetectionSample& sample = set.samples[seen];
      EXPECT_EQ(batch->image_ids[i], sample.image_id);
      EXPECT_EQ(batch->widths[i], sample.width);
      const std::vector<float> boxes(batch->boxes.begin() + 4 * batch->object_offsets[i],
                                     batch->boxes.begin() + 4 * batch->object_offsets[i + 1]);
      EXPECT_EQ(boxes, sample.boxes);
    }
  }
  EXPECT_EQ(seen, set.samples.size());
}

}  // namespace
}  // namespace trainbench::detection
