#include "data/image_decode.h"

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "support/error_message.h"
#include "test_files.h"
#include "util/error.h"

namespace trainbench::data {
namespace {

using trainbench::testing::error_message;

using testing::TempDir;
using testing::write_file;

// A smooth image (JPEG-friendly) with distinct values in every channel.
Image gradient_image(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.resize(size_t(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &image.rgb[(size_t(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(40 + 160 * x / width);
      p[1] = static_cast<uint8_t>(30 + 180 * y / height);
      p[2] = static_cast<uint8_t>(200 - 100 * (x + y) / (width + height));
    }
  return image;
}

int max_abs_difference(const Image& a, const Image& b) {
  int worst = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) worst = std::max(worst, std::abs(int(a.rgb[i]) - int(b.rgb[i])));
  return worst;
}

int jpeg_colorspace(const std::vector<uint8_t>& jpeg) {
  tjhandle handle = tjInitDecompress();
  int width = 0, height = 0, subsampling = 0, colorspace = -1;
  tjDecompressHeader3(handle, jpeg.data(), jpeg.size(), &width, &height, &subsampling, &colorspace);
  tjDestroy(handle);
  return colorspace;
}

// libpng's simplified writer, for PNG flavours encode_png does not produce.
std::vector<uint8_t> write_png(int width, int height, png_uint_32 format, const void* pixels,
                               const void* colormap = nullptr, int colormap_entries = 0) {
  png_image description;
  std::memset(&description, 0, sizeof(description));
  description.version = PNG_IMAGE_VERSION;
  description.width = width;
  description.height = height;
  description.format = format;
  description.colormap_entries = colormap_entries;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&description, nullptr, &size, 0, pixels, 0, colormap));
  std::vector<uint8_t> png(size);
  EXPECT_TRUE(png_image_write_to_memory(&description, png.data(), &size, 0, pixels, 0, colormap));
  png.resize(size);
  return png;
}

TEST(DataImageDecode, RgbJpegKeepsPixelValues) {
  const Image original = gradient_image(48, 40);
  const auto jpeg = encode_jpeg(original, 95);
  const Image decoded = decode_image(jpeg.data(), jpeg.size(), "rgb.jpg");
  ASSERT_EQ(decoded.width, 48);
  ASSERT_EQ(decoded.height, 40);
  ASSERT_EQ(decoded.rgb.size(), original.rgb.size());
  EXPECT_LE(max_abs_difference(decoded, original), 12);
}

TEST(DataImageDecode, GrayscaleJpegBecomesRgb) {
  const int width = 32, height = 24;
  std::vector<uint8_t> gray(width * height);
  for (int i = 0; i < width * height; ++i) gray[i] = static_cast<uint8_t>(60 + (i % width) * 4);
  tjhandle handle = tjInitCompress();
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(handle, gray.data(), width, 0, height, TJPF_GRAY, &buffer, &size, TJSAMP_GRAY, 95, 0), 0);
  const std::vector<uint8_t> jpeg(buffer, buffer + size);
  tjFree(buffer);
  tjDestroy(handle);
  ASSERT_EQ(jpeg_colorspace(jpeg), TJCS_GRAY);

  const Image decoded = decode_image(jpeg.data(), jpeg.size(), "gray.jpg");
  ASSERT_EQ(decoded.width, width);
  ASSERT_EQ(decoded.height, height);
  for (int i = 0; i < width * height; ++i) {
    EXPECT_EQ(decoded.rgb[i * 3], decoded.rgb[i * 3 + 1]);
    EXPECT_EQ(decoded.rgb[i * 3], decoded.rgb[i * 3 + 2]);
    EXPECT_NEAR(decoded.rgb[i * 3], gray[i], 6);
  }
}

TEST(DataImageDecode, CmykJpegColoursComeOutRight) {
  // Four 16x16 blocks side by side: red, blue, 50% black and white in ink amounts.
  const int width = 64, height = 16;
  const uint8_t inks[4][4] = {{0, 255, 255, 0}, {255, 255, 0, 0}, {0, 0, 0, 128}, {0, 0, 0, 0}};
  const uint8_t expected[4][3] = {{255, 0, 0}, {0, 0, 255}, {127, 127, 127}, {255, 255, 255}};
  std::vector<uint8_t> ink(size_t(width) * height * 4);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) std::memcpy(&ink[(size_t(y) * width + x) * 4], inks[x / 16], 4);
  const auto jpeg = encode_jpeg_cmyk(ink, width, height, 95);
  const int colorspace = jpeg_colorspace(jpeg);
  ASSERT_TRUE(colorspace == TJCS_YCCK || colorspace == TJCS_CMYK) << colorspace;

  const Image decoded = decode_image(jpeg.data(), jpeg.size(), "cmyk.jpg");
  ASSERT_EQ(decoded.width, width);
  for (int block = 0; block < 4; ++block) {
    const uint8_t* pixel = &decoded.rgb[(size_t(8) * width + block * 16 + 8) * 3];  // block centre
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(pixel[c], expected[block][c], 8) << "block " << block << " channel " << c;
  }
}

TEST(DataImageDecode, PngNamedJpegIsDetectedByContent) {
  TempDir dir;
  const Image original = gradient_image(20, 10);
  const std::string path = dir / "n02105855_2933.JPEG";
  write_file(path, encode_png(original));
  const Image decoded = decode_image_file(path);
  EXPECT_EQ(decoded.width, 20);
  EXPECT_EQ(decoded.height, 10);
  EXPECT_EQ(decoded.rgb, original.rgb);  // PNG is lossless
}

TEST(DataImageDecode, PngFlavoursBecomeRgb8) {
  auto decode = [](const std::vector<uint8_t>& png) { return decode_image(png.data(), png.size(), "x.png"); };
  const std::vector<uint8_t> expected = {0, 0, 0, 85, 85, 85, 170, 170, 170, 255, 255, 255};

  const uint8_t gray[4] = {0, 85, 170, 255};
  EXPECT_EQ(decode(write_png(4, 1, PNG_FORMAT_GRAY, gray)).rgb, expected);

  const uint8_t gray_alpha[8] = {0, 10, 85, 255, 170, 0, 255, 99};
  EXPECT_EQ(decode(write_png(4, 1, PNG_FORMAT_GA, gray_alpha)).rgb, expected);

  const uint8_t rgba[8] = {10, 20, 30, 0, 200, 150, 100, 255};
  EXPECT_EQ(decode(write_png(2, 1, PNG_FORMAT_RGBA, rgba)).rgb, (std::vector<uint8_t>{10, 20, 30, 200, 150, 100}));

  const uint8_t palette[6] = {255, 0, 0, 0, 0, 255};
  const uint8_t indices[3] = {1, 0, 1};
  EXPECT_EQ(decode(write_png(3, 1, PNG_FORMAT_RGB_COLORMAP, indices, palette, 2)).rgb,
            (std::vector<uint8_t>{0, 0, 255, 255, 0, 0, 0, 0, 255}));

  // 16-bit samples keep their high byte (the writer's linear 16-bit format stores them unchanged).
  const uint16_t deep[3] = {0x1234, 0xABCD, 0xFF00};
  EXPECT_EQ(decode(write_png(1, 1, PNG_FORMAT_LINEAR_RGB, deep)).rgb, (std::vector<uint8_t>{0x12, 0xAB, 0xFF}));
}

TEST(DataImageDecode, TruncatedJpegIsAnErrorNamingTheFile) {
  TempDir dir;
  const auto jpeg = encode_jpeg(gradient_image(64, 64), 90);
  const std::string path = dir / "truncated.JPEG";
  write_file(path, std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() * 6 / 10));
  const std::string message = error_message([&] { decode_image_file(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("Premature end"), std::string::npos) << message;
}

TEST(DataImageDecode, TruncatedPngIsAnErrorNamingTheFile) {
  TempDir dir;
  const auto png = encode_png(gradient_image(32, 32));
  const std::string path = dir / "truncated.png";
  write_file(path, std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2));
  const std::string message = error_message([&] { decode_image_file(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("PNG"), std::string::npos) << message;
}

TEST(DataImageDecode, JunkBeforeEndOfImageIsTolerated) {
  // libjpeg warns "extraneous bytes before marker 0xd9" but the picture is complete; some real
  // ImageNet files look like this.
  const Image original = gradient_image(32, 32);
  auto jpeg = encode_jpeg(original, 95);
  ASSERT_EQ(jpeg[jpeg.size() - 2], 0xFF);
  ASSERT_EQ(jpeg[jpeg.size() - 1], 0xD9);
  jpeg.insert(jpeg.end() - 2, {1, 2, 3, 4, 5});
  const Image decoded = decode_image(jpeg.data(), jpeg.size(), "junk.jpg");
  EXPECT_LE(max_abs_difference(decoded, original), 12);
}

TEST(DataImageDecode, GarbageAndEmptyFilesAreErrors) {
  TempDir dir;
  const std::string garbage = dir / "garbage.JPEG";
  write_file(garbage, std::string("this is not an image at all"));
  std::string message = error_message([&] { decode_image_file(garbage); });
  EXPECT_NE(message.find(garbage), std::string::npos) << message;
  EXPECT_NE(message.find("expected JPEG"), std::string::npos) << message;

  const std::string empty = dir / "empty.jpg";
  write_file(empty, std::string());
  message = error_message([&] { decode_image_file(empty); });
  EXPECT_NE(message.find(empty), std::string::npos) << message;

  // A JPEG signature followed by junk must not decode to anything.
  const std::vector<uint8_t> fake = {0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3, 4, 5, 6, 7, 8};
  message = error_message([&] { decode_image(fake.data(), fake.size(), "fake.jpg"); });
  EXPECT_NE(message.find("fake.jpg"), std::string::npos) << message;
}

TEST(DataImageDecode, FailuresDoNotSpoilLaterDecodesOnTheSameThread) {
  const auto good = encode_jpeg(gradient_image(16, 16), 90);
  const std::vector<uint8_t> bad_header = {0xFF, 0xD8, 0xFF, ' ', 'g', 'a', 'r', 'b', 'a', 'g', 'e'};
  const std::vector<uint8_t> truncated(good.begin(), good.begin() + good.size() / 2);
  for (const auto* bad : {&bad_header, &truncated}) {
    EXPECT_THROW(decode_image(bad->data(), bad->size(), "bad.jpg"), Error);
    EXPECT_EQ(decode_image(good.data(), good.size(), "good.jpg").width, 16);
  }
}

TEST(DataImageDecode, MissingFileIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir / "absent.JPEG";
  const std::string message = error_message([&] { decode_image_file(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
}

}  // namespace
}  // namespace trainbench::data
