#include "data/generators/coco_objects.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "coco/annotations.h"
#include "coco/mask.h"
#include "data/image_decode.h"
#include "support/error_message.h"
#include "test_files.h"
#include "util/atomic_file.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

CocoObjectsOptions small_options() {
  CocoObjectsOptions options;
  options.train_images = 20;
  options.val_images = 6;
  options.min_image_size = 160;
  options.max_image_size = 240;
  options.min_object_size = 10;
  options.max_object_size = 150;
  options.max_objects = 6;
  options.classes = {1, 5, 8};
  options.crowd_fraction = 0.3;
  options.empty_fraction = 0.1;
  options.seed = 3;
  return options;
}

// Re-reads a split and checks every annotation against pycocotools' rules as coco/ implements them: the polygons
// (or crowd RLE) rasterise to the recorded area and box, objects of one image never share a pixel, and every image
// decodes at its recorded size.
struct SplitSummary {
  int64_t images = 0, empty_images = 0, objects = 0, crowds = 0;
  std::array<int64_t, 3> by_area{};  // small, medium, large (COCO's 32^2 and 96^2 boundaries)
};

SplitSummary check_split(const fs::path& root, const std::string& split) {
  const coco::GroundTruth truth = coco::load_ground_truth((root / "annotations" / ("instances_" + split + ".json")).string());
  std::set<int64_t> category_ids;
  for (const auto& category : truth.categories) category_ids.insert(category.id);
  EXPECT_EQ(category_ids, (std::set<int64_t>{3, 11, 17}));
  SplitSummary summary;
  summary.images = static_cast<int64_t>(truth.images.size());
  std::map<int64_t, const coco::Image*> images;
  for (const auto& image : truth.images) {
    images[image.id] = &image;
    const Image decoded = decode_image_file((root / split / image.file_name).string());
    EXPECT_EQ(decoded.width, static_cast<int>(image.width));
    EXPECT_EQ(decoded.height, static_cast<int>(image.height));
  }
  std::map<int64_t, std::vector<uint8_t>> covered;  // per image, how many annotations cover each pixel
  std::set<int64_t> annotated;
  for (const auto& annotation : truth.annotations) {
    const coco::Image& image = *images.at(annotation.image_id);
    EXPECT_TRUE(category_ids.count(annotation.category_id));
    const std::string where = "annotation " + std::to_string(annotation.id);
    EXPECT_EQ(annotation.iscrowd, annotation.segmentation.has_rle) << where;
    const coco::Rle mask = coco::segmentation_to_rle(annotation.segmentation, image.height, image.width, where);
    EXPECT_EQ(coco::area(mask), annotation.area) << where;
    EXPECT_EQ(coco::to_box(mask), annotation.bbox) << where;
    auto& counts = covered[annotation.image_id];
    counts.resize(size_t(image.width) * image.height, 0);
    const std::vector<uint8_t> pixels = coco::decode(mask);
    for (size_t i = 0; i < pixels.size(); ++i) {
      counts[i] += pixels[i];
      EXPECT_LE(counts[i], 1) << where << " overlaps another object";
      if (counts[i] > 1) break;
    }
    annotated.insert(annotation.image_id);
    ++(annotation.iscrowd ? summary.crowds : summary.objects);
    if (!annotation.iscrowd) ++summary.by_area[annotation.area < 32 * 32 ? 0 : annotation.area < 96 * 96 ? 1 : 2];
  }
  summary.empty_images = summary.images - static_cast<int64_t>(annotated.size());
  return summary;
}

TEST(DataCocoObjectsGenerator, WritesACocoTreeWhoseAnnotationsAreExact) {
  TempDir dir;
  const auto counts = make_coco_objects_dataset(dir / "coco", small_options());
  EXPECT_FALSE(fs::exists(dir.path() / "coco.partial"));
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "coco/train2017/000000000001.jpg"));
  EXPECT_TRUE(fs::is_regular_file(dir.path() / "coco/val2017/000001000000.jpg"));
  const SplitSummary train = check_split(dir.path() / "coco", "train2017");
  const SplitSummary val = check_split(dir.path() / "coco", "val2017");
  EXPECT_EQ(train.images, 20);
  EXPECT_EQ(val.images, 6);
  EXPECT_EQ(train.objects + val.objects, counts.objects);
  EXPECT_EQ(train.crowds + val.crowds, counts.crowd_regions);
  EXPECT_GT(train.crowds, 0);
  EXPECT_GT(train.empty_images, 0);
  for (int range = 0; range < 3; ++range) EXPECT_GT(train.by_area[range], 0) << "no object in COCO area range " << range;
}

TEST(DataCocoObjectsGenerator, SameOptionsSameFiles) {
  TempDir dir;
  CocoObjectsOptions options = small_options();
  options.train_images = 4;
  options.val_images = 2;
  make_coco_objects_dataset(dir / "a", options);
  make_coco_objects_dataset(dir / "b", options);
  for (const char* file : {"annotations/instances_train2017.json", "annotations/instances_val2017.json",
                           "train2017/000000000004.jpg", "val2017/000001000001.jpg"})
    EXPECT_EQ(read_file((dir.path() / "a" / file).string()), read_file((dir.path() / "b" / file).string())) << file;
}

TEST(DataCocoObjectsGenerator, MissingInputsAreNamed) {
  TempDir dir;
  CocoObjectsOptions options = small_options();
  options.fashion_mnist_dir = dir / "nowhere";
  EXPECT_NE(trainbench::testing::error_message([&] { make_coco_objects_dataset(dir / "out", options); })
                .find("nowhere/train-images-idx3-ubyte.gz"),
            std::string::npos);
  options = small_options();
  options.classes = {1, 1};
  EXPECT_NE(trainbench::testing::error_message([&] { make_coco_objects_dataset(dir / "out", options); }).find("classes"),
            std::string::npos);
}

TEST(DataCocoObjectsGenerator, TracedOutlinesRasteriseToTheirPixels) {
  // A C shape (its inside reaches the border only diagonally), two squares touching at one corner, and a
  // single pixel: each outline must give back exactly these pixels through the COCO polygon rasteriser.
  const int width = 9, height = 7;
  const char* rows[] = {".XXXX....",
                        ".X..X..XX",
                        ".X.....XX",
                        ".XXXX.X..",
                        "......X..",
                        "...X.....",
                        "........."};
  std::vector<uint8_t> mask(width * height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) mask[y * width + x] = rows[y][x] == 'X';
  coco::Segmentation segmentation;
  segmentation.polygons = trace_polygons(mask, width, height, 0, 0);
  EXPECT_EQ(segmentation.polygons.size(), 4u);  // the C, the two corner-touching parts, the pixel
  std::vector<uint8_t> columns(mask.size());
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) columns[x * height + y] = mask[y * width + x];
  EXPECT_EQ(coco::segmentation_to_rle(segmentation, height, width, "test"), coco::encode(columns, height, width));
}

}  // namespace
}  // namespace trainbench::data
