// probe compute timed for real: a tiny CPU run gives positive numbers for every row, and its JSON copy is
// what `bench --peak` reads.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "probes/compute_probe.h"
#include "probes/environment.h"
#include "util/atomic_file.h"

namespace trainbench::probes {
namespace {


TEST(ComputeProbeRun, TinyCpuRunMeasuresPositiveFlopsAndItsJsonFeedsBenchPeak) {
  const data::testing::TempDir temp;
  const std::string json_path = temp / "compute.json";
  ComputeProbeOptions options;
  options.device = "cpu";
  options.threads = 1;
  options.seconds = 0.02;
  options.gemm_sizes = {16, 32};
  options.conv_shapes = {{1, 4, 8, 8, 4, 3, 1, 1}};
  std::ostringstream printed;
  const ComputeProbeResult result = run_compute_probe(options, printed);

  const bool native_bf16 = !cpu_bf16_skip_reason(read_cpuinfo()).has_value();
  ASSERT_EQ(result.rows.size(), native_bf16 ? 6u : 3u) << printed.str();
  for (const auto& row : result.rows) {
    EXPECT_GT(row.seconds_per_call, 0) << row.shape;
    EXPECT_GT(row.flops_per_second(), 0) << row.shape;
    EXPECT_GE(row.repetitions, 3);
    EXPECT_GE(row.calls_per_repetition, 1);
  }
  EXPECT_EQ(result.rows[1].flops_per_call, gemm_flops(32, 32, 32));
  EXPECT_EQ(result.rows[2].flops_per_call, conv_flops(options.conv_shapes[0]));
  EXPECT_EQ(result.device, "cpu");
  EXPECT_EQ(result.threads, 1);
  const auto skipped_bf16 = std::any_of(result.skipped.begin(), result.skipped.end(), [](const SkippedDtype& s) { return s.dtype == "bf16"; });
  EXPECT_EQ(skipped_bf16, !native_bf16);
  EXPECT_NE(printed.str().find("measured peak per dtype"), std::string::npos) << printed.str();
  EXPECT_NE(printed.str().find("gemm  fp32  32x32x32"), std::string::npos) << printed.str();

  const auto report = to_json(options, result);
  EXPECT_EQ(report["rows"].size(), result.rows.size());
  EXPECT_EQ(report["environment"]["device"], "cpu");
  write_file_atomically(json_path, report.dump());
  EXPECT_EQ(read_measured_peak(json_path, "fp32"), result.peaks().front().flops_per_second);
}

}  // namespace
}  // namespace trainbench::probes
