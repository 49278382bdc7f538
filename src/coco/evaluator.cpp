#include "coco/evaluator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <thread>

#include "util/error.h"

namespace trainbench::coco {

namespace {

constexpr int kMaxDetections[kMaxDetectionCount] = {1, 10, 100};
// COCOeval's areaRng. Both ends are inclusive: it leaves out area < low or area > high.
constexpr double kAreaRanges[kAreaRangeCount][2] = {{0, 1e10}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, 1e10}};
constexpr const char* kAreaNames[kAreaRangeCount] = {"all", "small", "medium", "large"};
constexpr double kEpsilon = 2.220446049250313e-16;  // np.spacing(1), in accumulate's precision denominator

// np.linspace(start, stop, N): element i is i * step + start, and the last is stop itself.
template <size_t N>
std::array<double, N> linspace(double start, double stop) {
  std::array<double, N> values{};
  const double step = (stop - start) / (N - 1);
  for (size_t i = 0; i + 1 < N; ++i) values[i] = static_cast<double>(i) * step + start;
  values[N - 1] = stop;
  return values;
}

bool finite_box(const Box& box) {
  return std::isfinite(box.x) && std::isfinite(box.y) && std::isfinite(box.width) && std::isfinite(box.height);
}

bool outside(double area, int area_range) {
  return area < kAreaRanges[area_range][0] || area > kAreaRanges[area_range][1];
}

// A segmentation as an RLE; polygons (and a box result's box) need the image size.
Rle rasterise(const Segmentation& segmentation, const Box* box_result, const Image& image, const std::string& where) {
  if ((box_result || !segmentation.polygons.empty()) && (image.height == 0 || image.width == 0))
    fail(where, "image " + std::to_string(image.id) + " has no height and width, which rasterising needs");
  if (box_result) return rle_from_box(*box_result, image.height, image.width, where);
  return segmentation_to_rle(segmentation, image.height, image.width, where);
}

// evaluateImg's output for one image, category and area range: the detections best first, whether each matched
// and whether it is ignored at each IoU threshold ([t][d]), and how many ground truths count.
struct ImageMatches {
  std::vector<double> scores;
  std::vector<uint8_t> matched;
  std::vector<uint8_t> ignored;
  uint32_t counted_ground_truths = 0;
};

// One image and category: its ground truths in file order, its best detections (at most 100, best first) and their
// IoUs, [detection][ground truth].
struct ImageCell {
  std::vector<const Annotation*> truths;
  std::vector<const Detection*> detections;
  std::vector<double> ious;
};

// evaluateImg for one area range.
ImageMatches match_image(const ImageCell& cell, int area_range) {
  constexpr int T = kIouThresholdCount;
  const size_t D = cell.detections.size(), G = cell.truths.size();
  ImageMatches result;
  for (const Detection* detection : cell.detections) result.scores.push_back(detection->score);
  result.matched.assign(T * D, 0);
  result.ignored.assign(T * D, 0);
  // Ground truths that are crowds or whose "area" field is outside the range are ignored, and go last.
  std::vector<uint8_t> ignored_truth(G);
  for (size_t g = 0; g < G; ++g) {
    ignored_truth[g] = cell.truths[g]->iscrowd || outside(cell.truths[g]->area, area_range);
    result.counted_ground_truths += !ignored_truth[g];
  }
  std::vector<uint32_t> order(G);
  for (uint32_t g = 0; g < G; ++g) order[g] = g;
  std::stable_partition(order.begin(), order.end(), [&](uint32_t g) { return !ignored_truth[g]; });

  std::vector<uint8_t> taken;
  for (int t = 0; t < T && G > 0; ++t) {
    taken.assign(G, 0);
    for (size_t d = 0; d < D; ++d) {
      // The best ground truth at IoU >= t, trying them in order; a later one wins a tie.
      double best_iou = iou_thresholds()[t];
      int best = -1;
      for (size_t position = 0; position < G; ++position) {
        const uint32_t g = order[position];
        if (taken[position] && !cell.truths[g]->iscrowd) continue;  // crowds can be matched again
        // Once matched to a counted ground truth, stop at the first ignored one.
        if (best >= 0 && !ignored_truth[order[best]] && ignored_truth[g]) break;
        if (cell.ious[d * G + g] < best_iou) continue;
        best_iou = cell.ious[d * G + g];
        best = static_cast<int>(position);
      }
      if (best < 0) continue;
      // A detection matched to an ignored ground truth is ignored too.
      result.ignored[t * D + d] = ignored_truth[order[best]];
      result.matched[t * D + d] = 1;
      taken[best] = 1;
    }
  }
  // Unmatched detections whose area is outside the range are ignored.
  for (size_t d = 0; d < D; ++d)
    if (outside(cell.detections[d]->area, area_range))
      for (int t = 0; t < T; ++t)
        if (!result.matched[t * D + d]) result.ignored[t * D + d] = 1;
  return result;
}

// accumulate for one category and area range: per maxDets, every image's best detections ranked together by score.
void accumulate(const std::vector<ImageMatches>& images, int category, int area_range, Evaluation& evaluation) {
  uint64_t counted = 0;
  for (const ImageMatches& image : images) counted += image.counted_ground_truths;
  if (counted == 0) return;  // no ground truth counts here: precision and recall stay -1
  struct Ranked {
    double score;
    uint32_t image;
    uint32_t detection;
  };
  std::vector<Ranked> ranked;
  std::vector<double> recall_curve, precision_curve;
  for (int m = 0; m < kMaxDetectionCount; ++m) {
    // Images in index (sorted id) order, then a stable sort: ties across images go to the lower image id.
    ranked.clear();
    for (uint32_t i = 0; i < images.size(); ++i) {
      const size_t kept = std::min<size_t>(images[i].scores.size(), kMaxDetections[m]);
      for (uint32_t d = 0; d < kept; ++d) ranked.push_back({images[i].scores[d], i, d});
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
    const size_t n = ranked.size();
    recall_curve.resize(n);
    precision_curve.resize(n);
    for (int t = 0; t < kIouThresholdCount; ++t) {
      // Cumulative true and false positives down the ranking; ignored detections count as neither but keep their
      // place in the curve, as in pycocotools.
      double true_positives = 0, false_positives = 0;
      for (size_t i = 0; i < n; ++i) {
        const ImageMatches& image = images[ranked[i].image];
        const size_t slot = t * image.scores.size() + ranked[i].detection;
        if (!image.ignored[slot]) {
          if (image.matched[slot])
            ++true_positives;
          else
            ++false_positives;
        }
        recall_curve[i] = true_positives / static_cast<double>(counted);
        precision_curve[i] = true_positives / (false_positives + true_positives + kEpsilon);
      }
      evaluation.recall[evaluation.recall_index(t, category, area_range, m)] = n > 0 ? recall_curve[n - 1] : 0;
      // Precision made non-increasing from the right, then read at the first point reaching each recall
      // (np.searchsorted side='left'); recall points never reached keep precision 0.
      for (size_t i = n; i-- > 1;)
        if (precision_curve[i] > precision_curve[i - 1]) precision_curve[i - 1] = precision_curve[i];
      for (int r = 0; r < kRecallPointCount; ++r) {
        const size_t reached = static_cast<size_t>(
            std::lower_bound(recall_curve.begin(), recall_curve.end(), recall_points()[r]) - recall_curve.begin());
        evaluation.precision[evaluation.precision_index(t, r, category, area_range, m)] =
            reached < n ? precision_curve[reached] : 0;
      }
    }
  }
}

}  // namespace

IouType parse_iou_type(const std::string& name) {
  if (name == "bbox") return IouType::bbox;
  if (name == "segm") return IouType::segm;
  fail("--type " + name, "expected bbox or segm");
}

const char* iou_type_name(IouType type) { return type == IouType::bbox ? "bbox" : "segm"; }

const std::array<double, kIouThresholdCount>& iou_thresholds() {
  static const auto thresholds = linspace<kIouThresholdCount>(.5, .95);
  return thresholds;
}

const std::array<double, kRecallPointCount>& recall_points() {
  static const auto points = linspace<kRecallPointCount>(0, 1);
  return points;
}

const std::array<SummaryMetric, kSummaryCount>& summary_metrics() {
  static const std::array<SummaryMetric, kSummaryCount> metrics{{
      {"AP", true, 0, 0, 100},
      {"AP50", true, .5, 0, 100},
      {"AP75", true, .75, 0, 100},
      {"APs", true, 0, 1, 100},
      {"APm", true, 0, 2, 100},
      {"APl", true, 0, 3, 100},
      {"AR1", false, 0, 0, 1},
      {"AR10", false, 0, 0, 10},
      {"AR100", false, 0, 0, 100},
      {"ARs", false, 0, 1, 100},
      {"ARm", false, 0, 2, 100},
      {"ARl", false, 0, 3, 100},
  }};
  return metrics;
}

size_t Evaluation::precision_index(int t, int r, int k, int a, int m) const {
  return (((static_cast<size_t>(t) * kRecallPointCount + r) * category_count + k) * kAreaRangeCount + a) *
             kMaxDetectionCount +
         m;
}

size_t Evaluation::recall_index(int t, int k, int a, int m) const {
  return ((static_cast<size_t>(t) * category_count + k) * kAreaRangeCount + a) * kMaxDetectionCount + m;
}

namespace {

std::string iou_label(const SummaryMetric& metric) {
  char text[16];
  if (metric.iou_threshold == 0)
    std::snprintf(text, sizeof text, "%0.2f:%0.2f", iou_thresholds().front(), iou_thresholds().back());
  else
    std::snprintf(text, sizeof text, "%0.2f", metric.iou_threshold);
  return text;
}

int max_detections_index(int max_detections) {
  return static_cast<int>(std::find(std::begin(kMaxDetections), std::end(kMaxDetections), max_detections) -
                          std::begin(kMaxDetections));
}

// summarize(): the mean of the entries > -1 over the selected thresholds (and recall points and categories), -1 when
// there are none.
double summarize(const Evaluation& evaluation, const SummaryMetric& metric) {
  const int m = max_detections_index(metric.max_detections);
  double sum = 0;
  size_t count = 0;
  const auto add = [&](double value) {
    if (value <= -1) return;
    sum += value;
    ++count;
  };
  for (int t = 0; t < kIouThresholdCount; ++t) {
    if (metric.iou_threshold != 0 && iou_thresholds()[t] != metric.iou_threshold) continue;
    for (int r = 0; r < (metric.average_precision ? kRecallPointCount : 1); ++r)
      for (int k = 0; k < evaluation.category_count; ++k)
        add(metric.average_precision ? evaluation.precision_at(t, r, k, metric.area_range, m)
                                     : evaluation.recall_at(t, k, metric.area_range, m));
  }
  return count == 0 ? -1 : sum / static_cast<double>(count);
}

}  // namespace

std::string format_summary(const std::array<double, kSummaryCount>& stats) {
  std::string text;
  for (int i = 0; i < kSummaryCount; ++i) {
    const SummaryMetric& metric = summary_metrics()[i];
    char line[128];
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  metric.average_precision ? "Average Precision" : "Average Recall",
                  metric.average_precision ? "(AP)" : "(AR)", iou_label(metric).c_str(), kAreaNames[metric.area_range],
                  metric.max_detections, stats[i]);
    text += line;
  }
  return text;
}

nlohmann::ordered_json summary_json(const std::array<double, kSummaryCount>& stats, IouType type) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (int i = 0; i < kSummaryCount; ++i) {
    const SummaryMetric& metric = summary_metrics()[i];
    list.push_back({{"name", metric.name},
                    {"metric", metric.average_precision ? "average precision" : "average recall"},
                    {"iou", iou_label(metric)},
                    {"area", kAreaNames[metric.area_range]},
                    {"max_dets", metric.max_detections},
                    {"value", stats[i]}});
  }
  return {{"iou_type", iou_type_name(type)}, {"stats", list}};
}

// Detections grouped like the ground truth: indices sorted by (category, image, file order), the image index of
// each detection, and where each category begins.
struct Evaluator::CategoryWork {
  std::vector<uint32_t> detections_by_cell;
  std::vector<uint32_t> detection_images;
  std::vector<size_t> category_starts;
};

namespace {

// Sorts item indices by (category, image) keeping file order within each, and finds where each category begins.
void group_by_cell(const std::vector<uint32_t>& categories, const std::vector<uint32_t>& images, int category_count,
                   std::vector<uint32_t>& order, std::vector<size_t>& category_starts) {
  order.resize(categories.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return categories[a] != categories[b] ? categories[a] < categories[b] : images[a] < images[b];
  });
  category_starts.assign(category_count + 1, 0);
  for (uint32_t category : categories) ++category_starts[category + 1];
  for (int k = 0; k < category_count; ++k) category_starts[k + 1] += category_starts[k];
}

}  // namespace

Evaluator::Evaluator(GroundTruth ground_truth, IouType type, std::string source)
    : truth_(std::move(ground_truth)), type_(type), source_(std::move(source)) {
  // Indices follow sorted ids, as COCOeval sorts imgIds and catIds; accumulate concatenates images in that order.
  const auto index_by_sorted_id = [&](std::vector<int64_t> ids, const char* list,
                                      std::unordered_map<int64_t, uint32_t>& index) {
    std::unordered_map<int64_t, size_t> first_position;
    for (size_t i = 0; i < ids.size(); ++i)
      if (!first_position.emplace(ids[i], i).second)
        fail(source_ + ": " + list + "[" + std::to_string(i) + "].id",
             "id " + std::to_string(ids[i]) + " is already used by " + list + "[" +
                 std::to_string(first_position[ids[i]]) + "]");
    std::sort(ids.begin(), ids.end());
    for (uint32_t i = 0; i < ids.size(); ++i) index[ids[i]] = i;
  };
  std::vector<int64_t> image_ids, category_ids;
  for (const Image& image : truth_.images) image_ids.push_back(image.id);
  for (const Category& category : truth_.categories) category_ids.push_back(category.id);
  index_by_sorted_id(image_ids, "images", image_index_);
  index_by_sorted_id(category_ids, "categories", category_index_);
  images_.resize(truth_.images.size());
  for (const Image& image : truth_.images) images_[image_index_.at(image.id)] = image;

  std::unordered_map<int64_t, size_t> annotation_positions;
  std::vector<uint32_t> categories;
  for (size_t i = 0; i < truth_.annotations.size(); ++i) {
    const Annotation& annotation = truth_.annotations[i];
    const std::string where = source_ + ": annotations[" + std::to_string(i) + "]";
    if (annotation.id == 0)
      fail(where + ".id",
           "id 0: pycocotools records a match by the annotation id and reads 0 as no match; "
           "number annotations from 1");
    if (!annotation_positions.emplace(annotation.id, i).second)
      fail(where + ".id", "id " + std::to_string(annotation.id) + " is already used by annotations[" +
                              std::to_string(annotation_positions[annotation.id]) + "]");
    const auto image = image_index_.find(annotation.image_id);
    if (image == image_index_.end())
      fail(where + ".image_id", "image " + std::to_string(annotation.image_id) + " is not in images");
    const auto category = category_index_.find(annotation.category_id);
    if (category == category_index_.end())
      fail(where + ".category_id", "category " + std::to_string(annotation.category_id) + " is not in categories");
    if (!finite_box(annotation.bbox)) fail(where + ".bbox", "not finite");
    if (!std::isfinite(annotation.area)) fail(where + ".area", "not finite");
    annotation_images_.push_back(image->second);
    categories.push_back(category->second);
  }
  group_by_cell(categories, annotation_images_, static_cast<int>(category_ids.size()), annotations_by_cell_,
                category_starts_);

  if (type_ != IouType::segm) return;
  masks_.reserve(truth_.annotations.size());
  for (size_t i = 0; i < truth_.annotations.size(); ++i) {
    const Annotation& annotation = truth_.annotations[i];
    masks_.push_back(rasterise(annotation.segmentation, nullptr, images_[annotation_images_[i]],
                               source_ + ": annotations[" + std::to_string(i) + "].segmentation"));
    mask_boxes_.push_back(to_box(masks_.back()));
  }
}

void Evaluator::check_detections(const std::vector<Detection>& detections, const std::string& source) const {
  for (size_t i = 0; i < detections.size(); ++i) {
    const Detection& detection = detections[i];
    const std::string where = source + ": [" + std::to_string(i) + "]";
    if (!image_index_.count(detection.image_id))
      fail(where + ".image_id",
           "image " + std::to_string(detection.image_id) + " is not in the ground truth (" + source_ + ")");
    if (!category_index_.count(detection.category_id))
      fail(where + ".category_id",
           "category " + std::to_string(detection.category_id) + " is not in the ground truth (" + source_ + ")");
    if (!std::isfinite(detection.score)) fail(where + ".score", "not a finite number");
    if (!finite_box(detection.bbox)) fail(where + ".bbox", "not finite");
    if (!std::isfinite(detection.area)) fail(where + ".area", "not finite");
  }
}

Evaluation Evaluator::evaluate(const std::vector<Detection>& detections, const std::string& source,
                               unsigned threads) const {
  check_detections(detections, source);
  const int category_count = static_cast<int>(category_index_.size());
  CategoryWork work;
  std::vector<uint32_t> categories;
  for (const Detection& detection : detections) {
    work.detection_images.push_back(image_index_.at(detection.image_id));
    categories.push_back(category_index_.at(detection.category_id));
  }
  group_by_cell(categories, work.detection_images, category_count, work.detections_by_cell, work.category_starts);

  Evaluation evaluation;
  evaluation.category_count = category_count;
  evaluation.precision.assign(static_cast<size_t>(kIouThresholdCount) * kRecallPointCount * category_count *
                                  kAreaRangeCount * kMaxDetectionCount,
                              -1);
  evaluation.recall.assign(
      static_cast<size_t>(kIouThresholdCount) * category_count * kAreaRangeCount * kMaxDetectionCount, -1);

  // Threads take whole categories; each writes only its own category's entries, so the result does not depend on
  // the thread count or timing. An error is rethrown for the lowest category that had one.
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, std::max(1, category_count));
  std::atomic<int> next_category{0};
  std::vector<std::exception_ptr> errors(category_count);
  const auto take_categories = [&] {
    for (int k = next_category++; k < category_count; k = next_category++) {
      try {
        evaluate_category(k, detections, work, source, evaluation);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < threads; ++i) helpers.emplace_back(take_categories);
  take_categories();
  for (auto& helper : helpers) helper.join();
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);

  for (int i = 0; i < kSummaryCount; ++i) evaluation.stats[i] = summarize(evaluation, summary_metrics()[i]);
  return evaluation;
}

void Evaluator::evaluate_category(int category, const std::vector<Detection>& detections, const CategoryWork& work,
                                  const std::string& source, Evaluation& evaluation) const {
  std::array<std::vector<ImageMatches>, kAreaRangeCount> per_area;
  size_t next_truth = category_starts_[category], next_detection = work.category_starts[category];
  const size_t truth_end = category_starts_[category + 1], detection_end = work.category_starts[category + 1];
  ImageCell cell;
  std::vector<uint32_t> truth_indices, detection_indices;
  std::vector<Rle> rasterised;
  std::vector<const Rle*> detection_masks;
  std::vector<Box> detection_mask_boxes;
  // evaluateImg for every image that has ground truth or detections of this category, in image order.
  while (next_truth < truth_end || next_detection < detection_end) {
    const uint32_t image = std::min(
        next_truth < truth_end ? annotation_images_[annotations_by_cell_[next_truth]] : UINT32_MAX,
        next_detection < detection_end ? work.detection_images[work.detections_by_cell[next_detection]] : UINT32_MAX);
    truth_indices.clear();
    detection_indices.clear();
    for (; next_truth < truth_end && annotation_images_[annotations_by_cell_[next_truth]] == image; ++next_truth)
      truth_indices.push_back(annotations_by_cell_[next_truth]);
    for (; next_detection < detection_end && work.detection_images[work.detections_by_cell[next_detection]] == image;
         ++next_detection)
      detection_indices.push_back(work.detections_by_cell[next_detection]);
    // Best score first; the stable sort keeps file order among equal scores, like np.argsort(kind='mergesort').
    std::stable_sort(detection_indices.begin(), detection_indices.end(),
                     [&](uint32_t a, uint32_t b) { return detections[a].score > detections[b].score; });
    if (detection_indices.size() > static_cast<size_t>(kMaxDetections[kMaxDetectionCount - 1]))
      detection_indices.resize(kMaxDetections[kMaxDetectionCount - 1]);

    cell.truths.clear();
    cell.detections.clear();
    for (uint32_t g : truth_indices) cell.truths.push_back(&truth_.annotations[g]);
    for (uint32_t d : detection_indices) cell.detections.push_back(&detections[d]);
    if (type_ == IouType::segm) {
      rasterised.clear();
      rasterised.reserve(detection_indices.size());
      detection_masks.clear();
      detection_mask_boxes.clear();
      for (uint32_t d : detection_indices) {
        const Segmentation& segmentation = detections[d].segmentation;
        if (segmentation.has_rle) {
          detection_masks.push_back(&segmentation.rle);
        } else {
          rasterised.push_back(rasterise(segmentation, segmentation.empty() ? &detections[d].bbox : nullptr,
                                         images_[image], source + ": [" + std::to_string(d) + "].segmentation"));
          detection_masks.push_back(&rasterised.back());
        }
        detection_mask_boxes.push_back(to_box(*detection_masks.back()));
      }
    }
    const size_t D = detection_indices.size(), G = truth_indices.size();
    cell.ious.resize(D * G);
    for (size_t d = 0; d < D; ++d)
      for (size_t g = 0; g < G; ++g) {
        const uint32_t truth = truth_indices[g];
        const bool crowd = truth_.annotations[truth].iscrowd;
        cell.ious[d * G + g] =
            type_ == IouType::bbox
                ? box_iou(cell.detections[d]->bbox, truth_.annotations[truth].bbox, crowd)
                : mask_iou(*detection_masks[d], detection_mask_boxes[d], masks_[truth], mask_boxes_[truth], crowd);
      }
    for (int a = 0; a < kAreaRangeCount; ++a) per_area[a].push_back(match_image(cell, a));
  }
  for (int a = 0; a < kAreaRangeCount; ++a) accumulate(per_area[a], category, a, evaluation);
}

}  // namespace trainbench::coco
