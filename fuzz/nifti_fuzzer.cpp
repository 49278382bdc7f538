// libFuzzer target: any bytes as a NIfTI file (KiTS19's imaging.nii / segmentation.nii, uncompressed here so
// that the header is what varies), read by niftilib and then checked as preprocessing checks its spacing.
// Every outcome must be a volume whose voxels match its shape, or an Error naming the file.
#include <array>
#include <cstdlib>

#include "fuzz_entry.h"
#include "medical/kits19.h"
#include "medical/nifti.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("imaging.nii", data, size);
  try {
    const trainbench::medical::NiftiVolume volume = trainbench::medical::read_nifti(path);
    if (static_cast<int64_t>(volume.voxels.size()) != volume.voxel_count()) std::abort();
    if (volume.spacing.size() != volume.shape.size()) std::abort();
    if (volume.shape.size() == 3 && volume.voxel_count() <= 4096) {
      const trainbench::medical::Shape3 shape{volume.shape[0], volume.shape[1], volume.shape[2]};
      const std::array<double, 3> spacing{volume.spacing[0], volume.spacing[1], volume.spacing[2]};
      try {
        // Small volumes only: a legal spacing may still resample to a large (bounded) one.
        if (spacing[0] * spacing[1] * spacing[2] < 100)
          (void)trainbench::medical::preprocess_case(volume.voxels, volume.voxels, shape, spacing, {1, 1, 1});
      } catch (const trainbench::Error& error) {
        if (std::string(error.what()).rfind("preprocess:", 0) != 0) std::abort();
      }
    }
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
  }
  return 0;
}
