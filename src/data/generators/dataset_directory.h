#pragma once
// What the dataset generators share: a dataset directory that is either absent or whole, and plain file writes.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace trainbench::data {

// Runs `generate` on "<out_dir>.partial" and renames that to out_dir when it returns, so out_dir is either
// absent or complete. out_dir must not exist (an empty directory is replaced). Returns the final path.
std::filesystem::path write_new_dataset_directory(const std::string& out_dir,
                                                  const std::function<void(const std::filesystem::path&)>& generate);

// Plain write: atomicity comes from renaming the finished tree, which is far cheaper than one fsync per file.
void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);

}  // namespace trainbench::data
