#include "coco/annotations.h"

#include <climits>
#include <cmath>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::coco {

namespace json_fields {

const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where) {
  const auto found = object.find(key);
  if (found == object.end()) fail(where + "." + key, "missing");
  return *found;
}

int64_t integer(const nlohmann::json& value, const std::string& where) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_unsigned()) fail(where, "integer " + json_excerpt(value) + " is too large");
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::trunc(number) == number && std::fabs(number) < 9e15) return static_cast<int64_t>(number);
  }
  fail(where, "expected an integer, got " + json_excerpt(value));
}

double number(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number()) fail(where, "expected a number, got " + json_excerpt(value));
  return value.get<double>();
}

Box box(const nlohmann::json& value, const std::string& where) {
  if (!value.is_array() || value.size() != 4) fail(where, "expected [x, y, width, height], got " + json_excerpt(value));
  return {number(value[0], where + "[0]"), number(value[1], where + "[1]"), number(value[2], where + "[2]"),
          number(value[3], where + "[3]")};
}

namespace {

uint32_t size_field(const nlohmann::json& value, const std::string& where) {
  const int64_t size = integer(value, where);
  if (size < 0 || size > UINT32_MAX) fail(where, "size " + std::to_string(size) + " is out of range");
  return static_cast<uint32_t>(size);
}

Rle rle_object(const nlohmann::json& value, const std::string& where) {
  const nlohmann::json& size = member(value, "size", where);
  if (!size.is_array() || size.size() != 2) fail(where + ".size", "expected [height, width], got " + json_excerpt(size));
  const uint32_t height = size_field(size[0], where + ".size[0]"), width = size_field(size[1], where + ".size[1]");
  const nlohmann::json& counts = member(value, "counts", where);
  if (counts.is_string())
    return from_compressed_string(counts.get_ref<const std::string&>(), height, width, where + ".counts");
  if (!counts.is_array()) fail(where + ".counts", "expected a compressed string or a list of run lengths");
  std::vector<uint32_t> runs;
  runs.reserve(counts.size());
  for (size_t i = 0; i < counts.size(); ++i)
    runs.push_back(size_field(counts[i], where + ".counts[" + std::to_string(i) + "]"));
  return from_counts(std::move(runs), height, width, where + ".counts");
}

}  // namespace

Segmentation segmentation(const nlohmann::json& value, const std::string& where) {
  Segmentation result;
  if (value.is_object()) {
    result.has_rle = true;
    result.rle = rle_object(value, where);
    return result;
  }
  if (!value.is_array()) fail(where, "expected a list of polygons or an RLE object");
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string part_where = where + "[" + std::to_string(i) + "]";
    const nlohmann::json& part = value[i];
    if (!part.is_array() || part.size() < 2) fail(part_where, "expected a polygon [x1, y1, x2, y2, ...]");
    std::vector<double>& polygon = result.polygons.emplace_back();
    polygon.reserve(part.size());
    for (size_t j = 0; j < part.size(); ++j)
      polygon.push_back(number(part[j], part_where + "[" + std::to_string(j) + "]"));
  }
  return result;
}

}  // namespace json_fields

namespace {

using namespace json_fields;

const nlohmann::json& array_member(const nlohmann::json& root, const char* key, const std::string& source) {
  const auto found = root.find(key);
  if (found == root.end() || !found->is_array()) fail(source, std::string("expected a list \"") + key + "\"");
  return *found;
}

uint32_t optional_size(const nlohmann::json& image, const char* key, const std::string& where) {
  const auto found = image.find(key);
  if (found == image.end()) return 0;
  const int64_t size = integer(*found, where + "." + key);
  // INT32_MAX: the training loaders and image decoders hold a side in an int.
  if (size <= 0 || size > INT32_MAX)
    fail(where + "." + key, "expected a positive size of at most " + std::to_string(INT32_MAX) + " pixels, got " +
                                std::to_string(size));
  return static_cast<uint32_t>(size);
}

bool crowd_flag(const nlohmann::json& value, const std::string& where) {
  if (value.is_boolean()) return value.get<bool>();
  return integer(value, where) != 0;  // pycocotools treats any nonzero iscrowd as crowd
}

Annotation annotation(const nlohmann::json& value, const std::string& where) {
  if (!value.is_object()) fail(where, "expected an object");
  Annotation result;
  result.id = integer(member(value, "id", where), where + ".id");
  result.image_id = integer(member(value, "image_id", where), where + ".image_id");
  result.category_id = integer(member(value, "category_id", where), where + ".category_id");
  result.bbox = box(member(value, "bbox", where), where + ".bbox");
  result.area = number(member(value, "area", where), where + ".area");
  result.iscrowd = crowd_flag(member(value, "iscrowd", where), where + ".iscrowd");
  const auto found = value.find("segmentation");
  if (found != value.end()) result.segmentation = segmentation(*found, where + ".segmentation");
  return result;
}

}  // namespace

GroundTruth parse_ground_truth(std::string_view json_text, const std::string& source) {
  check_json_nesting(json_text, source);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for a number like 1e400
    fail(source, std::string("not valid JSON: ") + error.what());
  }
  if (!root.is_object()) fail(source, "expected a COCO instances object with images, categories and annotations");
  GroundTruth truth;
  const nlohmann::json& images = array_member(root, "images", source);
  for (size_t i = 0; i < images.size(); ++i) {
    const std::string where = source + ": images[" + std::to_string(i) + "]";
    if (!images[i].is_object()) fail(where, "expected an object");
    const auto file_name = images[i].find("file_name");
    if (file_name != images[i].end() && !file_name->is_string())
      fail(where + ".file_name", "expected a string, got " + json_excerpt(*file_name));
    const uint32_t height = optional_size(images[i], "height", where), width = optional_size(images[i], "width", where);
    check_image_pixels(height, width, where);
    truth.images.push_back({integer(member(images[i], "id", where), where + ".id"), height, width,
                            file_name != images[i].end() ? file_name->get<std::string>() : ""});
  }
  const nlohmann::json& categories = array_member(root, "categories", source);
  for (size_t i = 0; i < categories.size(); ++i) {
    const std::string where = source + ": categories[" + std::to_string(i) + "]";
    if (!categories[i].is_object()) fail(where, "expected an object");
    const auto name = categories[i].find("name");
    truth.categories.push_back({integer(member(categories[i], "id", where), where + ".id"),
                                name != categories[i].end() && name->is_string() ? name->get<std::string>() : ""});
  }
  const nlohmann::json& annotations = array_member(root, "annotations", source);
  truth.annotations.reserve(annotations.size());
  for (size_t i = 0; i < annotations.size(); ++i)
    truth.annotations.push_back(annotation(annotations[i], source + ": annotations[" + std::to_string(i) + "]"));
  return truth;
}

GroundTruth load_ground_truth(const std::string& path) { return parse_ground_truth(read_file(path), path); }

}  // namespace trainbench::coco
