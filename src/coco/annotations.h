#pragma once
// COCO instances ground truth (images, categories, annotations) in memory, and its JSON reader. The reader checks
// only the shape of the file (fields present, of the right types); cross-references (an annotation's image and
// category, duplicate ids) are checked by the Evaluator, which also serves callers that build the ground truth in
// memory. Errors name the file, the object index and the field, e.g. "gt.json: annotations[12].bbox: ...".
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "coco/mask.h"

namespace trainbench::coco {

struct Image {
  int64_t id = 0;
  uint32_t height = 0;  // 0 when the file does not say; only polygon rasterisation needs the size
  uint32_t width = 0;
  std::string file_name;  // "" when the file does not say; only image loaders need it
};

struct Category {
  int64_t id = 0;
  std::string name;
};

struct Annotation {
  int64_t id = 0;  // must not be 0: pycocotools records a match by the ground truth's id, so 0 reads as "no match"
  int64_t image_id = 0;
  int64_t category_id = 0;
  Box bbox;
  double area = 0;  // the file's "area" field, which decides the area ranges (not the box or mask area)
  bool iscrowd = false;
  Segmentation segmentation;
};

struct GroundTruth {
  std::vector<Image> images;
  std::vector<Category> categories;
  std::vector<Annotation> annotations;  // file order, which breaks ties between equally good matches
};

// Reads a COCO instances JSON file. Polygons and RLEs are read but not rasterised (only segm evaluation does that).
GroundTruth load_ground_truth(const std::string& path);
GroundTruth parse_ground_truth(std::string_view json_text, const std::string& source);

// Field readers shared with the results reader. `where` names the value for error messages.
namespace json_fields {
const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where);
int64_t integer(const nlohmann::json& value, const std::string& where);  // an integer, or a float with no fraction
double number(const nlohmann::json& value, const std::string& where);
Box box(const nlohmann::json& value, const std::string& where);  // [x, y, width, height]
// Polygon parts, or an RLE object with "size" [height, width] and "counts" (a compressed string or a list).
Segmentation segmentation(const nlohmann::json& value, const std::string& where);
}  // namespace json_fields

}  // namespace trainbench::coco
