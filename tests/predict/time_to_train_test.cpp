#include "predict/time_to_train.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace trainbench::predict {
namespace {

// Two RCPs whose olympic means are exactly 40 (batch 800) and 60 (batch 8000).
review::RcpTable two_point_table() {
  return review::parse_rcp_table(R"({
    "a": {"Benchmark": "resnet", "BS": 800, "Epochs to converge": [40, 40, 40]},
    "b": {"Benchmark": "resnet", "BS": 8000, "Epochs to converge": [60, 60, 60]}})",
                                 "test table", {});
}

// One node of 8 devices at per-device batch 100, 1000 samples/s per device (a 0.1 s step), 40 epochs of
// a million samples, an evaluation every 4 epochs of 8 s, 10 s from run_start to the first step.
Calibration one_node() {
  Calibration calibration;
  calibration.benchmark = "resnet";
  calibration.devices_per_node = 8;
  calibration.global_batch = 800;
  calibration.samples_per_unit = 1e6;
  calibration.units_to_converge = 40;
  calibration.samples_per_second_per_device = 1000;
  calibration.evaluations_per_unit = 0.25;
  calibration.seconds_per_evaluation = 8;
  calibration.fixed_seconds = 10;
  return calibration;
}

ScaleOut ten_nodes(double per_device_batch) {
  ScaleOut scale_out;
  scale_out.nodes = 10;
  scale_out.devices_per_node = 8;
  scale_out.per_device_batch = per_device_batch;
  return scale_out;
}

TEST(RcpMeanUnits, ExactInterpolatedBelowAndAbove) {
  const review::RcpTable table = two_point_table();
  EXPECT_DOUBLE_EQ(rcp_mean_units(table, 800), 40);
  EXPECT_DOUBLE_EQ(rcp_mean_units(table, 2000), 40 + 20 * 1200.0 / 7200);
  EXPECT_DOUBLE_EQ(rcp_mean_units(table, 100), 40);
  EXPECT_DOUBLE_EQ(rcp_mean_units(table, 15200), 80);  // the two points' line, one more spacing up
}

TEST(PredictTimeToTrain, ScalesEpochsByTheRcpRatioAndEvaluationByTheDevices) {
  const review::RcpTable table = two_point_table();
  const Prediction prediction = predict_time_to_train(one_node(), ten_nodes(100), &table);
  // Global batch 8000: 40 x 60/40 = 60 epochs, 60e6 / 8000 = 7500 steps of 0.1 s; 15 evaluations of
  // 8 s x 8/80 devices = 0.8 s; 10 s fixed. 10 + 750 + 12 = 772 s.
  EXPECT_DOUBLE_EQ(prediction.global_batch, 8000);
  EXPECT_DOUBLE_EQ(prediction.units, 60);
  EXPECT_DOUBLE_EQ(prediction.steps, 7500);
  EXPECT_NEAR(prediction.compute_seconds, 750, 1e-9);
  EXPECT_NEAR(prediction.evaluation_seconds, 12, 1e-9);
  EXPECT_NEAR(prediction.minutes, 772.0 / 60, 1e-9);
  const auto json = to_json(prediction);
  EXPECT_NEAR(json["minutes"].get<double>(), 772.0 / 60, 1e-9);
  EXPECT_NEAR(json["parts"]["training_compute_seconds"].get<double>(), 750, 1e-9);
}

TEST(PredictTimeToTrain, HostSideEvaluationKeepsItsTime) {
  const review::RcpTable table = two_point_table();
  ScaleOut scale_out = ten_nodes(100);
  scale_out.evaluation_scales = false;
  EXPECT_NEAR(predict_time_to_train(one_node(), scale_out, &table).evaluation_seconds, 15 * 8, 1e-9);
}

TEST(PredictTimeToTrain, ExposedExchangeAddsToTheStep) {
  const review::RcpTable table = two_point_table();
  ScaleOut scale_out = ten_nodes(25);
  scale_out.gradient_bytes = 1e9;
  scale_out.intra = {1e11, 0};
  scale_out.inter = {8e10, 0};
  const Prediction prediction = predict_time_to_train(one_node(), scale_out, &table);
  // On one node the exchange (2 x 7/8 x 1 GB / 100 GB/s = 17.5 ms) hides in 2/3 of the 0.1 s step, so the
  // compute is the whole step: 1 ms a sample. At 10 nodes, batch 25: compute 25 ms; exchange 17.5 ms inside
  // + ring of the 125 MB shard on 10 GB/s, 2 x 9/10 x 12.5 ms = 22.5 ms (the tree takes 25 ms) = 40 ms,
  // of which 2/3 x 25 ms hides: 23.333 ms exposed.
  EXPECT_NEAR(prediction.compute_seconds_per_step, 0.025, 1e-12);
  EXPECT_NEAR(prediction.exchange_seconds_per_step, 0.04, 1e-12);
  EXPECT_NEAR(prediction.exposed_exchange_seconds_per_step, 0.04 - 0.025 * 2 / 3, 1e-12);
  // Global batch 2000: 40 x (40 + 20 x 1200/7200) / 40 epochs, steps rounded up.
  EXPECT_NEAR(prediction.units, 40 + 20 * 1200.0 / 7200, 1e-9);
  EXPECT_DOUBLE_EQ(prediction.steps, 21667);
}

TEST(PredictTimeToTrain, StepOverheadDoesNotShrinkWithTheBatch) {
  const review::RcpTable table = two_point_table();
  ScaleOut scale_out = ten_nodes(25);
  scale_out.step_overhead_seconds = 0.02;
  // (0.1 - 0.02) / 100 = 0.8 ms a sample: 20 ms + 25 x 0.8 ms = 40 ms.
  EXPECT_NEAR(predict_time_to_train(one_node(), scale_out, &table).compute_seconds_per_step, 0.04, 1e-12);
}

TEST(PredictTimeToTrain, SlowInputMakesTheStepWait) {
  const review::RcpTable table = two_point_table();
  ScaleOut scale_out = ten_nodes(100);
  scale_out.input_samples_per_second_per_node = 4000;  // 800 samples a step per node: 0.2 s against 0.1 s
  EXPECT_NEAR(predict_time_to_train(one_node(), scale_out, &table).input_wait_seconds_per_step, 0.1, 1e-12);
}

TEST(PredictTimeToTrain, WithoutRcpTheUnitsStayOrAreGiven) {
  const review::RcpTable empty;
  EXPECT_DOUBLE_EQ(predict_time_to_train(one_node(), ten_nodes(100), &empty).units, 40);
  ScaleOut scale_out = ten_nodes(100);
  scale_out.units_to_converge = 50;
  EXPECT_DOUBLE_EQ(predict_time_to_train(one_node(), scale_out, &empty).units, 50);
  Calibration bench = one_node();
  bench.units_to_converge.reset();
  EXPECT_THROW(predict_time_to_train(bench, ten_nodes(100), &empty), Error);
}

TEST(PredictTimeToTrain, RefusesACalibrationWithoutThroughput) {
  const review::RcpTable table = two_point_table();
  Calibration calibration = one_node();
  calibration.samples_per_second_per_device = 0;
  try {
    predict_time_to_train(calibration, ten_nodes(100), &table);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("throughput"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace trainbench::predict
