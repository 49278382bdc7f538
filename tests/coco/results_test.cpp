// Detections as bytes (coco/results.h), the form in which ranks gather their evaluation results.
#include "coco/results.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench::coco {
namespace {

using trainbench::testing::error_message;

bool same_detection(const Detection& a, const Detection& b) {
  return a.image_id == b.image_id && a.category_id == b.category_id && a.score == b.score && a.bbox == b.bbox &&
         a.area == b.area && a.segmentation.polygons == b.segmentation.polygons &&
         a.segmentation.has_rle == b.segmentation.has_rle && a.segmentation.rle == b.segmentation.rle;
}

std::vector<Detection> mixed_detections() {
  Detection polygon = box_detection(9, 2, {0.5, 1.25, 3, 4}, 0.25);
  polygon.segmentation.polygons = {{1, 2, 3, 4, 5, 6}, {}, {7.125, 8, 9, 10, 11, 12.5}};
  return {box_detection(1, 3, {10.1, 20.2, 30.3, 40.4}, 0.1 + 0.2),  // a score no decimal text holds exactly
          mask_detection(1 << 20, 90, Rle{4, 3, {2, 5, 1, 4}}, std::nextafter(1.0, 0.0)), mask_detection(7, 1, Rle{}, 0.5),
          polygon};
}

TEST(SerializedDetections, RoundTripBitForBit) {
  const std::vector<Detection> detections = mixed_detections();
  const std::vector<Detection> back = deserialize_detections(serialize_detections(detections), "round trip");
  ASSERT_EQ(back.size(), detections.size());
  for (size_t i = 0; i < detections.size(); ++i) EXPECT_TRUE(same_detection(back[i], detections[i])) << "detection " << i;
}

TEST(SerializedDetections, EmptyListRoundTrips) {
  EXPECT_TRUE(deserialize_detections(serialize_detections({}), "empty").empty());
}

TEST(SerializedDetections, TruncatedOrPaddedBuffersAreNamedErrors) {
  std::vector<uint8_t> bytes = serialize_detections(mixed_detections());
  for (size_t keep : {size_t{0}, size_t{5}, bytes.size() / 2, bytes.size() - 1}) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep));
    const std::string message = error_message([&] { deserialize_detections(cut, "rank 1's boxes"); });
    EXPECT_NE(message.find("rank 1's boxes: ends at byte " + std::to_string(keep)), std::string::npos) << message;
  }
  bytes.push_back(0);
  const std::string message = error_message([&] { deserialize_detections(bytes, "rank 1's boxes"); });
  EXPECT_NE(message.find("rank 1's boxes: has bytes after its 4 detections"), std::string::npos) << message;
}

}  // namespace
}  // namespace trainbench::coco
