#pragma once
// SSD's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"
#include "workloads/detection_common.h"

namespace trainbench::ssd {

struct Settings {
  int64_t max_epochs = 0, eval_first_epoch = 0, eval_interval_epochs = 0;
  int64_t batch_size = 0;  // global
  int64_t eval_batch_size = 0;
  int64_t image_size = 0, num_classes = 0;
  std::vector<int64_t> blocks_per_stage;
  int64_t width_divisor = 0;
  std::vector<double> box_steps, box_scales;  // the steps are integers in the presets, read as the geometry takes them
  nlohmann::json box_aspect_ratios;           // a list of ratio lists, one per feature level
  bool pretrained_backbone = false;
  std::string backbone_weights;  // empty: none
  double learning_rate_per_32 = 0, momentum = 0, weight_decay = 0;
  double warmup_epochs = 0;  // an integer in the presets; the warm-up length multiplies it as a double
  int64_t warmup_factor = 0;
  std::vector<int64_t> decay_epochs;
  double decay_factor = 0;
  int64_t max_samples = 0;
  double score_threshold = 0;
  int64_t candidates_per_class = 0;
  double nms_iou = 0;
  int64_t max_detections = 0;
  int64_t loader_threads = 0, prefetch_batches = 0;
  std::optional<CocoObjectsSettings> dataset;  // none: the preset trains on a real COCO tree

  // The reference scales --lr by the global batch over 32; the scaled value is the one logged.
  double base_learning_rate() const { return learning_rate_per_32 * static_cast<double>(batch_size) / 32.0; }

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_epochs", max_epochs);
    visit("eval_first_epoch", eval_first_epoch);
    visit("eval_interval_epochs", eval_interval_epochs);
    visit("batch_size", batch_size);
    visit("eval_batch_size", eval_batch_size);
    visit("image_size", image_size);
    visit("num_classes", num_classes);
    visit("blocks_per_stage", blocks_per_stage);
    visit("width_divisor", width_divisor);
    visit("box_steps", box_steps);
    visit("box_scales", box_scales);
    visit("box_aspect_ratios", box_aspect_ratios);
    visit("pretrained_backbone", pretrained_backbone);
    visit("backbone_weights", backbone_weights);
    visit("learning_rate_per_32", learning_rate_per_32);
    visit("momentum", momentum);
    visit("weight_decay", weight_decay);
    visit("warmup_epochs", warmup_epochs);
    visit("warmup_factor", warmup_factor);
    visit("decay_epochs", decay_epochs);
    visit("decay_factor", decay_factor);
    visit("max_samples", max_samples);
    visit("score_threshold", score_threshold);
    visit("candidates_per_class", candidates_per_class);
    visit("nms_iou", nms_iou);
    visit("max_detections", max_detections);
    visit("loader_threads", loader_threads);
    visit("prefetch_batches", prefetch_batches);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::ssd
