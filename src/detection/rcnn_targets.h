#pragma once
// Mask R-CNN's training targets that need no LibTorch: the mask target of a positive RoI, rasterised with the
// same COCO polygon rasteriser as the evaluator (src/coco/mask.h), so it builds in the torch-free data library.
#include <cstdint>
#include <vector>

namespace trainbench::detection {

// The reference's mask target: the object's polygons (pixels, [x1,y1,x2,y2,...] per part) cropped to `box`
// (x1,y1,x2,y2; w = x2 - x1 and h = y2 - y1, no +1, at least 1), scaled to size x size, rasterised with the
// COCO polygon rasteriser (coco::rle_from_polygon) and merged. size*size bytes, row-major, 0/1.
std::vector<uint8_t> polygon_mask_target(const std::vector<std::vector<double>>& polygons, const float box[4],
                                         int size);

}  // namespace trainbench::detection
