#pragma once
// Megatron's distributed checkpoint (megatron/core/dist_checkpointing, the GPT-3 reference's starting
// checkpoint), read and written without Python or LibTorch. A checkpoint is a directory of:
//  - `metadata.json`: {"sharded_backend": "zarr", "sharded_backend_version": 1, "common_backend": "torch",
//    "common_backend_version": 1} as serialization.py's save_config writes it (the published checkpoint's holds
//    only {"sharded_backend": "zarr"}; the other fields default as CheckpointingConfig's do);
//  - one Zarr v2 array directory per parameter key (util/zarr.h), e.g.
//    `language_model.encoder.layers.self_attention.query_key_value.weight`, pipeline layers stacked on a leading
//    axis, and its Adam moments under `optimizer.state.exp_avg.<key>` and `optimizer.state.exp_avg_sq.<key>`
//    (bf16 checkpoints add `optimizer.state.fp32_from_fp16.<key>`);
//  - `common.pt`: torch.save of the rest, a dict of plain values (util/plain_pickle.h).
// Megatron writes metadata.json last, so a directory is a checkpoint only once everything else is in place;
// the writers here keep that order (write_config last).
#include <string>
#include <vector>

#include "util/plain_pickle.h"
#include "util/zarr.h"

namespace trainbench::dist_checkpoint {

constexpr const char* kConfigFile = "metadata.json";
constexpr const char* kCommonFile = "common.pt";

struct Config {
  std::string sharded_backend = "zarr";
  int sharded_backend_version = 1;
  std::string common_backend = "torch";
  int common_backend_version = 1;
};

// True when `directory` holds a metadata.json (Megatron's check_is_distributed_checkpoint).
bool is_distributed_checkpoint(const std::string& directory);
// The checkpoint's metadata.json; refuses, naming the file and field, a missing file, unknown fields (Python's
// CheckpointingConfig(**config) refuses them too), and backends other than zarr 1 and torch 1.
Config read_config(const std::string& directory);
// Commits metadata.json with every field, as save_config writes it. Call it last.
void write_config(const std::string& directory, const Config& config = {});

// Creates `directory` where it is missing and refuses one that is not empty, as Megatron's save does.
void prepare_new_checkpoint(const std::string& directory);

// The array directory of `key`; refuses a key that is not one directory name (empty, ".", "..", a leading
// dot, '/' or NUL, longer than 255 bytes).
std::string array_directory(const std::string& checkpoint, const std::string& key);
zarr::Array open_array(const std::string& checkpoint, const std::string& key);
zarr::Array create_array(const std::string& checkpoint, const std::string& key, const zarr::ArrayMetadata& metadata);
// The keys of every array in the checkpoint (sub-directories holding a .zarray), sorted.
std::vector<std::string> array_keys(const std::string& checkpoint);

// Optimizer-state keys of parameter `key`, as the reference's checkpoint names them.
std::string exp_avg_key(const std::string& key);
std::string exp_avg_sq_key(const std::string& key);
std::string fp32_from_fp16_key(const std::string& key);

// The metadata Megatron's zarr strategy creates for a tensor of `global_shape` split `axis_fragmentations` ways
// along each axis (ShardedTensor.max_allowed_chunks: one chunk per shard), compressor null, fill_value null.
// Refuses an axis that does not divide evenly.
zarr::ArrayMetadata megatron_array_metadata(const std::vector<int64_t>& global_shape,
                                            const std::vector<int64_t>& axis_fragmentations, zarr::DataType dtype);

// common.pt's dict; an empty dict where the checkpoint has none (Megatron's load_common_state_dict). A non-dict
// is refused naming the file.
PlainValue read_common(const std::string& checkpoint);
void write_common(const std::string& checkpoint, const PlainValue& common);

}  // namespace trainbench::dist_checkpoint
