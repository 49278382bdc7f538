// /proc/cpuinfo parsing: the CPU model in the JSON copies and the flags that decide whether bf16 is timed.
#include <gtest/gtest.h>

#include "probes/environment.h"

namespace trainbench::probes {
namespace {

const char* const kCpuinfo =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "model name\t: AMD EPYC 7B13\n"
    "cpu MHz\t\t: 2450.000\n"
    "flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16x\n"
    "\n"
    "processor\t: 1\n"
    "model name\t: AMD EPYC 7B13\n";

TEST(Environment, ReadsFieldsOfTheFirstProcessor) {
  EXPECT_EQ(cpuinfo_field(kCpuinfo, "model name"), "AMD EPYC 7B13");
  EXPECT_EQ(cpuinfo_field(kCpuinfo, "cpu MHz"), "2450.000");
  EXPECT_EQ(cpuinfo_field(kCpuinfo, "bogomips"), "");
  EXPECT_EQ(cpuinfo_field("", "model name"), "");
}

TEST(Environment, MatchesCpuFlagsAsWholeWords) {
  EXPECT_TRUE(cpuinfo_has_flag(kCpuinfo, "avx2"));
  EXPECT_TRUE(cpuinfo_has_flag(kCpuinfo, "fpu"));
  EXPECT_FALSE(cpuinfo_has_flag(kCpuinfo, "avx512_bf16"));  // only "avx512_bf16x" is listed
  EXPECT_FALSE(cpuinfo_has_flag(kCpuinfo, "avx"));
}

TEST(Environment, DescribesThisHost) {
  const auto environment = host_environment();
  for (const char* key : {"hostname", "kernel", "cpu_model", "logical_cpus", "trainbench_version", "libtorch_version"})
    EXPECT_TRUE(environment.contains(key)) << key;
  EXPECT_GE(environment["logical_cpus"].get<int>(), 1);
}

}  // namespace
}  // namespace trainbench::probes
