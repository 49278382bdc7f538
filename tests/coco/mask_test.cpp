// The mask API against hand-derived RLEs and against strings that pycocotools itself produced (quoted by projects
// that compare their re-implementations with it, e.g. frBbox([10,10,10,10], 25, 25) = "T8:?00000000000000000c3").
#include "coco/mask.h"

#include <gtest/gtest.h>

#include <random>

#include "support/error_message.h"

namespace trainbench::coco {
namespace {

using trainbench::testing::error_message;

// A height x width mask (column-major) with rows y0..y1-1 of columns x0..x1-1 set.
std::vector<uint8_t> block(uint32_t height, uint32_t width, uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1) {
  std::vector<uint8_t> mask(height * width, 0);
  for (uint32_t x = x0; x < x1; ++x)
    for (uint32_t y = y0; y < y1; ++y) mask[x * height + y] = 1;
  return mask;
}

TEST(Polygon, SquareCoversThePixelsInsideIt) {
  // Worked by hand through rleFrPoly: the 5x grid vertices (5,5) (15,5) (15,15) (5,15) cross pixel-centre columns 1
  // and 2 at rows 1 (top edge) and 3 (bottom edge), so boundaries at 1*5+1, 2*5+1, 2*5+3, 1*5+3 and 25.
  const Rle rle = rle_from_polygon({1, 1, 3, 1, 3, 3, 1, 3}, 5, 5, "polygon");
  EXPECT_EQ(rle.counts, (std::vector<uint32_t>{6, 2, 3, 2, 12}));
  EXPECT_EQ(area(rle), 4u);
  EXPECT_EQ(to_box(rle), (Box{1, 1, 2, 2}));
  EXPECT_EQ(decode(rle), block(5, 5, 1, 1, 3, 3));
}

TEST(Polygon, RepeatedVertexGivesTheSameMask) {
  // A zero-length edge is where maskApi.c divides 0/0; it must not change the mask.
  EXPECT_EQ(rle_from_polygon({1, 1, 1, 1, 3, 1, 3, 3, 1, 3}, 5, 5, "polygon").counts,
            (std::vector<uint32_t>{6, 2, 3, 2, 12}));
  EXPECT_EQ(rle_from_polygon({1, 1, 3, 1, 3, 1, 3, 3, 1, 3, 1, 3}, 5, 5, "polygon").counts,
            (std::vector<uint32_t>{6, 2, 3, 2, 12}));
}

TEST(Polygon, MatchesPycocotoolsStrings) {
  EXPECT_EQ(to_compressed_string(rle_from_box({10, 10, 10, 10}, 25, 25, "box")), "T8:?00000000000000000c3");
  EXPECT_EQ(to_compressed_string(rle_from_box({5, 5, 10, 10}, 25, 25, "box")), "R4:?00000000000000000e7");
  EXPECT_EQ(to_compressed_string(rle_from_box({15, 15, 5, 5}, 25, 25, "box")), "V<5d00000000^3");
  EXPECT_EQ(to_compressed_string(rle_from_polygon({10, 10, 20, 10, 20, 20, 21, 21, 10, 20}, 25, 25, "polygon")),
            "T8:?00000000001O00000:F`2");
}

TEST(Polygon, ClipsToTheImage) {
  // A square reaching past every border covers the whole 5x5 image.
  const Rle rle = rle_from_polygon({-3, -3, 9, -3, 9, 9, -3, 9}, 5, 5, "polygon");
  EXPECT_EQ(area(rle), 25u);
  EXPECT_EQ(rle.counts, (std::vector<uint32_t>{0, 25}));
}

TEST(Polygon, RejectsCoordinatesOutsideAnyImage) {
  EXPECT_EQ(error_message([] {
              rle_from_polygon({0, 0, 1e7, 0, 1, 1}, 5, 5, "gt.json: annotations[3].segmentation[0]");
            }),
            "gt.json: annotations[3].segmentation[0]: polygon coordinate 10000000.000000 is not a pixel position "
            "within +-1e6");
  EXPECT_NE(error_message([] {
              rle_from_polygon({0, 0, NAN, 0, 1, 1}, 5, 5, "p");
            }).find("not a pixel position"),
            std::string::npos);
  EXPECT_EQ(error_message([] { rle_from_polygon({}, 5, 5, "p"); }), "p: a polygon needs at least one point (x, y)");
}

// Issue 32: coco-eval took 1-2 point ground-truth polygons; pycocotools' frPyObjects raises "input type is not
// supported" for a first part of fewer than 4 numbers (4 numbers are a box, 5 or more a polygon).
TEST(Segmentation, FirstPartOfFewerThanFourNumbersIsRefusedAsByFrPyObjects) {
  Segmentation one_point;
  one_point.polygons = {{1, 1}};
  EXPECT_EQ(error_message([&] { segmentation_to_rle(one_point, 6, 6, "gt.json: annotations[0].segmentation"); }),
            "gt.json: annotations[0].segmentation[0]: a polygon needs at least 3 points (6 numbers); pycocotools' "
            "frPyObjects refuses a first part of 2 numbers");
  one_point.polygons = {{1, 1, 2}};
  EXPECT_NE(error_message([&] { segmentation_to_rle(one_point, 6, 6, "s"); }).find("first part of 3 numbers"),
            std::string::npos);
  Segmentation two_points_after_a_polygon;  // later parts are frPoly'd whatever their length, as in pycocotools
  two_points_after_a_polygon.polygons = {{1, 1, 3, 1, 3, 3, 1, 3}, {4, 4, 5, 5}};
  EXPECT_EQ(area(segmentation_to_rle(two_points_after_a_polygon, 6, 6, "s")), 4u);
}

TEST(Segmentation, ImagesBeyondThirtyTwoBitPixelCountsAreRefused) {
  EXPECT_EQ(error_message([] { rle_from_polygon({0, 0, 1, 0, 1, 1}, 4000000000u, 4000000000u, "p"); }),
            "p: height 4000000000 x width 4000000000 is more than the 4294967295 pixels a COCO mask can hold "
            "(32-bit run lengths)");
  EXPECT_NE(error_message([] { from_counts({0, 65536, 0, 65536u * 65535u}, 65536, 65536, "c"); })
                .find("c: height 65536 x width 65536 is more than"),
            std::string::npos);
}

TEST(Segmentation, PolygonPartsAreMerged) {
  Segmentation two_squares;
  two_squares.polygons = {{1, 1, 3, 1, 3, 3, 1, 3}, {3, 3, 5, 3, 5, 5, 3, 5}};
  const Rle rle = segmentation_to_rle(two_squares, 6, 6, "s");
  EXPECT_EQ(area(rle), 8u);
  std::vector<uint8_t> expected = block(6, 6, 1, 1, 3, 3);
  const std::vector<uint8_t> second = block(6, 6, 3, 3, 5, 5);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] |= second[i];
  EXPECT_EQ(decode(rle), expected);
}

TEST(Segmentation, FirstPartOfFourNumbersMeansBoxes) {
  // frPyObjects reads [[x,y,w,h], ...] as boxes when the first part has exactly 4 numbers.
  Segmentation boxes;
  boxes.polygons = {{1, 1, 2, 2}, {4, 4, 1, 1}};
  const Rle rle = segmentation_to_rle(boxes, 6, 6, "s");
  EXPECT_EQ(rle, merge({rle_from_box({1, 1, 2, 2}, 6, 6, "b"), rle_from_box({4, 4, 1, 1}, 6, 6, "b")}));
  EXPECT_EQ(area(rle), 5u);
  boxes.polygons = {{1, 1, 2, 2}, {1, 1, 3, 1, 3, 3}};
  EXPECT_EQ(error_message([&] { segmentation_to_rle(boxes, 6, 6, "gt.json: annotations[0].segmentation"); }),
            "gt.json: annotations[0].segmentation[1]: the first part has 4 numbers, so pycocotools reads every part "
            "as a box [x,y,w,h]; this one has 6");
  EXPECT_EQ(error_message([] { segmentation_to_rle(Segmentation{}, 6, 6, "s"); }),
            "s: no segmentation (polygons or RLE) to evaluate");
}

TEST(Merge, UnionOfOverlappingBoxes) {
  const Rle a = rle_from_box({0, 0, 2, 2}, 4, 4, "a");
  const Rle b = rle_from_box({1, 1, 2, 2}, 4, 4, "b");
  const Rle merged = merge({a, b});
  EXPECT_EQ(area(merged), 7u);  // 4 + 4 - 1
  std::vector<uint8_t> expected = decode(a);
  const std::vector<uint8_t> other = decode(b);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] |= other[i];
  EXPECT_EQ(merged, encode(expected, 4, 4));
  EXPECT_EQ(merge({a}), a);
  EXPECT_EQ(merge({a, rle_from_box({0, 0, 1, 1}, 5, 4, "c")}), Rle{});  // sizes differ: maskApi.c gives 0x0
}

TEST(Encode, MatchesPycocotoolsStringsAndRoundTrips) {
  EXPECT_EQ(to_compressed_string(encode(block(25, 25, 0, 0, 5, 5), 25, 25)), "05d00000000d?");
  EXPECT_EQ(to_compressed_string(encode(block(25, 25, 5, 5, 15, 15), 25, 25)), "R4:?00000000000000000e7");
  EXPECT_EQ(to_compressed_string(encode(block(25, 25, 20, 20, 25, 25), 25, 25)), "X`05d00000000");
  EXPECT_EQ(to_compressed_string(encode(block(25, 25, 0, 0, 25, 25), 25, 25)), "0ac0");
  EXPECT_EQ(encode(block(25, 25, 0, 0, 25, 25), 25, 25).counts, (std::vector<uint32_t>{0, 625}));

  std::mt19937 random(7);
  std::vector<uint8_t> noise(37 * 23);
  for (auto& pixel : noise) pixel = random() % 3 == 0;
  const Rle rle = encode(noise, 37, 23);
  EXPECT_EQ(decode(rle), noise);
  EXPECT_EQ(from_compressed_string(to_compressed_string(rle), 37, 23, "s"), rle);
  EXPECT_NE(error_message([] { encode(std::vector<uint8_t>(5), 2, 2); }).find("5 mask bytes for a 2x2 image"),
            std::string::npos);
}

TEST(CompressedString, DecodesPycocotoolsOutput) {
  const Rle rle = from_compressed_string("T8:?00000000000000000c3", 25, 25, "s");
  std::vector<uint32_t> expected{260};  // columns 0..9 and rows 0..9 of column 10
  for (int column = 0; column < 10; ++column) {
    expected.push_back(10);
    expected.push_back(column < 9 ? 15 : 130);
  }
  EXPECT_EQ(rle.counts, expected);
  EXPECT_EQ(to_box(rle), (Box{10, 10, 10, 10}));

  // A 427x640 mask from a COCO results file: decoding and re-encoding gives the same string.
  const std::string coco = "\\`_3;j<6B@nCc0Q<@kCc0S<;01N10001O001O00001O001O0000O1L4K6K4L4B]COh<O<O001O0O2Omk^4";
  const Rle decoded = from_compressed_string(coco, 427, 640, "s");
  EXPECT_EQ(to_compressed_string(decoded), coco);
  EXPECT_EQ(decode(decoded).size(), 427u * 640u);
}

TEST(CompressedString, MalformedStringsNameWhereAndWhy) {
  const std::string where = "results.json: [4].segmentation.counts";
  EXPECT_EQ(error_message([&] { from_compressed_string("0ac0", 5, 5, where); }),
            where + ": RLE counts add up to 625 pixels, not height*width = 5*5");
  EXPECT_EQ(error_message([&] { from_compressed_string("T8 ?", 25, 25, where); }),
            where + ": RLE string has character ' ' at offset 2, outside '0'..'o'");
  EXPECT_EQ(error_message([&] { from_compressed_string("0a", 25, 25, where); }),
            where + ": RLE string ends in the middle of a count");
  EXPECT_EQ(error_message([&] { from_compressed_string("@", 25, 25, where); }), where + ": RLE count 0 decodes to -16");
  EXPECT_EQ(error_message([&] { from_compressed_string("ooooooo0", 25, 25, where); }),
            where + ": RLE count 0 is too long");
  EXPECT_EQ(error_message([&] {
              from_counts({3, 4}, 2, 2, where);
            }),
            where + ": RLE counts add up to 7 pixels, not height*width = 2*2");
  EXPECT_EQ(error_message([&] { from_counts({}, 0, 4, where); }), where + ": RLE size [0, 4] is not positive");
}

TEST(ToBox, RunAcrossColumnsCoversEveryRow) {
  // Pixels (x=0, y=3) and (x=1, y=0) in one run: the box spans both columns and all four rows.
  EXPECT_EQ(to_box(from_counts({3, 2, 11}, 4, 4, "r")), (Box{0, 0, 2, 4}));
  EXPECT_EQ(to_box(from_counts({16}, 4, 4, "r")), (Box{0, 0, 0, 0}));
}

TEST(Iou, BoxesWithAndWithoutCrowd) {
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 10, 10}, {5, 0, 10, 10}, false), 50.0 / 150.0);
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 10, 10}, {5, 0, 10, 10}, true), 50.0 / 100.0);  // union = detection area
  EXPECT_EQ(box_iou({0, 0, 10, 10}, {10, 0, 10, 10}, false), 0);                  // touching
  EXPECT_EQ(box_iou({0, 0, 10, 10}, {0, 20, 10, 10}, false), 0);
}

TEST(Iou, MasksWithAndWithoutCrowd) {
  const Rle a = rle_from_box({0, 0, 2, 2}, 4, 4, "a");
  const Rle b = rle_from_box({1, 1, 2, 2}, 4, 4, "b");
  EXPECT_DOUBLE_EQ(mask_iou(a, to_box(a), b, to_box(b), false), 1.0 / 7.0);
  EXPECT_DOUBLE_EQ(mask_iou(a, to_box(a), b, to_box(b), true), 1.0 / 4.0);
  const Rle corner = rle_from_box({3, 3, 1, 1}, 4, 4, "c");
  EXPECT_EQ(mask_iou(a, to_box(a), corner, to_box(corner), false), 0);
  // An L-shaped mask whose box overlaps the other mask but whose pixels do not.
  const Rle l_shape = encode({1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0}, 4, 4);
  const Rle inner = rle_from_box({1, 1, 2, 2}, 4, 4, "i");
  EXPECT_EQ(mask_iou(l_shape, to_box(l_shape), inner, to_box(inner), false), 0);
  const Rle other_size = rle_from_box({0, 0, 2, 2}, 5, 4, "o");
  EXPECT_EQ(mask_iou(a, to_box(a), other_size, to_box(other_size), false), -1);
}

}  // namespace
}  // namespace trainbench::coco
