// The 3-D model's terms against hand-computed values on a shape small enough to count by hand (4 layers, hidden 8,
// 2 heads, feed-forward 32, sequences of 16, vocabulary 100 padded to 104 at t = 2: transformer_cost_test.cpp
// counts its parameters), and its refusals by flag on GPT-3 175B.
#include "predict/three_d.h"

#include <gtest/gtest.h>

#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench::predict {
namespace {

ModelRun small_run(double global_batch) {
  ModelRun run;
  run.shape.layers = 4;
  run.shape.hidden = 8;
  run.shape.heads = 2;
  run.shape.ffn_hidden = 32;
  run.shape.seq_length = 16;
  run.shape.vocab_size = 100;
  run.shape.make_vocab_size_divisible_by = 4;
  run.shape.max_positions = 16;
  run.global_batch = global_batch;
  return run;
}

// Links of 1000 B/s inside a node and 200 B/s per node across (100 B/s for each of a node's two devices).
Cluster cluster(int nodes, int devices_per_node) {
  Cluster result;
  result.nodes = nodes;
  result.devices_per_node = devices_per_node;
  result.intra.bytes_per_second = 1000;
  result.inter.bytes_per_second = 200;
  return result;
}

// 72·8·16·4·64·(1 + 1/3 + 104/384) = 3784704 FLOPs, and the recomputed attention's 4·8·256·8·4 = 262144, over 8
// devices.
constexpr double kFlopsPerDevice = (3784704.0 + 262144.0) / 8;

TEST(ThreeD, EachTermOfAStepByHand) {
  // 4 nodes x 2 devices at tp 2 x pp 2 x dp 2, 4 micro-batches of 1: one second of compute a step.
  const LayoutCost cost = layout_cost(small_run(8), cluster(4, 2), {2, 2, 1, 1}, kFlopsPerDevice);
  EXPECT_EQ(cost.data, 2);
  EXPECT_EQ(cost.micro_batches, 4);
  EXPECT_DOUBLE_EQ(cost.flops_per_device, kFlopsPerDevice);
  EXPECT_DOUBLE_EQ(cost.step.compute, 1);
  EXPECT_DOUBLE_EQ(cost.step.bubble, 0.25);  // (2 − 1)/(1·4)
  // 4·(2 layers·4 + 1) all-reduces of 256 bytes on a stage, each a ring of 2 inside the node: 256/1000 s.
  EXPECT_NEAR(cost.step.tensor, 36 * 0.256, 1e-12);
  // A stage fills a node (T·D = 4 ≥ 2): 4 boundary messages of 256/2 bytes (sequence parallel) at 100 B/s.
  EXPECT_NEAR(cost.step.pipeline, 4 * 1.28, 1e-12);
  // Stage 0's 1464 fp32 gradients, one data-parallel member a node, a ring of 2 nodes at 100 B/s; the last
  // micro-batch's backward (2/3 of its quarter second) hides part of it.
  EXPECT_NEAR(cost.step.data, 5856 / 100.0, 1e-9);
  EXPECT_NEAR(cost.step.data_exposed, 58.56 - 2.0 / 3 / 4, 1e-9);
  // Memory per rank: bf16 weights, fp32 gradients, fp32 master and Adam (18 bytes a parameter), 2 micro-batches
  // of activations at 34/t a layer.
  EXPECT_EQ(cost.fullest_stage, 0);
  EXPECT_DOUBLE_EQ(cost.memory_bytes, 18 * 1464 + 2 * 2 * 128 * 17);
}

TEST(ThreeD, DataParallelAllReduceRingTreeAndInNetwork) {
  // tp 2 over 8 nodes of 2: dp 8, one member a node; the whole model's 2400 parameters (9600 fp32 bytes).
  Cluster nodes = cluster(8, 2);
  const LayoutCost ring = layout_cost(small_run(8), nodes, {2, 1, 1, 1}, kFlopsPerDevice);
  EXPECT_NEAR(ring.step.data, 2 * 7.0 / 8 * 9600 / 100, 1e-9);  // ring (168 s) beats the tree (192 s)
  nodes.in_network = true;
  nodes.switch_latency_seconds = 0.5;
  EXPECT_NEAR(layout_cost(small_run(8), nodes, {2, 1, 1, 1}, kFlopsPerDevice).step.data, 9600 / 100.0 + 0.5, 1e-9);
  // 2 nodes of 4 at tp 2: two members of each data group share a node; they reduce inside it (a ring of 2 at
  // 1000 B/s, twice) and each sends its half across on its 50 B/s share of the node's 200.
  const LayoutCost shared = layout_cost(small_run(4), cluster(2, 4), {2, 1, 1, 1}, kFlopsPerDevice);
  EXPECT_NEAR(shared.step.data, 2 * (0.5 * 9600 / 1000) + 4800 / 50.0, 1e-9);
}

TEST(ThreeD, ADistributedOptimizerShardsTheMasterAndAdam) {
  ModelRun run = small_run(8);
  run.distributed_optimizer = true;
  const LayoutCost cost = layout_cost(run, cluster(4, 2), {2, 2, 1, 1}, kFlopsPerDevice);
  EXPECT_DOUBLE_EQ(cost.memory_bytes, (2 + 4 + 12 / 2.0) * 1464 + 2 * 2 * 128 * 17);
}

TEST(ThreeD, CalibrationRecoversTheFlopRate) {
  const ModelRun run = small_run(8);
  const Cluster nodes = cluster(4, 2);
  const Layout layout{2, 2, 1, 1};
  const double step = layout_cost(run, nodes, layout, kFlopsPerDevice).step.seconds();
  Calibration logs;
  logs.source = "logs";
  logs.nodes = 4;
  logs.devices_per_node = 2;
  logs.global_batch = 8;
  logs.samples_per_unit = 1;  // epoch_num counts tokens
  logs.units_to_converge = 8 * 16 * 10;
  logs.samples_per_second_per_device = 8 * 16 / step / 8;
  const DeviceCalibration calibration = calibrate_from_run(logs, run, layout, nodes);
  EXPECT_NEAR(calibration.flops_per_second, kFlopsPerDevice, 1e-6 * kFlopsPerDevice);
  EXPECT_NEAR(calibration.step_seconds, step, 1e-9);
  // A step shorter than its modelled communication leaves no compute.
  logs.samples_per_second_per_device = 8 * 16 / 1.0 / 8;
  EXPECT_THROW(calibrate_from_run(logs, run, layout, nodes), Error);
}

// A calibration of kFlopsPerDevice on 4 nodes of 2, and an RCP table of one batch of 8 that converges at 1280 units.
DeviceCalibration small_calibration() {
  DeviceCalibration calibration;
  calibration.flops_per_second = kFlopsPerDevice;
  calibration.run.nodes = 4;
  calibration.run.devices_per_node = 2;
  return calibration;
}

review::RcpTable rcp_at_batch_8() {
  return review::parse_rcp_table(R"({"a": {"Benchmark": "x", "BS": 8, "Epochs to converge": [1280, 1280, 1280]}})",
                                 "test table", {});
}

TEST(ThreeD, PredictionAddsTheParts) {
  const ModelRun run = small_run(8);
  const Cluster nodes = cluster(4, 2);
  DeviceCalibration calibration = small_calibration();
  calibration.run.evaluations_per_unit = 0.01;
  calibration.run.seconds_per_evaluation = 3;
  calibration.run.fixed_seconds = 7;
  const ThreeDPrediction prediction = predict_three_d(calibration, run, nodes, {2, 2, 1, 1}, rcp_at_batch_8());
  EXPECT_DOUBLE_EQ(prediction.units, 1280);
  EXPECT_DOUBLE_EQ(prediction.steps, 10);  // 1280 tokens over 8 sequences of 16
  EXPECT_DOUBLE_EQ(prediction.evaluation_seconds, 12.8 * 3);
  EXPECT_NEAR(prediction.minutes * 60, 7 + 38.4 + 10 * prediction.cost.step.seconds(), 1e-9);
}

ModelRun gpt3(double global_batch) {
  ModelRun run;
  run.shape = gpt3_175b_shape();
  run.global_batch = global_batch;
  return run;
}

TEST(ThreeD, LayoutsThatDoNotDivideAreRefusedByFlag) {
  const Cluster nodes = cluster(64, 8);
  const auto flag = [&](const Layout& layout) {
    const auto problem = layout_problem(gpt3(2048), nodes, layout);
    return problem ? problem->flag : std::string("fits");
  };
  EXPECT_EQ(flag({4, 8, 12, 1}), "fits");
  EXPECT_EQ(flag({5, 8, 1, 1}), "--tensor-parallel");    // 96 heads
  EXPECT_EQ(flag({3, 8, 1, 1}), "--tensor-parallel");    // 8 devices a node
  EXPECT_EQ(flag({4, 7, 1, 1}), "--pipeline-parallel");  // 512 devices
  EXPECT_EQ(flag({4, 8, 5, 1}), "--interleave");         // 96 layers over 40 chunks
  EXPECT_EQ(flag({4, 8, 1, 3}), "--micro-batch");        // 128 sequences a replica
  EXPECT_EQ(flag({4, 8, 2, 128}), "--interleave");       // 1 micro-batch over 8 stages
}

TEST(ThreeD, ALayoutThatDoesNotFitIsRefusedNotPredicted) {
  Cluster nodes = cluster(64, 8);
  nodes.device_memory_bytes = 80.0 * (1 << 30);
  DeviceCalibration calibration;
  calibration.flops_per_second = 1e15;
  const review::RcpTable rcp = review::parse_rcp_table(
      R"({"a": {"Benchmark": "gpt3", "BS": 2048, "Epochs to converge": [1e9, 1e9, 1e9]}})", "test table", {});
  try {
    predict_three_d(calibration, gpt3(2048), nodes, {1, 8, 1, 1}, rcp);
    FAIL() << "a 22-billion-parameter stage fitted 80 GiB";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--device-memory-gib"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("does not fit"), std::string::npos) << error.what();
  }
  for (const auto& found : search_layouts(calibration, gpt3(2048), nodes, rcp))
    EXPECT_LE(found.cost.memory_bytes, nodes.device_memory_bytes);
}

// BERT (mlperf_model_run): the scores stored, so no second forward of the attention, and its s² activations held;
// convergence in samples.
TEST(ThreeD, StoredScoresAreHeldAndNotRecomputed) {
  ModelRun run = small_run(8);
  run.recompute_attention = false;
  const LayoutCost cost = layout_cost(run, cluster(4, 2), {2, 2, 1, 1}, 3784704.0 / 8);
  EXPECT_DOUBLE_EQ(cost.flops_per_device, 3784704.0 / 8);
  EXPECT_DOUBLE_EQ(cost.step.compute, 1);
  // 34/t + 5·a·s/(h·t) = 17 + 5·2·16/16 = 27 bytes an element of s·b·h a layer.
  EXPECT_DOUBLE_EQ(cost.memory_bytes, 18 * 1464 + 2 * 2 * 128 * 27);
}

ModelRun bert(double global_batch) {
  ModelRun run = mlperf_model_run("bert", "--test");
  run.global_batch = global_batch;
  return run;
}

TEST(ThreeD, BertLargeByHand) {
  const ModelRun run = bert(64);
  EXPECT_EQ(run.unit, ConvergenceUnit::kSamples);
  EXPECT_FALSE(run.recompute_attention);
  EXPECT_EQ(run.unit_name(), "samples");
  EXPECT_DOUBLE_EQ(run.units_per_sequence(), 1);
  // One node of 8 at tp 1 x pp 1, 8 sequences a device in one micro-batch. FLOPs: the 24 layers' 72·B·s·l·h²(1 +
  // s/6h), and the masked-LM head over 76 positions, 6·B·76·h·(30528 + h) (the decoder's padded rows and the
  // transform), nothing recomputed.
  const double b = 64, s = 512, l = 24, h = 1024;
  const double flops = 72 * b * s * l * h * h * (1 + s / (6 * h)) + 6 * b * 76 * h * (30528 + h);
  const LayoutCost cost = layout_cost(run, cluster(1, 8), {1, 1, 1, 8}, flops / 8);
  EXPECT_NEAR(cost.flops_per_device, flops / 8, 1e-12 * flops);
  EXPECT_NEAR(cost.step.compute, 1, 1e-12);
  EXPECT_DOUBLE_EQ(cost.step.bubble, 0);
  EXPECT_DOUBLE_EQ(cost.step.tensor + cost.step.pipeline, 0);
  // 24·(12h² + 13h) + 30528·h + 512·h + 2h + (h² + 3h) parameters at 18 bytes, and one micro-batch of 8 held: 24
  // layers of s·b·h·(10 + 24 + 5·16·512/1024) = 74 bytes an element, the scores stored.
  EXPECT_EQ(cost.fullest.parameters, 335148032);
  EXPECT_DOUBLE_EQ(cost.memory_bytes, 18.0 * 335148032 + 24.0 * 512 * 8 * 1024 * 74);
}

TEST(ThreeD, BertCountsSamples) {
  ModelRun run = small_run(8);
  run.unit = ConvergenceUnit::kSamples;
  const Cluster nodes = cluster(4, 2);
  const ThreeDPrediction prediction = predict_three_d(small_calibration(), run, nodes, {2, 2, 1, 1}, rcp_at_batch_8());
  EXPECT_DOUBLE_EQ(prediction.units, 1280);
  EXPECT_DOUBLE_EQ(prediction.steps, 160);  // 1280 samples over 8 a step, not over 8·16 tokens
  EXPECT_DOUBLE_EQ(to_json(prediction)["samples_to_converge"].get<double>(), 1280);
  // From logs counting train_samples: 8 sequences a step over 8 devices give the step, whatever the sequence's
  // length; logs counting another unit are refused.
  const double step = layout_cost(run, nodes, {2, 2, 1, 1}, kFlopsPerDevice).step.seconds();
  Calibration logs;
  logs.source = "logs";
  logs.nodes = 4;
  logs.devices_per_node = 2;
  logs.global_batch = 8;
  logs.unit = mllog_keys::kTrainSamples;
  logs.units_to_converge = 1280;
  logs.samples_per_second_per_device = 8 / step / 8;
  EXPECT_NEAR(calibrate_from_run(logs, run, {2, 2, 1, 1}, nodes).step_seconds, step, 1e-9);
  logs.unit = mllog_keys::kEpochNum;
  EXPECT_THROW(calibrate_from_run(logs, run, {2, 2, 1, 1}, nodes), Error);
}

TEST(ThreeD, BertLayoutsMustDivideItsHeadsAndLayers) {
  const auto flag = [&](const Layout& layout) {
    const auto problem = layout_problem(bert(3072), cluster(64, 8), layout);
    return problem ? problem->flag : std::string("fits");
  };
  EXPECT_EQ(flag({2, 2, 1, 1}), "fits");
  EXPECT_EQ(flag({32, 1, 1, 1}), "--tensor-parallel");    // 16 heads
  EXPECT_EQ(flag({1, 16, 1, 1}), "--pipeline-parallel");  // 24 layers
  EXPECT_EQ(flag({1, 8, 2, 1}), "--interleave");          // 24 layers over 16 chunks
  EXPECT_THROW(mlperf_model_run("resnet", "--test"), Error);
}

TEST(ThreeD, ParsesALayout) {
  const Layout layout = parse_layout("tp=4,pp=8,v=12,b=1", "--calibration-layout");
  EXPECT_EQ(layout.describe(), "tp=4 pp=8 v=12 b=1");
  EXPECT_EQ(parse_layout("pp=2,tp=1", "--calibration-layout").describe(), "tp=1 pp=2 v=1 b=1");
  for (const std::string bad : {"tp=4", "tp=4,pp=0", "tp=4,pp=8,x=2", "tp=nan,pp=8", ""})
    EXPECT_THROW(parse_layout(bad, "--calibration-layout"), Error) << bad;
}

}  // namespace
}  // namespace trainbench::predict
