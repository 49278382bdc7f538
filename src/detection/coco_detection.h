#pragma once
// A COCO instances file and its image folder as detection training samples, the way the MLPerf SSD reference's
// COCODetection reads them: categories numbered 1..C in the file's order (0 is background), each box
// [x, y, w, h] turned into (left, top, right, bottom) divided by the image's width and height from the file,
// crowd boxes kept, and images without any annotation left out. Boxes no model can train on are dropped and
// counted (dropped_boxes): a width or height under 0.1 px (NVIDIA's SSD reader, DALI's COCO reader with its
// size_threshold of 0.1, ignores those; the SSD reference's own reader keeps them and diverges on log(0)), and
// a box wholly outside its image (Mask R-CNN's clip_to_image(remove_empty=True) removes it). Plain C++ on top
// of the coco/ reader, so Mask R-CNN and the tests use it without LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "coco/annotations.h"
#include "data/image_decode.h"

namespace trainbench::detection {

struct DetectionSample {
  std::string path;  // image_dir / file_name, checked to stay inside image_dir
  int64_t image_id = 0;
  int width = 0;   // from the annotation file
  int height = 0;
  std::vector<float> boxes;     // 4 per object: left, top, right, bottom relative to the image
  std::vector<int64_t> labels;  // 1..C per object
  std::vector<uint32_t> annotations;  // each object's index in ground_truth.annotations
};

struct CocoDetectionSet {
  std::vector<DetectionSample> samples;  // images with at least one annotation, in the file's image order
  std::vector<int64_t> category_ids;     // label l is category_ids[l - 1]
  coco::GroundTruth ground_truth;        // the whole file, for the evaluator
  std::string annotation_file;           // where it was read from, for error messages
  std::string image_dir;                 // images' file names are relative to it
  int64_t dropped_boxes = 0;             // annotations left out: under 0.1 px, or wholly outside the image
};

// Throws Error naming the file and field: no image with a usable annotation; an image without file_name, width or height; a duplicate image id;
// an annotation on an unknown image or category; a box coordinate or size beyond +-1e6 pixels (corrupt, not
// a box of any image); a file_name that is absolute or leads out of image_dir, unless
// `allow_paths_outside_image_dir` (no preset setting asks for that yet).
CocoDetectionSet load_coco_detection(const std::string& annotation_file, const std::string& image_dir,
                                     bool allow_paths_outside_image_dir = false);

// Decodes a sample's image file; an Error naming the file when its size is not the annotation file's
// width x height (boxes and resizing rely on it).
data::Image decode_sample_image(const std::string& path, int width, int height);

}  // namespace trainbench::detection
