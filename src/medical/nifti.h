#pragma once
// NIfTI volumes through Debian's niftilib (libnifti2, which reads NIfTI-1 and NIfTI-2, .nii and .nii.gz,
// either byte order). Voxels come back as float in nibabel's array layout: shape (nx, ny, nz, ...) as
// nibabel's get_fdata() gives it, stored in C order (last axis fastest), with scl_slope/scl_inter applied as
// nibabel applies them. KiTS19's imaging.nii.gz is int16 Hounsfield units, segmentation.nii.gz uint8 labels.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::medical {

struct NiftiVolume {
  std::vector<int64_t> shape;   // nibabel's shape: dim[1..ndim]
  std::vector<double> spacing;  // pixdim[1..ndim] as stored (nibabel's zooms), 0 or NaN included
  std::vector<float> voxels;    // C order over `shape`, scaled
  int datatype = 0;             // NIFTI_TYPE_* as stored
  int version = 1;              // 1 or 2
  bool big_endian = false;      // byte order on disk

  int64_t voxel_count() const;
};

// The largest volume read_nifti reads: 2^31 voxels (KiTS19's largest case has 2.8e8).
constexpr int64_t kMaxNiftiVoxels = int64_t{1} << 31;

// Throws Error naming `path` when it is missing, not NIfTI, truncated, larger than kMaxNiftiVoxels or of an
// unsupported datatype.
NiftiVolume read_nifti(const std::string& path);

// How write_nifti stores voxels (values are rounded to the type; KiTS19 uses both).
enum class NiftiStorage { kInt16, kUint8 };

// Writes a 3-D NIfTI-1 volume (.nii or .nii.gz by the name) with pixdim[1..3] = spacing; `voxels` in the
// layout read_nifti returns.
void write_nifti(const std::string& path, const std::array<int64_t, 3>& shape, const std::array<double, 3>& spacing,
                 const std::vector<float>& voxels, NiftiStorage storage);

}  // namespace trainbench::medical
