#include "detection/box_ops.h"

#include <vector>

namespace trainbench::detection {

torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b) {
  const auto area_a = (a.select(1, 2) - a.select(1, 0)) * (a.select(1, 3) - a.select(1, 1));
  const auto area_b = (b.select(1, 2) - b.select(1, 0)) * (b.select(1, 3) - b.select(1, 1));
  const auto left_top = torch::max(a.unsqueeze(1).narrow(2, 0, 2), b.unsqueeze(0).narrow(2, 0, 2));
  const auto right_bottom = torch::min(a.unsqueeze(1).narrow(2, 2, 2), b.unsqueeze(0).narrow(2, 2, 2));
  const auto extent = (right_bottom - left_top).clamp_min(0);
  const auto intersection = extent.select(2, 0) * extent.select(2, 1);
  const auto union_area = area_a.unsqueeze(1) + area_b.unsqueeze(0) - intersection;
  return torch::where(union_area > 0, intersection / union_area, torch::zeros_like(intersection));
}

torch::Tensor xywh_to_ltrb(const torch::Tensor& boxes) {
  const auto center = boxes.narrow(-1, 0, 2), half = 0.5 * boxes.narrow(-1, 2, 2);
  return torch::cat({center - half, center + half}, -1);
}

torch::Tensor ltrb_to_xywh(const torch::Tensor& boxes) {
  const auto left_top = boxes.narrow(-1, 0, 2), right_bottom = boxes.narrow(-1, 2, 2);
  return torch::cat({0.5 * (left_top + right_bottom), right_bottom - left_top}, -1);
}

torch::Tensor clip_boxes(const torch::Tensor& boxes, double width, double height) {
  const auto x = boxes.index({torch::indexing::Ellipsis, torch::indexing::Slice(0, 4, 2)}).clamp(0, width);
  const auto y = boxes.index({torch::indexing::Ellipsis, torch::indexing::Slice(1, 4, 2)}).clamp(0, height);
  return torch::stack({x.select(-1, 0), y.select(-1, 0), x.select(-1, 1), y.select(-1, 1)}, -1);
}

torch::Tensor encode_boxes(const torch::Tensor& boxes_xywh, const torch::Tensor& anchors_xywh,
                           const BoxCoderWeights& weights) {
  const auto anchor_center = anchors_xywh.narrow(-1, 0, 2), anchor_size = anchors_xywh.narrow(-1, 2, 2);
  const auto center = weights.center * (boxes_xywh.narrow(-1, 0, 2) - anchor_center) / anchor_size;
  const auto size = weights.size * (boxes_xywh.narrow(-1, 2, 2) / anchor_size).log();
  return torch::cat({center, size}, -1);
}

torch::Tensor decode_boxes(const torch::Tensor& offsets, const torch::Tensor& anchors_xywh,
                           const BoxCoderWeights& weights) {
  const auto anchor_center = anchors_xywh.narrow(-1, 0, 2), anchor_size = anchors_xywh.narrow(-1, 2, 2);
  const auto center = offsets.narrow(-1, 0, 2) / weights.center * anchor_size + anchor_center;
  const auto size = (offsets.narrow(-1, 2, 2) / weights.size).exp() * anchor_size;
  return torch::cat({center, size}, -1);
}

torch::Tensor nms(const torch::Tensor& boxes_ltrb, const torch::Tensor& scores, double iou_threshold) {
  const int64_t count = boxes_ltrb.size(0);
  const auto index_options = torch::TensorOptions(torch::kInt64).device(boxes_ltrb.device());
  if (count == 0) return torch::empty({0}, index_options);
  // Stable, so equal scores are visited in index order whatever the device.
  const auto order = std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const auto sorted = boxes_ltrb.index_select(0, order);
  const auto suppressing = box_iou(sorted, sorted) > iou_threshold;
  if (!boxes_ltrb.device().is_cpu()) {
    const torch::Tensor keep = greedy_keep_in_rounds(suppressing, kNmsDeviceRounds);
    if (keep.defined()) return order.masked_select(keep);
  }
  const auto overlaps = suppressing.to(torch::kCPU).contiguous();
  const auto suppresses = overlaps.accessor<bool, 2>();
  std::vector<char> removed(count, 0);
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < count; ++i) {
    if (removed[i]) continue;
    kept.push_back(i);
    for (int64_t j = i + 1; j < count; ++j)
      if (suppresses[i][j]) removed[j] = 1;
  }
  return order.index_select(0, torch::tensor(kept, torch::kInt64).to(order.device()));
}

torch::Tensor greedy_keep_in_rounds(const torch::Tensor& suppresses, int max_rounds) {
  // Only earlier boxes suppress later ones; as float, "any kept i suppresses j" is a product with keep.
  const torch::Tensor earlier = suppresses.triu(1).to(torch::kFloat32).t().contiguous();
  torch::Tensor keep = torch::ones({suppresses.size(0)}, suppresses.options().dtype(torch::kBool));
  for (int round = 0; round < max_rounds; ++round) {
    const torch::Tensor next = torch::mv(earlier, keep.to(torch::kFloat32)).eq(0);
    if (torch::equal(next, keep)) return keep;
    keep = next;
  }
  return {};
}

torch::Tensor batched_nms(const torch::Tensor& boxes_ltrb, const torch::Tensor& scores, const torch::Tensor& classes,
                          double iou_threshold) {
  if (boxes_ltrb.size(0) == 0) return torch::empty({0}, torch::TensorOptions(torch::kInt64).device(boxes_ltrb.device()));
  // One NMS per class rather than one over boxes shifted apart by class: the same boxes survive, without an
  // IoU matrix over every class's candidates (SSD's 80 classes x 200 are 16,000 boxes: a 1 GiB matrix).
  const torch::Tensor labels = std::get<0>(at::_unique(classes, /*sorted=*/true)).to(torch::kCPU);
  std::vector<torch::Tensor> kept;
  for (int64_t i = 0; i < labels.numel(); ++i) {
    const torch::Tensor members = torch::nonzero(classes == labels[i].item<int64_t>()).squeeze(1);
    kept.push_back(members.index_select(0, nms(boxes_ltrb.index_select(0, members), scores.index_select(0, members), iou_threshold)));
  }
  // In index order first, so that a stable sort by score breaks ties by index, as one NMS pass does.
  const torch::Tensor survivors = std::get<0>(torch::cat(kept).sort());
  return survivors.index_select(0, std::get<1>(scores.index_select(0, survivors).sort(/*stable=*/true, 0, /*descending=*/true)));
}

}  // namespace trainbench::detection
