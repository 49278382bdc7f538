#include "go/example_file.h"

#include <array>
#include <cstring>
#include <fstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::go {

namespace {

constexpr std::array<char, 8> kMagic = {'T', 'B', 'G', 'O', 'E', 'X', '0', '1'};

struct Header {
  int64_t size = 0, games = 0, examples = 0;
};

template <typename T>
void append_array(std::vector<uint8_t>& bytes, const std::vector<T>& values) {
  const auto* data = reinterpret_cast<const uint8_t*>(values.data());
  bytes.insert(bytes.end(), data, data + values.size() * sizeof(T));
}

// Reads `count` values at `offset`, moving it on; `where` and `what` name a buffer cut short.
template <typename T>
void read_array(const uint8_t* bytes, size_t length, size_t& offset, std::vector<T>& values, size_t count,
                const std::string& where, const char* what) {
  if (count > (length - offset) / sizeof(T))
    fail(where, std::string("is cut short in its ") + what + " (expected " + std::to_string(count) + " values)");
  values.resize(count);
  std::memcpy(values.data(), bytes + offset, count * sizeof(T));
  offset += count * sizeof(T);
}

}  // namespace

std::vector<uint8_t> serialize_examples(const ExampleFile& file) {
  const ExampleSet& set = file.examples;
  const Header header{set.size, file.games, set.count()};
  std::vector<uint8_t> bytes(kMagic.begin(), kMagic.end());
  const auto* header_bytes = reinterpret_cast<const uint8_t*>(&header);
  bytes.insert(bytes.end(), header_bytes, header_bytes + sizeof header);
  append_array(bytes, set.features);
  append_array(bytes, set.policies);
  append_array(bytes, set.outcomes);
  return bytes;
}

ExampleFile parse_examples(const uint8_t* bytes, size_t length, int size, const std::string& where) {
  std::array<char, 8> magic{};
  Header header;
  if (length < magic.size() + sizeof header) fail(where, "is not a trainbench MiniGo example file");
  std::memcpy(magic.data(), bytes, magic.size());
  std::memcpy(&header, bytes + magic.size(), sizeof header);
  if (magic != kMagic) fail(where, "is not a trainbench MiniGo example file");
  if (header.size != size)
    fail(where, "holds " + std::to_string(header.size) + "x" + std::to_string(header.size) + " games; the preset's board_size is " +
                    std::to_string(size));
  if (header.games < 0 || header.examples < 0) fail(where, "has a negative game or example count");
  ExampleFile file;
  file.games = static_cast<int>(header.games);
  file.examples.size = size;
  const auto examples = static_cast<size_t>(header.examples), points = static_cast<size_t>(size * size);
  size_t offset = magic.size() + sizeof header;
  read_array(bytes, length, offset, file.examples.features, examples * Position::kPlanes * points, where, "features");
  read_array(bytes, length, offset, file.examples.policies, examples * (points + 1), where, "policies");
  read_array(bytes, length, offset, file.examples.outcomes, examples, where, "outcomes");
  if (offset != length) fail(where, "has bytes after its last example");
  return file;
}

void write_example_file(const std::string& path, const ExampleFile& file) {
  const std::vector<uint8_t> bytes = serialize_examples(file);
  write_file_atomically(path, std::string(bytes.begin(), bytes.end()));
}

ExampleFile read_example_file(const std::string& path, int size) {
  if (!std::ifstream(path, std::ios::binary))
    fail(path, "cannot be opened (write it with `trainbench data make minigo --preset reference --out DIR`)");
  const std::string bytes = read_file(path);
  return parse_examples(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), size, path);
}

}  // namespace trainbench::go
