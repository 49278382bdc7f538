// probe compute's LibTorch-free half: the FLOP counts every figure rests on, the peaks summary, which dtypes a
// CPU times, and reading a probe's JSON copy back for `bench --peak`.

#include <gtest/gtest.h>

#include "data/test_files.h"
#include "probes/compute_probe.h"
#include "support/error_message.h"
#include "util/atomic_file.h"

namespace trainbench::probes {
namespace {

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

TEST(ComputeReportTest, ReadingAPeakNamesTheFileAndWhatIsMissing) {
  const data::testing::TempDir temp;
  const std::string json_path = temp / "compute.json";
  EXPECT_NE(error_message([&] { read_measured_peak(json_path); }).find(json_path + ": cannot open for reading"), std::string::npos);
  write_file_atomically(json_path, "not json");
  EXPECT_NE(error_message([&] { read_measured_peak(json_path); }).find(json_path + ": not JSON"), std::string::npos);
  write_file_atomically(json_path, R"({"probe": "storage", "dataset_read": {}})");
  EXPECT_EQ(error_message([&] { read_measured_peak(json_path); }),
            json_path + ": is not the --json copy of `trainbench probe compute` (expected \"probe\": \"compute\" and \"peaks\")");
  write_file_atomically(json_path, R"({"probe": "compute", "peaks": {"fp32": {"flops_per_second": 1.5e11}}})");
  EXPECT_EQ(read_measured_peak(json_path, "fp32"), 1.5e11);
  EXPECT_EQ(error_message([&] { read_measured_peak(json_path, "bf16"); }),
            json_path + ": has no measured bf16 peak (peaks.bf16.flops_per_second)");
}

}  // namespace
}  // namespace trainbench::probes
