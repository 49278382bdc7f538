#pragma once
// ImageNet preprocessing with torchvision semantics, writing straight into a float CHW tensor buffer:
//   train: RandomResizedCrop(size, scale, ratio) -> RandomHorizontalFlip(0.5) -> ToTensor -> Normalize
//   eval:  Resize(resize_size) (shorter side) -> CenterCrop(crop_size) -> ToTensor -> Normalize
// Crop, resize, flip and normalisation happen in one pass over the source pixels. Resizing is bilinear
// the way PIL (torchvision's default backend) does it: a triangle filter widened when downscaling, so
// shrinking antialiases instead of skipping pixels; when enlarging it is plain bilinear interpolation.
#include <array>

#include "data/image_decode.h"
#include "data/random.h"

namespace trainbench::data {

// Per-channel mean and standard deviation on the 0..255 pixel scale; output = (pixel - mean) / std.
struct Normalization {
  std::array<float, 3> mean{0.485f * 255, 0.456f * 255, 0.406f * 255};
  std::array<float, 3> std{0.229f * 255, 0.224f * 255, 0.225f * 255};
};

// A rectangle of source pixels.
struct CropBox {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

struct RandomResizedCropOptions {
  double min_scale = 0.08;  // fraction of the image area
  double max_scale = 1.0;
  double min_ratio = 3.0 / 4.0;  // width / height
  double max_ratio = 4.0 / 3.0;
};

// torchvision RandomResizedCrop.get_params: up to 10 random (area, log-uniform aspect) draws, then the
// largest centred crop whose aspect ratio is within range.
CropBox random_resized_crop_box(int width, int height, Rng& rng, const RandomResizedCropOptions& options = {});

// Resamples `box` of `image` to out_size x out_size (mirrored left-right when `flip`), normalises, and
// writes 3 * out_size * out_size floats, channel-major (CHW), to `out`.
void crop_resize_normalize(const Image& image, const CropBox& box, int out_size, bool flip,
                           const Normalization& normalization, float* out);

// Train transform: random resized crop, then a horizontal flip with probability 0.5 (drawn in that order).
void random_resized_crop_flip(const Image& image, int out_size, Rng& rng, const Normalization& normalization,
                              float* out, const RandomResizedCropOptions& options = {});

// Eval transform: scale so the shorter side is `resize_size`, take the centred crop_size square.
void resize_center_crop(const Image& image, int resize_size, int crop_size, const Normalization& normalization,
                        float* out);

// Resizes the whole image to out_width x out_height (torchvision Resize((h, w)) on a PIL image), mirrored
// left-right when `flip`, normalises, and writes 3 * out_width * out_height floats, CHW, to `out`.
void resize_normalize(const Image& image, int out_width, int out_height, bool flip,
                      const Normalization& normalization, float* out);

}  // namespace trainbench::data
