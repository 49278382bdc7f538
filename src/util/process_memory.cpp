#include "util/process_memory.h"

#include <fstream>
#include <string>

namespace trainbench {

namespace {

// A "Key:   1234 kB" line of /proc/self/status, in bytes.
int64_t status_bytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  return 0;
}

}  // namespace

int64_t resident_bytes() { return status_bytes("VmRSS"); }
int64_t peak_resident_bytes() { return status_bytes("VmHWM"); }
void reset_peak_resident() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace trainbench
