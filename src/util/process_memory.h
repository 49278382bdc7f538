#pragma once
// The process's resident memory, read from Linux's /proc/self/status, for the memory figures of
// `trainbench bench`. Returns 0 where /proc is not there.
#include <cstdint>

namespace trainbench {

int64_t resident_bytes();       // VmRSS: resident now
int64_t peak_resident_bytes();  // VmHWM: the high-water since the process started or the last reset
// Sets the high-water to the current resident size (Linux >= 4.0: "5" into /proc/self/clear_refs).
void reset_peak_resident();

}  // namespace trainbench
