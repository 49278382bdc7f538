#include "coco/mask.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "util/error.h"

namespace trainbench::coco {

namespace {

uint64_t pixel_count(uint32_t height, uint32_t width) { return uint64_t{height} * width; }


// Walks two RLEs of one size side by side, calling visit(length, in_a, in_b, last) for each stretch where neither
// changes value. The loop and its end (both lists exhausted) are rleMerge's and rleIou's in maskApi.c.
template <typename Visit>
void walk_together(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, Visit visit) {
  uint32_t left_a = a[0], left_b = b[0];
  size_t next_a = 1, next_b = 1;
  bool in_a = false, in_b = false;
  uint64_t remaining = 1;
  while (remaining > 0) {
    const uint32_t length = std::min(left_a, left_b);
    const bool was_in_a = in_a, was_in_b = in_b;
    left_a -= length;
    if (left_a == 0 && next_a < a.size()) {
      left_a = a[next_a++];
      in_a = !in_a;
    }
    left_b -= length;
    if (left_b == 0 && next_b < b.size()) {
      left_b = b[next_b++];
      in_b = !in_b;
    }
    remaining = uint64_t{left_a} + left_b;
    visit(length, was_in_a, was_in_b, remaining == 0);
  }
}

void check_sum(const Rle& rle, const std::string& where) {
  if (rle.height == 0 || rle.width == 0)
    fail(where, "RLE size [" + std::to_string(rle.height) + ", " + std::to_string(rle.width) + "] is not positive");
  check_image_pixels(rle.height, rle.width, where);
  uint64_t total = 0;
  for (uint32_t count : rle.counts) total += count;
  if (rle.counts.empty() || total != pixel_count(rle.height, rle.width))
    fail(where, "RLE counts add up to " + std::to_string(total) +
                    " pixels, not height*width = " + std::to_string(rle.height) + "*" + std::to_string(rle.width));
}

}  // namespace

void check_image_pixels(uint32_t height, uint32_t width, const std::string& where) {
  if (pixel_count(height, width) > kMaxImagePixels)
    fail(where, "height " + std::to_string(height) + " x width " + std::to_string(width) + " is more than the " +
                    std::to_string(kMaxImagePixels) + " pixels a COCO mask can hold (32-bit run lengths)");
}

Rle encode(const std::vector<uint8_t>& column_major_mask, uint32_t height, uint32_t width) {
  if (column_major_mask.size() != pixel_count(height, width))
    fail("RLE encode", std::to_string(column_major_mask.size()) + " mask bytes for a " + std::to_string(height) + "x" +
                           std::to_string(width) + " image");
  Rle rle{height, width, {}};
  uint8_t current = 0;
  uint32_t run = 0;
  for (uint64_t i = 0; i < pixel_count(height, width); ++i) {
    const uint8_t value = column_major_mask[i] != 0;
    if (value != current) {
      rle.counts.push_back(run);
      run = 0;
      current = value;
    }
    ++run;
  }
  rle.counts.push_back(run);
  return rle;
}

std::vector<uint8_t> decode(const Rle& rle) {
  std::vector<uint8_t> mask;
  mask.reserve(pixel_count(rle.height, rle.width));
  uint8_t value = 0;
  for (uint32_t count : rle.counts) {
    mask.insert(mask.end(), count, value);
    value = !value;
  }
  return mask;
}

Rle rle_from_polygon(const std::vector<double>& xy, uint32_t height, uint32_t width, const std::string& where) {
  constexpr double kScale = 5;  // maskApi.c upsamples 5x so that the boundary is found to a fifth of a pixel
  const size_t points = xy.size() / 2;
  if (points == 0) fail(where, "a polygon needs at least one point (x, y)");
  if (height == 0 || width == 0) fail(where, "cannot rasterise a polygon on an image of size 0");
  check_image_pixels(height, width, where);
  // Vertices on the upsampled grid, rounded as maskApi.c does: (int)(5*v + .5), which truncates toward zero.
  std::vector<int> grid_x(points + 1), grid_y(points + 1);
  for (size_t j = 0; j < 2 * points; ++j) {
    const double scaled = kScale * xy[j] + .5;
    if (!(std::fabs(xy[j]) <= kMaxPolygonCoordinate))
      fail(where, "polygon coordinate " + std::to_string(xy[j]) + " is not a pixel position within +-1e6");
    (j % 2 == 0 ? grid_x : grid_y)[j / 2] = static_cast<int>(scaled);
  }
  grid_x[points] = grid_x[0];
  grid_y[points] = grid_y[0];

  // Walk every edge one grid step at a time along its longer axis (points are emitted from the edge's start to its
  // end even when the walk runs backwards).
  std::vector<int> walk_x, walk_y;
  for (size_t j = 0; j < points; ++j) {
    int xs = grid_x[j], xe = grid_x[j + 1], ys = grid_y[j], ye = grid_y[j + 1];
    const int dx = std::abs(xe - xs), dy = std::abs(ys - ye);
    const bool along_x = dx >= dy;
    const bool flip = along_x ? xs > xe : ys > ye;
    if (flip) {
      std::swap(xs, xe);
      std::swap(ys, ye);
    }
    if (along_x) {
      // A zero-length edge (dx == dy == 0) makes maskApi.c divide 0/0; its single point shares its x with both
      // neighbours, so the y-boundary pass below never reads its y, and any finite slope gives the same mask.
      const double slope = dx == 0 ? 0 : static_cast<double>(ye - ys) / dx;
      for (int d = 0; d <= dx; ++d) {
        const int t = flip ? dx - d : d;
        walk_x.push_back(t + xs);
        walk_y.push_back(static_cast<int>(ys + slope * t + .5));
      }
    } else {
      const double slope = static_cast<double>(xe - xs) / dy;
      for (int d = 0; d <= dy; ++d) {
        const int t = flip ? dy - d : d;
        walk_y.push_back(t + ys);
        walk_x.push_back(static_cast<int>(xs + slope * t + .5));
      }
    }
  }

  // Where the walk changes column, the boundary crosses a column of pixel centres: keep the crossings that fall on
  // a real column and clamp their row into [0, height], rounding up to the first pixel centre inside.
  std::vector<uint32_t> boundaries;
  for (size_t j = 1; j < walk_x.size(); ++j) {
    if (walk_x[j] == walk_x[j - 1]) continue;
    double column = walk_x[j] < walk_x[j - 1] ? walk_x[j] : walk_x[j] - 1;
    column = (column + .5) / kScale - .5;
    if (std::floor(column) != column || column < 0 || column > width - 1.0) continue;
    double row = walk_y[j] < walk_y[j - 1] ? walk_y[j] : walk_y[j - 1];
    row = (row + .5) / kScale - .5;
    if (row < 0)
      row = 0;
    else if (row > height)
      row = height;
    row = std::ceil(row);
    boundaries.push_back(static_cast<uint32_t>(static_cast<int64_t>(column) * height + static_cast<int64_t>(row)));
  }
  boundaries.push_back(height * width);
  std::sort(boundaries.begin(), boundaries.end());

  // Runs are the gaps between sorted boundary positions; a zero gap (two crossings at one pixel) cancels, so the
  // run after it joins the run before.
  uint32_t previous = 0;
  for (uint32_t& position : boundaries) {
    const uint32_t gap = position - previous;
    previous = position;
    position = gap;
  }
  Rle rle{height, width, {boundaries[0]}};
  for (size_t j = 1; j < boundaries.size();) {
    if (boundaries[j] > 0) {
      rle.counts.push_back(boundaries[j++]);
    } else if (++j < boundaries.size()) {
      rle.counts.back() += boundaries[j++];
    }
  }
  return rle;
}

Rle rle_from_box(const Box& box, uint32_t height, uint32_t width, const std::string& where) {
  const double x_end = box.x + box.width, y_end = box.y + box.height;
  return rle_from_polygon({box.x, box.y, box.x, y_end, x_end, y_end, x_end, box.y}, height, width, where);
}

Rle segmentation_to_rle(const Segmentation& segmentation, uint32_t height, uint32_t width, const std::string& where) {
  if (segmentation.has_rle) return segmentation.rle;
  if (segmentation.polygons.empty()) fail(where, "no segmentation (polygons or RLE) to evaluate");
  // frPyObjects decides by the first part alone: exactly 4 numbers means every part is a box [x,y,w,h].
  const size_t first_part = segmentation.polygons[0].size();
  if (first_part < 4)
    fail(where + "[0]", "a polygon needs at least 3 points (6 numbers); pycocotools' frPyObjects refuses a first part "
                        "of " + std::to_string(first_part) + " numbers");
  const bool parts_are_boxes = first_part == 4;
  std::vector<Rle> parts;
  for (size_t i = 0; i < segmentation.polygons.size(); ++i) {
    const auto& part = segmentation.polygons[i];
    const std::string part_where = where + "[" + std::to_string(i) + "]";
    if (!parts_are_boxes) {
      parts.push_back(rle_from_polygon(part, height, width, part_where));
      continue;
    }
    if (part.size() != 4)
      fail(part_where,
           "the first part has 4 numbers, so pycocotools reads every part as a box [x,y,w,h]; this one has " +
               std::to_string(part.size()));
    parts.push_back(rle_from_box({part[0], part[1], part[2], part[3]}, height, width, part_where));
  }
  return merge(parts);
}

Rle merge(const std::vector<Rle>& parts) {
  if (parts.empty()) return {};
  Rle merged = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const Rle& other = parts[i];
    if (other.height != merged.height || other.width != merged.width) return {};
    // A run of the union ends wherever its value changes between stretches.
    std::vector<uint32_t> counts;
    uint32_t run = 0;
    bool run_value = false;
    walk_together(merged.counts, other.counts, [&](uint32_t length, bool in_a, bool in_b, bool last) {
      if ((in_a || in_b) != run_value) {
        counts.push_back(run);
        run = 0;
        run_value = !run_value;
      }
      run += length;
      if (last) counts.push_back(run);
    });
    merged.counts = std::move(counts);
  }
  return merged;
}

uint32_t area(const Rle& rle) {
  uint32_t total = 0;
  for (size_t j = 1; j < rle.counts.size(); j += 2) total += rle.counts[j];
  return total;
}

Box to_box(const Rle& rle) {
  const size_t runs = rle.counts.size() / 2 * 2;  // a trailing background run does not move the box
  if (runs == 0) return {};
  const uint32_t h = rle.height;
  uint32_t x_min = rle.width, y_min = h, x_max = 0, y_max = 0, run_start_x = 0, position = 0;
  for (size_t j = 0; j < runs; ++j) {
    position += rle.counts[j];
    // Even j: position is the first pixel of a foreground run; odd j: one past its last pixel.
    const uint32_t pixel = position - j % 2;
    const uint32_t x = pixel / h, y = pixel - x * h;
    if (j % 2 == 0)
      run_start_x = x;
    else if (run_start_x < x) {  // the run wraps into another column, so it covers every row
      y_min = 0;
      y_max = h - 1;
    }
    x_min = std::min(x_min, x);
    x_max = std::max(x_max, x);
    y_min = std::min(y_min, y);
    y_max = std::max(y_max, y);
  }
  return {static_cast<double>(x_min), static_cast<double>(y_min), static_cast<double>(x_max - x_min + 1),
          static_cast<double>(y_max - y_min + 1)};
}

double box_iou(const Box& detection, const Box& ground_truth, bool ground_truth_is_crowd) {
  const double ground_truth_area = ground_truth.width * ground_truth.height;
  const double detection_area = detection.width * detection.height;
  const double overlap_width = std::fmin(detection.width + detection.x, ground_truth.width + ground_truth.x) -
                               std::fmax(detection.x, ground_truth.x);
  if (overlap_width <= 0) return 0;
  const double overlap_height = std::fmin(detection.height + detection.y, ground_truth.height + ground_truth.y) -
                                std::fmax(detection.y, ground_truth.y);
  if (overlap_height <= 0) return 0;
  const double intersection = overlap_width * overlap_height;
  const double union_area = ground_truth_is_crowd ? detection_area : detection_area + ground_truth_area - intersection;
  return intersection / union_area;
}

double mask_iou(const Rle& detection, const Box& detection_box, const Rle& ground_truth, const Box& ground_truth_box,
                bool ground_truth_is_crowd) {
  if (box_iou(detection_box, ground_truth_box, ground_truth_is_crowd) <= 0) return 0;
  if (detection.height != ground_truth.height || detection.width != ground_truth.width) return -1;
  uint32_t intersection = 0, union_area = 0;
  walk_together(detection.counts, ground_truth.counts, [&](uint32_t length, bool in_a, bool in_b, bool) {
    if (in_a || in_b) union_area += length;
    if (in_a && in_b) intersection += length;
  });
  if (intersection == 0) return 0;
  if (ground_truth_is_crowd) union_area = area(detection);
  return static_cast<double>(intersection) / static_cast<double>(union_area);
}

std::string to_compressed_string(const Rle& rle) {
  std::string text;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    int64_t value = rle.counts[i];
    if (i > 2) value -= rle.counts[i - 2];
    bool more = true;
    while (more) {
      char c = static_cast<char>(value & 0x1f);
      value >>= 5;  // arithmetic shift: a negative difference ends once only sign bits remain
      more = (c & 0x10) ? value != -1 : value != 0;
      if (more) c |= 0x20;
      text.push_back(static_cast<char>(c + 48));
    }
  }
  return text;
}

Rle from_compressed_string(std::string_view counts, uint32_t height, uint32_t width, const std::string& where) {
  // Up to 7 characters (35 bits) hold any difference of two 32-bit counts.
  constexpr int kMaxCharacters = 7;
  Rle rle{height, width, {}};
  rle.counts.reserve(counts.size());  // at least one character per count
  size_t position = 0;
  while (position < counts.size()) {
    int64_t value = 0;
    bool more = true;
    for (int k = 0; more; ++k) {
      if (k == kMaxCharacters) fail(where, "RLE count " + std::to_string(rle.counts.size()) + " is too long");
      if (position == counts.size()) fail(where, "RLE string ends in the middle of a count");
      const int c = static_cast<unsigned char>(counts[position]) - 48;
      if (c < 0 || c > 63)
        fail(where, "RLE string has character '" + std::string(1, counts[position]) + "' at offset " +
                        std::to_string(position) + ", outside '0'..'o'");
      value |= static_cast<int64_t>(c & 0x1f) << (5 * k);
      more = c & 0x20;
      ++position;
      if (!more && (c & 0x10)) value |= static_cast<int64_t>(-1) * (int64_t{1} << (5 * (k + 1)));  // sign-extend
    }
    if (rle.counts.size() > 2) value += rle.counts[rle.counts.size() - 2];
    if (value < 0 || value > UINT32_MAX)
      fail(where, "RLE count " + std::to_string(rle.counts.size()) + " decodes to " + std::to_string(value));
    rle.counts.push_back(static_cast<uint32_t>(value));
  }
  check_sum(rle, where);
  return rle;
}

Rle from_counts(std::vector<uint32_t> counts, uint32_t height, uint32_t width, const std::string& where) {
  Rle rle{height, width, std::move(counts)};
  check_sum(rle, where);
  return rle;
}

}  // namespace trainbench::coco
