#include "util/zarr.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <blosc.h>
#include <zlib.h>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::zarr {

namespace {

using nlohmann::json;

// numpy's limit on dimensions; more would only be a malformed file.
constexpr size_t kMaxDimensions = 32;
// One chunk must fit one blosc buffer (libblosc 1's limit, about 2 GiB); zarr's chunks are held whole in memory
// too, so the same bound keeps a malformed .zarray from making us allocate more.
constexpr int64_t kMaxChunkBytes = BLOSC_MAX_BUFFERSIZE;

struct DtypeSpelling {
  DataType type;
  const char* kind_and_size;  // numpy's spelling without the byte-order character
  int size;
};

constexpr DtypeSpelling kDtypes[] = {
    {DataType::kFloat16, "f2", 2}, {DataType::kFloat32, "f4", 4}, {DataType::kFloat64, "f8", 8},
    {DataType::kInt8, "i1", 1},    {DataType::kInt16, "i2", 2},   {DataType::kInt32, "i4", 4},
    {DataType::kInt64, "i8", 8},   {DataType::kUInt8, "u1", 1},   {DataType::kUInt16, "u2", 2},
    {DataType::kUInt32, "u4", 4},  {DataType::kUInt64, "u8", 8},
};

bool is_float(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBFloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat64;
}

// Parses a dtype string; sets `big_endian`. Throws naming the field.
DataType parse_dtype(const std::string& name, bool& big_endian, const std::string& source) {
  big_endian = false;
  if (name == "bfloat16") return DataType::kBFloat16;
  if (name == "<V2" || name == "|V2")
    fail(source,
         "field \"dtype\": \"" + name + "\" is an opaque void type (Megatron renames bfloat16's to \"bfloat16\")");
  if (name.size() == 3) {
    const char order = name[0];
    for (const DtypeSpelling& spelling : kDtypes) {
      if (name.compare(1, 2, spelling.kind_and_size) != 0) continue;
      if (spelling.size == 1 && (order == '|' || order == '<' || order == '>')) return spelling.type;
      if (spelling.size > 1 && (order == '<' || order == '>')) {
        big_endian = order == '>';
        return spelling.type;
      }
    }
  }
  fail(source,
       "field \"dtype\": \"" + name +
           "\" is not supported (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 bfloat16, and > orders)");
}

const json& required_field(const json& document, const char* name, const std::string& source) {
  const auto it = document.find(name);
  if (it == document.end()) fail(source, std::string("field \"") + name + "\" is missing");
  return *it;
}

[[noreturn]] void field_error(const std::string& source, const char* name, const std::string& expected,
                              const json& value) {
  fail(source, std::string("field \"") + name + "\": expected " + expected + ", found " + json_excerpt(value));
}

std::vector<int64_t> parse_dimensions(const json& value, const char* name, int64_t minimum, const std::string& source) {
  if (!value.is_array() || value.size() > kMaxDimensions)
    field_error(source, name, "an array of at most 32 integers", value);
  std::vector<int64_t> dimensions;
  for (const json& entry : value) {
    if (!entry.is_number_integer() || entry.get<int64_t>() < minimum)
      field_error(source, name, "integers >= " + std::to_string(minimum), value);
    dimensions.push_back(entry.get<int64_t>());
  }
  return dimensions;
}

int json_int(const json& object, const char* name, int low, int high, const std::string& source, const char* field) {
  const auto it = object.find(name);
  if (it == object.end()) fail(source, std::string("field \"") + field + "\": \"" + name + "\" is missing");
  if (!it->is_number_integer() || it->get<int64_t>() < low || it->get<int64_t>() > high)
    field_error(
        source, field,
        std::string("\"") + name + "\" an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]", *it);
  return it->get<int>();
}

Compressor parse_blosc(const json& value, const std::string& source) {
  Compressor compressor;
  compressor.kind = Compressor::Kind::kBlosc;
  const auto name = value.find("cname");
  if (name == value.end() || !name->is_string()) field_error(source, "compressor", "a blosc \"cname\" string", value);
  compressor.blosc_name = name->get<std::string>();
  if (blosc_compname_to_compcode(compressor.blosc_name.c_str()) < 0)
    fail(source, "compressor blosc with cname \"" + compressor.blosc_name + "\" is not in this libblosc " +
                     BLOSC_VERSION_STRING + " (it has " + blosc_list_compressors() + ")");
  compressor.level = json_int(value, "clevel", 0, 9, source, "compressor");
  compressor.blosc_shuffle = json_int(value, "shuffle", -1, 2, source, "compressor");
  compressor.blosc_block_size =
      value.contains("blocksize") ? json_int(value, "blocksize", 0, 1 << 30, source, "compressor") : 0;
  return compressor;
}

Compressor parse_compressor(const json& value, const std::string& source) {
  if (value.is_null()) return Compressor{};
  if (!value.is_object()) field_error(source, "compressor", "null or an object", value);
  const auto id = value.find("id");
  if (id == value.end() || !id->is_string())
    field_error(source, "compressor", "an object with an \"id\" string", value);
  const std::string codec = id->get<std::string>();
  if (codec == "blosc") return parse_blosc(value, source);
  if (codec == "zlib" || codec == "gzip") {
    Compressor compressor;
    compressor.kind = codec == "zlib" ? Compressor::Kind::kZlib : Compressor::Kind::kGzip;
    compressor.level = json_int(value, "level", 0, 9, source, "compressor");
    return compressor;
  }
  fail(source, "compressor \"" + codec + "\" is not supported (supported: null, blosc, zlib, gzip)");
}

std::optional<double> parse_fill_value(const json& value, DataType type, const std::string& source) {
  if (value.is_null()) return std::nullopt;
  if (is_float(type)) {
    if (value.is_number()) return value.get<double>();
    if (value == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (value == "Infinity") return std::numeric_limits<double>::infinity();
    if (value == "-Infinity") return -std::numeric_limits<double>::infinity();
    field_error(source, "fill_value", "null, a number, \"NaN\", \"Infinity\" or \"-Infinity\"", value);
  }
  if (!value.is_number_integer()) field_error(source, "fill_value", "null or an integer (integer dtype)", value);
  const double number = value.is_number_unsigned() ? static_cast<double>(value.get<uint64_t>())
                                                   : static_cast<double>(value.get<int64_t>());
  const int bits = 8 * element_size(type);
  const bool is_signed =
      type == DataType::kInt8 || type == DataType::kInt16 || type == DataType::kInt32 || type == DataType::kInt64;
  const double low = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double high = std::ldexp(1.0, is_signed ? bits - 1 : bits);  // exclusive
  if (number < low || number >= high) field_error(source, "fill_value", "an integer in the dtype's range", value);
  return number;
}

void check_filters_and_order(const json& document, const std::string& source) {
  const json& order = required_field(document, "order", source);
  if (order == "F") fail(source, "field \"order\": \"F\" (Fortran order) is not supported; only \"C\"");
  if (order != "C") field_error(source, "order", "\"C\"", order);
  const json& filters = required_field(document, "filters", source);
  if (filters.is_null() || (filters.is_array() && filters.empty())) return;
  if (!filters.is_array()) field_error(source, "filters", "null or an array", filters);
  const json& first = filters.front();
  const std::string id = first.is_object() && first.contains("id") ? json_excerpt(first["id"]) : json_excerpt(first);
  fail(source, "field \"filters\": filter " + id + " is not supported (only null)");
}

// Throws when the element count or a chunk's bytes overflow or pass the limits.
void check_sizes(const ArrayMetadata& metadata, const std::string& source) {
  int64_t chunk_elements = 1;
  for (size_t d = 0; d < metadata.chunks.size(); ++d) {
    if (metadata.chunks[d] > kMaxChunkBytes / chunk_elements)
      fail(source, "field \"chunks\": a chunk holds more than " + std::to_string(kMaxChunkBytes) + " bytes");
    chunk_elements *= metadata.chunks[d];
  }
  if (chunk_elements * element_size(metadata.dtype) > kMaxChunkBytes)
    fail(source, "field \"chunks\": a chunk holds more than " + std::to_string(kMaxChunkBytes) + " bytes");
  int64_t elements = 1;
  for (const int64_t extent : metadata.shape) {
    if (extent != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / extent)
      fail(source, "field \"shape\": more than 2^60 bytes");
    elements *= extent;
  }
}

void check_separator(const json& document, ArrayMetadata& metadata, const std::string& source) {
  const auto separator = document.find("dimension_separator");
  if (separator == document.end() || separator->is_null()) return;
  if (*separator == ".") return;
  if (*separator != "/") field_error(source, "dimension_separator", "\".\" or \"/\"", *separator);
  metadata.dimension_separator = '/';
}

int64_t product(const std::vector<int64_t>& values) {
  int64_t result = 1;
  for (const int64_t value : values) result *= value;
  return result;
}

std::string shape_text(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t d = 0; d < values.size(); ++d) text += (d ? ", " : "") + std::to_string(values[d]);
  return text + "]";
}

}  // namespace

int element_size(DataType type) {
  if (type == DataType::kBFloat16) return 2;
  for (const DtypeSpelling& spelling : kDtypes)
    if (spelling.type == type) return spelling.size;
  return 0;
}

std::string dtype_name(DataType type) {
  if (type == DataType::kBFloat16) return "bfloat16";
  for (const DtypeSpelling& spelling : kDtypes)
    if (spelling.type == type) return (spelling.size == 1 ? "|" : "<") + std::string(spelling.kind_and_size);
  return "?";
}

ArrayMetadata parse_zarray(const std::string& text, const std::string& source) {
  check_json_nesting(text, source);
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception& error) {
    fail(source, std::string("not JSON: ") + error.what());
  }
  if (!document.is_object()) fail(source, "not a JSON object");
  const json& format = required_field(document, "zarr_format", source);
  if (format != 2) field_error(source, "zarr_format", "2", format);
  ArrayMetadata metadata;
  metadata.shape = parse_dimensions(required_field(document, "shape", source), "shape", 0, source);
  metadata.chunks = parse_dimensions(required_field(document, "chunks", source), "chunks", 1, source);
  if (metadata.chunks.size() != metadata.shape.size())
    fail(source, "field \"chunks\": " + shape_text(metadata.chunks) + " has not as many dimensions as shape " +
                     shape_text(metadata.shape));
  const json& dtype = required_field(document, "dtype", source);
  if (!dtype.is_string()) field_error(source, "dtype", "a string", dtype);
  metadata.dtype = parse_dtype(dtype.get<std::string>(), metadata.big_endian, source);
  metadata.fill_value = parse_fill_value(required_field(document, "fill_value", source), metadata.dtype, source);
  metadata.compressor = parse_compressor(required_field(document, "compressor", source), source);
  check_filters_and_order(document, source);
  check_separator(document, metadata, source);
  check_sizes(metadata, source);
  return metadata;
}

namespace {

json fill_value_json(const ArrayMetadata& metadata) {
  if (!metadata.fill_value) return nullptr;
  const double value = *metadata.fill_value;
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (is_float(metadata.dtype)) return value;
  if (value >= 0) return static_cast<uint64_t>(value);
  return static_cast<int64_t>(value);
}

json compressor_json(const Compressor& compressor) {
  switch (compressor.kind) {
    case Compressor::Kind::kNone:
      return nullptr;
    case Compressor::Kind::kBlosc:
      return {{"id", "blosc"},
              {"cname", compressor.blosc_name},
              {"clevel", compressor.level},
              {"shuffle", compressor.blosc_shuffle},
              {"blocksize", compressor.blosc_block_size}};
    case Compressor::Kind::kZlib:
      return {{"id", "zlib"}, {"level", compressor.level}};
    case Compressor::Kind::kGzip:
      return {{"id", "gzip"}, {"level", compressor.level}};
  }
  return nullptr;
}

}  // namespace

std::string format_zarray(const ArrayMetadata& metadata) {
  // nlohmann's json sorts keys, and indent 4 is how zarr-python writes .zarray.
  json document = {{"zarr_format", 2},
                   {"shape", metadata.shape},
                   {"chunks", metadata.chunks},
                   {"dtype", dtype_name(metadata.dtype)},
                   {"fill_value", fill_value_json(metadata)},
                   {"compressor", compressor_json(metadata.compressor)},
                   {"order", "C"},
                   {"filters", nullptr}};
  if (metadata.dimension_separator == '/') document["dimension_separator"] = "/";
  return document.dump(4) + "\n";
}

int64_t Region::element_count() const { return product(count); }

Region whole(const ArrayMetadata& metadata) {
  return Region{std::vector<int64_t>(metadata.shape.size(), 0), metadata.shape};
}

// ---- element conversions ----

float half_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t result =
      exponent == 31 ? (sign | 0x7f800000u | (mantissa << 13)) : (sign | ((exponent + 112) << 23) | (mantissa << 13));
  float value;
  std::memcpy(&value, &result, 4);
  return value;
}

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  bits &= 0x7fffffff;
  if (bits > 0x7f800000) return sign | 0x7e00;   // NaN stays a (quiet) NaN
  if (bits >= 0x477ff000) return sign | 0x7c00;  // 65520 and above round to infinity
  if (bits < 0x38800000) {                       // below 2^-14: a half subnormal
    // Adding 0.5 puts the value where a float's last bit is 2^-24, a half subnormal's unit: the FPU rounds.
    float magnitude;
    std::memcpy(&magnitude, &bits, 4);
    const float shifted = magnitude + 0.5f;
    uint32_t shifted_bits;
    std::memcpy(&shifted_bits, &shifted, 4);
    return sign | static_cast<uint16_t>(shifted_bits - 0x3f000000u);
  }
  const uint32_t odd = (bits >> 13) & 1;
  bits += 0xc8000fffu + odd;  // exponent rebias (-112 << 23) and round half to even
  return sign | static_cast<uint16_t>(bits >> 13);
}

float bfloat16_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  return value;
}

uint16_t float_to_bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

template <typename T>
T load(const uint8_t* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

template <typename T>
void store(uint8_t* bytes, T value) {
  std::memcpy(bytes, &value, sizeof(T));
}

float element_to_float(DataType type, const uint8_t* bytes) {
  switch (type) {
    case DataType::kFloat16:
      return half_to_float(load<uint16_t>(bytes));
    case DataType::kBFloat16:
      return bfloat16_to_float(load<uint16_t>(bytes));
    case DataType::kFloat32:
      return load<float>(bytes);
    case DataType::kFloat64:
      return static_cast<float>(load<double>(bytes));
    case DataType::kInt8:
      return load<int8_t>(bytes);
    case DataType::kInt16:
      return load<int16_t>(bytes);
    case DataType::kInt32:
      return static_cast<float>(load<int32_t>(bytes));
    case DataType::kInt64:
      return static_cast<float>(load<int64_t>(bytes));
    case DataType::kUInt8:
      return load<uint8_t>(bytes);
    case DataType::kUInt16:
      return load<uint16_t>(bytes);
    case DataType::kUInt32:
      return static_cast<float>(load<uint32_t>(bytes));
    case DataType::kUInt64:
      return static_cast<float>(load<uint64_t>(bytes));
  }
  return 0;
}

void float_to_element(DataType type, float value, uint8_t* bytes) {
  switch (type) {
    case DataType::kFloat16:
      return store(bytes, float_to_half(value));
    case DataType::kBFloat16:
      return store(bytes, float_to_bfloat16(value));
    case DataType::kFloat32:
      return store(bytes, value);
    case DataType::kFloat64:
      return store(bytes, static_cast<double>(value));
    default:
      return;  // integer dtypes are refused before any conversion
  }
}

// One element of `type` holding `value` (fill values; integers are exact up to 2^53, as JSON numbers are).
void double_to_element(DataType type, double value, uint8_t* bytes) {
  switch (type) {
    case DataType::kFloat64:
      return store(bytes, value);
    case DataType::kInt8:
      return store(bytes, static_cast<int8_t>(value));
    case DataType::kInt16:
      return store(bytes, static_cast<int16_t>(value));
    case DataType::kInt32:
      return store(bytes, static_cast<int32_t>(value));
    case DataType::kInt64:
      return store(bytes, static_cast<int64_t>(value));
    case DataType::kUInt8:
      return store(bytes, static_cast<uint8_t>(value));
    case DataType::kUInt16:
      return store(bytes, static_cast<uint16_t>(value));
    case DataType::kUInt32:
      return store(bytes, static_cast<uint32_t>(value));
    case DataType::kUInt64:
      return store(bytes, static_cast<uint64_t>(value));
    default:
      return float_to_element(type, static_cast<float>(value), bytes);
  }
}

void byte_swap_elements(std::string& bytes, int size) {
  for (size_t offset = 0; offset + size <= bytes.size(); offset += size)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                 bytes.begin() + static_cast<std::ptrdiff_t>(offset) + size);
}

}  // namespace

// ---- chunk codecs ----

namespace {

std::string size_mismatch(size_t found, size_t expected, const char* how) {
  return std::string(how) + " " + std::to_string(found) + " bytes; a chunk of this array holds " +
         std::to_string(expected);
}

std::string blosc_decode(const std::string& stored, size_t expected, const std::string& path) {
  size_t decoded_bytes = 0, stored_bytes = 0, block_bytes = 0;
  if (stored.size() < BLOSC_MIN_HEADER_LENGTH ||
      blosc_cbuffer_validate(stored.data(), stored.size(), &decoded_bytes) != 0)
    fail(path, "not a blosc buffer (" + std::to_string(stored.size()) + " bytes)");
  blosc_cbuffer_sizes(stored.data(), &decoded_bytes, &stored_bytes, &block_bytes);
  if (stored_bytes != stored.size())
    fail(path, "its blosc header says " + std::to_string(stored_bytes) + " bytes, the file holds " +
                   std::to_string(stored.size()));
  if (decoded_bytes != expected) fail(path, size_mismatch(decoded_bytes, expected, "decompresses to"));
  std::string raw(expected, '\0');
  const int decoded = blosc_decompress_ctx(stored.data(), raw.data(), expected, 1);
  if (decoded < 0 || static_cast<size_t>(decoded) != expected)
    fail(path, "blosc cannot decompress it (code " + std::to_string(decoded) + ")");
  return raw;
}

// zlib and gzip streams (inflate's window bits 15 + 32 detect either header).
std::string zlib_decode(const std::string& stored, size_t expected, const std::string& path) {
  std::string raw(expected, '\0');
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 32) != Z_OK) fail(path, "zlib cannot start inflating");
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(stored.data()));
  stream.avail_in = static_cast<uInt>(stored.size());
  stream.next_out = reinterpret_cast<Bytef*>(raw.data());
  stream.avail_out = static_cast<uInt>(expected);
  const int status = inflate(&stream, Z_FINISH);
  const size_t produced = expected - stream.avail_out;
  const bool trailing = stream.avail_in != 0;
  const std::string message = stream.msg ? stream.msg : "truncated stream";
  inflateEnd(&stream);
  if (status == Z_STREAM_END && produced == expected && !trailing) return raw;
  if (status == Z_STREAM_END && produced != expected) fail(path, size_mismatch(produced, expected, "decompresses to"));
  if (status == Z_STREAM_END) fail(path, "holds bytes after its compressed stream");
  if (stream.avail_out == 0)
    fail(path, "decompresses to more than " + std::to_string(expected) + " bytes, a chunk's size");
  fail(path, "zlib cannot decompress it: " + message);
}

std::string decode_chunk(const Compressor& compressor, const std::string& stored, size_t expected,
                         const std::string& path) {
  switch (compressor.kind) {
    case Compressor::Kind::kNone:
      if (stored.size() != expected) fail(path, size_mismatch(stored.size(), expected, "holds"));
      return stored;
    case Compressor::Kind::kBlosc:
      return blosc_decode(stored, expected, path);
    default:
      return zlib_decode(stored, expected, path);
  }
}

std::string zlib_encode(const std::string& raw, int level, bool gzip, const std::string& path) {
  z_stream stream{};
  if (deflateInit2(&stream, level, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    fail(path, "zlib cannot start deflating");
  std::string encoded(deflateBound(&stream, static_cast<uLong>(raw.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  stream.avail_in = static_cast<uInt>(raw.size());
  stream.next_out = reinterpret_cast<Bytef*>(encoded.data());
  stream.avail_out = static_cast<uInt>(encoded.size());
  const int status = deflate(&stream, Z_FINISH);
  encoded.resize(encoded.size() - stream.avail_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) fail(path, "zlib cannot compress the chunk (status " + std::to_string(status) + ")");
  return encoded;
}

std::string encode_chunk(const Compressor& compressor, const std::string& raw, int type_size, const std::string& path) {
  if (compressor.kind == Compressor::Kind::kNone) return raw;
  if (compressor.kind != Compressor::Kind::kBlosc)
    return zlib_encode(raw, compressor.level, compressor.kind == Compressor::Kind::kGzip, path);
  // numcodecs' AUTOSHUFFLE (-1) is bit-shuffle for 1-byte types and byte-shuffle otherwise.
  const int shuffle =
      compressor.blosc_shuffle >= 0 ? compressor.blosc_shuffle : (type_size == 1 ? BLOSC_BITSHUFFLE : BLOSC_SHUFFLE);
  std::string encoded(raw.size() + BLOSC_MAX_OVERHEAD, '\0');
  const int size = blosc_compress_ctx(compressor.level, shuffle, static_cast<size_t>(type_size), raw.size(), raw.data(),
                                      encoded.data(), encoded.size(), compressor.blosc_name.c_str(),
                                      static_cast<size_t>(compressor.blosc_block_size), 1);
  if (size <= 0) fail(path, "blosc cannot compress the chunk (code " + std::to_string(size) + ")");
  encoded.resize(static_cast<size_t>(size));
  return encoded;
}

// ---- chunk grid ----

// A 0-d array is stored as one chunk of one element, key "0": it is handled as shape [1].
std::vector<int64_t> at_least_one_dimension(const std::vector<int64_t>& values, int64_t value) {
  return values.empty() ? std::vector<int64_t>{value} : values;
}

Region normalised(const Region& region) {
  return Region{at_least_one_dimension(region.start, 0), at_least_one_dimension(region.count, 1)};
}

void check_region(const ArrayMetadata& metadata, const Region& region, const std::string& directory) {
  if (region.start.size() != metadata.shape.size() || region.count.size() != metadata.shape.size())
    fail(directory, "a region of " + std::to_string(region.start.size()) + "/" + std::to_string(region.count.size()) +
                        " dimensions for an array of " + std::to_string(metadata.shape.size()));
  for (size_t d = 0; d < metadata.shape.size(); ++d) {
    const int64_t start = region.start[d], count = region.count[d], extent = metadata.shape[d];
    if (start < 0 || count < 0 || start > extent || count > extent - start)
      fail(directory, "region start " + shape_text(region.start) + " count " + shape_text(region.count) +
                          " is outside the array's shape " + shape_text(metadata.shape) + " (dimension " +
                          std::to_string(d) + ")");
  }
}

// C-order strides, in elements, of an array of `extents`.
std::vector<int64_t> strides(const std::vector<int64_t>& extents) {
  std::vector<int64_t> result(extents.size(), 1);
  for (size_t d = extents.size(); d-- > 1;) result[d - 1] = result[d] * extents[d];
  return result;
}

// Advances `position` through the box [low, high) in C order over dimensions [0, dimensions); false when done.
bool advance(std::vector<int64_t>& position, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
             size_t dimensions) {
  for (size_t d = dimensions; d-- > 0;) {
    if (++position[d] < high[d]) return true;
    position[d] = low[d];
  }
  return false;
}

// Calls visit(chunk indices) for every chunk that `region` (normalised) intersects.
template <typename Visit>
void for_each_chunk(const std::vector<int64_t>& chunks, const Region& region, Visit visit) {
  const size_t n = chunks.size();
  std::vector<int64_t> first(n), end(n);
  for (size_t d = 0; d < n; ++d) {
    if (region.count[d] == 0) return;
    first[d] = region.start[d] / chunks[d];
    end[d] = (region.start[d] + region.count[d] - 1) / chunks[d] + 1;
  }
  std::vector<int64_t> index = first;
  do visit(index);
  while (advance(index, first, end, n));
}

// Calls row(chunk offset, region offset, length), in elements, for each run along the last dimension that
// chunk `index` shares with `region` (both normalised).
template <typename Row>
void for_each_row(const std::vector<int64_t>& chunks, const std::vector<int64_t>& index, const Region& region,
                  Row row) {
  const size_t n = chunks.size();
  std::vector<int64_t> low(n), high(n);
  for (size_t d = 0; d < n; ++d) {
    low[d] = std::max(region.start[d], index[d] * chunks[d]);
    high[d] = std::min(region.start[d] + region.count[d], (index[d] + 1) * chunks[d]);
  }
  const std::vector<int64_t> chunk_strides = strides(chunks), region_strides = strides(region.count);
  std::vector<int64_t> position = low;
  do {
    int64_t chunk_offset = 0, region_offset = 0;
    for (size_t d = 0; d < n; ++d) {
      chunk_offset += (position[d] - index[d] * chunks[d]) * chunk_strides[d];
      region_offset += (position[d] - region.start[d]) * region_strides[d];
    }
    row(chunk_offset, region_offset, high[n - 1] - low[n - 1]);
  } while (advance(position, low, high, n - 1));
}

// True when `region` covers every element of chunk `index` that lies inside the array.
bool covers_chunk(const ArrayMetadata& metadata, const std::vector<int64_t>& index, const Region& region) {
  const std::vector<int64_t> shape = at_least_one_dimension(metadata.shape, 1);
  const std::vector<int64_t> chunks = at_least_one_dimension(metadata.chunks, 1);
  for (size_t d = 0; d < chunks.size(); ++d) {
    const int64_t chunk_start = index[d] * chunks[d];
    const int64_t chunk_end = std::min(chunk_start + chunks[d], shape[d]);
    if (region.start[d] > chunk_start || region.start[d] + region.count[d] < chunk_end) return false;
  }
  return true;
}

// A whole chunk of fill_value (zeros where it is null).
std::string filled_chunk(const ArrayMetadata& metadata) {
  const int size = element_size(metadata.dtype);
  const int64_t elements = product(metadata.chunks);
  std::string chunk(static_cast<size_t>(elements * size), '\0');
  if (!metadata.fill_value || *metadata.fill_value == 0) return chunk;
  uint8_t element[8];
  double_to_element(metadata.dtype, *metadata.fill_value, element);
  for (int64_t i = 0; i < elements; ++i) std::memcpy(&chunk[static_cast<size_t>(i * size)], element, size);
  return chunk;
}

// The largest chunk file a valid chunk can be, so that a huge file is refused before it is read.
int64_t largest_stored_chunk(const Compressor& compressor, int64_t chunk_bytes) {
  if (compressor.kind == Compressor::Kind::kNone) return chunk_bytes;
  if (compressor.kind == Compressor::Kind::kBlosc) return chunk_bytes + BLOSC_MAX_OVERHEAD;
  return chunk_bytes + chunk_bytes / 1000 + 1024;  // deflate's stored blocks add 5 bytes per 16 KiB
}

}  // namespace

// ---- arrays ----

Array::Array(std::string directory, ArrayMetadata metadata)
    : directory_(std::move(directory)), metadata_(std::move(metadata)) {}

Array Array::open(const std::string& directory) {
  const std::string path = (std::filesystem::path(directory) / ".zarray").string();
  if (!std::filesystem::is_regular_file(path)) fail(directory, "not a Zarr v2 array (no .zarray file)");
  constexpr std::uintmax_t kMaxMetadataBytes = 1 << 20;
  if (std::filesystem::file_size(path) > kMaxMetadataBytes) fail(path, "larger than 1 MiB; not a .zarray");
  return Array(directory, parse_zarray(read_file(path), path));
}

Array Array::create(const std::string& directory, const ArrayMetadata& metadata) {
  const std::string path = (std::filesystem::path(directory) / ".zarray").string();
  if (metadata.big_endian) fail(directory, "trainbench writes little-endian arrays only");
  // Parsing what would be written checks the metadata as a reader will: chunks, sizes, codec names.
  const std::string text = format_zarray(metadata);
  ArrayMetadata checked = parse_zarray(text, path);
  if (std::filesystem::exists(path)) fail(directory, "already holds a Zarr array; not replacing it");
  write_file_atomically(path, text);
  return Array(directory, std::move(checked));
}

std::string Array::chunk_path(const std::vector<int64_t>& indices) const {
  std::string key;
  for (size_t d = 0; d < indices.size(); ++d)
    key += (d ? std::string(1, metadata_.dimension_separator) : "") + std::to_string(indices[d]);
  return (std::filesystem::path(directory_) / (indices.empty() ? "0" : key)).string();
}

namespace {

// Chunk `index` decoded to little-endian bytes; a missing chunk is fill_value, or zeros where `missing_is_zero`
// (writers merging into a new chunk), or else an error when fill_value is null.
std::string load_chunk(const Array& array, const std::vector<int64_t>& index, bool missing_is_zero) {
  const ArrayMetadata& metadata = array.metadata();
  const std::string path = array.chunk_path(index);
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    if (errno != ENOENT) fail(path, std::string("cannot read the chunk file: ") + std::strerror(errno));
    if (!metadata.fill_value && !missing_is_zero)
      fail(path, "chunk file is missing and the array's fill_value is null, so the chunk has no value");
    return filled_chunk(metadata);
  }
  const int64_t chunk_bytes = product(metadata.chunks) * element_size(metadata.dtype);
  if (metadata.compressor.kind == Compressor::Kind::kNone && status.st_size != chunk_bytes)
    fail(path, size_mismatch(static_cast<size_t>(status.st_size), static_cast<size_t>(chunk_bytes), "holds"));
  if (status.st_size > largest_stored_chunk(metadata.compressor, chunk_bytes))
    fail(path, "holds " + std::to_string(status.st_size) + " bytes, more than a chunk of " +
                   std::to_string(chunk_bytes) + " bytes compresses to");
  std::string raw = decode_chunk(metadata.compressor, read_file(path), static_cast<size_t>(chunk_bytes), path);
  if (metadata.big_endian) byte_swap_elements(raw, element_size(metadata.dtype));
  return raw;
}

// Calls take(chunk row bytes, region offset, length) for every run of `region` in the chunks it touches.
template <typename Take>
void read_rows(const Array& array, const Region& region, Take take) {
  check_region(array.metadata(), region, array.directory());
  const Region slab = normalised(region);
  const std::vector<int64_t> chunks = at_least_one_dimension(array.metadata().chunks, 1);
  const int size = element_size(array.metadata().dtype);
  for_each_chunk(chunks, slab, [&](const std::vector<int64_t>& index) {
    const std::string chunk = load_chunk(array, index, false);
    const auto* bytes = reinterpret_cast<const uint8_t*>(chunk.data());
    for_each_row(chunks, index, slab, [&](int64_t chunk_offset, int64_t region_offset, int64_t length) {
      take(bytes + chunk_offset * size, region_offset, length);
    });
  });
}

// Calls put(chunk row bytes, region offset, length) for every run of `region`, then commits each touched chunk.
template <typename Put>
void write_rows(const Array& array, const Region& region, Put put) {
  const ArrayMetadata& metadata = array.metadata();
  if (metadata.big_endian) fail(array.directory(), "a big-endian array; trainbench writes little-endian arrays only");
  check_region(metadata, region, array.directory());
  const Region slab = normalised(region);
  const std::vector<int64_t> chunks = at_least_one_dimension(metadata.chunks, 1);
  const int size = element_size(metadata.dtype);
  for_each_chunk(chunks, slab, [&](const std::vector<int64_t>& index) {
    std::string chunk = covers_chunk(metadata, index, slab) ? filled_chunk(metadata) : load_chunk(array, index, true);
    auto* bytes = reinterpret_cast<uint8_t*>(chunk.data());
    for_each_row(chunks, index, slab, [&](int64_t chunk_offset, int64_t region_offset, int64_t length) {
      put(bytes + chunk_offset * size, region_offset, length);
    });
    const std::string path = array.chunk_path(index);
    write_file_atomically(path, encode_chunk(metadata.compressor, chunk, size, path));
  });
}

}  // namespace

void Array::read_bytes(const Region& region, void* out) const {
  const int size = element_size(metadata_.dtype);
  auto* destination = static_cast<uint8_t*>(out);
  read_rows(*this, region, [&](const uint8_t* row, int64_t region_offset, int64_t length) {
    std::memcpy(destination + region_offset * size, row, static_cast<size_t>(length * size));
  });
}

void Array::read_float32(const Region& region, float* out) const {
  const int size = element_size(metadata_.dtype);
  const DataType type = metadata_.dtype;
  read_rows(*this, region, [&](const uint8_t* row, int64_t region_offset, int64_t length) {
    for (int64_t i = 0; i < length; ++i) out[region_offset + i] = element_to_float(type, row + i * size);
  });
}

std::vector<float> Array::read_float32(const Region& region) const {
  check_region(metadata_, region, directory_);
  std::vector<float> values(static_cast<size_t>(region.element_count()));
  read_float32(region, values.data());
  return values;
}

void Array::write_bytes(const Region& region, const void* data) const {
  const int size = element_size(metadata_.dtype);
  const auto* source = static_cast<const uint8_t*>(data);
  write_rows(*this, region, [&](uint8_t* row, int64_t region_offset, int64_t length) {
    std::memcpy(row, source + region_offset * size, static_cast<size_t>(length * size));
  });
}

void Array::write_float32(const Region& region, const float* data) const {
  const DataType type = metadata_.dtype;
  if (!is_float(type))
    fail(directory_, "write_float32 into an array of dtype " + dtype_name(type) + "; integers are written as bytes");
  const int size = element_size(type);
  write_rows(*this, region, [&](uint8_t* row, int64_t region_offset, int64_t length) {
    for (int64_t i = 0; i < length; ++i) float_to_element(type, data[region_offset + i], row + i * size);
  });
}
}  // namespace trainbench::zarr
