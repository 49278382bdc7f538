// probe compute: the FLOP counts every figure rests on, the peaks summary, the JSON copy that `bench --peak`
// reads back, and a tiny real run on the CPU.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "probes/compute_probe.h"
#include "probes/environment.h"
#include "support/error_message.h"
#include "util/atomic_file.h"

namespace trainbench::probes {
namespace {

namespace fs = std::filesystem;
using trainbench::testing::error_message;

TEST(ComputeFlops, GemmCountsTwoFlopsPerMultiplyAdd) {
  EXPECT_EQ(gemm_flops(2, 3, 4), 48.0);
  EXPECT_EQ(gemm_flops(1024, 1024, 1024), 2147483648.0);
}

TEST(ComputeFlops, ConvCountsEveryOutputTimesItsDotProduct) {
  // ResNet-50 stage 1, 3x3 stride 1 pad 1 keeps 56x56: 2*N*K*C*R*S*P*Q.
  const ConvShape stage1{1, 64, 56, 56, 64, 3, 1, 1};
  EXPECT_EQ(stage1.out_height(), 56);
  EXPECT_EQ(conv_flops(stage1), 2.0 * 64 * 64 * 3 * 3 * 56 * 56);
  // The stem: 7x7 stride 2 pad 3 on 224 px gives 112x112.
  const ConvShape stem{2, 3, 224, 224, 64, 7, 2, 3};
  EXPECT_EQ(stem.out_width(), 112);
  EXPECT_EQ(conv_flops(stem), 2.0 * 2 * 64 * 3 * 7 * 7 * 112 * 112);
  // A 1x1 stride-2 projection: (56 - 1) / 2 + 1 = 28.
  EXPECT_EQ((ConvShape{1, 256, 56, 56, 512, 1, 2, 0}.out_height()), 28);
  EXPECT_EQ(stage1.describe(), "N1 C64 56x56 -> K64 3x3/1");
}

TEST(ComputePeaks, BestRowPerDtypeAndBestOfEachOp) {
  ComputeProbeResult result;
  result.rows = {{"gemm", "fp32", "a", 100, 1.0, 1, 3}, {"conv", "fp32", "b", 300, 1.0, 1, 3},
                 {"gemm", "fp32", "c", 200, 1.0, 1, 3}, {"gemm", "bf16", "d", 50, 0.5, 1, 3}};
  const auto peaks = result.peaks();
  ASSERT_EQ(peaks.size(), 2u);
  EXPECT_EQ(peaks[0].dtype, "fp32");
  EXPECT_EQ(peaks[0].flops_per_second, 300);
  EXPECT_EQ(peaks[0].op, "conv");
  EXPECT_EQ(peaks[0].shape, "b");
  EXPECT_EQ(peaks[0].gemm_flops_per_second, 200);
  EXPECT_EQ(peaks[0].conv_flops_per_second, 300);
  EXPECT_EQ(peaks[1].dtype, "bf16");
  EXPECT_EQ(peaks[1].flops_per_second, 100);
  EXPECT_EQ(peaks[1].conv_flops_per_second, 0);
}

TEST(ComputeDtypes, Bf16OnTheCpuOnlyWithNativeInstructions) {
  EXPECT_TRUE(cpu_bf16_skip_reason("flags\t: fpu avx2 fma\n").has_value());
  EXPECT_NE(cpu_bf16_skip_reason("flags\t: avx2\n")->find("neither avx512_bf16 nor amx_bf16"), std::string::npos);
  EXPECT_FALSE(cpu_bf16_skip_reason("flags\t: avx2 avx512_bf16\n").has_value());
  EXPECT_FALSE(cpu_bf16_skip_reason("flags\t: amx_bf16 amx_tile\n").has_value());
}

TEST(ComputeFormat, PicksGigaOrTera) {
  EXPECT_EQ(format_flops(81.44e9), "81.4 GFLOP/s");
  EXPECT_EQ(format_flops(1.234e12), "1.23 TFLOP/s");
}

class ComputeProbeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    json_path_ = (fs::temp_directory_path() / ("trainbench_compute_" + std::to_string(::getpid()) + ".json")).string();
  }
  void TearDown() override { fs::remove(json_path_); }
  std::string json_path_;
};

TEST_F(ComputeProbeRun, TinyCpuRunMeasuresPositiveFlopsAndItsJsonFeedsBenchPeak) {
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
  write_file_atomically(json_path_, report.dump());
  EXPECT_EQ(read_measured_peak(json_path_, "fp32"), result.peaks().front().flops_per_second);
}

TEST_F(ComputeProbeRun, ReadingAPeakNamesTheFileAndWhatIsMissing) {
  EXPECT_NE(error_message([&] { read_measured_peak(json_path_); }).find(json_path_ + ": cannot open for reading"), std::string::npos);
  write_file_atomically(json_path_, "not json");
  EXPECT_NE(error_message([&] { read_measured_peak(json_path_); }).find(json_path_ + ": not JSON"), std::string::npos);
  write_file_atomically(json_path_, R"({"probe": "storage", "dataset_read": {}})");
  EXPECT_EQ(error_message([&] { read_measured_peak(json_path_); }),
            json_path_ + ": is not the --json copy of `trainbench probe compute` (expected \"probe\": \"compute\" and \"peaks\")");
  write_file_atomically(json_path_, R"({"probe": "compute", "peaks": {"fp32": {"flops_per_second": 1.5e11}}})");
  EXPECT_EQ(read_measured_peak(json_path_, "fp32"), 1.5e11);
  EXPECT_EQ(error_message([&] { read_measured_peak(json_path_, "bf16"); }),
            json_path_ + ": has no measured bf16 peak (peaks.bf16.flops_per_second)");
}

}  // namespace
}  // namespace trainbench::probes
