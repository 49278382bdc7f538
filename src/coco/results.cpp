#include "coco/results.h"

#include <cstring>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "coco/annotations.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::coco {

Detection box_detection(int64_t image_id, int64_t category_id, const Box& box, double score) {
  Detection detection;
  detection.image_id = image_id;
  detection.category_id = category_id;
  detection.score = score;
  detection.bbox = box;
  detection.area = box.width * box.height;
  return detection;
}

Detection mask_detection(int64_t image_id, int64_t category_id, Rle mask, double score) {
  Detection detection;
  detection.image_id = image_id;
  detection.category_id = category_id;
  detection.score = score;
  detection.bbox = to_box(mask);
  detection.area = area(mask);
  detection.segmentation.has_rle = true;
  detection.segmentation.rle = std::move(mask);
  return detection;
}

namespace {

class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* first = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), first, first + sizeof(T));
  }
  template <typename T>
  void put_all(const std::vector<T>& values) {
    put<uint64_t>(values.size());
    const auto* first = reinterpret_cast<const uint8_t*>(values.data());
    bytes_.insert(bytes_.end(), first, first + values.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  ByteReader(const std::vector<uint8_t>& bytes, const std::string& source) : bytes_(bytes), source_(source) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  template <typename T>
  std::vector<T> get_all() {
    const auto count = get<uint64_t>();
    if (count > (bytes_.size() - offset_) / sizeof(T)) truncated();
    std::vector<T> values(count);
    if (count > 0) std::memcpy(values.data(), take(count * sizeof(T)), count * sizeof(T));
    return values;
  }
  bool done() const { return offset_ == bytes_.size(); }

 private:
  const uint8_t* take(size_t size) {
    if (size > bytes_.size() - offset_) truncated();
    const uint8_t* at = bytes_.data() + offset_;
    offset_ += size;
    return at;
  }
  [[noreturn]] void truncated() const {
    fail(source_, "ends at byte " + std::to_string(bytes_.size()) + " inside a detection (byte " + std::to_string(offset_) +
                      "); it is not a whole serialized detection list");
  }
  const std::vector<uint8_t>& bytes_;
  const std::string& source_;
  size_t offset_ = 0;
};

}  // namespace

std::vector<uint8_t> serialize_detections(const std::vector<Detection>& detections) {
  ByteWriter out;
  out.put<uint64_t>(detections.size());
  for (const Detection& detection : detections) {
    out.put(detection.image_id);
    out.put(detection.category_id);
    out.put(detection.score);
    out.put(detection.bbox);
    out.put(detection.area);
    out.put<uint64_t>(detection.segmentation.polygons.size());
    for (const auto& polygon : detection.segmentation.polygons) out.put_all(polygon);
    out.put<uint8_t>(detection.segmentation.has_rle ? 1 : 0);
    out.put(detection.segmentation.rle.height);
    out.put(detection.segmentation.rle.width);
    out.put_all(detection.segmentation.rle.counts);
  }
  return out.take();
}

std::vector<Detection> deserialize_detections(const std::vector<uint8_t>& bytes, const std::string& source) {
  ByteReader in(bytes, source);
  const auto count = in.get<uint64_t>();
  std::vector<Detection> detections;
  for (uint64_t i = 0; i < count; ++i) {
    Detection detection;
    detection.image_id = in.get<int64_t>();
    detection.category_id = in.get<int64_t>();
    detection.score = in.get<double>();
    detection.bbox = in.get<Box>();
    detection.area = in.get<double>();
    const auto polygons = in.get<uint64_t>();
    for (uint64_t p = 0; p < polygons; ++p) detection.segmentation.polygons.push_back(in.get_all<double>());
    detection.segmentation.has_rle = in.get<uint8_t>() != 0;
    detection.segmentation.rle.height = in.get<uint32_t>();
    detection.segmentation.rle.width = in.get<uint32_t>();
    detection.segmentation.rle.counts = in.get_all<uint32_t>();
    detections.push_back(std::move(detection));
  }
  if (!in.done()) fail(source, "has bytes after its " + std::to_string(count) + " detections; it is not one serialized list");
  return detections;
}

namespace {

using namespace json_fields;

// loadNumpyAnnotations: [image_id, x, y, w, h, score, category_id].
Detection row_detection(const nlohmann::json& row, const std::string& where) {
  if (!row.is_array() || row.size() != 7)
    fail(where, "expected a row [image_id, x, y, w, h, score, category_id], got " + json_excerpt(row));
  return box_detection(integer(row[0], where + "[0]"), integer(row[6], where + "[6]"),
                       {number(row[1], where + "[1]"), number(row[2], where + "[2]"), number(row[3], where + "[3]"),
                        number(row[4], where + "[4]")},
                       number(row[5], where + "[5]"));
}

bool has_nonempty_bbox(const nlohmann::json& result) {
  const auto bbox = result.find("bbox");
  return bbox != result.end() && !(bbox->is_array() && bbox->empty());
}

Detection object_detection(const nlohmann::json& result, bool box_results, const std::string& where) {
  if (!result.is_object()) fail(where, "expected a result object, like the first result");
  const int64_t image_id = integer(member(result, "image_id", where), where + ".image_id");
  const int64_t category_id = integer(member(result, "category_id", where), where + ".category_id");
  const double score = number(member(result, "score", where), where + ".score");
  if (box_results) {
    Detection detection =
        box_detection(image_id, category_id, box(member(result, "bbox", where), where + ".bbox"), score);
    const auto found = result.find("segmentation");
    if (found != result.end()) detection.segmentation = segmentation(*found, where + ".segmentation");
    return detection;
  }
  Segmentation mask = segmentation(member(result, "segmentation", where), where + ".segmentation");
  if (!mask.has_rle)
    fail(where + ".segmentation", "a mask result must be an RLE object (pycocotools' loadRes takes its area)");
  Detection detection = mask_detection(image_id, category_id, std::move(mask.rle), score);
  if (has_nonempty_bbox(result)) detection.bbox = box(result["bbox"], where + ".bbox");
  return detection;
}

}  // namespace

std::vector<Detection> parse_results(std::string_view json_text, const std::string& source) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<Detection> detections;
  bool rows = false;
  bool box_results = false;
  std::string field;  // the key being read inside the current result, for parse error messages
  const auto result_where = [&] { return source + ": [" + std::to_string(detections.size()) + "]"; };
  // Each result is converted as soon as it is parsed and then dropped from the document, so memory holds the
  // detections, not a JSON tree of them.
  const nlohmann::json::parser_callback_t take_result = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth == 0 && event != Event::array_start && event != Event::array_end)
      fail(source, "expected a JSON list of results");
    if (depth == 1 && event == Event::object_start) field.clear();
    if (depth == 2 && event == Event::key) field = parsed.get<std::string>();
    if (depth != 1 || event == Event::object_start || event == Event::array_start) return true;
    const std::string where = result_where();
    if (detections.empty()) {
      rows = parsed.is_array();
      box_results = rows || (parsed.is_object() && has_nonempty_bbox(parsed));
      if (parsed.is_object() && !box_results && !parsed.contains("segmentation"))
        fail(where, "a result needs a \"bbox\" or a \"segmentation\"");
    }
    detections.push_back(rows ? row_detection(parsed, where) : object_detection(parsed, box_results, where));
    field.clear();
    return false;
  };
  check_json_nesting(json_text, source);
  try {
    const nlohmann::json emptied_list = nlohmann::json::parse(json_text.begin(), json_text.end(), take_result);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for a number like 1e400
    fail(result_where() + (field.empty() ? "" : "." + field), std::string("not valid JSON: ") + error.what());
  }
  return detections;
}

std::vector<Detection> load_results(const std::string& path) { return parse_results(read_file(path), path); }

}  // namespace trainbench::coco
