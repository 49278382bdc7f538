#pragma once
// Generated KiTS19-layout data for the U-Net3D mini and tiny presets: case_00000 .. case_00209, each with
// imaging.nii.gz (int16 Hounsfield units) and segmentation.nii.gz (uint8: 0 background, 1 kidney, 2 tumour),
// at a per-case voxel spacing around KiTS19's, so `data prepare` really resamples. A case is an abdomen
// phantom: air, an elliptic body of soft tissue, a spine of bone, two kidneys (contrast-enhanced ellipsoids of
// random size and position) and, in most cases, a tumour: a sphere of lower density in or on one kidney,
// which may bulge out of it as real renal tumours do. Gaussian noise makes the intensities CT-like.
#include <array>
#include <cstdint>
#include <string>

namespace trainbench::medical {

struct PhantomOptions {
  std::array<double, 3> extent_mm = {150, 115, 115};  // the field of view along the three axes
  double noise_hu = 20;                               // standard deviation of the added noise
  double tumour_probability = 0.8;
  uint64_t seed = 1;
};

// Writes out_dir/case_XXXXX/{imaging,segmentation}.nii.gz for ids 0..209.
void make_kits19_phantoms(const std::string& out_dir, const PhantomOptions& options);

}  // namespace trainbench::medical
