#include "detection/coco_detection.h"

#include <cmath>
#include <unordered_map>

#include "coco/mask.h"
#include "util/confined_path.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::detection {

namespace {

// DALI's COCO reader (NVIDIA's SSD) ignores boxes whose width or height in pixels is under this.
constexpr double kMinBoxSide = 0.1;

// A coordinate or size beyond any image (1e300 overflows the float boxes to inf) is an Error naming the
// annotation; the same bound as polygon coordinates.
void check_box_values(const coco::Box& box, const std::string& where) {
  const double values[] = {box.x, box.y, box.width, box.height};
  for (size_t k = 0; k < 4; ++k)
    if (!(std::fabs(values[k]) <= coco::kMaxPolygonCoordinate))
      fail(where + ".bbox[" + std::to_string(k) + "]",
           json_excerpt(values[k]) + " is not a pixel position or size within +-1e6");
}

// Whether a box has a side under kMinBoxSide or no area inside its width x height image.
bool unusable_box(const coco::Box& box, int width, int height) {
  if (!(box.width >= kMinBoxSide && box.height >= kMinBoxSide)) return true;
  return box.x >= width || box.y >= height || box.x + box.width <= 0 || box.y + box.height <= 0;
}

}  // namespace

CocoDetectionSet load_coco_detection(const std::string& annotation_file, const std::string& image_dir,
                                     bool allow_paths_outside_image_dir) {
  CocoDetectionSet set;
  set.ground_truth = coco::load_ground_truth(annotation_file);
  set.annotation_file = annotation_file;
  set.image_dir = image_dir;
  const coco::GroundTruth& truth = set.ground_truth;

  std::unordered_map<int64_t, int64_t> label_of_category;
  for (size_t i = 0; i < truth.categories.size(); ++i) {
    if (!label_of_category.emplace(truth.categories[i].id, static_cast<int64_t>(i) + 1).second)
      fail(annotation_file + ": categories[" + std::to_string(i) + "].id",
           "duplicate category id " + std::to_string(truth.categories[i].id));
    set.category_ids.push_back(truth.categories[i].id);
  }

  std::unordered_map<int64_t, size_t> sample_of_image;
  std::vector<DetectionSample> all;
  for (size_t i = 0; i < truth.images.size(); ++i) {
    const coco::Image& image = truth.images[i];
    const std::string where = annotation_file + ": images[" + std::to_string(i) + "]";
    if (image.file_name.empty()) fail(where + ".file_name", "missing; the loader needs each image's file");
    if (image.width == 0 || image.height == 0) fail(where, "needs width and height to scale its boxes");
    if (!sample_of_image.emplace(image.id, all.size()).second)
      fail(where + ".id", "duplicate image id " + std::to_string(image.id));
    DetectionSample sample;
    sample.path = path_inside(image_dir, image.file_name, where + ".file_name", allow_paths_outside_image_dir);
    sample.image_id = image.id;
    sample.width = static_cast<int>(image.width);
    sample.height = static_cast<int>(image.height);
    all.push_back(std::move(sample));
  }

  for (size_t i = 0; i < truth.annotations.size(); ++i) {
    const coco::Annotation& annotation = truth.annotations[i];
    const std::string where = annotation_file + ": annotations[" + std::to_string(i) + "]";
    const auto image = sample_of_image.find(annotation.image_id);
    if (image == sample_of_image.end())
      fail(where + ".image_id", std::to_string(annotation.image_id) + " is not in images");
    const auto label = label_of_category.find(annotation.category_id);
    if (label == label_of_category.end())
      fail(where + ".category_id", std::to_string(annotation.category_id) + " is not in categories");
    DetectionSample& sample = all[image->second];
    const coco::Box& box = annotation.bbox;
    check_box_values(box, where + " (id " + std::to_string(annotation.id) + ")");
    if (unusable_box(box, sample.width, sample.height)) {
      ++set.dropped_boxes;
      continue;
    }
    const float width = static_cast<float>(sample.width), height = static_cast<float>(sample.height);
    for (double value : {box.x / width, box.y / height, (box.x + box.width) / width, (box.y + box.height) / height})
      sample.boxes.push_back(static_cast<float>(value));
    sample.labels.push_back(label->second);
    sample.annotations.push_back(static_cast<uint32_t>(i));
  }

  for (auto& sample : all)
    if (!sample.labels.empty()) set.samples.push_back(std::move(sample));
  if (set.samples.empty())  // the loaders would refuse an empty set without saying which file it came from
    fail(annotation_file, "has no image with an annotation to use (" + std::to_string(truth.images.size()) + " images, " +
                              std::to_string(truth.annotations.size()) + " annotations, " + std::to_string(set.dropped_boxes) +
                              " boxes dropped as too small or outside their image)");
  return set;
}

data::Image decode_sample_image(const std::string& path, int width, int height) {
  data::Image image = data::decode_image_file(path);
  if (image.width != width || image.height != height)
    fail(path, "is " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                   " but the annotation file says " + std::to_string(width) + "x" + std::to_string(height));
  return image;
}

}  // namespace trainbench::detection
