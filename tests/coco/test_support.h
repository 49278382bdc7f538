#pragma once
// Helpers shared by the COCO tests: small in-memory ground truths, fixture paths and scratch files.
#include <string>

#include "coco/annotations.h"
#include "coco/evaluator.h"
#include "coco/results.h"

namespace trainbench::coco::testing {

// Images 1..image_count of 100x100 pixels and categories 1..category_count.
GroundTruth make_truth(int image_count, int category_count);

// Appends a box annotation with the next id; its "area" field is the box area unless given.
void add_box(GroundTruth& truth, int64_t image_id, int64_t category_id, const Box& box, bool crowd = false,
             double area = -1);

// The 12 stats of evaluating `detections` as boxes.
std::array<double, kSummaryCount> box_stats(const GroundTruth& truth, const std::vector<Detection>& detections);

// Index of a stat by its name (AP, AP50, ..., ARl).
int stat(const std::string& name);

std::string fixture_path(const std::string& name);

// A file under the system temp dir holding `text`, removed when the object dies.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& text);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace trainbench::coco::testing
