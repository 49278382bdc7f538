#pragma once
// U-Net3D's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"

namespace trainbench::unet3d {

// The generated KiTS19-layout phantoms that `data make unet3d` writes.
struct DatasetSettings {
  std::vector<double> extent_mm;
  double noise_hu = 0, tumour_probability = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("extent_mm", extent_mm);
    visit("noise_hu", noise_hu);
    visit("tumour_probability", tumour_probability);
  }
};

struct Settings {
  std::vector<int64_t> filters, patch;  // patch: [D, H, W]
  int64_t batch_size = 0;  // global
  double learning_rate = 0, init_learning_rate = 0;
  int64_t warmup_epochs = 0;
  std::vector<int64_t> decay_boundary_epochs;
  double decay_factor = 0, momentum = 0, weight_decay = 0, oversampling = 0, validation_overlap = 0;
  int64_t eval_window_batch = 0, start_eval_at = 0, evaluate_every = 0, max_epochs = 0;
  std::string reference_checksums;  // empty: data prepare compares no md5s
  std::vector<int64_t> bench_eval_shape;
  std::optional<DatasetSettings> dataset;  // none: the preset trains on prepared KiTS19

  template <typename Visit>
  void fields(Visit& visit) {
    visit("filters", filters);
    visit("patch", patch);
    visit("batch_size", batch_size);
    visit("learning_rate", learning_rate);
    visit("init_learning_rate", init_learning_rate);
    visit("warmup_epochs", warmup_epochs);
    visit("decay_boundary_epochs", decay_boundary_epochs);
    visit("decay_factor", decay_factor);
    visit("momentum", momentum);
    visit("weight_decay", weight_decay);
    visit("oversampling", oversampling);
    visit("validation_overlap", validation_overlap);
    visit("eval_window_batch", eval_window_batch);
    visit("start_eval_at", start_eval_at);
    visit("evaluate_every", evaluate_every);
    visit("max_epochs", max_epochs);
    visit("reference_checksums", reference_checksums);
    visit("bench_eval_shape", bench_eval_shape);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::unet3d
