#pragma once
// Mask R-CNN with a ResNet-50-FPN backbone as the MLPerf v1.1 reference builds it (maskrcnn-benchmark,
// configs/e2e_mask_rcnn_R_50_FPN_1x.yaml): a frozen-BN ResNet body with the stride in the 1x1 convs (for MSRA's
// weights; in the 3x3 for torchvision's), FPN P2-P6, the RPN with Detectron anchors, the box head with
// class-specific deltas and the mask head, their five losses and the test-time post-processing. Parameterised by
// widths, depths, sizes and RoI counts, so the tiny and mini presets are the same code scaled down. Module names
// follow the reference (fpn_inner1, rpn.conv, box_head.fc6, mask_head.mask_fcn1, ...) except the body, which
// takes torchvision's ResNet names (conv1, bn1, layer1..layer4), the names the reference's Caffe2 renaming gives
// too, so both weight sources map one to one. Boxes are Detectron's inclusive pixels throughout.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "detection/rcnn_ops.h"
#include "workloads/checkpoint.h"
#include "workloads/training_loop.h"

namespace trainbench::maskrcnn {

// Where the body's ImageNet weights come from, which also fixes where each stage's stride sits. MSRA's Caffe2 R-50
// (the reference's catalog://ImageNetPretrained/MSRA/R-50, Detectron's R-50.pkl) has it in the 1x1 convolution of
// each stage's first block (the reference's RESNETS.STRIDE_IN_1X1); torchvision's ResNet-50 (v1.5) in the 3x3.
enum class BackboneWeights { kMsra, kTorchvision };

struct MaskRcnnOptions {
  TORCH_ARG(int64_t, num_classes) = 81;  // with background (label 0)
  // Bottleneck widths of res2..res5 (each stage outputs 4x its width); the stem has widths[0] channels.
  TORCH_ARG(std::vector<int64_t>, body_widths) = std::vector<int64_t>{64, 128, 256, 512};
  TORCH_ARG(std::vector<int64_t>, blocks_per_stage) = std::vector<int64_t>{3, 4, 6, 3};
  // Frozen batch norm (the reference; an affine map with fixed statistics and no eps) or, for a body
  // trained from random initialisation, batch norm with batch statistics.
  TORCH_ARG(bool, frozen_batch_norm) = true;
  TORCH_ARG(int64_t, freeze_at) = 2;  // 1: the stem, 2: the stem and res2 get no gradient; 0: nothing frozen
  TORCH_ARG(BackboneWeights, backbone_weights) = BackboneWeights::kMsra;
  TORCH_ARG(int64_t, fpn_channels) = 256;
  TORCH_ARG(std::vector<double>, anchor_sizes) = std::vector<double>{32, 64, 128, 256, 512};
  TORCH_ARG(std::vector<double>, aspect_ratios) = std::vector<double>{0.5, 1.0, 2.0};
  TORCH_ARG(double, straddle_threshold) = 0;
  // Proposals: per level before and after NMS, then over all levels (per batch in training, per image in test).
  TORCH_ARG(int64_t, rpn_pre_nms_top_n_train) = 2000;
  TORCH_ARG(int64_t, rpn_post_nms_top_n_train) = 2000;
  TORCH_ARG(int64_t, fpn_post_nms_top_n_train) = 2000;
  TORCH_ARG(int64_t, rpn_pre_nms_top_n_test) = 1000;
  TORCH_ARG(int64_t, rpn_post_nms_top_n_test) = 1000;
  TORCH_ARG(int64_t, fpn_post_nms_top_n_test) = 1000;
  TORCH_ARG(double, rpn_nms_threshold) = 0.7;
  TORCH_ARG(double, rpn_min_size) = 0;
  TORCH_ARG(double, rpn_fg_iou_threshold) = 0.7;
  TORCH_ARG(double, rpn_bg_iou_threshold) = 0.3;
  TORCH_ARG(int64_t, rpn_batch_size_per_image) = 256;
  TORCH_ARG(double, rpn_positive_fraction) = 0.5;
  TORCH_ARG(double, roi_fg_iou_threshold) = 0.5;
  TORCH_ARG(double, roi_bg_iou_threshold) = 0.5;
  TORCH_ARG(int64_t, roi_batch_size_per_image) = 512;
  TORCH_ARG(double, roi_positive_fraction) = 0.25;
  TORCH_ARG(int64_t, box_pooled_size) = 7;
  TORCH_ARG(int64_t, box_fc_size) = 1024;
  TORCH_ARG(int64_t, mask_pooled_size) = 14;
  TORCH_ARG(std::vector<int64_t>, mask_conv_channels) = std::vector<int64_t>{256, 256, 256, 256};
  TORCH_ARG(int64_t, sampling_ratio) = 2;
  // Test-time post-processing.
  TORCH_ARG(double, score_threshold) = 0.05;
  TORCH_ARG(double, detection_nms_threshold) = 0.5;
  TORCH_ARG(int64_t, detections_per_image) = 100;

 public:
  // The FPN strides of P2..P6.
  static std::vector<int64_t> strides() { return {4, 8, 16, 32, 64}; }
  bool stride_in_1x1() const { return backbone_weights_ == BackboneWeights::kMsra; }
  int64_t mask_resolution() const { return 2 * mask_pooled_size_; }  // the ConvTranspose doubles the pooled size
};

// maskrcnn-benchmark's FrozenBatchNorm2d: y = x * weight / sqrt(running_var) + (bias - running_mean * weight /
// sqrt(running_var)), with no eps, all four as buffers (never trained).
class FrozenBatchNorm2dImpl : public torch::nn::Module {
 public:
  explicit FrozenBatchNorm2dImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& input);

  torch::Tensor weight, bias, running_mean, running_var;
};
TORCH_MODULE(FrozenBatchNorm2d);

// The reference's Bottleneck: 1x1 -> 3x3 -> 1x1 (4x width) with the stride in the 1x1 (STRIDE_IN_1X1) or the 3x3,
// a 1x1 projection shortcut (strided) where the shape changes.
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int64_t in_channels, int64_t width, int64_t stride, bool frozen_batch_norm, bool stride_in_1x1);
  torch::Tensor forward(const torch::Tensor& input);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  torch::nn::AnyModule bn1, bn2, bn3;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Bottleneck);

// The ResNet body: stem (conv1, bn1, ReLU, max pool) and res2..res5 (layer1..layer4); returns C2..C5.
class BodyImpl : public torch::nn::Module {
 public:
  explicit BodyImpl(const MaskRcnnOptions& options);
  std::vector<torch::Tensor> forward(const torch::Tensor& images);
  std::vector<int64_t> out_channels() const { return out_channels_; }

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::AnyModule bn1;
  torch::nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};

 private:
  std::vector<int64_t> out_channels_;
};
TORCH_MODULE(Body);

class MaskRcnnImpl;
TORCH_MODULE(MaskRcnn);

// The ground truth of one training image, in the resized (and flipped) image.
struct ImageTarget {
  torch::Tensor boxes;   // (G, 4) inclusive pixels
  torch::Tensor labels;  // (G) int64, 1..num_classes-1
  std::vector<std::vector<std::vector<double>>> polygons;  // per object, pixel polygons
};

struct ImageSize {
  int64_t height = 0, width = 0;  // after resize, before padding
};

// The five terms of the reference's loss dict; the training loss is their plain sum.
struct Losses {
  torch::Tensor objectness, rpn_box, classifier, box_reg, mask;
  torch::Tensor total() const { return objectness + rpn_box + classifier + box_reg + mask; }
};

// One image's detections in its resized image: at most detections_per_image (ties at the last score kept).
struct ImageDetections {
  torch::Tensor boxes;   // (K, 4) inclusive pixels
  torch::Tensor scores;  // (K)
  torch::Tensor labels;  // (K) int64
  torch::Tensor masks;   // (K, M, M) mask probabilities of the detected class
};

class MaskRcnnImpl : public torch::nn::Module {
 public:
  explicit MaskRcnnImpl(const MaskRcnnOptions& options = {});

  // P2..P6 of padded images (N, 3, H, W) with H and W multiples of 32.
  std::vector<torch::Tensor> features(const torch::Tensor& images);
  // One training step's five losses. `generator` draws the RPN's and the box head's samples.
  Losses losses(const torch::Tensor& images, const std::vector<ImageSize>& sizes, const std::vector<ImageTarget>& targets,
                at::Generator generator);
  // Inference and the reference's post-processing (in eval mode, without gradients).
  std::vector<ImageDetections> detect(const torch::Tensor& images, const std::vector<ImageSize>& sizes);

  // The proposals of each image (RPN without gradients): per level the top pre-NMS boxes by objectness, decoded,
  // clipped, NMS, then the top over all levels (per batch when training, per image otherwise).
  std::vector<torch::Tensor> proposals(const std::vector<torch::Tensor>& objectness, const std::vector<torch::Tensor>& deltas,
                                       const std::vector<torch::Tensor>& anchors, const std::vector<ImageSize>& sizes,
                                       bool training) const;
  // Loads the body's ImageNet weights in the format of options().backbone_weights(). MSRA: Detectron's Caffe2
  // pickle (conv1_w, res_conv1_bn_s, res2_0_branch2a_w, ..., res5_2_branch2c_bn_b; fc1000 and momenta unused),
  // renamed as the reference's utils/c2_model_loading.py does, each batch norm's scale and bias becoming its weight
  // and bias over statistics 0 and 1 (Caffe2's affine channel has none). Torchvision: a body state dict
  // (torchvision's ResNet names without fc: conv1.weight, bn1.running_var, layer3.5.conv2.weight, ...) written by
  // scripts/convert_resnet50_backbone.py. Every tensor of the body must be there with its shape, and an MSRA file
  // may hold no block weight the body has no place for (a deeper ResNet's); throws Error naming the file and the
  // tensor.
  void load_backbone(const std::string& path);
  // Stops the gradient of the frozen stages (freeze_at); the optimizer trains what still requires it.
  void freeze_stages();
  // The rules' 21 weights_initialization names of the tensors this model initialises (FPN, RPN and heads).
  static std::vector<std::string> mlperf_tensor_names();
  // Multiply-accumulates of the convolutions and linear layers for one image of `height` x `width` with
  // `rois` box-head RoIs and `mask_rois` mask-head RoIs, for the bench's FLOP/s.
  double forward_macs(int64_t height, int64_t width, int64_t rois, int64_t mask_rois) const;

  const MaskRcnnOptions& options() const { return options_; }

  Body body{nullptr};
  std::vector<torch::nn::Conv2d> fpn_inner, fpn_layer;  // fpn_inner1..4 (1x1 laterals), fpn_layer1..4 (3x3)
  torch::nn::Conv2d rpn_conv{nullptr}, rpn_cls_logits{nullptr}, rpn_bbox_pred{nullptr};
  torch::nn::Linear fc6{nullptr}, fc7{nullptr}, cls_score{nullptr}, bbox_pred{nullptr};
  std::vector<torch::nn::Conv2d> mask_fcn;  // mask_fcn1..4
  torch::nn::ConvTranspose2d conv5_mask{nullptr};
  torch::nn::Conv2d mask_fcn_logits{nullptr};

 private:
  // Per level: objectness (N, H*W*A) and deltas (N, H*W*A, 4) in the (y, x, anchor) order of the anchors.
  std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> rpn_head(const std::vector<torch::Tensor>& features);
  std::vector<torch::Tensor> anchors(const std::vector<torch::Tensor>& features) const;
  // (K, num_classes) logits and (K, 4 * num_classes) deltas of rois (K, 5).
  std::pair<torch::Tensor, torch::Tensor> box_head(const std::vector<torch::Tensor>& features, const torch::Tensor& rois);
  // (K, num_classes, M, M) mask logits of rois (K, 5).
  torch::Tensor mask_head(const std::vector<torch::Tensor>& features, const torch::Tensor& rois);

  MaskRcnnOptions options_;
  detection::AnchorGeneratorOptions anchor_options_;
};

// (x1, y1, x2, y2) boxes of several images as RoIs (K, 5) with the image index first.
torch::Tensor rois_of(const std::vector<torch::Tensor>& boxes_per_image);

// One update for the shared training loop: forward and the five losses per micro-batch (the RPN's and the
// box head's sampling drawn from `generator`), then SGD with each parameter group at its rate.
TrainingStep training_step(MaskRcnn model, torch::optim::SGD& optimizer, std::vector<double> group_learning_rates,
                           torch::Tensor images, std::vector<ImageSize> sizes, std::vector<ImageTarget> targets,
                           at::Generator& generator);

// The model under the names of the v1.1 reference's GeneralizedRCNN (maskrcnn_benchmark built from
// configs/e2e_mask_rcnn_R_50_FPN_1x.yaml): backbone.body.stem.conv1, backbone.body.layer3.0.downsample.1.running_var,
// backbone.fpn.fpn_inner2, rpn.head.conv / cls_logits / bbox_pred, roi_heads.box.feature_extractor.fc6,
// roi_heads.box.predictor.cls_score, roi_heads.mask.feature_extractor.mask_fcn1, roi_heads.mask.predictor.conv5_mask,
// ..., and the anchor generator's five cell_anchors buffers, which trainbench computes from the options instead:
// their entries are copies, and check_official_anchors compares what a file put there. Batch norms carry no
// num_batches_tracked (the reference's are FrozenBatchNorm2d, which has none and no epsilon).
StateDict official_state(const MaskRcnn& model);
// Throws Error naming `path` when the cell anchors `state` (official_state's, after loading `path`) holds differ
// from the model's anchor sizes and aspect ratios.
void check_official_anchors(const MaskRcnn& model, const StateDict& state, const std::string& path);

}  // namespace trainbench::maskrcnn
