#pragma once
// The U-Net3D reference's training patches and evaluation windows, on plain buffers (C order, one channel).
// Training (data_loading/pytorch_loader.py): RandBalancedCrop (with probability `oversampling` a crop around
// one of the two largest connected components of a random present foreground class, else a uniform crop),
// RandFlip (each axis with probability 1/3), RandomBrightnessAugmentation (with probability 0.1, x(1 + f),
// f ~ U(0.7, 1.3): the reference's factor, kept as it is) and GaussianNoise (with probability 0.1, sigma ~
// U(0, 0.1)). Evaluation (runtime/inference.py): the crop/pad plan of sliding_window_inference and its
// Gaussian importance patch.
#include <array>
#include <cstdint>
#include <vector>

#include "data/random.h"
#include "medical/kits19.h"

namespace trainbench::medical {

// A standard normal draw (Box-Muller) from the project's portable generator.
double standard_normal(data::Rng& rng);

// [low, high) per axis.
struct Box {
  std::array<int64_t, 3> low{}, high{};
  int64_t volume() const { return (high[0] - low[0]) * (high[1] - low[1]) * (high[2] - low[2]); }
};

// For each foreground class present in a label volume: the bounding boxes of its connected components
// (6-connectivity, scipy.ndimage.label's default), the two largest by box volume, largest last. Computed
// once per case: the reference recomputes the same thing for every foreground crop.
struct ForegroundBoxes {
  std::vector<uint8_t> classes;            // present classes, ascending
  std::vector<std::vector<Box>> largest;   // per class: at most two boxes
};
ForegroundBoxes foreground_boxes(const std::vector<uint8_t>& label, const Shape3& shape);

struct PatchOptions {
  Shape3 patch{128, 128, 128};
  double oversampling = 0.4;
};

// One augmented training patch of a case (shape >= patch on every axis) into image_out / label_out
// (patch-sized, C order).
void sample_training_patch(const float* image, const uint8_t* label, const Shape3& shape, const ForegroundBoxes& boxes,
                           const PatchOptions& options, data::Rng& rng, float* image_out, uint8_t* label_out);

// scipy.signal.gaussian(n, std) per axis, std = 0.125 * roi; their outer product, its cube root, divided by
// its maximum (C order over roi), as gaussian_kernel computes it in float64, rounded to float.
std::vector<float> gaussian_importance(const Shape3& roi);

// sliding_window_inference's stride along an axis of the window: roi * (1 - overlap), truncated to voxels.
int64_t window_stride(int64_t roi, double overlap);

// sliding_window_inference's geometry for a volume: strides roi * (1 - overlap); per axis, `shape % stride`
// cropped off (centred) when under stride / 2; then constant padding, split evenly, to a multiple of the stride
// and at least the roi; windows at every stride.
struct WindowPlan {
  Shape3 stride{}, crop_low{}, cropped{}, pad_low{}, padded{};
  std::vector<std::array<int64_t, 3>> origins;  // in the padded volume
};
WindowPlan plan_sliding_windows(const Shape3& shape, const Shape3& roi, double overlap);

}  // namespace trainbench::medical
