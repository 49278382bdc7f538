#pragma once
// ResNet's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"

namespace trainbench::resnet {

// The generated stand-in for ImageNet that `data make resnet` writes.
struct DatasetSettings {
  int64_t classes = 0, train_per_class = 0, val_per_class = 0, image_size = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("classes", classes);
    visit("train_per_class", train_per_class);
    visit("val_per_class", val_per_class);
    visit("image_size", image_size);
  }
};

struct Settings {
  int64_t max_epochs = 0, eval_first_epoch = 0, eval_interval_epochs = 0, train_epochs = 0;
  int64_t batch_size = 0;  // global
  int64_t image_size = 0, eval_resize = 0;
  double crop_min_scale = 0;
  int64_t num_classes = 0;
  int64_t stem_width = 0, stem_kernel = 0, stem_stride = 0;
  bool stem_max_pool = false;
  std::vector<int64_t> stage_widths, blocks_per_stage;
  int64_t expansion = 0;
  std::string optimizer;  // "lars" or "sgd"
  double base_learning_rate = 0, end_learning_rate = 0;
  int64_t warmup_epochs = 0;
  double momentum = 0, weight_decay = 0, lars_eta = 0, label_smoothing = 0;
  int64_t loader_threads = 0, prefetch_batches = 0;
  std::optional<DatasetSettings> dataset;  // none: the preset trains on a real ImageNet tree

  bool lars() const { return optimizer == "lars"; }

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_epochs", max_epochs);
    visit("eval_first_epoch", eval_first_epoch);
    visit("eval_interval_epochs", eval_interval_epochs);
    visit("train_epochs", train_epochs);
    visit("batch_size", batch_size);
    visit("image_size", image_size);
    visit("eval_resize", eval_resize);
    visit("crop_min_scale", crop_min_scale);
    visit("num_classes", num_classes);
    visit("stem_width", stem_width);
    visit("stem_kernel", stem_kernel);
    visit("stem_stride", stem_stride);
    visit("stem_max_pool", stem_max_pool);
    visit("stage_widths", stage_widths);
    visit("blocks_per_stage", blocks_per_stage);
    visit("expansion", expansion);
    visit("optimizer", optimizer);
    visit("base_learning_rate", base_learning_rate);
    visit("end_learning_rate", end_learning_rate);
    visit("warmup_epochs", warmup_epochs);
    visit("momentum", momentum);
    visit("weight_decay", weight_decay);
    visit("lars_eta", lars_eta);
    visit("label_smoothing", label_smoothing);
    visit("loader_threads", loader_threads);
    visit("prefetch_batches", prefetch_batches);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::resnet
