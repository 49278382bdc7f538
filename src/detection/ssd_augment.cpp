#include "detection/ssd_augment.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace trainbench::detection {
namespace {

float iou(const float* a, const std::array<float, 4>& b) {
  const float left = std::max(a[0], b[0]), top = std::max(a[1], b[1]);
  const float right = std::min(a[2], b[2]), bottom = std::min(a[3], b[3]);
  const float intersection = std::max(right - left, 0.0f) * std::max(bottom - top, 0.0f);
  const float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
  return intersection / (area_a + area_b - intersection);
}

float clamp255(float value) { return std::min(std::max(value, 0.0f), 255.0f); }

// PIL's ITU-R 601-2 luma, as torchvision's grayscale uses.
float luma(float r, float g, float b) { return 0.299f * r + 0.587f * g + 0.114f * b; }

void blend_with(float* chw, int64_t pixels, double factor, const float* other_or_null, float constant) {
  for (int c = 0; c < 3; ++c) {
    float* plane = chw + c * pixels;
    for (int64_t i = 0; i < pixels; ++i) {
      const float other = other_or_null ? other_or_null[i] : constant;
      plane[i] = clamp255(static_cast<float>(factor * plane[i] + (1 - factor) * other));
    }
  }
}

std::vector<float> grayscale(const float* chw, int64_t pixels) {
  std::vector<float> gray(pixels);
  for (int64_t i = 0; i < pixels; ++i) gray[i] = luma(chw[i], chw[pixels + i], chw[2 * pixels + i]);
  return gray;
}

// Shifts hue by `shift` turns through HSV, as torchvision's adjust_hue does.
void shift_hue(float* chw, int64_t pixels, double shift) {
  float* red = chw;
  float* green = chw + pixels;
  float* blue = chw + 2 * pixels;
  for (int64_t i = 0; i < pixels; ++i) {
    const double r = red[i] / 255.0, g = green[i] / 255.0, b = blue[i] / 255.0;
    const double max = std::max({r, g, b}), min = std::min({r, g, b}), range = max - min;
    if (range <= 0) continue;  // grey: hue is undefined and unchanged
    double hue;
    if (max == r)
      hue = (g - b) / range;
    else if (max == g)
      hue = 2.0 + (b - r) / range;
    else
      hue = 4.0 + (r - g) / range;
    hue = hue / 6.0 + shift;
    hue -= std::floor(hue);
    const double saturation = range / max, value = max;
    const double sector = hue * 6.0;
    const int index = static_cast<int>(sector) % 6;
    const double fraction = sector - std::floor(sector);
    const double p = value * (1 - saturation), q = value * (1 - saturation * fraction),
                 t = value * (1 - saturation * (1 - fraction));
    const std::array<std::array<double, 3>, 6> rgb{{{value, t, p}, {q, value, p}, {p, value, t},
                                                     {p, q, value}, {t, p, value}, {value, p, q}}};
    red[i] = clamp255(static_cast<float>(rgb[index][0] * 255));
    green[i] = clamp255(static_cast<float>(rgb[index][1] * 255));
    blue[i] = clamp255(static_cast<float>(rgb[index][2] * 255));
  }
}

}  // namespace

data::CropBox ssd_random_crop(Objects& objects, int width, int height, int attempts, data::Rng& rng) {
  constexpr double kNoConstraint = -std::numeric_limits<double>::infinity();
  // Mode 0 keeps the image; the others are the minimum IoU (the maximum is +inf in every mode).
  static const std::array<double, 6> kMinIou{0.1, 0.3, 0.5, 0.7, 0.9, kNoConstraint};
  const size_t count = objects.labels.size();
  while (true) {
    const uint64_t mode = rng.below(kMinIou.size() + 1);
    if (mode == 0) return {0, 0, width, height};
    const double min_iou = kMinIou[mode - 1];
    for (int attempt = 0; attempt < attempts; ++attempt) {
      const double w = rng.uniform(0.3, 1.0), h = rng.uniform(0.3, 1.0);
      if (w / h < 0.5 || w / h > 2) continue;
      const double left = rng.uniform(0, 1.0 - w), top = rng.uniform(0, 1.0 - h);
      const double right = left + w, bottom = top + h;
      const std::array<float, 4> crop{static_cast<float>(left), static_cast<float>(top), static_cast<float>(right),
                                      static_cast<float>(bottom)};
      bool all_overlap = true;
      for (size_t i = 0; i < count && all_overlap; ++i) all_overlap = iou(&objects.boxes[4 * i], crop) > min_iou;
      if (!all_overlap) continue;
      Objects kept;
      for (size_t i = 0; i < count; ++i) {
        const float* box = &objects.boxes[4 * i];
        const float center_x = 0.5f * (box[0] + box[2]), center_y = 0.5f * (box[1] + box[3]);
        if (!(center_x > crop[0] && center_x < crop[2] && center_y > crop[1] && center_y < crop[3])) continue;
        // Clip to the crop, then express relative to it (the reference divides by the drawn w and h).
        const float l = std::max(box[0], crop[0]), t = std::max(box[1], crop[1]);
        const float r = std::min(box[2], crop[2]), b = std::min(box[3], crop[3]);
        for (double value : {(l - left) / w, (t - top) / h, (r - left) / w, (b - top) / h})
          kept.boxes.push_back(static_cast<float>(value));
        kept.labels.push_back(objects.labels[i]);
      }
      if (kept.labels.empty()) continue;
      objects = std::move(kept);
      const int x0 = static_cast<int>(left * width), y0 = static_cast<int>(top * height);
      const int x1 = static_cast<int>(right * width), y1 = static_cast<int>(bottom * height);
      return {x0, y0, std::max(x1 - x0, 1), std::max(y1 - y0, 1)};
    }
  }
}

void flip_boxes(std::vector<float>& boxes) {
  for (size_t i = 0; i + 3 < boxes.size(); i += 4) {
    const float left = boxes[i];
    boxes[i] = 1.0f - boxes[i + 2];
    boxes[i + 2] = 1.0f - left;
  }
}

void color_jitter(float* chw, int64_t pixels, const ColorJitterOptions& options, data::Rng& rng) {
  std::array<int, 4> order{0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  for (int step : order) {
    switch (step) {
      case 0:
        blend_with(chw, pixels, rng.uniform(1 - options.brightness, 1 + options.brightness), nullptr, 0.0f);
        break;
      case 1: {  // towards the mean grey level of the whole image
        const std::vector<float> gray = grayscale(chw, pixels);
        double sum = 0;
        for (float value : gray) sum += value;
        blend_with(chw, pixels, rng.uniform(1 - options.contrast, 1 + options.contrast), nullptr,
                   static_cast<float>(sum / static_cast<double>(pixels)));
        break;
      }
      case 2: {  // towards each pixel's own grey level
        const std::vector<float> gray = grayscale(chw, pixels);
        blend_with(chw, pixels, rng.uniform(1 - options.saturation, 1 + options.saturation), gray.data(), 0.0f);
        break;
      }
      default:
        shift_hue(chw, pixels, rng.uniform(-options.hue, options.hue));
    }
  }
}

void normalize(float* chw, int64_t pixels, const data::Normalization& normalization) {
  for (int c = 0; c < 3; ++c) {
    const float scale = 1.0f / normalization.std[c], offset = -normalization.mean[c] * scale;
    float* plane = chw + c * pixels;
    for (int64_t i = 0; i < pixels; ++i) plane[i] = plane[i] * scale + offset;
  }
}

}  // namespace trainbench::detection
