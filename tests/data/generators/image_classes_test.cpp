#include "data/generators/image_classes.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <map>

#include "data/image_decode.h"
#include "data/image_folder.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;

ImageClassesOptions small_options() {
  ImageClassesOptions options;
  options.classes = 10;
  options.train_per_class = 6;
  options.val_per_class = 3;
  options.image_size = 32;
  options.seed = 5;
  return options;
}

// Relative path -> contents of every file under root.
std::map<std::string, std::vector<uint8_t>> tree_contents(const fs::path& root) {
  std::map<std::string, std::vector<uint8_t>> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file())
      files[entry.path().lexically_relative(root).string()] = read_bytes(entry.path().string());
  return files;
}

TEST(DataImageClassesGenerator, LayoutAndCounts) {
  TempDir dir;
  const auto counts = make_image_classification_dataset(dir / "mini", small_options());
  EXPECT_EQ(counts.classes, 10);
  EXPECT_EQ(counts.train_images, 60);
  EXPECT_EQ(counts.val_images, 30);
  EXPECT_FALSE(fs::exists(dir / "mini.partial"));
  EXPECT_TRUE(fs::is_regular_file(dir / "mini/train/n90000000/n90000000_1.JPEG"));
  EXPECT_TRUE(fs::is_regular_file(dir / "mini/train/n90000009/n90000009_6.JPEG"));
  EXPECT_TRUE(fs::is_regular_file(dir / "mini/val/ILSVRC2012_val_00000001.JPEG"));
  EXPECT_TRUE(fs::is_regular_file(dir / "mini/val/ILSVRC2012_val_00000030.JPEG"));
  EXPECT_FALSE(fs::exists(dir / "mini/val/ILSVRC2012_val_00000031.JPEG"));

  const ImageFolderIndex index = index_imagenet(dir / "mini");
  ASSERT_EQ(index.classes.size(), 10u);
  EXPECT_EQ(index.classes[3], "n90000003");
  EXPECT_EQ(index.train.size(), 60u);
  ASSERT_EQ(index.val.size(), 30u);
  std::vector<int> val_per_class(10, 0);
  for (const auto& sample : index.val) ++val_per_class[sample.label];
  EXPECT_EQ(val_per_class, std::vector<int>(10, 3));
  for (const auto& sample : index.val) {
    const Image image = decode_image_file(sample.path);
    EXPECT_EQ(image.width, 32);
    EXPECT_EQ(image.height, 32);
  }
}

TEST(DataImageClassesGenerator, SameSeedByteIdenticalOtherSeedDifferent) {
  TempDir dir;
  auto options = small_options();
  make_image_classification_dataset(dir / "a", options);
  make_image_classification_dataset(dir / "b", options);
  options.seed = 6;
  make_image_classification_dataset(dir / "c", options);
  const auto a = tree_contents(dir.path() / "a");
  EXPECT_EQ(a.size(), 60u + 30u + 1u);
  EXPECT_EQ(a, tree_contents(dir.path() / "b"));
  const auto c = tree_contents(dir.path() / "c");
  ASSERT_EQ(a.size(), c.size());
  int differing = 0;
  for (const auto& [path, bytes] : a) differing += c.at(path) != bytes;
  EXPECT_GT(differing, 80);
}

TEST(DataImageClassesGenerator, MeanColourCarriesNoLabel) {
  TempDir dir;
  ImageClassesOptions options;
  options.classes = 10;
  options.train_per_class = 100;
  options.val_per_class = 1;
  options.image_size = 24;
  make_image_classification_dataset(dir / "mini", options);
  const ImageFolderIndex index = index_imagenet(dir / "mini");

  std::vector<std::array<double, 3>> image_means;
  std::vector<std::array<double, 3>> class_means(10, {0, 0, 0});
  std::array<double, 3> overall{0, 0, 0};
  for (const auto& sample : index.train) {
    const Image image = decode_image_file(sample.path);
    std::array<double, 3> mean{0, 0, 0};
    for (size_t i = 0; i < image.rgb.size(); ++i) mean[i % 3] += image.rgb[i];
    for (int c = 0; c < 3; ++c) {
      mean[c] /= double(image.rgb.size() / 3);
      class_means[sample.label][c] += mean[c] / options.train_per_class;
      overall[c] += mean[c] / index.train.size();
    }
    image_means.push_back(mean);
  }
  // Per-class mean colours sit in a narrow band around the overall mean (sampling noise is ~5 levels).
  for (int label = 0; label < 10; ++label)
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(class_means[label][c], overall[c], 18.0) << label << "/" << c;
  // And a nearest-class-mean classifier on mean colour is close to chance (10%).
  int correct = 0;
  for (size_t i = 0; i < index.train.size(); ++i) {
    int best = 0;
    double best_distance = 1e300;
    for (int label = 0; label < 10; ++label) {
      double distance = 0;
      for (int c = 0; c < 3; ++c) distance += std::pow(image_means[i][c] - class_means[label][c], 2);
      if (distance < best_distance) best_distance = distance, best = label;
    }
    correct += best == index.train[i].label;
  }
  EXPECT_LT(correct, int(index.train.size() * 0.25)) << correct;
}

TEST(DataImageClassesGenerator, RefusesToOverwriteAndValidatesOptions) {
  TempDir dir;
  testing::write_file(dir / "taken/file.txt", std::string("keep me"));
  EXPECT_THROW(make_image_classification_dataset(dir / "taken", small_options()), Error);
  EXPECT_TRUE(fs::exists(dir / "taken/file.txt"));

  fs::create_directories(dir.path() / "empty");  // an empty directory may be filled
  EXPECT_EQ(make_image_classification_dataset(dir / "empty/", small_options()).train_images, 60);

  auto options = small_options();
  options.classes = 11;
  try {
    make_image_classification_dataset(dir / "bad", options);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("classes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trainbench::data
