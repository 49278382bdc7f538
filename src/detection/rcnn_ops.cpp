#include "detection/rcnn_ops.h"

#include <algorithm>
#include <map>
#include <string>

#include "util/error.h"

namespace trainbench::detection {

namespace {

using torch::indexing::None;
using torch::indexing::Slice;

// Widths and heights of inclusive-pixel boxes (the reference's TO_REMOVE = 1).
torch::Tensor inclusive_widths(const torch::Tensor& boxes) { return boxes.select(1, 2) - boxes.select(1, 0) + 1; }
torch::Tensor inclusive_heights(const torch::Tensor& boxes) { return boxes.select(1, 3) - boxes.select(1, 1) + 1; }

void check_boxes(const torch::Tensor& boxes, int64_t columns, const char* where) {
  if (boxes.dim() != 2 || boxes.size(1) != columns)
    fail(where, "expected a (N, " + std::to_string(columns) + ") tensor, got " + std::to_string(boxes.dim()) +
                    " dimensions of sizes " + c10::str(boxes.sizes()));
}

}  // namespace

torch::Tensor box_iou_inclusive(const torch::Tensor& a, const torch::Tensor& b) {
  check_boxes(a, 4, "box_iou_inclusive: a");
  check_boxes(b, 4, "box_iou_inclusive: b");
  const auto area_a = inclusive_widths(a) * inclusive_heights(a);
  const auto area_b = inclusive_widths(b) * inclusive_heights(b);
  const auto left_top = torch::max(a.unsqueeze(1).narrow(2, 0, 2), b.unsqueeze(0).narrow(2, 0, 2));
  const auto right_bottom = torch::min(a.unsqueeze(1).narrow(2, 2, 2), b.unsqueeze(0).narrow(2, 2, 2));
  const auto extent = (right_bottom - left_top + 1).clamp_min(0);
  const auto intersection = extent.select(2, 0) * extent.select(2, 1);
  return intersection / (area_a.unsqueeze(1) + area_b.unsqueeze(0) - intersection);
}

torch::Tensor clip_boxes_inclusive(const torch::Tensor& boxes, int64_t width, int64_t height) {
  check_boxes(boxes, 4, "clip_boxes_inclusive: boxes");
  const auto x = boxes.index({Slice(), Slice(0, 4, 2)}).clamp(0, width - 1);
  const auto y = boxes.index({Slice(), Slice(1, 4, 2)}).clamp(0, height - 1);
  return torch::stack({x.select(1, 0), y.select(1, 0), x.select(1, 1), y.select(1, 1)}, 1);
}

torch::Tensor keep_boxes_of_min_size(const torch::Tensor& boxes, double min_size) {
  check_boxes(boxes, 4, "keep_boxes_of_min_size: boxes");
  return torch::nonzero((inclusive_widths(boxes) >= min_size) & (inclusive_heights(boxes) >= min_size)).squeeze(1);
}

torch::Tensor DetectronBoxCoder::encode(const torch::Tensor& reference_boxes, const torch::Tensor& proposals) const {
  check_boxes(reference_boxes, 4, "DetectronBoxCoder::encode: reference_boxes");
  check_boxes(proposals, 4, "DetectronBoxCoder::encode: proposals");
  const auto proposal_widths = inclusive_widths(proposals), proposal_heights = inclusive_heights(proposals);
  const auto proposal_x = proposals.select(1, 0) + 0.5 * proposal_widths;
  const auto proposal_y = proposals.select(1, 1) + 0.5 * proposal_heights;
  const auto target_widths = inclusive_widths(reference_boxes), target_heights = inclusive_heights(reference_boxes);
  const auto target_x = reference_boxes.select(1, 0) + 0.5 * target_widths;
  const auto target_y = reference_boxes.select(1, 1) + 0.5 * target_heights;
  return torch::stack({weights[0] * (target_x - proposal_x) / proposal_widths,
                       weights[1] * (target_y - proposal_y) / proposal_heights,
                       weights[2] * torch::log(target_widths / proposal_widths),
                       weights[3] * torch::log(target_heights / proposal_heights)},
                      1);
}

torch::Tensor DetectronBoxCoder::decode(const torch::Tensor& deltas, const torch::Tensor& boxes) const {
  check_boxes(boxes, 4, "DetectronBoxCoder::decode: boxes");
  if (deltas.dim() != 2 || deltas.size(1) % 4 != 0 || deltas.size(0) != boxes.size(0))
    fail("DetectronBoxCoder::decode: deltas", "expected (" + std::to_string(boxes.size(0)) +
                                                  ", 4k) deltas for as many boxes, got sizes " + c10::str(deltas.sizes()));
  const auto anchors = boxes.to(deltas.dtype());
  const auto widths = inclusive_widths(anchors).unsqueeze(1), heights = inclusive_heights(anchors).unsqueeze(1);
  const auto center_x = anchors.select(1, 0).unsqueeze(1) + 0.5 * widths;
  const auto center_y = anchors.select(1, 1).unsqueeze(1) + 0.5 * heights;
  const auto dx = deltas.index({Slice(), Slice(0, None, 4)}) / weights[0];
  const auto dy = deltas.index({Slice(), Slice(1, None, 4)}) / weights[1];
  const auto dw = (deltas.index({Slice(), Slice(2, None, 4)}) / weights[2]).clamp_max(scale_clamp);
  const auto dh = (deltas.index({Slice(), Slice(3, None, 4)}) / weights[3]).clamp_max(scale_clamp);
  const auto predicted_x = dx * widths + center_x, predicted_y = dy * heights + center_y;
  const auto predicted_w = torch::exp(dw) * widths, predicted_h = torch::exp(dh) * heights;
  return torch::stack({predicted_x - 0.5 * predicted_w, predicted_y - 0.5 * predicted_h,
                       predicted_x + 0.5 * predicted_w - 1, predicted_y + 0.5 * predicted_h - 1},
                      2)
      .reshape(deltas.sizes());
}

torch::Tensor cell_anchors(int64_t stride, double size, const std::vector<double>& aspect_ratios) {
  if (stride <= 0 || size <= 0 || aspect_ratios.empty())
    fail("cell_anchors", "expected a positive stride and size and at least one aspect ratio, got stride " +
                             std::to_string(stride) + ", size " + std::to_string(size) + ", " +
                             std::to_string(aspect_ratios.size()) + " ratios");
  // generate_anchors.py in double precision, step by step: the ratio anchors are rounded (np.round: half to even,
  // as std::nearbyint in the default rounding mode) around the window's centre, then scaled by size / stride.
  const double window = static_cast<double>(stride);
  const double center = 0.5 * (window - 1);
  const double scale = size / window;
  std::vector<float> corners;
  for (const double ratio : aspect_ratios) {
    const double ratio_width = std::nearbyint(std::sqrt(window * window / ratio));
    const double ratio_height = std::nearbyint(ratio_width * ratio);
    // _whctrs of the ratio anchor (x_ctr - 0.5 (ws - 1), ..., x_ctr + 0.5 (ws - 1)): same centre, same size.
    const double x1 = center - 0.5 * (ratio_width - 1), x2 = center + 0.5 * (ratio_width - 1);
    const double y1 = center - 0.5 * (ratio_height - 1), y2 = center + 0.5 * (ratio_height - 1);
    const double width = x2 - x1 + 1, height = y2 - y1 + 1;
    const double center_x = x1 + 0.5 * (width - 1), center_y = y1 + 0.5 * (height - 1);
    const double scaled_width = width * scale, scaled_height = height * scale;
    for (const double corner : {center_x - 0.5 * (scaled_width - 1), center_y - 0.5 * (scaled_height - 1),
                                center_x + 0.5 * (scaled_width - 1), center_y + 0.5 * (scaled_height - 1)})
      corners.push_back(static_cast<float>(corner));
  }
  return torch::tensor(corners).view({-1, 4});
}

std::vector<torch::Tensor> grid_anchors(const AnchorGeneratorOptions& options,
                                        const std::vector<std::array<int64_t, 2>>& feature_sizes_hw,
                                        torch::Device device) {
  if (options.strides.size() != options.sizes.size() || options.strides.size() != feature_sizes_hw.size())
    fail("grid_anchors", "expected one stride, one size and one feature map per level, got " +
                             std::to_string(options.strides.size()) + " strides, " +
                             std::to_string(options.sizes.size()) + " sizes and " +
                             std::to_string(feature_sizes_hw.size()) + " feature maps");
  const auto float_options = torch::TensorOptions(torch::kFloat32).device(device);
  std::vector<torch::Tensor> levels;
  for (size_t level = 0; level < feature_sizes_hw.size(); ++level) {
    const int64_t stride = options.strides[level];
    const auto [height, width] = feature_sizes_hw[level];
    const auto base = cell_anchors(stride, options.sizes[level], options.aspect_ratios).to(device);
    const auto shifts_x = torch::arange(0, width * stride, stride, float_options);
    const auto shifts_y = torch::arange(0, height * stride, stride, float_options);
    const auto grid = torch::meshgrid({shifts_y, shifts_x}, "ij");
    const auto shift_x = grid[1].reshape(-1), shift_y = grid[0].reshape(-1);
    const auto shifts = torch::stack({shift_x, shift_y, shift_x, shift_y}, 1);
    levels.push_back((shifts.view({-1, 1, 4}) + base.view({1, -1, 4})).reshape({-1, 4}));
  }
  return levels;
}

torch::Tensor visible_anchors(const torch::Tensor& anchors, int64_t width, int64_t height, double straddle_threshold) {
  check_boxes(anchors, 4, "visible_anchors: anchors");
  // The reference's RPN: a negative threshold keeps every anchor.
  if (straddle_threshold < 0) return torch::ones({anchors.size(0)}, anchors.options().dtype(torch::kBool));
  return (anchors.select(1, 0) >= -straddle_threshold) & (anchors.select(1, 1) >= -straddle_threshold) &
         (anchors.select(1, 2) < width + straddle_threshold) & (anchors.select(1, 3) < height + straddle_threshold);
}

torch::Tensor match_predictions(const torch::Tensor& iou, double high_threshold, double low_threshold,
                                bool allow_low_quality_matches) {
  if (iou.dim() != 2) fail("match_predictions: iou", "expected a (ground truths, predictions) matrix");
  if (low_threshold > high_threshold)
    fail("match_predictions", "expected low_threshold <= high_threshold, got " + std::to_string(low_threshold) +
                                  " > " + std::to_string(high_threshold));
  // The reference raises on an image without ground truth; every prediction is then background, as torchvision's
  // later Matcher returns, so that a caller can keep such images.
  if (iou.size(0) == 0)
    return torch::full({iou.size(1)}, kBelowLowThreshold, iou.options().dtype(torch::kInt64));
  if (iou.size(1) == 0) return torch::empty({0}, iou.options().dtype(torch::kInt64));
  const auto [best_iou, best_ground_truth] = iou.max(0);
  auto matches = best_ground_truth.clone();
  matches.masked_fill_(best_iou < low_threshold, kBelowLowThreshold);
  matches.masked_fill_((best_iou >= low_threshold) & (best_iou < high_threshold), kBetweenThresholds);
  if (!allow_low_quality_matches) return matches;
  // Every prediction that is (one of) the best for some ground truth keeps its best match, whatever the IoU,
  // ties included, as set_low_quality_matches_ does (an IoU of 0 included).
  const auto best_per_ground_truth = std::get<0>(iou.max(1));
  const auto is_best_for_some = (iou == best_per_ground_truth.unsqueeze(1)).any(0);
  return torch::where(is_best_for_some, best_ground_truth, matches);
}

std::pair<torch::Tensor, torch::Tensor> sample_positive_negative(const torch::Tensor& labels, int64_t batch_size,
                                                                 double positive_fraction,
                                                                 at::Generator generator) {
  if (labels.dim() != 1) fail("sample_positive_negative: labels", "expected a (N,) tensor");
  if (batch_size < 0 || positive_fraction < 0 || positive_fraction > 1)
    fail("sample_positive_negative", "expected batch_size >= 0 and positive_fraction in [0, 1], got " +
                                         std::to_string(batch_size) + " and " + std::to_string(positive_fraction));
  const auto positive = torch::nonzero(labels >= 1).squeeze(1);
  const auto negative = torch::nonzero(labels == 0).squeeze(1);
  const int64_t positive_count =
      std::min(positive.numel(), static_cast<int64_t>(static_cast<double>(batch_size) * positive_fraction));
  const int64_t negative_count = std::min(negative.numel(), batch_size - positive_count);
  const auto index_options = torch::TensorOptions(torch::kInt64).device(generator.device());
  const auto positive_order = torch::randperm(positive.numel(), generator, index_options).narrow(0, 0, positive_count);
  const auto negative_order = torch::randperm(negative.numel(), generator, index_options).narrow(0, 0, negative_count);
  return {positive.index_select(0, positive_order.to(labels.device())),
          negative.index_select(0, negative_order.to(labels.device()))};
}

namespace {

// One axis of RoIAlign's sampling grid for RoIs that share a grid size: per (RoI, bin, sample), the two
// neighbouring pixel rows (or columns) and their bilinear weights, as torchvision's bilinear_interpolate picks
// them: a point below -1 or above `size` weighs nothing, one in [-1, 0] reads pixel 0, one at or past size - 1
// reads pixel size - 1. Each result is (K, pooled * grid * 2), the two neighbours of a sample side by side.
struct RoiAlignAxis {
  torch::Tensor pixel;
  torch::Tensor weight;
};

RoiAlignAxis roi_align_axis(const torch::Tensor& start, const torch::Tensor& bin_size, int64_t pooled, int64_t grid,
                            int64_t size) {
  const auto options = start.options();
  const auto bin = bin_size.view({-1, 1, 1});
  const auto bins = torch::arange(pooled, options).view({1, -1, 1});
  const auto steps = (torch::arange(grid, options) + 0.5).view({1, 1, -1});
  // Same order of operations as torchvision: start + p * bin + ((i + 0.5) * bin) / grid.
  const auto point = (start.view({-1, 1, 1}) + bins * bin + steps * bin / static_cast<double>(grid)).flatten(1);
  const auto inside = ((point >= -1) & (point <= static_cast<double>(size))).to(options.dtype());
  auto clamped = point.clamp_min(0);
  const auto low_unclamped = clamped.floor();
  const auto at_last = low_unclamped >= static_cast<double>(size - 1);
  const auto low = low_unclamped.clamp_max(static_cast<double>(size - 1));
  clamped = torch::where(at_last, low, clamped);
  const auto high = torch::where(at_last, low, low + 1);
  const auto high_weight = clamped - low;
  const auto low_weight = 1 - high_weight;
  return {torch::stack({low, high}, -1).flatten(1).to(torch::kInt64),
          torch::stack({low_weight * inside, high_weight * inside}, -1).flatten(1)};
}

}  // namespace

// RoIAlign as one sparse matrix product. Every output value is a fixed linear combination of feature pixels
// (4 bilinear neighbours per sampling point, averaged over the bin), so the RoIs' sampling weights form a sparse
// (K * P * P, N * H * W) matrix with K * P * P * samples * 4 entries, and the pooled features are that matrix
// times the features laid out as (N * H * W, C). Why this and not the alternatives:
// - gathering the 4 neighbours of every sampling point as dense tensors materialises K * C * P * P * samples * 4
//   values: 400 MB in the reference (512 RoIs x 256 channels x 7 x 7 x 4 samples x 4) before the sum, and
//   autograd keeps the indices of that gather for the backward;
// - the sparse matrix holds 20 bytes per entry (two int64 indices, a float: about 1.6 MB per 100 RoIs at 7x7
//   and 2x2 samples), the product writes only the output, and its backward (matrix^T x gradient, by autograd of
//   torch::mm) scatters into the features in one more pass with the same matrix: no custom autograd::Function,
//   the same ops on CPU (a loop of axpy over the entries) and CUDA (cuSPARSE). The price is a channels-last copy
//   of the features (and of their gradient), small beside the convolutions that made them.
// The adaptive sampling ratio (<= 0: ceil(roi size / pooled size) samples per bin and axis) differs per RoI, so
// RoIs are grouped by their grid and each group adds its entries.
torch::Tensor roi_align(const torch::Tensor& features, const torch::Tensor& rois, double spatial_scale,
                        int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  if (features.dim() != 4) fail("roi_align: features", "expected (N, C, H, W), got sizes " + c10::str(features.sizes()));
  check_boxes(rois, 5, "roi_align: rois");
  if (pooled_height <= 0 || pooled_width <= 0)
    fail("roi_align", "expected a positive pooled size, got " + std::to_string(pooled_height) + "x" +
                          std::to_string(pooled_width));
  // Sparse matrix products have no bf16 or fp16 kernels: features of a lower precision (under --precision bf16
  // or fp16) are pooled in fp32 and come back in their own type, and autocast must not cast the product down.
  if (features.scalar_type() == torch::kBFloat16 || features.scalar_type() == torch::kHalf)
    return roi_align(features.to(torch::kFloat), rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned)
        .to(features.scalar_type());
  const int64_t images = features.size(0), channels = features.size(1);
  const int64_t height = features.size(2), width = features.size(3);
  const int64_t roi_count = rois.size(0), bins_per_roi = pooled_height * pooled_width;

  // torchvision computes the RoI geometry in the features' precision; so do we.
  const auto boxes = rois.detach().to(features.dtype());
  const double offset = aligned ? 0.5 : 0.0;
  const auto start_x = boxes.select(1, 1) * spatial_scale - offset;
  const auto start_y = boxes.select(1, 2) * spatial_scale - offset;
  auto roi_width = boxes.select(1, 3) * spatial_scale - offset - start_x;
  auto roi_height = boxes.select(1, 4) * spatial_scale - offset - start_y;
  if (!aligned) {  // the legacy alignment: a RoI is at least 1x1 feature pixel
    roi_width = roi_width.clamp_min(1);
    roi_height = roi_height.clamp_min(1);
  }
  const auto bin_width = roi_width / static_cast<double>(pooled_width);
  const auto bin_height = roi_height / static_cast<double>(pooled_height);
  const auto image_of_roi = boxes.select(1, 0).to(torch::kInt64);

  // RoI indices grouped by (samples per bin along y, along x).
  std::map<std::pair<int64_t, int64_t>, torch::Tensor> groups;
  if (sampling_ratio > 0) {
    groups[{sampling_ratio, sampling_ratio}] = torch::arange(roi_count, image_of_roi.options());
  } else {
    const auto grids = torch::stack({bin_height.ceil(), bin_width.ceil()}, 1).to(torch::kInt64).cpu();
    std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> members;
    const auto grid = grids.accessor<int64_t, 2>();
    for (int64_t roi = 0; roi < roi_count; ++roi) members[{grid[roi][0], grid[roi][1]}].push_back(roi);
    for (const auto& [key, indices] : members) groups[key] = torch::tensor(indices).to(image_of_roi.device());
  }

  std::vector<torch::Tensor> rows, columns, values;
  for (const auto& [grid, members] : groups) {
    const auto [grid_height, grid_width] = grid;
    if (grid_height == 0 || grid_width == 0) continue;  // an empty aligned RoI pools to 0, as torchvision's
    const int64_t count = members.numel();
    const auto y = roi_align_axis(start_y.index_select(0, members), bin_height.index_select(0, members),
                                  pooled_height, grid_height, height);
    const auto x = roi_align_axis(start_x.index_select(0, members), bin_width.index_select(0, members),
                                  pooled_width, grid_width, width);
    // Entries (RoI, bin row, bin column, sample row neighbour, sample column neighbour).
    const auto y_shape = std::vector<int64_t>{count, pooled_height, 1, 2 * grid_height, 1};
    const auto x_shape = std::vector<int64_t>{count, 1, pooled_width, 1, 2 * grid_width};
    const auto y_pixel = y.pixel.view(y_shape), x_pixel = x.pixel.view(x_shape);
    const auto pixel = image_of_roi.index_select(0, members).view({count, 1, 1, 1, 1}) * (height * width) +
                       y_pixel * width + x_pixel;
    const auto weight =
        y.weight.view(y_shape) * x.weight.view(x_shape) / static_cast<double>(grid_height * grid_width);
    const auto bin = members.view({count, 1, 1, 1, 1}) * bins_per_roi +
                     torch::arange(bins_per_roi, members.options()).view({1, pooled_height, pooled_width, 1, 1});
    rows.push_back(bin.expand_as(pixel).reshape(-1));
    columns.push_back(pixel.reshape(-1));
    values.push_back(weight.reshape(-1));
  }
  const auto index_options = image_of_roi.options();
  const auto entries = rows.empty() ? torch::empty({2, 0}, index_options)
                                    : torch::stack({torch::cat(rows), torch::cat(columns)});
  const auto weights = values.empty() ? torch::empty({0}, features.options().requires_grad(false)) : torch::cat(values);
  const auto sampling = at::_sparse_coo_tensor_unsafe(entries, weights, {roi_count * bins_per_roi, images * height * width},
                                                      weights.options().layout(torch::kSparse));
  const auto pixels = features.permute({0, 2, 3, 1}).reshape({images * height * width, channels});
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return torch::mm(sampling, pixels).view({roi_count, pooled_height, pooled_width, channels}).permute({0, 3, 1, 2})
      .contiguous();
}

torch::Tensor roi_levels(const torch::Tensor& rois, int64_t min_level, int64_t max_level, double canonical_scale,
                         int64_t canonical_level) {
  if (rois.dim() != 2 || (rois.size(1) != 4 && rois.size(1) != 5))
    fail("roi_levels: rois", "expected (K, 4) boxes or (K, 5) RoIs, got sizes " + c10::str(rois.sizes()));
  const auto boxes = rois.narrow(1, rois.size(1) - 4, 4);
  const auto scale = torch::sqrt(inclusive_widths(boxes) * inclusive_heights(boxes));
  const auto level = torch::floor(torch::log2(scale / canonical_scale + 1e-6) + static_cast<double>(canonical_level));
  return level.clamp(static_cast<double>(min_level), static_cast<double>(max_level)).to(torch::kInt64);
}

torch::Tensor multilevel_roi_align(const std::vector<torch::Tensor>& features, const torch::Tensor& rois,
                                   const std::vector<double>& spatial_scales, int64_t pooled_size,
                                   int64_t sampling_ratio, int64_t min_level) {
  if (features.empty() || features.size() != spatial_scales.size())
    fail("multilevel_roi_align", "expected one spatial scale per feature level, got " +
                                     std::to_string(features.size()) + " levels and " +
                                     std::to_string(spatial_scales.size()) + " scales");
  check_boxes(rois, 5, "multilevel_roi_align: rois");
  const int64_t level_count = static_cast<int64_t>(features.size());
  const auto levels = roi_levels(rois, min_level, min_level + level_count - 1);
  std::vector<torch::Tensor> pooled, order;
  for (int64_t level = 0; level < level_count; ++level) {
    const auto members = torch::nonzero(levels == min_level + level).squeeze(1);
    pooled.push_back(roi_align(features[level], rois.index_select(0, members), spatial_scales[level], pooled_size,
                               pooled_size, sampling_ratio));
    order.push_back(members);
  }
  // Back to the RoIs' order: the pooled rows are by level, `order` says which RoI each is.
  return torch::cat(pooled).index_select(0, torch::argsort(torch::cat(order)));
}

torch::Tensor paste_masks(const torch::Tensor& mask_probabilities, const torch::Tensor& boxes, int64_t height,
                          int64_t width, double threshold, int64_t padding) {
  if (mask_probabilities.dim() != 3 || mask_probabilities.size(1) != mask_probabilities.size(2))
    fail("paste_masks: mask_probabilities", "expected (K, M, M), got sizes " + c10::str(mask_probabilities.sizes()));
  check_boxes(boxes, 4, "paste_masks: boxes");
  if (threshold < 0 || padding < 0)
    fail("paste_masks", "expected threshold >= 0 and padding >= 0, got " + std::to_string(threshold) + " and " +
                            std::to_string(padding));
  const int64_t count = mask_probabilities.size(0), mask_size = mask_probabilities.size(2);
  if (boxes.size(0) != count)
    fail("paste_masks: boxes", "expected one box per mask (" + std::to_string(count) + "), got " +
                                   std::to_string(boxes.size(0)));
  auto pasted = torch::zeros({count, height, width}, mask_probabilities.options().dtype(torch::kUInt8));
  if (count == 0) return pasted;
  const auto padded =
      torch::constant_pad_nd(mask_probabilities.to(torch::kFloat32), {padding, padding, padding, padding}, 0);
  // expand_boxes: the box grows around its centre by (M + 2 padding) / M, in the boxes' precision, then the
  // corners are truncated to integers (the reference's .to(torch.int32)).
  const double scale = static_cast<double>(mask_size + 2 * padding) / static_cast<double>(mask_size);
  const auto half_width = (boxes.select(1, 2) - boxes.select(1, 0)) * 0.5 * scale;
  const auto half_height = (boxes.select(1, 3) - boxes.select(1, 1)) * 0.5 * scale;
  const auto center_x = (boxes.select(1, 2) + boxes.select(1, 0)) * 0.5;
  const auto center_y = (boxes.select(1, 3) + boxes.select(1, 1)) * 0.5;
  const auto expanded = torch::stack({center_x - half_width, center_y - half_height, center_x + half_width,
                                      center_y + half_height}, 1)
                            .to(torch::kInt32)
                            .cpu();
  const auto corner = expanded.accessor<int32_t, 2>();
  namespace F = torch::nn::functional;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t x0 = corner[k][0], y0 = corner[k][1], x1 = corner[k][2], y1 = corner[k][3];
    const int64_t box_width = std::max<int64_t>(x1 - x0 + 1, 1), box_height = std::max<int64_t>(y1 - y0 + 1, 1);
    const int64_t left = std::max<int64_t>(x0, 0), right = std::min<int64_t>(x1 + 1, width);
    const int64_t top = std::max<int64_t>(y0, 0), bottom = std::min<int64_t>(y1 + 1, height);
    if (right <= left || bottom <= top) continue;
    const auto resized = F::interpolate(padded[k].view({1, 1, mask_size + 2 * padding, -1}),
                                        F::InterpolateFuncOptions()
                                            .size(std::vector<int64_t>{box_height, box_width})
                                            .mode(torch::kBilinear)
                                            .align_corners(false))[0][0];
    pasted[k]
        .index({Slice(top, bottom), Slice(left, right)})
        .copy_(resized.index({Slice(top - y0, bottom - y0), Slice(left - x0, right - x0)}) > threshold);
  }
  return pasted;
}

}  // namespace trainbench::detection
