#pragma once
// NumPy .npy files (format versions 1.0 to 3.0, C order), as the U-Net3D reference stores its preprocessed
// volumes (case_XXXXX_x.npy float32, case_XXXXX_y.npy uint8, shape 1 x D x H x W). Written by hand: Debian
// has no C++ .npy library (libcnpy is not packaged), and the format is a short text header before raw data.
#include <cstdint>
#include <string>
#include <vector>

namespace trainbench::medical {

enum class NpyType { kFloat32, kUint8 };

// The most elements read_npy accepts: 16 GiB of float32, far above a KiTS19 case (about 1e8 voxels).
constexpr int64_t kMaxNpyElements = int64_t{1} << 32;

struct NpyArray {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<float> floats;    // when type is kFloat32
  std::vector<uint8_t> bytes;   // when type is kUint8

  int64_t element_count() const;
};

// Throws Error naming `path` for a missing or truncated file, a bad header, Fortran order, or a dtype other
// than little-endian float32 ('<f4') or uint8 ('|u1'), and a shape that is not non-negative integers or holds
// more than kMaxNpyElements.
NpyArray read_npy(const std::string& path);
// read_npy's checks of the header alone: the type and shape, no data read (floats and bytes stay empty).
NpyArray read_npy_header(const std::string& path);

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& values);
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<uint8_t>& values);

}  // namespace trainbench::medical
