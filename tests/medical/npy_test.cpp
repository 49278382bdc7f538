// The hand-written .npy reader and writer against numpy: numpy's files read here, ours read by numpy, and the
// files it must refuse (other dtypes, Fortran order, truncation).
#include "medical/npy.h"

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "medical/python_reference.h"
#include "support/error_message.h"

namespace trainbench::medical {
namespace {

using data::testing::TempDir;
using trainbench::testing::error_message;

TEST(Npy, ReadsWhatNumpyWrites) {
  if (!testing::python_has("numpy")) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  const TempDir dir;
  const nlohmann::json sums = testing::run_reference_json("npy-write " + dir.path().string());
  const NpyArray floats = read_npy(dir / "float32.npy");
  EXPECT_EQ(floats.type, NpyType::kFloat32);
  EXPECT_EQ(floats.shape, (std::vector<int64_t>{1, 3, 4, 5}));
  double sum = 0;
  for (const float value : floats.floats) sum += value;
  EXPECT_NEAR(sum, sums.at("float32_sum").get<double>(), 1e-5);
  const NpyArray bytes = read_npy(dir / "uint8.npy");
  EXPECT_EQ(bytes.type, NpyType::kUint8);
  int64_t byte_sum = 0;
  for (const uint8_t value : bytes.bytes) byte_sum += value;
  EXPECT_EQ(byte_sum, sums.at("uint8_sum").get<int64_t>());
  EXPECT_EQ(read_npy(dir / "vector.npy").shape, (std::vector<int64_t>{7}));
  const NpyArray version2 = read_npy(dir / "version2.npy");
  EXPECT_EQ(version2.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(version2.floats.back(), 5.0f);

  EXPECT_NE(error_message([&] { read_npy(dir / "float64.npy"); }).find("float64.npy: .npy dtype '<f8' is not supported"),
            std::string::npos);
  EXPECT_NE(error_message([&] { read_npy(dir / "fortran.npy"); }).find("Fortran order"), std::string::npos);
}

TEST(Npy, WritesWhatNumpyReads) {
  const TempDir dir;
  write_npy(dir / "x.npy", {1, 2, 3, 4}, std::vector<float>{0.5f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, -1.25f});
  write_npy(dir / "y.npy", {3}, std::vector<uint8_t>{0, 1, 2});
  const NpyArray back = read_npy(dir / "x.npy");
  EXPECT_EQ(back.shape, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(back.floats.back(), -1.25f);
  EXPECT_EQ(data::testing::read_bytes(dir / "x.npy").size() % 64, (24 * 4) % 64) << "header padded to 64 bytes";
  if (!testing::python_has("numpy")) GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  const nlohmann::json x = testing::run_reference_json("npy-read " + (dir / "x.npy"));
  EXPECT_EQ(x.at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(x.at("dtype"), "<f4");
  EXPECT_EQ(x.at("first").get<double>(), 0.5);
  EXPECT_EQ(x.at("last").get<double>(), -1.25);
  const nlohmann::json y = testing::run_reference_json("npy-read " + (dir / "y.npy"));
  EXPECT_EQ(y.at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{3}));
  EXPECT_EQ(y.at("dtype"), "|u1");
  EXPECT_EQ(y.at("sum").get<double>(), 3);
}

TEST(Npy, NamesTheFileForTruncatedOrForeignFiles) {
  const TempDir dir;
  write_npy(dir / "full.npy", {100}, std::vector<float>(100, 1.0f));
  auto bytes = data::testing::read_bytes(dir / "full.npy");
  bytes.resize(bytes.size() - 10);
  data::testing::write_file(dir / "short.npy", bytes);
  EXPECT_NE(error_message([&] { read_npy(dir / "short.npy"); }).find("short.npy: truncated .npy data"), std::string::npos);
  data::testing::write_file(dir / "text.npy", std::string("hello"));
  EXPECT_NE(error_message([&] { read_npy(dir / "text.npy"); }).find("text.npy: not a .npy file"), std::string::npos);
  EXPECT_NE(error_message([&] { read_npy(dir / "absent.npy"); }).find("absent.npy: cannot open"), std::string::npos);
}

// A version 1.0 file whose header says `shape`, followed by `data_bytes` zero bytes.
std::string npy_with_shape(const std::string& shape, size_t data_bytes) {
  const std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + shape + "), }\n";
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file.push_back(static_cast<char>(dict.size() & 0xff));
  file.push_back(static_cast<char>(dict.size() >> 8));
  return file + dict + std::string(data_bytes, '\0');
}

// Issue 32: (1, 4294967296, 4294967296, 24) overflowed to 0 elements and was accepted, (1, -16, 24, 24) was read
// as 16, and a 20-digit dimension ended in "unexpected failure: stoll".
TEST(Npy, RefusesShapesThatAreNotSizesOrOverflow) {
  const TempDir dir;
  const auto message = [&](const std::string& shape) {
    data::testing::write_file(dir / "case_x.npy", npy_with_shape(shape, 64));
    return error_message([&] { read_npy(dir / "case_x.npy"); });
  };
  EXPECT_EQ(message("1, 4294967296, 4294967296, 24"),
            dir / "case_x.npy" + ": .npy shape (1, 4294967296, 4294967296, 24) holds more than 4294967296 elements");
  EXPECT_EQ(message("1, -16, 24, 24"),
            dir / "case_x.npy" + ": .npy shape (1, -16, 24, 24) has dimension '-16'; expected a non-negative integer");
  EXPECT_EQ(message("1, 12345678901234567890, 2"),
            dir / "case_x.npy" + ": .npy shape (1, 12345678901234567890, 2) has dimension 12345678901234567890, more "
                                 "than 4294967296 elements");
  EXPECT_EQ(message("1, , 2"), dir / "case_x.npy" + ": .npy shape (1, , 2) has dimension ''; expected a non-negative integer");
  // A header asking for more than the file holds is refused before anything is allocated.
  EXPECT_EQ(message("1, 65536, 65536"), dir / "case_x.npy" + ": truncated .npy data (64 of 4294967296 bytes)");
  data::testing::write_file(dir / "ok.npy", npy_with_shape("2, 3,", 6));
  EXPECT_EQ(read_npy(dir / "ok.npy").shape, (std::vector<int64_t>{2, 3}));
  data::testing::write_file(dir / "scalar.npy", npy_with_shape("", 1));
  EXPECT_EQ(read_npy(dir / "scalar.npy").bytes.size(), 1u);
}

TEST(Npy, HeaderAloneGivesTypeAndShapeWithReadNpysChecks) {
  const TempDir dir;
  write_npy(dir / "case_y.npy", {1, 2, 3, 4}, std::vector<uint8_t>(24, 1));
  const NpyArray header = read_npy_header(dir / "case_y.npy");
  EXPECT_EQ(header.type, NpyType::kUint8);
  EXPECT_EQ(header.shape, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(header.bytes.empty());
  data::testing::write_file(dir / "case_x.npy", npy_with_shape("1, -16, 24, 24", 64));
  EXPECT_EQ(error_message([&] { read_npy_header(dir / "case_x.npy"); }),
            dir / "case_x.npy" + ": .npy shape (1, -16, 24, 24) has dimension '-16'; expected a non-negative integer");
}

}  // namespace
}  // namespace trainbench::medical
