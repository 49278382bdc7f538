#pragma once
// Raw float32 files: how tests hand signals to a Python reference script and read its answer back.
#include <fstream>
#include <string>
#include <vector>

namespace trainbench::testing {

inline void write_floats(const std::string& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values;
  for (float v; in.read(reinterpret_cast<char*>(&v), sizeof v);) values.push_back(v);
  return values;
}

}  // namespace trainbench::testing
