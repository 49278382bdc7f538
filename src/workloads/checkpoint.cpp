#include "workloads/checkpoint.h"

#include <cstring>
#include <filesystem>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/torch_file.h"

namespace trainbench {

namespace {

// "a, b, c" of the first `limit` names, and how many more there are.
std::string name_list(const std::vector<std::string>& names, size_t limit = 8) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > limit) text += ", and " + std::to_string(names.size() - limit) + " more";
  return text;
}

torch::ScalarType scalar_type(TorchDtype dtype) {
  constexpr torch::ScalarType kInTorchDtypeOrder[] = {
      torch::kFloat64, torch::kFloat32, torch::kFloat16, torch::kBFloat16, torch::kInt64,
      torch::kInt32,   torch::kInt16,   torch::kInt8,    torch::kUInt8,    torch::kBool};
  return kInTorchDtypeOrder[static_cast<int>(dtype)];
}

}  // namespace

std::map<std::string, torch::Tensor> read_state_dict_file(const std::string& path) {
  std::map<std::string, torch::Tensor> tensors;
  for (StoredTensor& stored : read_torch_state_dict(path)) {
    if (const int64_t element = first_non_finite(stored); element >= 0)
      fail(path + ": " + stored.name,
           "element " + std::to_string(element) + " is NaN or infinite; weights must be finite");
    torch::Tensor tensor = torch::empty(stored.shape, torch::TensorOptions().dtype(scalar_type(stored.dtype)));
    std::memcpy(tensor.data_ptr(), stored.bytes.data(), stored.bytes.size());
    std::string().swap(stored.bytes);  // the file's copy goes as the model's arrives
    tensors.emplace(stored.name, std::move(tensor));
  }
  return tensors;
}

StateDict module_state(const torch::nn::Module& module) {
  StateDict state;
  for (const auto& parameter : module.named_parameters()) state.push_back({parameter.key(), parameter.value()});
  for (const auto& buffer : module.named_buffers()) state.push_back({buffer.key(), buffer.value()});
  return state;
}

StateDict with_renamed_prefixes(StateDict state, const std::vector<std::pair<std::string, std::string>>& prefixes) {
  for (NamedTensor& tensor : state)
    for (const auto& [ours, official] : prefixes)
      if (tensor.name.rfind(ours, 0) == 0) {
        tensor.name = official + tensor.name.substr(ours.size());
        break;
      }
  return state;
}

void save_state_dict(const StateDict& state, const std::string& path) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, tensor] : state) dict.insert(name, tensor.detach().to(torch::kCPU).contiguous());
  const std::vector<char> bytes = torch::pickle_save(dict);
  write_file_atomically(path, std::string(bytes.begin(), bytes.end()));
}

void load_state_dict(const std::string& path, const StateDict& targets) {
  const std::map<std::string, torch::Tensor> file = read_state_dict_file(path);

  std::vector<std::string> missing, misshaped, unexpected;
  std::map<std::string, bool> expected;
  for (const auto& [name, tensor] : targets) {
    expected[name] = true;
    const auto found = file.find(name);
    if (found == file.end()) {
      missing.push_back(name);
    } else if (found->second.sizes() != tensor.sizes()) {
      misshaped.push_back(name + " " + c10::str(found->second.sizes()) + " (the model's is " + c10::str(tensor.sizes()) + ")");
    }
  }
  for (const auto& [name, tensor] : file)
    if (!expected.count(name)) unexpected.push_back(name);
  if (!missing.empty() || !misshaped.empty() || !unexpected.empty()) {
    std::string problems;
    if (!missing.empty()) problems += std::to_string(missing.size()) + " missing: " + name_list(missing);
    if (!unexpected.empty()) problems += (problems.empty() ? "" : "; ") + std::to_string(unexpected.size()) + " unexpected: " + name_list(unexpected);
    if (!misshaped.empty()) problems += (problems.empty() ? "" : "; ") + std::to_string(misshaped.size()) + " of another shape: " + name_list(misshaped, 4);
    fail("--weights " + path, "does not fit this model's " + std::to_string(targets.size()) + " tensors (" + problems + ")");
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : targets) {
    torch::Tensor target = tensor;  // the model's tensor, shared
    target.copy_(file.at(name));
  }
}

}  // namespace trainbench
