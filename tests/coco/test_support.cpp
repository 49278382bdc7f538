#include "test_support.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace trainbench::coco::testing {

GroundTruth make_truth(int image_count, int category_count) {
  GroundTruth truth;
  for (int i = 1; i <= image_count; ++i) truth.images.push_back({i, 100, 100});
  for (int k = 1; k <= category_count; ++k) truth.categories.push_back({k, "category " + std::to_string(k)});
  return truth;
}

void add_box(GroundTruth& truth, int64_t image_id, int64_t category_id, const Box& box, bool crowd, double area) {
  Annotation annotation;
  annotation.id = static_cast<int64_t>(truth.annotations.size()) + 1;
  annotation.image_id = image_id;
  annotation.category_id = category_id;
  annotation.bbox = box;
  annotation.area = area < 0 ? box.width * box.height : area;
  annotation.iscrowd = crowd;
  truth.annotations.push_back(annotation);
}

std::array<double, kSummaryCount> box_stats(const GroundTruth& truth, const std::vector<Detection>& detections) {
  return Evaluator(truth, IouType::bbox).evaluate(detections).stats;
}

int stat(const std::string& name) {
  for (int i = 0; i < kSummaryCount; ++i)
    if (summary_metrics()[i].name == name) return i;
  throw std::invalid_argument("no stat " + name);
}

std::string fixture_path(const std::string& name) { return std::string(COCO_FIXTURE_DIR) + "/" + name; }

ScratchFile::ScratchFile(const std::string& text) {
  static std::atomic<int> counter{0};
  path_ = (std::filesystem::temp_directory_path() /
           ("trainbench_coco_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".json"))
              .string();
  std::ofstream(path_) << text;
}

ScratchFile::~ScratchFile() { std::remove(path_.c_str()); }

}  // namespace trainbench::coco::testing
