#pragma once
// KiTS19 as the U-Net3D reference uses it (mlcommons/training image_segmentation/pytorch): the one-time
// preprocessing of preprocess_dataset.py (resample to spacing 1.6 x 1.2 x 1.2, trilinear with align_corners
// for the image and nearest for the labels, clip to [-79, 304], normalise (x - 101) / 76.9, edge-pad to at
// least the patch), its output files case_XXXXX_{x,y}.npy, and the fixed split of evaluation_cases.txt.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "medical/npy.h"

namespace trainbench::medical {

using Shape3 = std::array<int64_t, 3>;

inline int64_t voxel_count(const Shape3& shape) { return shape[0] * shape[1] * shape[2]; }

constexpr std::array<double, 3> kTargetSpacing = {1.6, 1.2, 1.2};
// A prepared case is written as .npy and read back by read_npy, so resampling may not make it larger.
constexpr int64_t kMaxResampledVoxels = kMaxNpyElements;
constexpr float kClipMin = -79.0f, kClipMax = 304.0f, kNormMean = 101.0f, kNormStd = 76.9f;
constexpr int kCaseIdLimit = 210;  // the reference preprocesses cases 0..209 (the ones with labels)

// The 42 evaluation cases of the reference's evaluation_cases.txt ("00000", "00003", ..., "00207"); the other
// 168 of cases 0..209 are the training set.
const std::vector<std::string>& evaluation_case_ids();

// interpolate(size=..., mode="trilinear", align_corners=True) on one channel, as PyTorch computes it (float).
std::vector<float> resample_trilinear(const std::vector<float>& volume, const Shape3& from, const Shape3& to);
// interpolate(size=..., mode="nearest"): source index floor(i * in / out) in float, as PyTorch computes it.
std::vector<uint8_t> resample_nearest(const std::vector<uint8_t>& volume, const Shape3& from, const Shape3& to);

// An Error naming `path`, the first offending voxel's (d, h, w) in `shape` (C order) and its value, for a label
// other than 0 (background), 1 (kidney) or 2 (tumour), or an intensity that is NaN or infinite: the reference
// fails on the first (a one-hot class that does not exist) and diverges on the second.
void check_labels(const std::vector<float>& labels, const Shape3& shape, const std::string& path);
void check_labels(const std::vector<uint8_t>& labels, const Shape3& shape, const std::string& path);
void check_intensities(const std::vector<float>& image, const Shape3& shape, const std::string& path);

// The reference's new shape: (spacing / target * shape) truncated to integers.
Shape3 resampled_shape(const Shape3& shape, const std::array<double, 3>& spacing);

struct PreparedCase {
  Shape3 shape{};
  std::vector<float> image;   // normalised intensities, C order
  std::vector<uint8_t> label; // 0 background, 1 kidney, 2 tumour
};

// preprocess_dataset.py for one case: `spacing` is the image header's pixdim[1..3] (as float32, as nibabel
// reads it); resampling happens only when it differs from the target spacing, as in the reference. An Error
// when a spacing is not positive and finite, or would resample to more than kMaxResampledVoxels.
PreparedCase preprocess_case(const std::vector<float>& image, const std::vector<float>& label, const Shape3& shape,
                             const std::array<double, 3>& spacing, const Shape3& min_shape);

// Reads in_dir/case_XXXXX/{imaging,segmentation}.nii.gz for ids below 210 and writes out_dir/case_XXXXX_x.npy
// (float32, 1 x D x H x W) and _y.npy (uint8). Returns the number of cases written; an Error when in_dir has
// none, or a case is unreadable or fails check_labels / check_intensities.
int prepare_kits19(const std::string& in_dir, const std::string& out_dir, const Shape3& min_shape);

// The files prepare_kits19 wrote in `prepared_dir` against the reference's checksum.json
// (image_segmentation/pytorch/checksum.json: the md5 of every case_XXXXX_{x,y}.npy its preprocess_dataset.py
// writes, which its verify_dataset asserts). An Error naming the file when it is not a JSON object of names
// to md5 strings.
struct ChecksumComparison {
  int matching = 0;
  std::vector<std::string> differing;  // prepared here with another md5
  std::vector<std::string> missing;    // listed, not prepared here
  std::vector<std::string> unlisted;   // prepared here, not listed
};
ChecksumComparison compare_with_checksums(const std::string& prepared_dir, const std::string& checksum_path);

struct PreparedFiles {
  std::string id;  // "00042"
  std::string image, label;
};
struct Kits19Split {
  std::vector<PreparedFiles> train, eval;
};
// The prepared cases in `dir`, split by evaluation_case_ids(). An Error naming `dir` when it holds no
// case_XXXXX_x.npy, or an image without its label.
Kits19Split split_prepared_cases(const std::string& dir);

}  // namespace trainbench::medical
