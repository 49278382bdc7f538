#include "data/image_transforms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace trainbench::data {
namespace {

Normalization identity() {
  Normalization normalization;
  normalization.mean = {0, 0, 0};
  normalization.std = {1, 1, 1};
  return normalization;
}

Image make_image(int width, int height, const std::function<void(int, int, uint8_t*)>& pixel) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(size_t(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) pixel(x, y, &image.rgb[(size_t(y) * width + x) * 3]);
  return image;
}

// Channel c, row y, column x of a CHW buffer.
float at(const std::vector<float>& chw, int size, int c, int y, int x) {
  return chw[(size_t(c) * size + y) * size + x];
}

TEST(DataRng, StreamIsPinned) {
  // Reference values from an independent implementation of splitmix64-seeded xoshiro256**.
  Rng rng(42);
  EXPECT_EQ(rng.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(rng.next_u64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(rng.next_u64(), 0xae17533239e499a1ULL);
  EXPECT_DOUBLE_EQ(rng.uniform(), 0.9246929453253876);
}

TEST(DataRng, BoundedIntegersStayInRange) {
  Rng rng(7);
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 1000; ++i) {
    const int64_t value = rng.uniform_int(-2, 2);
    ASSERT_GE(value, -2);
    ASSERT_LE(value, 2);
    ++seen[value + 2];
  }
  for (int count : seen) EXPECT_GT(count, 150);
}

TEST(DataImageTransforms, RandomResizedCropBoxRespectsScaleAndRatio) {
  Rng rng(3);
  for (int i = 0; i < 2000; ++i) {
    const CropBox box = random_resized_crop_box(200, 150, rng);
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_LE(box.x + box.width, 200);
    ASSERT_LE(box.y + box.height, 150);
    const double scale = double(box.width) * box.height / (200.0 * 150.0);
    EXPECT_GE(scale, 0.07);  // 0.08 up to integer rounding
    EXPECT_LE(scale, 1.0);
    const double ratio = double(box.width) / box.height;
    EXPECT_GE(ratio, 0.7);
    EXPECT_LE(ratio, 1.4);
  }
}

TEST(DataImageTransforms, RandomResizedCropFallsBackToCentreCrop) {
  // No draw fits a 1000x10 strip, so torchvision's fallback applies: height 10, width round(10 * 4/3).
  Rng rng(1);
  const CropBox box = random_resized_crop_box(1000, 10, rng);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 13);
  EXPECT_EQ(box.x, (1000 - 13) / 2);
  EXPECT_EQ(box.y, 0);
}

TEST(DataImageTransforms, WritesExactlyThreeSquarePlanes) {
  const Image image = make_image(50, 40, [](int x, int y, uint8_t* p) { p[0] = p[1] = p[2] = uint8_t(x + y); });
  const int size = 16;
  std::vector<float> out(3 * size * size + 8, -12345.0f);
  Rng rng(5);
  random_resized_crop_flip(image, size, rng, Normalization{}, out.data());
  for (size_t i = 0; i < 3 * size * size; ++i) ASSERT_NE(out[i], -12345.0f) << i;
  for (size_t i = 3 * size * size; i < out.size(); ++i) EXPECT_EQ(out[i], -12345.0f);
}

TEST(DataImageTransforms, CenterCropGeometry) {
  // Shorter side (8) already equals resize_size, so the output is an exact window of the source:
  // left = round((10 - 4) / 2) = 3, top = round((8 - 4) / 2) = 2.
  const Image image = make_image(10, 8, [](int x, int y, uint8_t* p) {
    p[0] = uint8_t(x * 10);
    p[1] = uint8_t(y * 10);
    p[2] = 7;
  });
  std::vector<float> out(3 * 4 * 4);
  resize_center_crop(image, 8, 4, identity(), out.data());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(at(out, 4, 0, y, x), (x + 3) * 10, 1e-3);
      EXPECT_NEAR(at(out, 4, 1, y, x), (y + 2) * 10, 1e-3);
      EXPECT_NEAR(at(out, 4, 2, y, x), 7, 1e-3);
    }
}

TEST(DataImageTransforms, DownscalingAntialiases) {
  // One-pixel stripes of 0 and 200: halving must average them (a point-sampling resize would alias).
  const Image image = make_image(32, 32, [](int x, int, uint8_t* p) { p[0] = p[1] = p[2] = x % 2 ? 200 : 0; });
  std::vector<float> out(3 * 16 * 16);
  resize_center_crop(image, 16, 16, identity(), out.data());
  for (int y = 0; y < 16; ++y)
    for (int x = 1; x < 15; ++x) EXPECT_NEAR(at(out, 16, 0, y, x), 100.0f, 1e-3) << x;
}

TEST(DataImageTransforms, FlipMirrorsColumns) {
  const Image image = make_image(30, 20, [](int x, int y, uint8_t* p) {
    p[0] = uint8_t(x * 8);
    p[1] = uint8_t(y * 12);
    p[2] = uint8_t((x * y) % 251);
  });
  const CropBox box{3, 2, 21, 15};
  const int size = 12;
  std::vector<float> plain(3 * size * size), flipped(3 * size * size);
  crop_resize_normalize(image, box, size, false, Normalization{}, plain.data());
  crop_resize_normalize(image, box, size, true, Normalization{}, flipped.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) EXPECT_EQ(at(flipped, size, c, y, x), at(plain, size, c, y, size - 1 - x));
}

TEST(DataImageTransforms, NormalizationUsesImageNetStatistics) {
  const Image image = make_image(9, 9, [](int, int, uint8_t* p) {
    p[0] = 200;
    p[1] = 100;
    p[2] = 50;
  });
  std::vector<float> out(3 * 4 * 4);
  resize_center_crop(image, 6, 4, Normalization{}, out.data());
  const float expected[3] = {(200 - 0.485f * 255) / (0.229f * 255), (100 - 0.456f * 255) / (0.224f * 255),
                             (50 - 0.406f * 255) / (0.225f * 255)};
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(out[c * 16 + i], expected[c], 1e-4);
}

TEST(DataImageTransforms, SameSeedSameOutput) {
  const Image image = make_image(64, 48, [](int x, int y, uint8_t* p) {
    p[0] = uint8_t(x * 4);
    p[1] = uint8_t(y * 5);
    p[2] = uint8_t(x * y);
  });
  auto run = [&](uint64_t seed) {
    std::vector<float> out(3 * 24 * 24);
    Rng rng(seed);
    random_resized_crop_flip(image, 24, rng, Normalization{}, out.data());
    return out;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

TEST(DataImageTransforms, RejectsBadArguments) {
  const Image image = make_image(8, 8, [](int, int, uint8_t* p) { p[0] = p[1] = p[2] = 1; });
  std::vector<float> out(3 * 16 * 16);
  EXPECT_THROW(resize_center_crop(image, 4, 8, Normalization{}, out.data()), std::runtime_error);
  EXPECT_THROW(crop_resize_normalize(image, CropBox{4, 4, 8, 8}, 4, false, Normalization{}, out.data()),
               std::runtime_error);
}

}  // namespace
}  // namespace trainbench::data
