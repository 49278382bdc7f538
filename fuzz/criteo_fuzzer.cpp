// libFuzzer target: any bytes as a Criteo day file, plain or gzip (zlib detects which), read line by line.
// Every outcome must be rows or an Error naming file:line; never a crash, a hang or an out-of-bounds read.
#include <cstdlib>

#include "data/criteo.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string path = trainbench::fuzz::write_scratch_file("day_0", data, size);
  try {
    trainbench::data::CriteoDayReader reader(path);
    trainbench::data::CriteoRow row;
    int64_t rows = 0;
    while (reader.next(row)) {
      if (row.label != 0 && row.label != 1) std::abort();
      ++rows;
    }
    if (rows != reader.line_number()) std::abort();
  } catch (const trainbench::Error& error) {
    if (std::string(error.what()).rfind(path + ":", 0) != 0) std::abort();  // every error names the file
  }
  return 0;
}
