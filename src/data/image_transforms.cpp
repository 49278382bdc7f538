#include "data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "util/error.h"

namespace trainbench::data {
namespace {

// For one axis: which source pixels (first, count) and weights make each output pixel.
struct AxisTaps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // out_size * stride, unused slots zero
  int stride = 0;
};

// One axis of a resampling: output pixel i is centred on source coordinate begin + (i + 0.5) * scale,
// and only pixels in [clip_begin, clip_end) may be read (the crop for crop-then-resize, the whole image
// for resize-then-crop). Mirrors PIL's precompute_coeffs with the bilinear (triangle) filter.
struct AxisMapping {
  double begin;
  double scale;
  int clip_begin;
  int clip_end;
};

void compute_taps(const AxisMapping& axis, int out_size, AxisTaps& taps) {
  const double filter_scale = std::max(axis.scale, 1.0);
  const double support = filter_scale;  // the triangle filter's support is 1 at unit scale
  const double inverse_filter_scale = 1.0 / filter_scale;
  const int clip_size = axis.clip_end - axis.clip_begin;
  taps.stride = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(size_t(out_size) * taps.stride, 0.0f);
  for (int i = 0; i < out_size; ++i) {
    const double center = axis.begin - axis.clip_begin + (i + 0.5) * axis.scale;  // relative to clip_begin
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), clip_size);
    const int count = std::min(std::max(hi - lo, 0), taps.stride);
    float* weights = &taps.weights[size_t(i) * taps.stride];
    double total = 0;
    for (int k = 0; k < count; ++k) {
      const double distance = std::abs((k + lo - center + 0.5) * inverse_filter_scale);
      const double weight = distance < 1.0 ? 1.0 - distance : 0.0;
      weights[k] = static_cast<float>(weight);
      total += weight;
    }
    if (total > 0)
      for (int k = 0; k < count; ++k) weights[k] = static_cast<float>(weights[k] / total);
    taps.first[i] = axis.clip_begin + lo;
    taps.count[i] = count;
  }
}

// Scratch reused across calls on a thread, so a transform allocates nothing once warmed up.
struct ResampleScratch {
  AxisTaps horizontal;
  AxisTaps vertical;
  std::vector<float> rows;  // horizontally resampled source rows, each out_width * 3 interleaved floats
  std::vector<float> line;  // one output row, interleaved
};

void resample_normalize(const Image& image, const AxisMapping& x_axis, const AxisMapping& y_axis, int out_width,
                        int out_height, bool flip, const Normalization& normalization, float* out) {
  thread_local ResampleScratch scratch;
  compute_taps(x_axis, out_width, scratch.horizontal);
  compute_taps(y_axis, out_height, scratch.vertical);
  const AxisTaps& h = scratch.horizontal;
  const AxisTaps& v = scratch.vertical;

  // Only the source rows the vertical pass reads are resampled horizontally.
  int row_begin = image.height, row_end = 0;
  for (int i = 0; i < out_height; ++i) {
    if (v.count[i] == 0) continue;
    row_begin = std::min(row_begin, v.first[i]);
    row_end = std::max(row_end, v.first[i] + v.count[i]);
  }
  row_end = std::max(row_end, row_begin);
  const size_t line_floats = size_t(out_width) * 3;
  scratch.rows.resize(size_t(row_end - row_begin) * line_floats);
  scratch.line.resize(line_floats);

  for (int row = row_begin; row < row_end; ++row) {
    const uint8_t* source = image.rgb.data() + size_t(row) * image.width * 3;
    float* destination = scratch.rows.data() + size_t(row - row_begin) * line_floats;
    for (int i = 0; i < out_width; ++i) {
      const float* weights = &h.weights[size_t(i) * h.stride];
      const uint8_t* pixel = source + size_t(h.first[i]) * 3;
      float r = 0, g = 0, b = 0;
      for (int k = 0; k < h.count[i]; ++k, pixel += 3) {
        r += weights[k] * pixel[0];
        g += weights[k] * pixel[1];
        b += weights[k] * pixel[2];
      }
      float* target = destination + size_t(flip ? out_width - 1 - i : i) * 3;
      target[0] = r;
      target[1] = g;
      target[2] = b;
    }
  }

  float scale[3], offset[3];  // (value - mean) / std as one multiply-add
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / normalization.std[c];
    offset[c] = -normalization.mean[c] * scale[c];
  }
  const size_t plane = size_t(out_width) * out_height;
  float* line = scratch.line.data();
  for (int y = 0; y < out_height; ++y) {
    std::fill(line, line + line_floats, 0.0f);
    const float* weights = &v.weights[size_t(y) * v.stride];
    for (int k = 0; k < v.count[y]; ++k) {
      const float weight = weights[k];
      const float* source = scratch.rows.data() + size_t(v.first[y] + k - row_begin) * line_floats;
      for (size_t j = 0; j < line_floats; ++j) line[j] += weight * source[j];
    }
    for (int c = 0; c < 3; ++c) {
      float* target = out + c * plane + size_t(y) * out_width;
      for (int x = 0; x < out_width; ++x) target[x] = line[x * 3 + c] * scale[c] + offset[c];
    }
  }
}

void check_source(const Image& image, int out_size, const char* what) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != size_t(image.width) * image.height * 3)
    fail(what, "image buffer does not hold width*height*3 bytes");
  if (out_size <= 0) fail(what, "output size must be positive, got " + std::to_string(out_size));
}

}  // namespace

CropBox random_resized_crop_box(int width, int height, Rng& rng, const RandomResizedCropOptions& options) {
  const double area = double(width) * height;
  const double log_min_ratio = std::log(options.min_ratio);
  const double log_max_ratio = std::log(options.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(options.min_scale, options.max_scale);
    const double aspect_ratio = std::exp(rng.uniform(log_min_ratio, log_max_ratio));
    // nearbyint rounds half to even, like Python's round().
    const int w = static_cast<int>(std::nearbyint(std::sqrt(target_area * aspect_ratio)));
    const int h = static_cast<int>(std::nearbyint(std::sqrt(target_area / aspect_ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = static_cast<int>(rng.uniform_int(0, height - h));
      const int x = static_cast<int>(rng.uniform_int(0, width - w));
      return {x, y, w, h};
    }
  }
  const double in_ratio = double(width) / height;
  int w = width, h = height;
  if (in_ratio < options.min_ratio) {
    h = static_cast<int>(std::nearbyint(w / options.min_ratio));
  } else if (in_ratio > options.max_ratio) {
    w = static_cast<int>(std::nearbyint(h * options.max_ratio));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

void crop_resize_normalize(const Image& image, const CropBox& box, int out_size, bool flip,
                           const Normalization& normalization, float* out) {
  check_source(image, out_size, "crop_resize_normalize");
  if (box.width <= 0 || box.height <= 0 || box.x < 0 || box.y < 0 || box.x + box.width > image.width ||
      box.y + box.height > image.height)
    fail("crop_resize_normalize", "crop box lies outside the " + std::to_string(image.width) + "x" +
                                      std::to_string(image.height) + " image");
  // Crop first, then resize: the filter may only read pixels inside the crop.
  const AxisMapping x_axis{double(box.x), double(box.width) / out_size, box.x, box.x + box.width};
  const AxisMapping y_axis{double(box.y), double(box.height) / out_size, box.y, box.y + box.height};
  resample_normalize(image, x_axis, y_axis, out_size, out_size, flip, normalization, out);
}

void random_resized_crop_flip(const Image& image, int out_size, Rng& rng, const Normalization& normalization,
                              float* out, const RandomResizedCropOptions& options) {
  const CropBox box = random_resized_crop_box(image.width, image.height, rng, options);
  const bool flip = rng.uniform() < 0.5;
  crop_resize_normalize(image, box, out_size, flip, normalization, out);
}

void resize_center_crop(const Image& image, int resize_size, int crop_size, const Normalization& normalization,
                        float* out) {
  check_source(image, crop_size, "resize_center_crop");
  if (resize_size < crop_size)
    fail("resize_center_crop", "resize size " + std::to_string(resize_size) + " is smaller than crop size " +
                                   std::to_string(crop_size));
  // torchvision Resize(int): the shorter side becomes resize_size, the longer one int(size * long / short).
  int resized_width = resize_size, resized_height = resize_size;
  if (image.width < image.height)
    resized_height = static_cast<int>(double(resize_size) * image.height / image.width);
  else
    resized_width = static_cast<int>(double(resize_size) * image.width / image.height);
  // torchvision CenterCrop: offset int(round((size - crop) / 2)).
  const int left = static_cast<int>(std::nearbyint((resized_width - crop_size) / 2.0));
  const int top = static_cast<int>(std::nearbyint((resized_height - crop_size) / 2.0));
  // Resize first, then crop: the same filter positions as resizing the whole image, reading any pixel.
  const double x_scale = double(image.width) / resized_width;
  const double y_scale = double(image.height) / resized_height;
  const AxisMapping x_axis{left * x_scale, x_scale, 0, image.width};
  const AxisMapping y_axis{top * y_scale, y_scale, 0, image.height};
  resample_normalize(image, x_axis, y_axis, crop_size, crop_size, false, normalization, out);
}

void resize_normalize(const Image& image, int out_width, int out_height, bool flip,
                      const Normalization& normalization, float* out) {
  check_source(image, std::min(out_width, out_height), "resize_normalize");
  const AxisMapping x_axis{0, double(image.width) / out_width, 0, image.width};
  const AxisMapping y_axis{0, double(image.height) / out_height, 0, image.height};
  resample_normalize(image, x_axis, y_axis, out_width, out_height, flip, normalization, out);
}

}  // namespace trainbench::data
