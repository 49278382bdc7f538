#pragma once
// torch.save files written byte by byte, for tests of the torch file reader (util/torch_file.h) and of the
// commands that read weights: pickles opcode by opcode (protocol 2, as torch.save writes them) of a dict of
// tensors whose storage, offset, size and stride a test chooses, in torch.save's zip archive.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "util/torch_format.h"

namespace trainbench::testing {

inline std::string str(const std::string& text) {
  std::string out = "X";
  append_little_endian(out, text.size(), 4);
  return out + text;
}

inline std::string integer(int64_t value) {
  std::string out = "\x8a\x08";  // LONG1 of 8 bytes
  append_little_endian(out, static_cast<uint64_t>(value), 8);
  return out;
}

inline std::string int_tuple(const std::vector<int64_t>& values) {
  std::string out = "(";
  for (const int64_t value : values) out += integer(value);
  return out + "t";
}

struct CraftedTensor {
  std::string name;
  std::string key;  // its storage
  int64_t storage_elements;
  int64_t offset;
  std::vector<int64_t> shape, stride;
  std::string storage_type = "FloatStorage";
};

// `_rebuild_tensor_v2(persistent storage id, offset, size, stride, False, {})`.
inline std::string tensor_pickle(const CraftedTensor& tensor) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\n" + tensor.storage_type + "\n" +
         str(tensor.key) + str("cpu") + integer(tensor.storage_elements) + "tQ" + integer(tensor.offset) +
         int_tuple(tensor.shape) + int_tuple(tensor.stride) + "\x89}tR";
}

inline std::string state_dict_pickle(const std::vector<CraftedTensor>& tensors) {
  std::string out = "\x80\x02}(";
  for (const CraftedTensor& tensor : tensors) out += str(tensor.name) + tensor_pickle(tensor);
  return out + "u.";
}

// torch.save's archive of `pickle` and storages (key -> bytes).
inline std::string archive(const std::string& pickle,
                           const std::vector<std::pair<std::string, std::string>>& storages) {
  std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", pickle}};
  for (const auto& [key, bytes] : storages) entries.emplace_back("archive/data/" + key, bytes);
  entries.emplace_back("archive/version", "3\n");
  return stored_zip(entries);
}

inline std::string floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

}  // namespace trainbench::testing
