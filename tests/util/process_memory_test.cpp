// The resident-memory readings behind `bench --memory`: a buffer written after a reset shows in the
// high-water, and the reset brings the high-water back to what is resident.
#include "util/process_memory.h"

#include <cstring>
#include <memory>

#include <gtest/gtest.h>

namespace trainbench {
namespace {

TEST(ProcessMemory, TheHighWaterFollowsATouchedBufferAndResetsToTheResidentSize) {
  ASSERT_GT(resident_bytes(), 0) << "no VmRSS in /proc/self/status";
  reset_peak_resident();
  const int64_t before = peak_resident_bytes();
  EXPECT_LE(before - resident_bytes(), 1 << 20);  // the reset took the high-water down to what is resident
  constexpr size_t kBuffer = 64 << 20;
  {
    const auto buffer = std::make_unique<char[]>(kBuffer);
    std::memset(buffer.get(), 1, kBuffer);  // resident only once written
    EXPECT_GE(peak_resident_bytes() - before, static_cast<int64_t>(kBuffer) * 9 / 10);
  }
  EXPECT_GE(peak_resident_bytes() - before, static_cast<int64_t>(kBuffer) * 9 / 10);  // a high-water stays up
}

}  // namespace
}  // namespace trainbench
