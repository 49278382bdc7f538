// libFuzzer target: any bytes as a COCO results file (coco-eval --dt), read under pycocotools' loadRes rules.
// Every outcome must be detections or an Error naming the file, kept to one short line.
#include <cstdlib>
#include <string>

#include "coco/results.h"
#include "fuzz_entry.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  const std::string source = "dt.json";
  try {
    (void)trainbench::coco::parse_results(std::string(reinterpret_cast<const char*>(data), size), source);
  } catch (const trainbench::Error& error) {
    const std::string message = error.what();
    if (message.rfind(source, 0) != 0) std::abort();  // every error names the file
    if (message.size() > size + 4096) std::abort();   // a message quotes values briefly, never the whole input
  }
  return 0;
}
