#pragma once
// Detection results, as pycocotools' COCO.loadRes turns them into annotations. Which rule applies is decided by the
// first result, for all of them (loadRes branches on anns[0]):
// - it has a non-empty "bbox": every result is a box; area = w*h, whatever segmentation it also carries. For segm
//   evaluation a result without a segmentation is its box as a polygon.
// - otherwise it has a "segmentation" (an RLE): area = the RLE's foreground area, bbox = toBbox(RLE) unless given.
// Results are also accepted as rows [image_id, x, y, w, h, score, category_id] (loadNumpyAnnotations, the form the
// SSD reference evaluates). The reader checks the file's shape; the Evaluator checks each result's image and
// category against the ground truth and that numbers are finite.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coco/mask.h"

namespace trainbench::coco {

struct Detection {
  int64_t image_id = 0;
  int64_t category_id = 0;
  double score = 0;
  Box bbox;
  double area = 0;            // decides the area range of an unmatched detection
  Segmentation segmentation;  // empty for box results
};

// A box result, as loadRes makes one from {"bbox": [x,y,w,h]}.
Detection box_detection(int64_t image_id, int64_t category_id, const Box& box, double score);
// A mask result, as loadRes makes one from {"segmentation": RLE}.
Detection mask_detection(int64_t image_id, int64_t category_id, Rle mask, double score);

// Detections as bytes and back, every field bit for bit, to move them between ranks. The layout is this build's
// (native byte order and sizes), for processes of one build, not a file format.
std::vector<uint8_t> serialize_detections(const std::vector<Detection>& detections);
// `source` names the buffer in the error a truncated or malformed one gets.
std::vector<Detection> deserialize_detections(const std::vector<uint8_t>& bytes, const std::string& source);

// Reads a results JSON file: a list of result objects or of 7-number rows. An empty list is no detections.
std::vector<Detection> load_results(const std::string& path);
std::vector<Detection> parse_results(std::string_view json_text, const std::string& source);

}  // namespace trainbench::coco
