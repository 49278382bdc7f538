#include "predict/measurements.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "util/error.h"

namespace trainbench::predict {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(BenchOutput, ReadsTheTrainingLine) {
  const std::string output =
      "resnet mini:\n"
      "training          1234.5 img/s  (batch 128 over 2 rank(s), 32 px, cpu, 2 threads/rank, median of 20 steps: "
      "0.10369 s/step, 12.3 GFLOP/s)\n"
      "data pipeline   skipped (no dataset: pass --data)\n";
  const auto measurement = parse_bench_output(output, "resnet", "mini");
  ASSERT_TRUE(measurement);
  EXPECT_DOUBLE_EQ(measurement->samples_per_second, 1234.5);
  EXPECT_EQ(measurement->sample_unit, "img");
  EXPECT_DOUBLE_EQ(measurement->global_batch, 128);
  EXPECT_EQ(measurement->ranks, 2);
  EXPECT_EQ(measurement->steps, 20);
  EXPECT_DOUBLE_EQ(measurement->step_seconds, 0.10369);
  EXPECT_FALSE(parse_bench_output("nothing here", "resnet", "mini"));
}

TEST(BenchJson, IsAOneNodeCalibration) {
  const auto measurement = parse_bench_output(
      "training 800.0 seq/s  (batch 64 over 2 rank(s), x, cpu, 1 threads/rank, median of 5 steps: 0.08 s/step)", "bert",
      "mini");
  const std::string path = write_temp("predict_bench.json", to_json(*measurement).dump());
  const Calibration calibration = calibration_from_bench_json(path);
  EXPECT_EQ(calibration.benchmark, "bert");
  EXPECT_EQ(calibration.devices_per_node, 2);
  EXPECT_DOUBLE_EQ(calibration.per_device_batch(), 32);
  EXPECT_DOUBLE_EQ(calibration.samples_per_second_per_device, 64 / 0.08 / 2);
  EXPECT_FALSE(calibration.units_to_converge);
}

TEST(BenchJson, NamesTheMissingField) {
  const std::string path = write_temp("predict_bench_bad.json", R"({"benchmark": "bert", "ranks": 1})");
  try {
    calibration_from_bench_json(path);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("global_batch"), std::string::npos) << error.what();
  }
}

TEST(StepOverhead, FromTwoBatchesOnTheLine) {
  // 0.05 s at batch 10 per device and 0.14 s at batch 40: 3 ms a sample and 20 ms a step.
  Calibration small, large;
  small.global_batch = 10;
  small.samples_per_second_per_device = 10 / 0.05;
  large.global_batch = 40;
  large.samples_per_second_per_device = 40 / 0.14;
  EXPECT_NEAR(step_overhead_seconds(small, large), 0.02, 1e-12);
  EXPECT_THROW(step_overhead_seconds(small, small), Error);
}

TEST(CommJson, BandwidthAtTheLargestSizeLatencyFromTheSmallest) {
  // 4 ranks: 6 ring hops; 30 us for 8 bytes is 5 us a hop.
  const std::string path = write_temp("predict_comm.json", R"({"probe": "comm", "environment": {"ranks": 4}, "rows": [
      {"operation": "all_reduce", "bytes": 8, "time_us": 30, "busbw_GBps": 0.001},
      {"operation": "broadcast", "bytes": 8, "time_us": 1, "busbw_GBps": 9},
      {"operation": "all_reduce", "bytes": 268435456, "time_us": 20000, "busbw_GBps": 20.1}]})");
  const Link link = link_from_comm_json(path);
  EXPECT_DOUBLE_EQ(link.bytes_per_second, 20.1e9);
  EXPECT_NEAR(link.latency_seconds, 5e-6, 1e-15);
  const std::string alone = write_temp("predict_comm_one.json", R"({"environment": {"ranks": 1}, "rows": []})");
  EXPECT_THROW(link_from_comm_json(alone), Error);
}

TEST(StorageJson, FilesPerSecondAreSamplesPerSecond) {
  const std::string path = write_temp("predict_storage.json", R"({"probe": "storage", "dataset_read": {"files_per_second": 2500.5}})");
  EXPECT_DOUBLE_EQ(input_rate_from_storage_json(path), 2500.5);
  EXPECT_THROW(input_rate_from_storage_json(write_temp("predict_storage_bad.json", "{}")), Error);
}

}  // namespace
}  // namespace trainbench::predict
