// libFuzzer target: any bytes as a pickle of numpy arrays (Mask R-CNN's MSRA R-50.pkl). Every outcome must be
// arrays whose values fill their shapes, or an Error naming the file; never a crash, a leak, a call of another
// global, or an allocation the file does not back.
#include <cstdlib>

#include "fuzz_entry.h"
#include "util/error.h"
#include "util/numpy_pickle.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("R-50.pkl", data, size);
  try {
    for (const auto& [name, array] : trainbench::read_pickled_arrays(path))
      if (static_cast<int64_t>(array.values.size()) != array.element_count()) std::abort();
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
  }
  return 0;
}
