#pragma once
// For parity tests against python3-torch: tensors go to and from Python as pickled dicts
// (torch.load/torch.save on the Python side).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace trainbench::testing {

inline void save_dict(const c10::Dict<std::string, torch::Tensor>& dict, const std::filesystem::path& path) {
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline c10::Dict<c10::IValue, c10::IValue> load_dict(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes).toGenericDict();
}

}  // namespace trainbench::testing
