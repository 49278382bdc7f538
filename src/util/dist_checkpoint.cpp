#include "util/dist_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::dist_checkpoint {

namespace {

using nlohmann::json;

std::string file_in(const std::string& directory, const char* name) {
  return (std::filesystem::path(directory) / name).string();
}

json parse_config_file(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) fail(path, "missing: not a Megatron distributed checkpoint");
  if (std::filesystem::file_size(path) > (1 << 20)) fail(path, "larger than 1 MiB; not a checkpoint's metadata");
  const std::string text = read_file(path);
  check_json_nesting(text, path);
  try {
    json document = json::parse(text);
    if (!document.is_object()) fail(path, "not a JSON object");
    return document;
  } catch (const json::exception& error) {
    fail(path, std::string("not JSON: ") + error.what());
  }
}

void read_string_field(const json& document, const char* name, std::string& value, const std::string& path) {
  const auto it = document.find(name);
  if (it == document.end()) return;
  if (!it->is_string())
    fail(path, std::string("field \"") + name + "\": expected a string, found " + json_excerpt(*it));
  value = it->get<std::string>();
}

void read_int_field(const json& document, const char* name, int& value, const std::string& path) {
  const auto it = document.find(name);
  if (it == document.end()) return;
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000000)
    fail(path, std::string("field \"") + name + "\": expected a version number, found " + json_excerpt(*it));
  value = it->get<int>();
}

}  // namespace

bool is_distributed_checkpoint(const std::string& directory) {
  return std::filesystem::exists(file_in(directory, kConfigFile));
}

Config read_config(const std::string& directory) {
  const std::string path = file_in(directory, kConfigFile);
  const json document = parse_config_file(path);
  for (const auto& [name, value] : document.items()) {
    if (name != "sharded_backend" && name != "sharded_backend_version" && name != "common_backend" &&
        name != "common_backend_version")
      fail(path, "unknown field \"" + name.substr(0, 80) + "\"");
  }
  if (!document.contains("sharded_backend")) fail(path, "field \"sharded_backend\" is missing");
  Config config;
  read_string_field(document, "sharded_backend", config.sharded_backend, path);
  read_int_field(document, "sharded_backend_version", config.sharded_backend_version, path);
  read_string_field(document, "common_backend", config.common_backend, path);
  read_int_field(document, "common_backend_version", config.common_backend_version, path);
  if (config.sharded_backend != "zarr" || config.sharded_backend_version != 1)
    fail(path, "sharded backend \"" + config.sharded_backend.substr(0, 80) + "\" version " +
                   std::to_string(config.sharded_backend_version) + " (read: zarr version 1)");
  if (config.common_backend != "torch" || config.common_backend_version != 1)
    fail(path, "common backend \"" + config.common_backend.substr(0, 80) + "\" version " +
                   std::to_string(config.common_backend_version) + " (read: torch version 1)");
  return config;
}

void write_config(const std::string& directory, const Config& config) {
  // The field order of Python's json.dump(asdict(CheckpointingConfig)).
  const nlohmann::ordered_json document = {{"sharded_backend", config.sharded_backend},
                                           {"sharded_backend_version", config.sharded_backend_version},
                                           {"common_backend", config.common_backend},
                                           {"common_backend_version", config.common_backend_version}};
  write_file_atomically(file_in(directory, kConfigFile), document.dump());
}

void prepare_new_checkpoint(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) fail(directory, "cannot create the checkpoint directory: " + error.message());
  if (!std::filesystem::is_empty(directory, error) || error)
    fail(directory, "the checkpoint directory is not empty; not writing a checkpoint over another");
}

std::string array_directory(const std::string& checkpoint, const std::string& key) {
  if (key.empty() || key == "." || key == ".." || key.front() == '.' || key.size() > 255 ||
      key.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
    fail(checkpoint, "array key \"" + key.substr(0, 80) + "\" is not a single directory name");
  return (std::filesystem::path(checkpoint) / key).string();
}

zarr::Array open_array(const std::string& checkpoint, const std::string& key) {
  const std::string directory = array_directory(checkpoint, key);
  if (!std::filesystem::is_directory(directory)) fail(directory, "the checkpoint has no array \"" + key + "\"");
  return zarr::Array::open(directory);
}

zarr::Array create_array(const std::string& checkpoint, const std::string& key, const zarr::ArrayMetadata& metadata) {
  return zarr::Array::create(array_directory(checkpoint, key), metadata);
}

std::vector<std::string> array_keys(const std::string& checkpoint) {
  std::vector<std::string> keys;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint, error))
    if (entry.is_directory() && std::filesystem::is_regular_file(entry.path() / ".zarray"))
      keys.push_back(entry.path().filename().string());
  if (error) fail(checkpoint, "cannot list the checkpoint: " + error.message());
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::string exp_avg_key(const std::string& key) { return "optimizer.state.exp_avg." + key; }
std::string exp_avg_sq_key(const std::string& key) { return "optimizer.state.exp_avg_sq." + key; }
std::string fp32_from_fp16_key(const std::string& key) { return "optimizer.state.fp32_from_fp16." + key; }

zarr::ArrayMetadata megatron_array_metadata(const std::vector<int64_t>& global_shape,
                                            const std::vector<int64_t>& axis_fragmentations, zarr::DataType dtype) {
  if (axis_fragmentations.size() != global_shape.size())
    throw Error("axis fragmentations of " + std::to_string(axis_fragmentations.size()) + " axes for a shape of " +
                std::to_string(global_shape.size()));
  zarr::ArrayMetadata metadata;
  metadata.shape = global_shape;
  metadata.dtype = dtype;
  for (size_t axis = 0; axis < global_shape.size(); ++axis) {
    const int64_t pieces = axis_fragmentations[axis];
    if (pieces < 1 || global_shape[axis] % pieces != 0)
      throw Error("axis " + std::to_string(axis) + " of " + std::to_string(global_shape[axis]) +
                  " is not divisible by its fragmentation " + std::to_string(pieces));
    metadata.chunks.push_back(std::max<int64_t>(global_shape[axis] / pieces, 1));
  }
  return metadata;
}

PlainValue read_common(const std::string& checkpoint) {
  const std::string path = file_in(checkpoint, kCommonFile);
  if (!std::filesystem::exists(path)) return PlainValue::dict();
  PlainValue common = load_torch_plain(path);
  if (common.kind() != PlainValue::Kind::kDict)
    fail(path, std::string("holds a ") + PlainValue::kind_name(common.kind()) + ", not a dict");
  return common;
}

void write_common(const std::string& checkpoint, const PlainValue& common) {
  const std::string path = file_in(checkpoint, kCommonFile);
  if (common.kind() != PlainValue::Kind::kDict)
    fail(path, std::string("common state must be a dict, not a ") + PlainValue::kind_name(common.kind()));
  save_torch_plain(path, common);
}

}  // namespace trainbench::dist_checkpoint
