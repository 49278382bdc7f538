#pragma once
// The MLPerf SSD reference's training augmentation (utils.py), on plain buffers:
//   SSDCropping -> RandomHorizontalFlip(0.5) -> Resize(size x size) -> ColorJitter(.125, .5, .5, .05)
//   -> ToTensor -> Normalize
// Boxes are (left, top, right, bottom) relative to the image and follow every geometric step.
#include <cstdint>
#include <vector>

#include "data/image_transforms.h"
#include "data/random.h"

namespace trainbench::detection {

// Boxes relative to the image, 4 floats each, with one label per box.
struct Objects {
  std::vector<float> boxes;
  std::vector<int64_t> labels;
};

// SSDCropping: draws one of 7 modes uniformly: keep the image, a crop whose IoU with every box exceeds 0.1,
// 0.3, 0.5, 0.7 or 0.9, or a crop with no IoU constraint. A crop's width and height are each U(0.3, 1) of the
// image with w/h in [0.5, 2], placed uniformly; boxes whose centre lies strictly inside are kept, clipped
// and re-expressed relative to the crop. A failed attempt (aspect ratio, IoU, no centre inside) is retried
// up to `attempts` times (the rules' max_samples: 1 or 50), then a new mode is drawn. Updates `objects` and
// returns the crop in pixels: int(left * width), ... as the reference cuts it.
data::CropBox ssd_random_crop(Objects& objects, int width, int height, int attempts, data::Rng& rng);

// Mirrors the boxes left-right: (l, t, r, b) -> (1 - r, t, 1 - l, b).
void flip_boxes(std::vector<float>& boxes);

// torchvision's ColorJitter: brightness, contrast, saturation and hue factors drawn uniformly from
// [1 - x, 1 + x] (hue: [-x, x]) and applied in a random order. Works on a CHW float image with values on the
// 0..255 scale (clamped after each step) rather than on 8-bit PIL pixels, so values are not rounded in between.
struct ColorJitterOptions {
  double brightness = 0.125;
  double contrast = 0.5;
  double saturation = 0.5;
  double hue = 0.05;
};
void color_jitter(float* chw, int64_t pixels, const ColorJitterOptions& options, data::Rng& rng);

// (value - mean) / std per channel, in place on a CHW float image.
void normalize(float* chw, int64_t pixels, const data::Normalization& normalization);

}  // namespace trainbench::detection
