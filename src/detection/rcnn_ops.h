#pragma once
// The operators of Mask R-CNN as the MLPerf v1.1 reference (maskrcnn-benchmark) builds them: boxes in Detectron's
// inclusive-pixel convention (width = x2 - x1 + 1), its box coder, anchor generator, matcher and sampler,
// torchvision's RoIAlign with the legacy alignment, FPN level assignment and the test-time mask paste.
// LibTorch ops only, so everything runs wherever the tensors are (CPU or CUDA). NMS and batched NMS are in
// box_ops.h. Everything is float boxes (x1, y1, x2, y2) unless said otherwise.
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace trainbench::detection {

// IoU of inclusive-pixel boxes: (N,4) x (M,4) -> (N,M); areas use +1 sizes.
torch::Tensor box_iou_inclusive(const torch::Tensor& a, const torch::Tensor& b);
// Clamps to [0, width-1] x [0, height-1].
torch::Tensor clip_boxes_inclusive(const torch::Tensor& boxes, int64_t width, int64_t height);
// Boxes with width and height >= min_size (+1 sizes): indices (int64).
torch::Tensor keep_boxes_of_min_size(const torch::Tensor& boxes, double min_size);

// maskrcnn-benchmark's BoxCoder: +1 widths, weights (wx, wy, ww, wh), dw/dh clamped at log(1000/16) in decode.
struct DetectronBoxCoder {
  std::array<double, 4> weights{1, 1, 1, 1};
  double scale_clamp = std::log(1000.0 / 16);
  // (N,4) targets relative to (N,4) proposals -> (N,4) deltas.
  torch::Tensor encode(const torch::Tensor& reference_boxes, const torch::Tensor& proposals) const;
  // (N, 4k) deltas applied to (N,4) boxes -> (N, 4k) boxes (class-specific when k > 1).
  torch::Tensor decode(const torch::Tensor& deltas, const torch::Tensor& boxes) const;
};

// Detectron's anchor generator (generate_anchors.py): one size per level, each ratio, around the window
// (0, 0, stride-1, stride-1).
struct AnchorGeneratorOptions {
  std::vector<int64_t> strides{4, 8, 16, 32, 64};
  std::vector<double> sizes{32, 64, 128, 256, 512};
  std::vector<double> aspect_ratios{0.5, 1.0, 2.0};
  double straddle_threshold = 0;  // anchors further than this outside the image are not visible
};
// (A, 4) cell anchors of one level.
torch::Tensor cell_anchors(int64_t stride, double size, const std::vector<double>& aspect_ratios);
// Per level l: (H_l * W_l * A, 4) anchors, ordered (y, x, anchor) as the reference's grid_anchors, on `device`.
std::vector<torch::Tensor> grid_anchors(const AnchorGeneratorOptions& options,
                                        const std::vector<std::array<int64_t, 2>>& feature_sizes_hw,
                                        torch::Device device);
// (N,) bool: anchors inside the (un-padded) image of `width` x `height`, with the straddle threshold.
torch::Tensor visible_anchors(const torch::Tensor& anchors, int64_t width, int64_t height, double straddle_threshold);

// maskrcnn-benchmark's Matcher on an (G, N) IoU matrix (G ground truths, N predictions): (N,) int64 with the
// matched ground-truth index, kBelowLowThreshold or kBetweenThresholds; allow_low_quality_matches keeps, for
// each ground truth, every prediction tied at its highest IoU. With no ground truth (G = 0) every prediction is
// kBelowLowThreshold (the reference raises instead).
constexpr int64_t kBelowLowThreshold = -1;
constexpr int64_t kBetweenThresholds = -2;
torch::Tensor match_predictions(const torch::Tensor& iou, double high_threshold, double low_threshold,
                                bool allow_low_quality_matches);

// BalancedPositiveNegativeSampler on (N,) int64 labels (>= 1 positive, 0 negative, -1 ignored): up to
// batch_size * positive_fraction positives, the rest negatives, each chosen by a random permutation drawn
// from `generator`. Returns (positive indices, negative indices), int64.
std::pair<torch::Tensor, torch::Tensor> sample_positive_negative(const torch::Tensor& labels, int64_t batch_size,
                                                                 double positive_fraction,
                                                                 at::Generator generator);

// RoIAlign as torchvision.ops.roi_align: features (N,C,H,W); rois (K,5) = (batch index, x1, y1, x2, y2) in
// input pixels; aligned=false is the legacy alignment (no -0.5 offset, RoI size at least 1). LibTorch ops only
// (CPU and CUDA); differentiable with respect to `features`.
torch::Tensor roi_align(const torch::Tensor& features, const torch::Tensor& rois, double spatial_scale,
                        int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned = false);
// The FPN level of each RoI: floor(canonical_level + log2(sqrt(area)/canonical_scale + 1e-6)) clamped to
// [min_level, max_level], area with +1 sizes. (K,) int64.
torch::Tensor roi_levels(const torch::Tensor& rois, int64_t min_level = 2, int64_t max_level = 5,
                         double canonical_scale = 224, int64_t canonical_level = 4);
// Pools each RoI from its level: features[i] is level min_level + i with scale 1/stride. Output (K,C,P,P) in rois' order.
torch::Tensor multilevel_roi_align(const std::vector<torch::Tensor>& features, const torch::Tensor& rois,
                                   const std::vector<double>& spatial_scales, int64_t pooled_size,
                                   int64_t sampling_ratio, int64_t min_level = 2);

// The reference's test-time mask paste: (K, M, M) probabilities, (K, 4) boxes in the image -> (K, H, W) uint8,
// padding each mask by `padding` px and expanding its box by (M + 2*padding) / M, bilinear resize
// (align_corners=false) to the integer box size, threshold (> threshold; threshold >= 0, else an Error).
torch::Tensor paste_masks(const torch::Tensor& mask_probabilities, const torch::Tensor& boxes, int64_t height,
                          int64_t width, double threshold = 0.5, int64_t padding = 1);

}  // namespace trainbench::detection
