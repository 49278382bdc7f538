// The Zarr v2 reader and writer (util/zarr.h) against python3-zarr 2.13 (zarr_reference.py): arrays python3-zarr
// writes (every dtype, blosc's codecs and shuffles, zlib, gzip, no compressor as Megatron writes, edge chunks,
// fill values and missing chunks, "/" keys, 0-d) read equal here, whole and in hyperslabs across chunk
// boundaries; arrays written here read equal in python3-zarr; and what the reader refuses.
#include "util/zarr.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/error_message.h"
#include "support/python_script.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::zarr {
namespace {

using testing::error_message;
namespace fs = std::filesystem;

class ZarrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
        fs::temp_directory_path() / ("trainbench_zarr_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::string path(const std::string& name) const { return (directory_ / name).string(); }

  fs::path directory_;
};

ArrayMetadata metadata_of(std::vector<int64_t> shape, std::vector<int64_t> chunks, DataType dtype) {
  ArrayMetadata metadata;
  metadata.shape = std::move(shape);
  metadata.chunks = std::move(chunks);
  metadata.dtype = dtype;
  return metadata;
}

bool python_has_zarr() { return testing::python_has("zarr"); }

nlohmann::json run_reference(const std::string& command, const std::string& argument) {
  const auto run =
      testing::or_throw(testing::run_python_script(TRAINBENCH_ZARR_REFERENCE_SCRIPT, command + " " + argument));
  return nlohmann::json::parse(run.output);
}

// zarr_reference.py's pattern(): multiples of 1/8 (floats), or integers, exact in every dtype used.
std::vector<float> pattern(int64_t count, DataType type) {
  std::vector<float> values;
  const bool is_unsigned = type == DataType::kUInt8 || type == DataType::kUInt16;
  const bool is_integer = !(type == DataType::kFloat16 || type == DataType::kBFloat16 || type == DataType::kFloat32 ||
                            type == DataType::kFloat64);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t base = k * 37 % 101;
    values.push_back(is_unsigned ? base : is_integer ? base - 50 : (base - 50) / 8.0f);
  }
  return values;
}

std::vector<float> json_values(const nlohmann::json& values) {
  std::vector<float> result;
  for (const auto& value : values) result.push_back(value.is_null() ? NAN : value.get<float>());
  return result;
}

// NaN equals NaN: fill values of NaN must read as NaN.
void expect_same_values(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i]))
      EXPECT_TRUE(std::isnan(actual[i])) << "element " << i;
    else
      EXPECT_EQ(actual[i], expected[i]) << "element " << i;
  }
}

// The C-order sub-block [start, start + count) of a full array of `shape`.
std::vector<float> sub_block(const std::vector<float>& full, const std::vector<int64_t>& shape, const Region& region) {
  std::vector<float> block;
  std::vector<int64_t> position(shape.size(), 0);
  const int64_t total = region.element_count();
  for (int64_t n = 0; n < total; ++n) {
    int64_t flat = 0, rest = n;
    for (size_t d = shape.size(); d-- > 0;) {
      position[d] = region.start[d] + rest % region.count[d];
      rest /= region.count[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + position[d];
    block.push_back(full[static_cast<size_t>(flat)]);
  }
  return block;
}

TEST_F(ZarrTest, ReadsEveryArrayPythonZarrWritesWholeAndInHyperslabs) {
  if (!python_has_zarr()) GTEST_SKIP() << "python3-zarr is not installed";
  const nlohmann::json expected = run_reference("write", directory_.string());
  ASSERT_EQ(expected.size(), 13u);
  for (const auto& [name, description] : expected.items()) {
    SCOPED_TRACE(name);
    const Array array = Array::open(path(name));
    const std::vector<int64_t> shape = description["shape"].get<std::vector<int64_t>>();
    ASSERT_EQ(array.metadata().shape, shape);
    const std::vector<float> full = json_values(description["values"]);
    expect_same_values(array.read_float32(whole(array.metadata())), full);
    if (shape.empty()) continue;
    // A slab that starts inside the first chunk and ends inside the last of each dimension.
    Region slab{std::vector<int64_t>(shape.size()), shape};
    for (size_t d = 0; d < shape.size(); ++d) {
      slab.start[d] = shape[d] > 2 ? 1 : 0;
      slab.count[d] = shape[d] - slab.start[d] - (shape[d] > 3 ? 1 : 0);
    }
    expect_same_values(array.read_float32(slab), sub_block(full, shape, slab));
  }
  const ArrayMetadata blosc = Array::open(path("u2_blosc_lz4hc_autoshuffle")).metadata();
  EXPECT_EQ(blosc.compressor.blosc_name, "lz4hc");
  EXPECT_EQ(blosc.compressor.blosc_shuffle, -1);
  EXPECT_TRUE(Array::open(path("i4_big_endian")).metadata().big_endian);
  EXPECT_FALSE(Array::open(path("f4_megatron_stacked")).metadata().fill_value.has_value());
}

TEST_F(ZarrTest, RawBytesOfAStackedLayerAreTheRankSlice) {
  if (!python_has_zarr()) GTEST_SKIP() << "python3-zarr is not installed";
  run_reference("write", directory_.string());
  const Array array = Array::open(path("f4_megatron_stacked"));  // [4, 6, 8], chunks [1, 3, 8]
  // Pipeline stage 1 of 2 (layers 2-3), tensor rank 1 of 2 (rows 3-5): exactly two chunks touched.
  const Region slice{{2, 3, 0}, {2, 3, 8}};
  std::vector<float> bytes(static_cast<size_t>(slice.element_count()));
  array.read_bytes(slice, bytes.data());
  const std::vector<float> full = pattern(4 * 6 * 8, DataType::kFloat32);
  EXPECT_EQ(bytes, sub_block(full, {4, 6, 8}, slice));
}

// Arrays written here, each with its expected values, for python3-zarr to read.
struct Written {
  std::string name;
  std::vector<float> values;
};

std::vector<Written> write_arrays(const fs::path& directory) {
  std::vector<Written> written;
  auto add = [&](const std::string& name, ArrayMetadata metadata) {
    const Array array = Array::create((directory / name).string(), metadata);
    std::vector<float> values = pattern(whole(metadata).element_count(), metadata.dtype);
    array.write_float32(whole(metadata), values.data());
    written.push_back({name, values});
  };
  ArrayMetadata megatron;  // as Megatron's zarr strategy creates: compressor None, fill_value None
  megatron.shape = {4, 6, 8};
  megatron.chunks = {1, 3, 8};
  add("f4_megatron", megatron);
  ArrayMetadata bf16 = megatron;
  bf16.dtype = DataType::kBFloat16;
  add("bf16_megatron", bf16);
  ArrayMetadata half = metadata_of({7, 5}, {3, 2}, DataType::kFloat16);
  half.compressor = {Compressor::Kind::kBlosc, 7, "zstd", 2, 0};
  add("f2_blosc_zstd_bitshuffle", half);
  ArrayMetadata wide = metadata_of({3, 4, 5}, {2, 3, 2}, DataType::kFloat64);
  wide.compressor = {Compressor::Kind::kZlib, 6};
  wide.dimension_separator = '/';
  add("f8_zlib_slash", wide);
  ArrayMetadata gzip = metadata_of({11}, {4}, DataType::kFloat32);
  gzip.compressor = {Compressor::Kind::kGzip, 9};
  gzip.fill_value = 2.5;
  add("f4_gzip", gzip);
  ArrayMetadata lz4 = metadata_of({9, 2}, {4, 2}, DataType::kFloat32);
  lz4.compressor = {Compressor::Kind::kBlosc, 5, "lz4", 1, 0};
  add("f4_blosc_lz4", lz4);
  ArrayMetadata blosclz = metadata_of({6}, {4}, DataType::kFloat32);
  blosclz.compressor = {Compressor::Kind::kBlosc, 5, "blosclz", 0, 0};
  add("f4_blosc_blosclz_noshuffle", blosclz);
  return written;
}

TEST_F(ZarrTest, PythonZarrReadsArraysWrittenHere) {
  if (!python_has_zarr()) GTEST_SKIP() << "python3-zarr is not installed";
  std::vector<Written> written = write_arrays(directory_);
  // Integers go in as bytes; two partial writes share chunks, and one chunk is never written (fill 3).
  ArrayMetadata integers = metadata_of({5, 7}, {2, 3}, DataType::kInt32);
  integers.compressor = {Compressor::Kind::kBlosc, 5, "lz4", -1, 0};
  integers.fill_value = 3;
  const Array array = Array::create(path("i4_partial_writes"), integers);
  const std::vector<int32_t> left = {1, 2, 3, 4, 5, 6, 7, 8}, right = {-1, -2, -3, -4};
  array.write_bytes(Region{{0, 0}, {2, 4}}, left.data());
  array.write_bytes(Region{{0, 4}, {2, 2}}, right.data());
  std::vector<float> expected(35, 3.0f);
  for (int i = 0; i < 8; ++i) expected[(i / 4) * 7 + i % 4] = static_cast<float>(left[i]);
  for (int i = 0; i < 4; ++i) expected[(i / 2) * 7 + 4 + i % 2] = static_cast<float>(right[i]);
  written.push_back({"i4_partial_writes", expected});
  EXPECT_FALSE(fs::exists(array.chunk_path({2, 0})));

  const nlohmann::json read = run_reference("read", directory_.string());
  ASSERT_EQ(read.size(), written.size());
  for (const Written& array_written : written) {
    SCOPED_TRACE(array_written.name);
    expect_same_values(json_values(read.at(array_written.name).at("values")), array_written.values);
  }
  EXPECT_EQ(read["bf16_megatron"]["dtype"], "bfloat16");
  expect_same_values(Array::open(path("i4_partial_writes")).read_float32(whole(integers)), expected);
}

TEST_F(ZarrTest, ZarrayTextMatchesMegatronsFields) {
  ArrayMetadata metadata = metadata_of({96, 36864, 12288}, {1, 4608, 12288}, DataType::kBFloat16);
  const nlohmann::json document = nlohmann::json::parse(format_zarray(metadata));
  EXPECT_EQ(document["dtype"], "bfloat16");
  EXPECT_TRUE(document["compressor"].is_null());
  EXPECT_TRUE(document["fill_value"].is_null());
  EXPECT_TRUE(document["filters"].is_null());
  EXPECT_EQ(document["order"], "C");
  EXPECT_EQ(document["zarr_format"], 2);
  EXPECT_EQ(parse_zarray(format_zarray(metadata), "x").chunks, metadata.chunks);
}

TEST_F(ZarrTest, HalfAndBfloat16RoundToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float value = half_to_float(static_cast<uint16_t>(bits));
    if (!std::isnan(value)) {
      EXPECT_EQ(float_to_half(value), bits);
    }
    const float wide = bfloat16_to_float(static_cast<uint16_t>(bits));
    if (!std::isnan(wide)) {
      EXPECT_EQ(float_to_bfloat16(wide), bits);
    }
  }
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
}

// ---- refusals ----

std::string zarray_with(const std::string& field, const nlohmann::json& value) {
  nlohmann::json document = nlohmann::json::parse(format_zarray(metadata_of({4, 4}, {2, 2}, DataType::kFloat32)));
  if (value.is_discarded())
    document.erase(field);
  else
    document[field] = value;
  return document.dump();
}

TEST_F(ZarrTest, RefusesBadZarrayFieldsByName) {
  const nlohmann::json missing = nlohmann::json::value_t::discarded;
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"chunks", missing, "field \"chunks\" is missing"},
      {"shape", "4", "field \"shape\""},
      {"chunks", {2}, "field \"chunks\""},
      {"chunks", {0, 2}, "field \"chunks\""},
      {"dtype", "<c8", "field \"dtype\": \"<c8\" is not supported"},
      {"dtype", "<V2", "opaque void type"},
      {"order", "F", "\"F\" (Fortran order) is not supported"},
      {"filters", nlohmann::json::parse(R"([{"id": "delta", "dtype": "<f4"}])"), "filter \"delta\" is not supported"},
      {"compressor", {{"id", "lz4"}, {"acceleration", 1}}, "compressor \"lz4\" is not supported"},
      {"compressor", {{"id", "blosc"}, {"cname", "snappy2"}, {"clevel", 5}, {"shuffle", 1}}, "cname \"snappy2\""},
      {"compressor", {{"id", "zlib"}, {"level", 12}}, "field \"compressor\""},
      {"zarr_format", 3, "field \"zarr_format\""},
      {"fill_value", "abc", "field \"fill_value\""},
      {"dimension_separator", "-", "field \"dimension_separator\""},
  };
  for (const auto& [field, value, message] : cases) {
    SCOPED_TRACE(field + " = " + value.dump());
    const std::string text = zarray_with(field, value);
    const std::string error = error_message([&] { parse_zarray(text, "/ckpt/layer/.zarray"); });
    EXPECT_NE(error.find("/ckpt/layer/.zarray"), std::string::npos) << error;
    EXPECT_NE(error.find(message), std::string::npos) << error;
  }
  EXPECT_NE(error_message([] { parse_zarray("{\"zarr_format\": 2, ", "z"); }).find("not JSON"), std::string::npos);
  const std::string huge = zarray_with("chunks", {100000, 100000});
  EXPECT_NE(error_message([&] { parse_zarray(huge, "z"); }).find("a chunk holds more than"), std::string::npos);
}

TEST_F(ZarrTest, RefusesChunksOfTheWrongSizeNamingTheChunkFile) {
  ArrayMetadata plain = metadata_of({4, 4}, {2, 2}, DataType::kFloat32);
  const Array array = Array::create(path("plain"), plain);
  const std::vector<float> values(16, 1.0f);
  array.write_float32(whole(plain), values.data());
  fs::resize_file(array.chunk_path({1, 0}), 12);
  std::string error = error_message([&] { array.read_float32(whole(plain)); });
  EXPECT_NE(error.find(array.chunk_path({1, 0}) + ": holds 12 bytes; a chunk of this array holds 16"),
            std::string::npos)
      << error;
  // The chunks the read does not touch still read.
  EXPECT_EQ(array.read_float32(Region{{0, 0}, {2, 4}}), std::vector<float>(8, 1.0f));

  // A blosc chunk of another array's size, then one that is not blosc at all.
  ArrayMetadata blosc = plain;
  blosc.compressor = {Compressor::Kind::kBlosc, 5, "lz4", 1, 0};
  const Array small = Array::create(path("small"), blosc);
  small.write_float32(whole(blosc), values.data());
  ArrayMetadata smaller = blosc;
  smaller.chunks = {1, 2};
  const Array other = Array::create(path("other"), smaller);
  other.write_float32(whole(smaller), values.data());
  fs::copy_file(other.chunk_path({0, 0}), small.chunk_path({0, 0}), fs::copy_options::overwrite_existing);
  error = error_message([&] { small.read_float32(whole(blosc)); });
  EXPECT_NE(error.find(small.chunk_path({0, 0}) + ": decompresses to 8 bytes; a chunk of this array holds 16"),
            std::string::npos)
      << error;
  write_file_atomically(small.chunk_path({0, 1}), std::string(20, 'x'));
  error = error_message([&] { small.read_float32(Region{{0, 2}, {1, 1}}); });
  EXPECT_NE(error.find(small.chunk_path({0, 1}) + ": not a blosc buffer"), std::string::npos) << error;
  write_file_atomically(small.chunk_path({1, 1}), std::string(4096, 'x'));
  error = error_message([&] { small.read_float32(Region{{2, 2}, {1, 1}}); });
  EXPECT_NE(error.find(small.chunk_path({1, 1}) + ": holds 4096 bytes, more than a chunk of 16 bytes compresses to"),
            std::string::npos)
      << error;

  ArrayMetadata zlib = plain;
  zlib.compressor = {Compressor::Kind::kZlib, 1};
  const Array deflated = Array::create(path("zlib"), zlib);
  deflated.write_float32(whole(zlib), values.data());
  write_file_atomically(deflated.chunk_path({0, 0}), "not a zlib stream");
  error = error_message([&] { deflated.read_float32(whole(zlib)); });
  EXPECT_NE(error.find(deflated.chunk_path({0, 0}) + ": zlib cannot decompress it"), std::string::npos) << error;
}

TEST_F(ZarrTest, MissingChunkOfANullFillValueIsAnError) {
  ArrayMetadata metadata = metadata_of({4}, {2}, DataType::kFloat32);
  const Array array = Array::create(path("a"), metadata);
  const std::vector<float> two = {1, 2};
  array.write_float32(Region{{0}, {2}}, two.data());
  EXPECT_EQ(array.read_float32(Region{{0}, {2}}), two);
  const std::string error = error_message([&] { array.read_float32(whole(metadata)); });
  EXPECT_NE(error.find(array.chunk_path({1}) + ": chunk file is missing and the array's fill_value is null"),
            std::string::npos)
      << error;
}

TEST_F(ZarrTest, RefusesBadRegionsAndWritesBeforeTouchingAnyChunk) {
  ArrayMetadata metadata = metadata_of({4, 6}, {2, 3}, DataType::kInt32);
  const Array array = Array::create(path("a"), metadata);
  const std::vector<float> values(24, 1.0f);
  EXPECT_NE(
      error_message([&] { array.write_float32(whole(metadata), values.data()); }).find("integers are written as bytes"),
      std::string::npos);
  EXPECT_NE(error_message([&] {
              array.write_bytes(Region{{3, 0}, {2, 6}}, values.data());
            }).find("outside the array's shape"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              array.write_bytes(Region{{0}, {4}}, values.data());
            }).find("a region of 1/1 dimensions"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              array.read_bytes(Region{{-1, 0}, {1, 1}}, nullptr);
            }).find("outside"),
            std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("a")), fs::directory_iterator()), 1);  // .zarray alone
  EXPECT_NE(error_message([&] { Array::create(path("a"), metadata); }).find("already holds a Zarr array"),
            std::string::npos);
  EXPECT_NE(error_message([&] { Array::open(path("nothing")); }).find("no .zarray file"), std::string::npos);
}

}  // namespace
}  // namespace trainbench::zarr
