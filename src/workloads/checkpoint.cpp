#include "workloads/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench {

namespace {

// "a, b, c" of the first `limit` names, and how many more there are.
std::string name_list(const std::vector<std::string>& names, size_t limit = 8) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > limit) text += ", and " + std::to_string(names.size() - limit) + " more";
  return text;
}

}  // namespace

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
  if (std::filesystem::is_directory(path))
    fail("--weights " + path, "is a directory; this benchmark starts from a file torch.save wrote");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--weights " + path, "cannot read the file");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue loaded;
  try {
    loaded = torch::pickle_load(bytes);
  } catch (const c10::Error& error) {
    fail("--weights " + path, std::string("is not a file torch.save wrote: ") + error.what_without_backtrace());
  }
  if (!loaded.isGenericDict()) fail("--weights " + path, "holds a " + loaded.tagKind() + ", not a dict of tensors (a state_dict)");
  std::map<std::string, torch::Tensor> file;
  for (const auto& item : loaded.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      fail("--weights " + path, "holds an entry that is not a name and a tensor (" + item.key().tagKind() + ")");
    file[item.key().toStringRef()] = item.value().toTensor();
  }

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
