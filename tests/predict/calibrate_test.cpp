#include "predict/calibrate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "util/error.h"

namespace trainbench::predict {
namespace {

const std::string kNvidia = PREDICT_NVIDIA_DIR;

TEST(LinkSpeed, ReadsBytesBitsAndCounts) {
  EXPECT_DOUBLE_EQ(link_bytes_per_second("NVLINK 3.0, NVSWITCH 2.0 600GB/s"), 600e9);
  EXPECT_DOUBLE_EQ(link_bytes_per_second("Compute: 8x ConnectX-6 IB HDR 200Gb/Sec"), 8 * 25e9);
  EXPECT_DOUBLE_EQ(link_bytes_per_second("100 Gb/s Ethernet"), 12.5e9);
  EXPECT_EQ(link_bytes_per_second("NVLink"), 0);
}

TEST(LinkSpeed, SystemDescriptionGivesHalfTheNvlinkFigureAndTheComputeNics) {
  const nlohmann::json description = {
      {"accelerator_interconnect", "NVLINK 3.0, NVSWITCH 2.0 600GB/s"},
      {"host_networking",
       "Storage: 2x ConnectX-6 IB HDR 200Gb/sec, Management: 1x ConnectX-6 Ethernet 100Gb/Sec, Compute: 8x "
       "ConnectX-6 IB HDR 200Gb/Sec"}};
  Link intra, inter;
  std::vector<std::string> notes;
  links_from_system_description(description, intra, inter, notes);
  EXPECT_DOUBLE_EQ(intra.bytes_per_second, 300e9);
  EXPECT_DOUBLE_EQ(inter.bytes_per_second, 200e9);
  EXPECT_TRUE(notes.empty());
  links_from_system_description(nlohmann::json::object(), intra, inter, notes);
  EXPECT_EQ(notes.size(), 2u);
}

TEST(Calibrate, RefusesAPathWithoutLogs) {
  const auto folder = std::filesystem::temp_directory_path() / "predict_calibrate_empty";
  std::filesystem::create_directories(folder);
  const review::Ruleset ruleset = review::load_ruleset("1.1.0");
  try {
    calibrate_from_logs(folder.string(), ruleset);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("result_<N>.txt"), std::string::npos) << error.what();
  }
  EXPECT_THROW(calibrate_from_logs((folder / "missing").string(), ruleset), Error);
}

// NVIDIA's one-node ResNet-50 (five runs on 8 A100s): the expected figures were worked out from the same
// logs by an independent script (run_start to the first epoch_start; eval_start to eval_stop; the rest
// trains 35 epochs of 1,281,167 images).
TEST(Calibrate, NvidiaResnetOneNode) {
  const std::string folder = kNvidia + "/results/dgxa100_ngc21.09_mxnet/resnet";
  if (!std::filesystem::is_directory(folder)) GTEST_SKIP() << folder << " is absent";
  const Calibration calibration = calibrate_from_logs(folder, review::load_ruleset("1.1.0"));
  EXPECT_EQ(calibration.benchmark, "resnet");
  EXPECT_EQ(calibration.system, "dgxa100_ngc21.09_mxnet");
  EXPECT_EQ(calibration.nodes, 1);
  EXPECT_EQ(calibration.devices_per_node, 8);
  EXPECT_EQ(calibration.runs, 5);
  EXPECT_DOUBLE_EQ(calibration.global_batch, 3264);
  EXPECT_DOUBLE_EQ(calibration.samples_per_unit, 1281167);
  EXPECT_DOUBLE_EQ(calibration.units_to_converge.value_or(0), 35);
  EXPECT_NEAR(calibration.samples_per_second_per_device, 3240.056, 1e-3);
  EXPECT_NEAR(calibration.fixed_seconds, 0.224, 1e-9);
  EXPECT_NEAR(calibration.seconds_per_evaluation, 1.75449, 1e-5);
  EXPECT_NEAR(calibration.evaluations_per_unit, 9.0 / 35, 1e-12);
  // The olympic mean NVIDIA's summarizer publishes (shared/data/mlperf-training-v1.1/README.md).
  EXPECT_NEAR(calibration.published_minutes.value_or(0), 29.1466, 1e-4);
  EXPECT_DOUBLE_EQ(calibration.intra.bytes_per_second, 300e9);
}

// Issue 45: a system description claiming more devices than the logs' global batch (1e6 nodes for batch 3264
// predicted 0.00 minutes, -100%) is refused naming it.
TEST(Calibrate, MoreDevicesThanTheGlobalBatchIsRefusedNamingTheSystemDescription) {
  const std::string folder = kNvidia + "/results/dgxa100_ngc21.09_mxnet/resnet";
  if (!std::filesystem::is_directory(folder)) GTEST_SKIP() << folder << " is absent";
  const auto root = std::filesystem::temp_directory_path() / ("trainbench_calibrate_" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "results/box");
  std::filesystem::create_directories(root / "systems");
  std::filesystem::copy(folder, root / "results/box/resnet");
  std::ofstream(root / "systems/box.json") << R"({"number_of_nodes": 1000000, "accelerators_per_node": 8})";
  try {
    calibrate_from_logs((root / "results/box/resnet").string(), review::load_ruleset("1.1.0"));
    ADD_FAILURE() << "calibrated on 8000000 devices for a batch of 3264";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("box.json: number_of_nodes x accelerators_per_node is 8000000 devices for the logs' "
                        "global batch 3264: more than 64 devices a sample"),
              std::string::npos)
        << error.what();
  }
  std::ofstream(root / "systems/box.json") << R"({"number_of_nodes": 1e12, "accelerators_per_node": 8})";
  EXPECT_THROW(calibrate_from_logs((root / "results/box/resnet").string(), review::load_ruleset("1.1.0")), Error);
  std::filesystem::remove_all(root);
}

TEST(Calibrate, NvidiaBertCountsSamplesAndHasNoTimedEvaluations) {
  const std::string folder = kNvidia + "/results/dgxa100_ngc21.09_pytorch/bert";
  if (!std::filesystem::is_directory(folder)) GTEST_SKIP() << folder << " is absent";
  const Calibration calibration = calibrate_from_logs(folder, review::load_ruleset("1.1.0"));
  EXPECT_EQ(calibration.unit, "train_samples");
  EXPECT_DOUBLE_EQ(calibration.samples_per_unit, 1);
  EXPECT_GT(calibration.units_to_converge.value_or(0), 2e6);
  EXPECT_EQ(calibration.seconds_per_evaluation, 0);
  EXPECT_NEAR(calibration.published_minutes.value_or(0), 20.0032, 1e-4);
}

TEST(Calibrate, OneLogFileIsACalibrationToo) {
  const std::string log = kNvidia + "/results/dgxa100_ngc21.09_mxnet/resnet/result_0.txt";
  if (!std::filesystem::is_regular_file(log)) GTEST_SKIP() << log << " is absent";
  const Calibration calibration = calibrate_from_logs(log, review::load_ruleset("1.1.0"));
  EXPECT_EQ(calibration.runs, 1);
  EXPECT_EQ(calibration.devices_per_node, 8);
}

}  // namespace
}  // namespace trainbench::predict
