#pragma once
// COCO instance masks as run-length encodings, computed exactly as pycocotools 2.0's common/maskApi.c does, so
// that areas, boxes and IoUs match it bit for bit. An RLE walks the image column by column (column-major):
// counts[0] background pixels, then counts[1] foreground pixels, and so on, summing to height * width.
#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainbench::coco {

// maskApi.c counts pixels in 32 bits (siz h, w and every run), so no image may hold more pixels than this.
constexpr uint64_t kMaxImagePixels = UINT32_MAX;
// Far beyond any image, and small enough that the 5x upsampled polygon walk fits in int and in memory.
constexpr double kMaxPolygonCoordinate = 1e6;

// Throws Error naming `where` when height x width is more than kMaxImagePixels.
void check_image_pixels(uint32_t height, uint32_t width, const std::string& where);

// COCO boxes are [x, y, width, height] in pixels, with no +1.
struct Box {
  double x = 0;
  double y = 0;
  double width = 0;
  double height = 0;
  bool operator==(const Box& other) const {
    return x == other.x && y == other.y && width == other.width && height == other.height;
  }
};

struct Rle {
  uint32_t height = 0;
  uint32_t width = 0;
  std::vector<uint32_t> counts;
  bool operator==(const Rle& other) const {
    return height == other.height && width == other.width && counts == other.counts;
  }
};

// A COCO "segmentation" field: polygon parts ([[x1,y1,x2,y2,...], ...], in pixels) or an RLE (read from either
// the compressed string or the uncompressed counts list). Empty when an annotation has none.
struct Segmentation {
  std::vector<std::vector<double>> polygons;
  bool has_rle = false;
  Rle rle;
  bool empty() const { return polygons.empty() && !has_rle; }
};

// rleEncode / rleDecode: a mask of height * width bytes in column-major order, nonzero meaning foreground.
Rle encode(const std::vector<uint8_t>& column_major_mask, uint32_t height, uint32_t width);
std::vector<uint8_t> decode(const Rle& rle);

// rleFrPoly: one polygon part [x1,y1,x2,y2,...] (an odd trailing number is ignored), rasterised on a 5x upsampled
// grid and sampled at pixel centres. Throws Error naming `where` when a coordinate is not finite or so large that
// the upsampled grid overflows int, where maskApi.c would be undefined.
Rle rle_from_polygon(const std::vector<double>& xy, uint32_t height, uint32_t width, const std::string& where);
// rleFrBbox: a box rasterised as the polygon (x,y) (x,y+h) (x+w,y+h) (x+w,y).
Rle rle_from_box(const Box& box, uint32_t height, uint32_t width, const std::string& where);
// A segmentation as one RLE, as pycocotools' COCO.annToRLE does: polygon parts are rasterised and merged; an RLE
// is used as it is (with its own size). Like frPyObjects, a list whose first part has exactly 4 numbers is read
// as a list of boxes [x,y,w,h]; a first part of fewer than 4 numbers is refused, as frPyObjects raises "input
// type is not supported" for it. Throws Error naming `where` for an empty segmentation.
Rle segmentation_to_rle(const Segmentation& segmentation, uint32_t height, uint32_t width, const std::string& where);

// rleMerge with intersect=0: the union of the parts. Parts of different sizes give an empty 0x0 RLE, as in
// maskApi.c; no parts give one too.
Rle merge(const std::vector<Rle>& parts);
// rleArea: the foreground pixel count.
uint32_t area(const Rle& rle);
// rleToBbox: the tightest box around the foreground, in whole pixels; [0,0,0,0] for an empty mask.
Box to_box(const Rle& rle);

// bbIou: intersection over union of two boxes; for a crowd ground truth the union is the detection's area alone.
double box_iou(const Box& detection, const Box& ground_truth, bool ground_truth_is_crowd);
// rleIou for one pair, given each mask's to_box (pycocotools first compares the boxes and only walks the runs when
// they overlap). 0 when the masks do not intersect, -1 when their sizes differ (never a match), and for a crowd
// ground truth the union is the detection's area.
double mask_iou(const Rle& detection, const Box& detection_box, const Rle& ground_truth, const Box& ground_truth_box,
                bool ground_truth_is_crowd);

// rleToString / rleFrString: the compressed "counts" string of COCO JSON. Each count (from the fourth on, its
// difference from the count two before) is written 5 bits per character, low bits first, with bit 5 meaning
// "more characters follow", offset by '0'. Decoding throws Error naming `where` for a character outside '0'..'o',
// a truncated value, a negative or oversized count, or counts that do not add up to height * width.
std::string to_compressed_string(const Rle& rle);
Rle from_compressed_string(std::string_view counts, uint32_t height, uint32_t width, const std::string& where);
// An uncompressed RLE ({"counts": [..]}), checked like a decoded string.
Rle from_counts(std::vector<uint32_t> counts, uint32_t height, uint32_t width, const std::string& where);

}  // namespace trainbench::coco
