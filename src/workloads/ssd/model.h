#pragma once
// SSD300 with a ResNet-34 backbone, the MLPerf v1.1 reference model (single_stage_detector/ssd: ssd300.py,
// base_model.py, utils.py), parameterised by input size, depth and a width divisor so that the tiny and mini
// presets are the same code scaled down. Module names follow the reference (backbone = torchvision's ResNet-34
// names, additional_blocks, loc, conf), so torchvision's resnet34 weights map one to one.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "detection/box_ops.h"
#include "detection/default_boxes.h"
#include "workloads/checkpoint.h"
#include "workloads/training_loop.h"

namespace trainbench::ssd {

struct SsdOptions {
  TORCH_ARG(int64_t, num_classes) = 81;  // with background (label 0)
  TORCH_ARG(int64_t, image_size) = 300;
  TORCH_ARG(std::vector<int64_t>, blocks_per_stage) = std::vector<int64_t>{3, 4, 6};  // ResNet-34's layer1..3
  // Every channel count of the reference divided by this (stem 64, stages 64/128/256, extra blocks 256/512/128).
  TORCH_ARG(int64_t, width_divisor) = 1;
  TORCH_ARG(detection::DefaultBoxGeometry, geometry) = detection::ssd300_geometry();
};

// The side of the backbone's output (stride 8: conv1, max pool and layer2 halve it) and of every level
// after it, for a square input: 300 -> 38, 19, 10, 5, 3, 1 (the reference's six levels); 150 -> 19, 10, 5, 3,
// 1; 75 -> 10, 5, 3, 1. Like the reference's _build_additional_features, a smaller input drops the leading
// extra blocks.
std::vector<int> feature_sizes(int64_t image_size);

class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in_channels, int64_t channels, int64_t stride);
  torch::Tensor forward(const torch::Tensor& input);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

// torchvision's ResNet-34 up to layer3, with layer3's first block at stride 1 (conv1 and downsample).
class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const SsdOptions& options);
  torch::Tensor forward(const torch::Tensor& input);
  int64_t out_channels() const { return out_channels_; }

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr};

 private:
  int64_t out_channels_;
};
TORCH_MODULE(Backbone);

class SsdImpl : public torch::nn::Module {
 public:
  explicit SsdImpl(const SsdOptions& options = {});
  // Images (N, 3, S, S) -> locations (N, 4, boxes) and class scores (N, num_classes, boxes), levels concatenated
  // in default-box order.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& images);

  // Multiply-accumulates of one forward pass for one image (convolutions), for the bench's FLOP/s.
  int64_t forward_macs() const;
  // Loads a backbone state dict (torchvision names without layer4/fc: conv1.weight, bn1.running_mean,
  // layer3.5.bn2.bias, ...) written by torch.save in Python; every tensor of the backbone must be there with
  // its shape. Throws Error naming the file and the tensor.
  void load_backbone(const std::string& path);
  // The rules' weights_initialization names (MXNet style, ssd0_resnetmlperf0_conv0_weight, ...) of the
  // model's tensors, in order.
  std::vector<std::string> mlperf_tensor_names() const;

  const SsdOptions& options() const { return options_; }
  // The default boxes on the model's device, (boxes, 4): xywh and ltrb.
  const torch::Tensor& default_boxes_xywh() const { return boxes_xywh_; }
  const torch::Tensor& default_boxes_ltrb() const { return boxes_ltrb_; }

  Backbone backbone{nullptr};
  torch::nn::ModuleList additional_blocks{nullptr}, loc{nullptr}, conf{nullptr};

 private:
  SsdOptions options_;
  std::vector<int64_t> level_channels_;
  torch::Tensor boxes_xywh_, boxes_ltrb_;
};
TORCH_MODULE(Ssd);

// The model's tensors under the reference SSD300's state_dict names (single_stage_detector/ssd/ssd300.py):
// its ResNet-34 body is two Sequentials of torchvision's children (model.layer1 = conv1, bn1, relu, maxpool,
// layer1, layer2; model.layer2 = layer3), so backbone.layer1.0.conv1.weight is model.layer1.4.0.conv1.weight;
// the extra blocks (additional_blocks.i.0/.2) and heads (loc.i, conf.i) have the same names here. The default
// boxes, buffers here, are left out: the reference computes them from the geometry.
StateDict official_state(const Ssd& model);

// The reference Encoder.encode for one image: IoU of the ground truth (M, 4 ltrb) with the default boxes; each
// ground truth's best box is forced to it, otherwise a box takes its best ground truth when IoU > criterion.
// Returns the matched boxes (boxes, 4) in xywh (unmatched: the default box itself) and labels (boxes), 0 for
// background.
std::pair<torch::Tensor, torch::Tensor> match(const torch::Tensor& truth_ltrb, const torch::Tensor& truth_labels,
                                              const torch::Tensor& default_ltrb, const torch::Tensor& default_xywh,
                                              double criterion = 0.5);

// The reference Loss: SmoothL1 over positive boxes' offsets plus cross entropy over positives and the 3P
// hardest negatives, per image divided by its P (images without positives count 0), averaged over the batch.
// locations (N, 4, B), scores (N, C, B), matched_xywh (N, B, 4), labels (N, B).
torch::Tensor ssd_loss(const torch::Tensor& locations, const torch::Tensor& scores, const torch::Tensor& matched_xywh,
                       const torch::Tensor& labels, const torch::Tensor& default_xywh);

struct DecodeOptions {
  double score_threshold = 0.05;
  int64_t candidates_per_class = 200;
  double nms_iou = 0.5;  // boxes with IoU >= this with a kept box of their class are dropped (the reference keeps < 0.5)
  int64_t max_detections = 200;
};

struct ImageDetections {
  torch::Tensor boxes_ltrb;  // (K, 4) relative to the image
  torch::Tensor labels;      // (K) 1..C-1
  torch::Tensor scores;      // (K)
};

// The reference decode_batch for one image: offsets to boxes, softmax, then per class the candidates above
// the score threshold (at most candidates_per_class, best first), greedy NMS, and the best max_detections of
// all classes. locations (4, B), scores (C, B).
ImageDetections decode(const torch::Tensor& locations, const torch::Tensor& scores, const torch::Tensor& default_xywh,
                       const DecodeOptions& options);

// One update for the shared training loop: forward and the reference loss per micro-batch (a mean over
// images of each image's loss over its matched boxes), then the SGD update at `learning_rate`.
TrainingStep training_step(Ssd model, torch::optim::SGD& optimizer, torch::Tensor images, torch::Tensor matched_boxes,
                           torch::Tensor matched_labels, double learning_rate);

}  // namespace trainbench::ssd
