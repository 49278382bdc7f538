#pragma once
// COCO detection metrics for bbox and segm, equal to pycocotools 2.0's COCOeval evaluate() / accumulate() /
// summarize() with its default parameters: IoU thresholds 0.50:0.05:0.95, 101 recall points, area ranges all /
// small / medium / large, maxDets 1 / 10 / 100, every image and category of the ground truth. docs/coco.md lists
// the pycocotools behaviours matched. Evaluation works per category (threads take whole categories, so results
// do not depend on the thread count), and per image within it, so memory grows with the detections, not with
// their square.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "coco/annotations.h"
#include "coco/mask.h"
#include "coco/results.h"

namespace trainbench::coco {

enum class IouType { bbox, segm };
IouType parse_iou_type(const std::string& name);  // "bbox" or "segm"
const char* iou_type_name(IouType type);

constexpr int kIouThresholdCount = 10;
constexpr int kRecallPointCount = 101;
constexpr int kAreaRangeCount = 4;  // all, small, medium, large
constexpr int kMaxDetectionCount = 3;
// np.linspace(.5, .95, 10) and np.linspace(0, 1, 101), bit for bit (the 9th IoU threshold is 0.8999999999999999).
const std::array<double, kIouThresholdCount>& iou_thresholds();
const std::array<double, kRecallPointCount>& recall_points();

// One of the 12 numbers summarize() prints, in its order.
struct SummaryMetric {
  const char* name;        // AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl
  bool average_precision;  // false: average recall
  double iou_threshold;    // 0: the mean over all thresholds
  int area_range;          // 0 all, 1 small, 2 medium, 3 large
  int max_detections;      // 1, 10 or 100
};
constexpr int kSummaryCount = 12;
const std::array<SummaryMetric, kSummaryCount>& summary_metrics();

struct Evaluation {
  int category_count = 0;
  // precision[t][r][k][a][m] and recall[t][k][a][m] as COCOeval.eval holds them: -1 where category k has no
  // ground truth that counts in area range a.
  std::vector<double> precision;
  std::vector<double> recall;
  std::array<double, kSummaryCount> stats{};  // COCOeval.stats

  size_t precision_index(int t, int r, int k, int a, int m) const;
  size_t recall_index(int t, int k, int a, int m) const;
  double precision_at(int t, int r, int k, int a, int m) const { return precision[precision_index(t, r, k, a, m)]; }
  double recall_at(int t, int k, int a, int m) const { return recall[recall_index(t, k, a, m)]; }
};

// The 12 lines summarize() prints, e.g.
// " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.372".
std::string format_summary(const std::array<double, kSummaryCount>& stats);
// The 12 numbers with their names, at full precision.
nlohmann::ordered_json summary_json(const std::array<double, kSummaryCount>& stats, IouType type);

class Evaluator {
 public:
  // Checks the ground truth (unique non-zero annotation ids, unique image and category ids, annotations on known
  // images and categories, finite numbers) and, for segm, rasterises every annotation once. `source` names the
  // ground truth in error messages (the file name when it was read from one).
  Evaluator(GroundTruth ground_truth, IouType type, std::string source = "ground truth");

  // Checks the detections (known image and category, finite numbers) and evaluates them. `source` names them in
  // error messages; detection i is "<source>: [i]". threads = 0 uses every core.
  Evaluation evaluate(const std::vector<Detection>& detections, const std::string& source = "detections",
                      unsigned threads = 0) const;

  IouType type() const { return type_; }
  const GroundTruth& ground_truth() const { return truth_; }

 private:
  struct CategoryWork;
  void evaluate_category(int category, const std::vector<Detection>& detections, const CategoryWork& work,
                         const std::string& source, Evaluation& evaluation) const;
  void check_detections(const std::vector<Detection>& detections, const std::string& source) const;

  GroundTruth truth_;
  IouType type_;
  std::string source_;
  std::unordered_map<int64_t, uint32_t> image_index_;     // by id; indices follow sorted ids, as COCOeval's imgIds
  std::unordered_map<int64_t, uint32_t> category_index_;  // by id; indices follow sorted ids
  std::vector<Image> images_;                             // by image index
  std::vector<uint32_t> annotation_images_;               // the image index of each annotation
  std::vector<uint32_t> annotations_by_cell_;             // annotation indices sorted by (category, image, file order)
  std::vector<size_t> category_starts_;                   // where each category begins in annotations_by_cell_
  std::vector<Rle> masks_;                                // segm: each annotation as an RLE
  std::vector<Box> mask_boxes_;                           // segm: to_box of each mask
};

}  // namespace trainbench::coco
