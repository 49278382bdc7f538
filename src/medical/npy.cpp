#include "medical/npy.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <regex>

#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::medical {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, ".npy reading assumes a little-endian machine");

constexpr char kMagic[] = "\x93NUMPY";

// The shape tuple's text, e.g. "1, 128, 128, 128" or "3," or "": each dimension a non-negative integer, the
// product at most kMaxNpyElements (checked as it grows, so it cannot overflow).
std::vector<int64_t> parse_shape(const std::string& path, const std::string& dims) {
  std::vector<int64_t> shape;
  int64_t elements = 1;
  size_t start = 0;
  while (start < dims.size()) {
    const size_t comma = std::min(dims.find(',', start), dims.size());
    const size_t first = dims.find_first_not_of(" \t", start), last = dims.find_last_not_of(" \t", comma - 1);
    const bool blank = first == std::string::npos || first >= comma;
    if (blank && comma == dims.size() && !shape.empty()) break;  // Python's trailing comma: "(3,)"
    const std::string text = blank ? "" : dims.substr(first, last - first + 1);
    if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
      fail(path, ".npy shape (" + dims + ") has dimension '" + text + "'; expected a non-negative integer");
    int64_t dim = 0;
    for (const char digit : text) {
      dim = dim * 10 + (digit - '0');
      if (dim > kMaxNpyElements)
        fail(path, ".npy shape (" + dims + ") has dimension " + text + ", more than " +
                       std::to_string(kMaxNpyElements) + " elements");
    }
    if (dim != 0 && elements > kMaxNpyElements / dim)
      fail(path, ".npy shape (" + dims + ") holds more than " + std::to_string(kMaxNpyElements) + " elements");
    elements *= dim;
    shape.push_back(dim);
    start = comma + 1;
  }
  return shape;
}

// Parses the header dict, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1, 128, 128, 128), }, leaving
// `in` at the data. Returns the array's type and shape, without data.
NpyArray parse_header(const std::string& path, std::ifstream& in) {
  char preamble[8];
  in.read(preamble, 8);
  if (in.gcount() < 8 || std::memcmp(preamble, kMagic, 6) != 0) fail(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(preamble[6]);
  if (major < 1 || major > 3) fail(path, ".npy format version " + std::to_string(major) + " is not 1, 2 or 3");
  uint32_t length = 0;
  const int length_bytes = major == 1 ? 2 : 4;
  unsigned char raw[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(raw), length_bytes);
  if (in.gcount() < length_bytes) fail(path, "truncated .npy header");
  for (int i = length_bytes - 1; i >= 0; --i) length = (length << 8) | raw[i];
  // numpy's own reading limit (np.load's max_header_size), checked before the header is allocated.
  constexpr uint32_t kMaxHeaderBytes = 10000;
  if (length > kMaxHeaderBytes)
    fail(path, ".npy header of " + std::to_string(length) + " bytes is longer than numpy's limit of " +
                   std::to_string(kMaxHeaderBytes));
  std::string dict(length, '\0');
  in.read(dict.data(), length);
  if (static_cast<uint32_t>(in.gcount()) < length) fail(path, "truncated .npy header");

  NpyArray header;
  std::smatch match;
  if (!std::regex_search(dict, match, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    fail(path, ".npy header has no 'descr'");
  const std::string descr = match[1];
  if (descr == "<f4")
    header.type = NpyType::kFloat32;
  else if (descr == "|u1" || descr == "<u1")
    header.type = NpyType::kUint8;
  else
    fail(path, ".npy dtype '" + descr + "' is not supported (expected '<f4' float32 or '|u1' uint8)");
  if (!std::regex_search(dict, match, std::regex(R"('fortran_order'\s*:\s*(True|False))")))
    fail(path, ".npy header has no 'fortran_order'");
  if (match[1] == "True") fail(path, ".npy array is in Fortran order (expected C order)");
  if (!std::regex_search(dict, match, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    fail(path, ".npy header has no 'shape'");
  header.shape = parse_shape(path, match[1]);
  return header;
}

void write(const std::string& path, const std::vector<int64_t>& shape, const char* descr, const void* data,
           size_t bytes) {
  std::string dims;
  for (size_t axis = 0; axis < shape.size(); ++axis) dims += (axis ? ", " : "") + std::to_string(shape[axis]);
  if (shape.size() == 1) dims += ",";  // Python's one-element tuple: "(3,)"
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Version 1.0; the header (magic, version, length, dict, newline) is padded to a multiple of 64 bytes.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  write_file_atomically(path, out);
}

}  // namespace

int64_t NpyArray::element_count() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

NpyArray read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open .npy file");
  return parse_header(path, in);
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open .npy file");
  NpyArray array = parse_header(path, in);
  const int64_t count = array.element_count();
  // Compared with the file before allocating, so a header cannot ask for memory the data does not back.
  const uint64_t needed = static_cast<uint64_t>(count) * (array.type == NpyType::kFloat32 ? sizeof(float) : 1);
  const uint64_t available = std::filesystem::file_size(path) - static_cast<uint64_t>(in.tellg());
  if (needed > available)
    fail(path, "truncated .npy data (" + std::to_string(available) + " of " + std::to_string(needed) + " bytes)");
  char* target = nullptr;
  size_t bytes = 0;
  if (array.type == NpyType::kFloat32) {
    array.floats.resize(static_cast<size_t>(count));
    target = reinterpret_cast<char*>(array.floats.data());
    bytes = array.floats.size() * sizeof(float);
  } else {
    array.bytes.resize(static_cast<size_t>(count));
    target = reinterpret_cast<char*>(array.bytes.data());
    bytes = array.bytes.size();
  }
  in.read(target, static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(in.gcount()) < bytes)
    fail(path, "truncated .npy data (" + std::to_string(in.gcount()) + " of " + std::to_string(bytes) + " bytes)");
  return array;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  write(path, shape, "<f4", values.data(), values.size() * sizeof(float));
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<uint8_t>& values) {
  write(path, shape, "|u1", values.data(), values.size());
}

}  // namespace trainbench::medical
