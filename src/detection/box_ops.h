#pragma once
// Box operations shared by the detection benchmarks (SSD now, Mask R-CNN next): IoU, conversions, clipping,
// encoding of boxes as offsets from anchors and back, and greedy non-maximum suppression, plain and per
// class. LibTorch ops only, so they run wherever the tensors are (CPU or CUDA).
// Boxes are (N, 4) float tensors: "ltrb" = (left, top, right, bottom), "xywh" = (centre x, centre y, w, h).
#include <torch/torch.h>

namespace trainbench::detection {

// (N, 4) ltrb x (M, 4) ltrb -> (N, M) intersection over union (0 where both boxes are empty).
torch::Tensor box_iou(const torch::Tensor& a, const torch::Tensor& b);

torch::Tensor xywh_to_ltrb(const torch::Tensor& boxes);
torch::Tensor ltrb_to_xywh(const torch::Tensor& boxes);

// Clamps ltrb boxes to [0, width] x [0, height].
torch::Tensor clip_boxes(const torch::Tensor& boxes, double width, double height);

// Scales of the offsets: SSD's variances 0.1 (centre) and 0.2 (size) are weights 10 and 5.
struct BoxCoderWeights {
  double center = 10;
  double size = 5;
};

// Offsets of xywh boxes from xywh anchors: (center * (c_box - c_anchor) / wh_anchor, size * log(wh_box / wh_anchor)).
// Both (N, 4), or boxes (B, N, 4) against anchors (N, 4).
torch::Tensor encode_boxes(const torch::Tensor& boxes_xywh, const torch::Tensor& anchors_xywh,
                           const BoxCoderWeights& weights = {});
// The inverse: xywh boxes from offsets.
torch::Tensor decode_boxes(const torch::Tensor& offsets, const torch::Tensor& anchors_xywh,
                           const BoxCoderWeights& weights = {});

// Greedy NMS as torchvision.ops.nms: visits boxes by decreasing score and drops every later box whose IoU
// with a kept one is above `iou_threshold`. Returns the kept indices (int64) by decreasing score. The IoU
// matrix is computed where the boxes are. On the CPU the greedy pass walks it; on another device the pass
// runs there in rounds (greedy_keep_in_rounds), so no N x N matrix crosses to the host (audit M4), and only
// a suppression chain too long for kNmsDeviceRounds sends the matrix to the CPU walk. Memory is N^2 bytes
// (N^2 floats on a device), fine for the few thousand candidates a detector keeps per image.
torch::Tensor nms(const torch::Tensor& boxes_ltrb, const torch::Tensor& scores, double iou_threshold);

constexpr int kNmsDeviceRounds = 64;
// Greedy NMS's keep mask from `suppresses` (N x N bool, row i suppresses column j, boxes by decreasing score),
// in rounds where the tensors are: keep_j = no i < j with suppresses[i][j] and keep_i is the greedy result's
// unique fixed point, and iterating it from "keep all" fixes one more box each round at least, so a round that
// changes nothing has reached it. Each round is one matrix-vector product and one scalar read. Returns an
// undefined tensor when `max_rounds` rounds do not settle it.
torch::Tensor greedy_keep_in_rounds(const torch::Tensor& suppresses, int max_rounds);
// NMS within each class (`classes`: (N,) int64): torchvision.ops.batched_nms. The survivors, best first (equal
// scores by index).
torch::Tensor batched_nms(const torch::Tensor& boxes_ltrb, const torch::Tensor& scores, const torch::Tensor& classes,
                          double iou_threshold);

}  // namespace trainbench::detection
