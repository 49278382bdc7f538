#pragma once
// What the two COCO detection benchmarks (SSD and Mask R-CNN) do alike: their loaders' shared options, generate
// a preset's COCO-format set from its "dataset" settings, load a COCO tree's splits and check their categories, log the boxes their
// annotation files had that no model can train on, and load backbone weights converted from torchvision into a
// body module.
// Header-only, so neither benchmark's translation unit depends on the other's.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/generators/coco_objects.h"
#include "data/image_loader.h"
#include "detection/coco_detection.h"
#include "harness/config.h"
#include "harness/typed_settings.h"
#include "harness/workload.h"
#include "parallel/context.h"
#include "util/error.h"
#include "workloads/checkpoint.h"
#include "workloads/common.h"

namespace trainbench {

// The loader settings SSD's and Mask R-CNN's loaders share: the mode, this rank's share of the global batch
// (training) or the evaluation batch, loader threads, prefetch depth, seed and the rank's place among the ranks.
template <typename LoaderOptions, typename Settings>
LoaderOptions shared_loader_options(const Settings& preset, bool train, const WorkloadSettings& settings,
                                    const parallel::ParallelContext& context) {
  LoaderOptions options;
  options.mode = train ? data::LoaderMode::Train : data::LoaderMode::Eval;
  options.batch_size =
      train ? local_batch_size(settings.config, "batch_size", context.world_size()) : preset.eval_batch_size;
  options.drop_last = train;
  options.workers = loader_threads(settings.config, "loader_threads");
  options.prefetch_batches = static_cast<int>(preset.prefetch_batches);
  options.seed = static_cast<uint64_t>(settings.seed);
  options.rank = context.rank();
  options.world = context.world_size();
  return options;
}

// The generated COCO-format set of a preset's "dataset" object (data::CocoObjectsOptions): one category per listed
// Fashion-MNIST class, num_classes - 1 of them.
struct CocoObjectsSettings {
  int64_t train_images = 0, val_images = 0, min_image_size = 0, max_image_size = 0, min_objects = 0, max_objects = 0;
  double min_object_size = 0, max_object_size = 0;  // integers in the presets, converted as the generator takes them
  std::vector<int64_t> fashion_classes;
  double crowd_fraction = 0;

  template <typename Visit>
  void fields(Visit& visit) {
    visit("train_images", train_images);
    visit("val_images", val_images);
    visit("min_image_size", min_image_size);
    visit("max_image_size", max_image_size);
    visit("min_objects", min_objects);
    visit("max_objects", max_objects);
    visit("min_object_size", min_object_size);
    visit("max_object_size", max_object_size);
    visit("fashion_classes", fashion_classes);
    visit("crowd_fraction", crowd_fraction);
  }
};

// `trainbench data make`: writes `dataset` (none: the preset of `config` trains on a real COCO tree) to out_dir.
inline void write_generated_coco_dataset(const Config& config, const std::optional<CocoObjectsSettings>& dataset,
                                         int64_t num_classes, const std::string& out_dir, int64_t seed) {
  if (!dataset) fail("--preset " + config.name(), "has no generated dataset; pass --data with a COCO 2017 tree");
  data::CocoObjectsOptions options;
  options.train_images = static_cast<int>(dataset->train_images);
  options.val_images = static_cast<int>(dataset->val_images);
  options.min_image_size = static_cast<int>(dataset->min_image_size);
  options.max_image_size = static_cast<int>(dataset->max_image_size);
  options.min_objects = static_cast<int>(dataset->min_objects);
  options.max_objects = static_cast<int>(dataset->max_objects);
  options.min_object_size = dataset->min_object_size;
  options.max_object_size = dataset->max_object_size;
  options.classes.clear();
  for (int64_t fashion_class : dataset->fashion_classes) options.classes.push_back(static_cast<int>(fashion_class));
  options.crowd_fraction = dataset->crowd_fraction;
  options.seed = static_cast<uint64_t>(seed);
  if (static_cast<int64_t>(options.classes.size()) + 1 != num_classes)
    fail(config.name() + ": dataset.fashion_classes",
         "must list num_classes - 1 = " + std::to_string(num_classes - 1) + " classes");
  data::make_coco_objects_dataset(out_dir, options);
}

// WorkloadEntry::make_dataset of a benchmark whose Settings have `dataset` and `num_classes`.
template <typename Settings>
void make_generated_coco_dataset(const Config& config, const std::string& out_dir, int64_t seed) {
  const Settings preset = read_settings<Settings>(config);
  write_generated_coco_dataset(config, preset.dataset, preset.num_classes, out_dir, seed);
}

// A COCO 2017 tree's annotation file of `split` ("train2017", "val2017").
inline std::string coco_annotation_file(const std::string& data_dir, const std::string& split) {
  return (std::filesystem::path(data_dir) / "annotations" / ("instances_" + split + ".json")).string();
}

// The boxes (and polygons) of one split of a COCO 2017 tree, with its image folder.
inline detection::CocoDetectionSet load_coco_split(const std::string& data_dir, const std::string& split) {
  return detection::load_coco_detection(coco_annotation_file(data_dir, split),
                                        (std::filesystem::path(data_dir) / split).string());
}

// An Error naming the annotations unless train and val list the same categories, num_classes - 1 of them (the
// preset `preset` counts the background).
inline void check_coco_categories(const detection::CocoDetectionSet& train, const detection::CocoDetectionSet& val,
                                  const std::string& data_dir, const std::string& preset, int64_t num_classes) {
  if (static_cast<int64_t>(train.category_ids.size()) + 1 == num_classes && val.category_ids == train.category_ids)
    return;
  fail(data_dir + "/annotations", "has " + std::to_string(train.category_ids.size()) +
                                      " categories (train and val must list the same) but " + preset +
                                      " expects num_classes = " + std::to_string(num_classes) + " with background");
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
  if (!std::filesystem::is_regular_file(path)) fail(path, "cannot read the backbone weights (" + how_to_make + ")");
  const std::map<std::string, torch::Tensor> state = read_state_dict_file(path);
  torch::NoGradGuard no_grad;
  auto copy = [&](const std::string& name, torch::Tensor& target) {
    const auto found = state.find(name);
    if (found == state.end()) fail(path, "has no tensor '" + name + "'");
    const torch::Tensor& source = found->second;
    if (source.sizes() != target.sizes())
      fail(path + ": " + name,
           "has shape " + c10::str(source.sizes()) + ", the model expects " + c10::str(target.sizes()));
    target.copy_(source);
  };
  for (auto& parameter : module.named_parameters()) copy(parameter.key(), parameter.value());
  for (auto& buffer : module.named_buffers())
    if (buffer.key().find("num_batches_tracked") == std::string::npos) copy(buffer.key(), buffer.value());
}

}  // namespace trainbench
