#pragma once
// DLRM's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"

namespace trainbench::dlrm {

// The generated Criteo-format days that `data make dlrm` writes, with their planted logistic model.
struct DatasetSettings {
  int64_t days = 0, samples_per_day = 0, eval_samples = 0;
  double zipf_exponent = 0, missing_dense = 0, missing_sparse = 0, bias = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("days", days);
    visit("samples_per_day", samples_per_day);
    visit("eval_samples", eval_samples);
    visit("zipf_exponent", zipf_exponent);
    visit("missing_dense", missing_dense);
    visit("missing_sparse", missing_sparse);
    visit("bias", bias);
  }
};

struct Settings {
  int64_t max_epochs = 0, evals_per_epoch = 0;
  int64_t batch_size = 0;  // global
  std::string embedding_sharding;  // "replicated" or "sharded"
  int64_t eval_batch_size = 0;
  std::vector<int64_t> table_sizes;
  int64_t embedding_dim = 0;
  std::vector<int64_t> bottom_mlp, top_mlp;
  double base_learning_rate = 0;
  int64_t warmup_steps = 0, decay_start_step = 0, decay_steps = 0;
  std::optional<DatasetSettings> dataset;  // none: the preset trains on the prepared Criteo 1TB days
  std::optional<int64_t> days;             // the Criteo day files a preset without a generated set prepares

  bool shards_tables() const { return embedding_sharding == "sharded"; }

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_epochs", max_epochs);
    visit("evals_per_epoch", evals_per_epoch);
    visit("batch_size", batch_size);
    visit("embedding_sharding", embedding_sharding);
    visit("eval_batch_size", eval_batch_size);
    visit("table_sizes", table_sizes);
    visit("embedding_dim", embedding_dim);
    visit("bottom_mlp", bottom_mlp);
    visit("top_mlp", top_mlp);
    visit("base_learning_rate", base_learning_rate);
    visit("warmup_steps", warmup_steps);
    visit("decay_start_step", decay_start_step);
    visit("decay_steps", decay_steps);
    visit("dataset", dataset);
    visit("days", days);
  }
};

}  // namespace trainbench::dlrm
