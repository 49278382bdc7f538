#include "go/example_file.h"

#include <array>
#include <cstring>
#include <fstream>

#include "util/error.h"

namespace trainbench::go {

namespace {

constexpr std::array<char, 8> kMagic = {'T', 'B', 'G', 'O', 'E', 'X', '0', '1'};

struct Header {
  int64_t size = 0, games = 0, examples = 0;
};

template <typename T>
void write_array(std::ofstream& out, const std::vector<T>& values) {
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
}

template <typename T>
void read_array(std::ifstream& in, std::vector<T>& values, size_t count, const std::string& path, const char* what) {
  values.resize(count);
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (!in) fail(path, std::string("is cut short in its ") + what + " (expected " + std::to_string(count) + " values)");
}

}  // namespace

void write_example_file(const std::string& path, const ExampleFile& file) {
  const ExampleSet& set = file.examples;
  std::ofstream out(path, std::ios::binary);
  const Header header{set.size, file.games, set.count()};
  out.write(kMagic.data(), kMagic.size());
  out.write(reinterpret_cast<const char*>(&header), sizeof header);
  write_array(out, set.features);
  write_array(out, set.policies);
  write_array(out, set.outcomes);
  if (!out) fail(path, "could not be written");
}

ExampleFile read_example_file(const std::string& path, int size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be opened (write it with `trainbench data make minigo --preset reference --out DIR`)");
  std::array<char, 8> magic{};
  Header header;
  in.read(magic.data(), magic.size());
  in.read(reinterpret_cast<char*>(&header), sizeof header);
  if (!in || magic != kMagic) fail(path, "is not a trainbench MiniGo example file");
  if (header.size != size)
    fail(path, "holds " + std::to_string(header.size) + "x" + std::to_string(header.size) + " games; the preset's board_size is " +
                   std::to_string(size));
  if (header.games < 0 || header.examples < 0) fail(path, "has a negative game or example count");
  ExampleFile file;
  file.games = static_cast<int>(header.games);
  file.examples.size = size;
  const auto examples = static_cast<size_t>(header.examples), points = static_cast<size_t>(size * size);
  read_array(in, file.examples.features, examples * Position::kPlanes * points, path, "features");
  read_array(in, file.examples.policies, examples * (points + 1), path, "policies");
  read_array(in, file.examples.outcomes, examples, path, "outcomes");
  if (in.peek() != std::char_traits<char>::eof()) fail(path, "has bytes after its last example");
  return file;
}

}  // namespace trainbench::go
