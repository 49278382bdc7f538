// libFuzzer target: any bytes as a weights file torch.save wrote (util/torch_file.h), zip or legacy, and the same
// bytes as the data.pkl of a well-formed archive beside a storage "0" of 64 bytes, so that mutations reach the
// pickle's checks past the archive's CRCs. Every outcome must be tensors whose bytes fill their shapes, or an
// Error naming the file; never a crash, a read past a storage, a leak, or a call of a global outside the reader's
// allow-list. Seeds: fuzz/torch_file_seeds.py.
#include <cstdlib>

#include "fuzz_entry.h"
#include "util/error.h"
#include "util/torch_file.h"
#include "util/torch_format.h"

namespace {

void read_expecting_tensors_or_an_error(const std::string& path) {
  try {
    for (const trainbench::StoredTensor& tensor : trainbench::read_torch_state_dict(path)) {
      int64_t elements = 1;
      for (const int64_t dimension : tensor.shape) elements *= dimension;
      if (static_cast<int64_t>(tensor.bytes.size()) != elements * trainbench::element_size(tensor.dtype)) std::abort();
      trainbench::first_non_finite(tensor);
    }
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
  }
}

}  // namespace

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  read_expecting_tensors_or_an_error(trainbench::fuzz::write_scratch_file("weights.pt", data, size));
  const std::string archive = trainbench::stored_zip({{"archive/data.pkl", std::string(data, data + size)},
                                                      {"archive/data/0", std::string(64, '\x01')},
                                                      {"archive/version", "3\n"}});
  read_expecting_tensors_or_an_error(trainbench::fuzz::write_scratch_file(
      "archive.pt", reinterpret_cast<const uint8_t*>(archive.data()), archive.size()));
  return 0;
}
