#pragma once
// SSD's default (anchor) boxes, as the MLPerf reference's DefaultBoxes builds them (dboxes300_coco for the
// reference model). Plain C++: the table is a fixed function of the geometry, computed once and wrapped as a
// tensor by the model.
//
// Per feature level k (size f_k, step s_k, scales S_k and S_{k+1} in pixels of the figure):
//   sk1 = S_k / figure, sk3 = sqrt(sk1 * S_{k+1} / figure); box sizes (sk1, sk1), (sk3, sk3), then for each
//   aspect ratio a: (sk1 sqrt(a), sk1 / sqrt(a)) and its transpose;
//   centres ((j + .5) / fk, (i + .5) / fk) with fk = figure / s_k, for rows i and columns j.
// The order is level, then box size (anchor), then row, then column: the order of the heads' flattened
// outputs. Computed in double, rounded to float, then each of (cx, cy, w, h) clamped to [0, 1] (the
// reference's quirk: the clamp is on centre and size, not on the corners).
#include <string>
#include <vector>

namespace trainbench::detection {

struct DefaultBoxGeometry {
  double figure_size = 300;
  std::vector<int> feature_sizes;               // e.g. 38, 19, 10, 5, 3, 1
  std::vector<double> steps;                    // pixels per cell, one per level
  std::vector<double> scales;                   // pixels, one more than the levels
  std::vector<std::vector<double>> aspect_ratios;  // per level, e.g. {2} or {2, 3}

  // 2 + 2 * aspect ratios: the boxes at each location of `level`.
  int boxes_per_location(size_t level) const;
  int total_boxes() const;
  // Throws Error naming `where` when the lists disagree in length or hold non-positive values.
  void check(const std::string& where) const;
};

// The MLPerf reference's geometry for 300 px input: 8732 boxes.
DefaultBoxGeometry ssd300_geometry();

// total_boxes() * 4 floats: cx, cy, w, h relative to the image.
std::vector<float> default_boxes_xywh(const DefaultBoxGeometry& geometry);

}  // namespace trainbench::detection
