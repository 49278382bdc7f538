#pragma once
// Mask R-CNN's settings (settings.json beside this file) as typed fields, read once from the effective preset.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/typed_settings.h"
#include "workloads/detection_common.h"

namespace trainbench::maskrcnn {

struct Settings {
  int64_t max_epochs = 0;
  int64_t batch_size = 0;  // global
  int64_t eval_batch_size = 0, num_classes = 0;
  std::vector<int64_t> body_widths, blocks_per_stage;
  bool frozen_batch_norm = false;
  int64_t freeze_conv_body_at = 0;
  bool pretrained_backbone = false;
  std::string backbone_weights;         // empty: none
  std::string backbone_weights_source;  // "msra" or "torchvision"
  int64_t fpn_channels = 0;
  std::vector<double> anchor_sizes;  // integers in the presets, read as the model takes them
  int64_t min_image_size = 0, max_image_size = 0;
  int64_t rpn_pre_nms_top_n_train = 0, rpn_post_nms_top_n_train = 0, proposals_per_image_train = 0;
  int64_t rpn_pre_nms_top_n_test = 0, rpn_post_nms_top_n_test = 0, proposals_per_image_test = 0;
  int64_t rpn_batch_size_per_image = 0, roi_batch_size_per_image = 0;
  int64_t box_fc_size = 0;
  std::vector<int64_t> mask_conv_channels;
  double base_learning_rate = 0;
  double bias_lr_factor = 0;  // an integer in the presets; it multiplies the learning rate as a double
  double momentum = 0, weight_decay = 0;
  int64_t warmup_steps = 0;
  double warmup_factor = 0;
  std::vector<int64_t> decay_steps;
  double decay_factor = 0;
  int64_t loader_threads = 0, prefetch_batches = 0;
  std::optional<CocoObjectsSettings> dataset;  // none: the preset trains on a real COCO tree

  template <typename Visit>
  void fields(Visit& visit) {
    visit("max_epochs", max_epochs);
    visit("batch_size", batch_size);
    visit("eval_batch_size", eval_batch_size);
    visit("num_classes", num_classes);
    visit("body_widths", body_widths);
    visit("blocks_per_stage", blocks_per_stage);
    visit("frozen_batch_norm", frozen_batch_norm);
    visit("freeze_conv_body_at", freeze_conv_body_at);
    visit("pretrained_backbone", pretrained_backbone);
    visit("backbone_weights", backbone_weights);
    visit("backbone_weights_source", backbone_weights_source);
    visit("fpn_channels", fpn_channels);
    visit("anchor_sizes", anchor_sizes);
    visit("min_image_size", min_image_size);
    visit("max_image_size", max_image_size);
    visit("rpn_pre_nms_top_n_train", rpn_pre_nms_top_n_train);
    visit("rpn_post_nms_top_n_train", rpn_post_nms_top_n_train);
    visit("proposals_per_image_train", proposals_per_image_train);
    visit("rpn_pre_nms_top_n_test", rpn_pre_nms_top_n_test);
    visit("rpn_post_nms_top_n_test", rpn_post_nms_top_n_test);
    visit("proposals_per_image_test", proposals_per_image_test);
    visit("rpn_batch_size_per_image", rpn_batch_size_per_image);
    visit("roi_batch_size_per_image", roi_batch_size_per_image);
    visit("box_fc_size", box_fc_size);
    visit("mask_conv_channels", mask_conv_channels);
    visit("base_learning_rate", base_learning_rate);
    visit("bias_lr_factor", bias_lr_factor);
    visit("momentum", momentum);
    visit("weight_decay", weight_decay);
    visit("warmup_steps", warmup_steps);
    visit("warmup_factor", warmup_factor);
    visit("decay_steps", decay_steps);
    visit("decay_factor", decay_factor);
    visit("loader_threads", loader_threads);
    visit("prefetch_batches", prefetch_batches);
    visit("dataset", dataset);
  }
};

}  // namespace trainbench::maskrcnn
