#include "detection/rcnn_targets.h"

#include <algorithm>
#include <string>

#include "coco/mask.h"
#include "util/error.h"

namespace trainbench::detection {

std::vector<uint8_t> polygon_mask_target(const std::vector<std::vector<double>>& polygons, const float box[4],
                                         int size) {
  if (size <= 0) fail("polygon_mask_target: size", "expected a positive mask size, got " + std::to_string(size));
  // The reference's Polygons.crop then resize((M, M)), step for step in float32 as its tensors are: coordinates
  // minus the box corner, times float(M) / float(w) (a double ratio that the float32 multiply rounds to float).
  const float box_width = std::max(box[2] - box[0], 1.0f);
  const float box_height = std::max(box[3] - box[1], 1.0f);
  const auto scale_x = static_cast<float>(static_cast<double>(size) / static_cast<double>(box_width));
  const auto scale_y = static_cast<float>(static_cast<double>(size) / static_cast<double>(box_height));
  coco::Segmentation cropped;
  for (const auto& part : polygons) {
    std::vector<double> xy(part.size());
    for (size_t i = 0; i < part.size(); ++i) {
      const auto coordinate = static_cast<float>(part[i]);
      xy[i] = i % 2 == 0 ? (coordinate - box[0]) * scale_x : (coordinate - box[1]) * scale_y;
    }
    cropped.polygons.push_back(std::move(xy));
  }
  // frPyObjects + merge + decode, as Polygons.convert("mask") calls pycocotools.
  const auto side = static_cast<uint32_t>(size);
  const auto column_major = coco::decode(coco::segmentation_to_rle(cropped, side, side, "mask target polygons"));
  std::vector<uint8_t> row_major(column_major.size());
  for (uint32_t x = 0; x < side; ++x)
    for (uint32_t y = 0; y < side; ++y) row_major[y * side + x] = column_major[x * side + y] != 0;
  return row_major;
}

}  // namespace trainbench::detection
