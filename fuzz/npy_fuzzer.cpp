// libFuzzer target: any bytes as a .npy file (U-Net3D's prepared case_XXXXX_{x,y}.npy). Every outcome must be
// an array whose data matches its shape, or an Error naming the file; never a crash or an allocation the file
// does not back.
#include <cstdlib>

#include "fuzz_entry.h"
#include "medical/npy.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("case_x.npy", data, size);
  try {
    const trainbench::medical::NpyArray array = trainbench::medical::read_npy(path);
    const size_t held = array.type == trainbench::medical::NpyType::kFloat32 ? array.floats.size() : array.bytes.size();
    if (static_cast<int64_t>(held) != array.element_count()) std::abort();
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
  }
  return 0;
}
