#pragma once
// What the two COCO detection benchmarks (SSD and Mask R-CNN) do alike: generate a preset's COCO-format set
// from its "dataset" settings, log the boxes their annotation files had that no model can train on, and load
// backbone weights converted from torchvision into a body module.
// Header-only, so neither benchmark's translation unit depends on the other's.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/generators/coco_objects.h"
#include "detection/coco_detection.h"
#include "harness/config.h"
#include "harness/workload.h"
#include "util/error.h"

namespace trainbench {

// `trainbench data make`: the preset's "dataset" object as data::CocoObjectsOptions (one category per listed
// Fashion-MNIST class, num_classes - 1 of them), written to out_dir.
inline void make_generated_coco_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  if (!config.values().contains("dataset"))
    fail("--preset " + config.name(), "has no generated dataset; pass --data with a COCO 2017 tree");
  const Config dataset(config.name() + ": dataset", config.values().at("dataset"));
  data::CocoObjectsOptions options;
  options.train_images = static_cast<int>(dataset.integer("train_images"));
  options.val_images = static_cast<int>(dataset.integer("val_images"));
  options.min_image_size = static_cast<int>(dataset.integer("min_image_size"));
  options.max_image_size = static_cast<int>(dataset.integer("max_image_size"));
  options.min_objects = static_cast<int>(dataset.integer("min_objects"));
  options.max_objects = static_cast<int>(dataset.integer("max_objects"));
  options.min_object_size = dataset.number("min_object_size");
  options.max_object_size = dataset.number("max_object_size");
  options.classes.clear();
  for (int64_t fashion_class : dataset.integers("fashion_classes")) options.classes.push_back(static_cast<int>(fashion_class));
  options.crowd_fraction = dataset.number("crowd_fraction");
  options.seed = static_cast<uint64_t>(seed);
  if (static_cast<int64_t>(options.classes.size()) + 1 != config.integer("num_classes"))
    fail(config.name() + ": dataset.fashion_classes", "must list num_classes - 1 = " +
                                                          std::to_string(config.integer("num_classes") - 1) + " classes");
  data::make_coco_objects_dataset(out_dir, options);
}

// trainbench_dropped_boxes {"train": n, "val": m}, when load_coco_detection left boxes out of either file.
inline void log_dropped_boxes(const detection::CocoDetectionSet& train, const detection::CocoDetectionSet& val,
                              DataSummary& summary) {
  if (train.dropped_boxes == 0 && val.dropped_boxes == 0) return;
  summary.derived_hyperparameters.push_back(
      {"trainbench_dropped_boxes", {{"train", train.dropped_boxes}, {"val", val.dropped_boxes}}});
}

// Copies a dict {name: tensor} written by torch.save into every parameter and buffer of `module` (batch norms'
// num_batches_tracked aside). A missing tensor or another shape is an Error naming the file and the tensor;
// `how_to_make` says in the error for an unreadable file how such a file is made.
inline void load_module_state(const std::string& path, torch::nn::Module& module, const std::string& how_to_make) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot read the backbone weights (" + how_to_make + ")");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::impl::GenericDict state = [&] {
    try {
      return torch::pickle_load(bytes).toGenericDict();
    } catch (const c10::Error& error) {
      fail(path, std::string("is not a dict of tensors saved by torch.save: ") + error.what_without_backtrace());
    }
  }();
  torch::NoGradGuard no_grad;
  auto copy = [&](const std::string& name, torch::Tensor& target) {
    const auto found = state.find(name);
    if (found == state.end() || !found->value().isTensor()) fail(path, "has no tensor '" + name + "'");
    const torch::Tensor source = found->value().toTensor();
    if (source.sizes() != target.sizes())
      fail(path + ": " + name, "has shape " + c10::str(source.sizes()) + ", the model expects " + c10::str(target.sizes()));
    target.copy_(source);
  };
  for (auto& parameter : module.named_parameters()) copy(parameter.key(), parameter.value());
  for (auto& buffer : module.named_buffers())
    if (buffer.key().find("num_batches_tracked") == std::string::npos) copy(buffer.key(), buffer.value());
}

}  // namespace trainbench
