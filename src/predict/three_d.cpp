#include "predict/three_d.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>

#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench::predict {

namespace {

parallel::ParallelPlan plan_of(const Layout& layout, int data) {
  parallel::ParallelPlan plan;
  plan.tensor = layout.tensor;
  plan.pipeline = layout.pipeline;
  plan.data = data;
  plan.virtual_stages = layout.virtual_stages;
  plan.schedule = layout.virtual_stages > 1 ? parallel::PipelineSchedule::kInterleaved
                                            : parallel::PipelineSchedule::kOneForwardOneBackward;
  plan.sequence_parallel = layout.tensor > 1;
  return plan;
}

parallel::FootprintOptions footprint_options(const ModelRun& run, const Layout& layout, int micro_batches) {
  parallel::FootprintOptions options;
  options.micro_batches = micro_batches;
  options.micro_batch_size = layout.micro_batch_size;
  options.activation_element_bytes = 2;
  options.recompute_attention = run.recompute_attention;
  options.weight_element_bytes = 2;
  options.master_weights = true;
  options.distributed_optimizer = run.distributed_optimizer;
  return options;
}

// The data-parallel group of a rank is every T-th rank (world rank = t + T·(d + D·p)): G/T of its members share
// a node while T < G, each member has a node of its own once T ≥ G. The members on one node reduce inside it; the
// node's shard crosses the network on its devices' share of it (every device of the node is in some data group
// doing the same): ring, tree, or summed in the switches, where each device sends and receives its shard once.
double data_all_reduce_seconds(double bytes, int tensor, int data, const Cluster& cluster) {
  const int per_node = std::max(1, std::min(data, cluster.devices_per_node / tensor));
  const int nodes = data / per_node;
  const double inside = 2.0 * ring_gather_seconds(bytes, per_node, cluster.intra);
  if (nodes <= 1) return per_node > 1 ? inside : 0;
  const double shard = bytes / per_node;
  const Link share{cluster.inter.bytes_per_second / cluster.devices_per_node, cluster.inter.latency_seconds};
  double across = std::min(ring_all_reduce_seconds(shard, nodes, share), tree_all_reduce_seconds(shard, nodes, share));
  if (cluster.in_network)
    across = share.latency_seconds + cluster.switch_latency_seconds +
             (share.bytes_per_second > 0 ? shard / share.bytes_per_second : 0);
  return inside + across;
}

// One all-reduce of the tensor group: a ring inside the node while T ≤ G, else hierarchical over T/G nodes.
double tensor_all_reduce_seconds(double bytes, int tensor, const Cluster& cluster) {
  if (tensor <= cluster.devices_per_node) return ring_all_reduce_seconds(bytes, tensor, cluster.intra);
  return hierarchical_all_reduce_seconds(bytes, tensor / cluster.devices_per_node, cluster.devices_per_node,
                                         cluster.intra, cluster.inter);
}

// A point-to-point message to the next stage, T·D ranks away: on the node's network (each device on its share)
// once a stage fills a node.
double pipeline_message_seconds(double bytes, int tensor, int data, const Cluster& cluster) {
  const bool across_nodes = cluster.nodes > 1 && tensor * data >= cluster.devices_per_node;
  const Link link = across_nodes
                        ? Link{cluster.inter.bytes_per_second / cluster.devices_per_node, cluster.inter.latency_seconds}
                        : cluster.intra;
  return link.latency_seconds + (link.bytes_per_second > 0 ? bytes / link.bytes_per_second : 0);
}

std::vector<int> divisors(int value) {
  std::vector<int> result;
  for (int d = 1; d <= value; ++d)
    if (value % d == 0) result.push_back(d);
  return result;
}

}  // namespace

namespace {

// A transformer with the feed-forward 4·h wide and learned positions as long as its sequences, as both MLPerf
// models have them.
parallel::TransformerShape transformer_of(int64_t layers, int64_t hidden, int64_t heads, int64_t seq_length,
                                          int64_t vocab_size, int64_t make_vocab_size_divisible_by) {
  parallel::TransformerShape shape;
  shape.layers = layers;
  shape.hidden = hidden;
  shape.heads = heads;
  shape.ffn_hidden = 4 * hidden;
  shape.seq_length = seq_length;
  shape.vocab_size = vocab_size;
  shape.make_vocab_size_divisible_by = make_vocab_size_divisible_by;
  shape.max_positions = seq_length;
  return shape;
}

}  // namespace

parallel::TransformerShape gpt3_175b_shape() { return transformer_of(96, 12288, 96, 2048, 50257, 128); }

parallel::TransformerShape bert_large_shape() {
  parallel::TransformerShape shape = transformer_of(24, 1024, 16, 512, 30522, 8);
  shape.lm_head_positions = 76;
  shape.lm_head_transform = true;
  return shape;
}

double ModelRun::units_per_sequence() const {
  return unit == ConvergenceUnit::kTokens ? static_cast<double>(shape.seq_length) : 1;
}

std::string ModelRun::unit_name() const { return unit == ConvergenceUnit::kTokens ? "tokens" : "samples"; }

ModelRun mlperf_model_run(const std::string& benchmark, const std::string& flag) {
  ModelRun run;
  if (benchmark == "gpt3") {
    run.shape = gpt3_175b_shape();
  } else if (benchmark == "bert") {
    run.shape = bert_large_shape();
    run.unit = ConvergenceUnit::kSamples;  // the v1.1 RCPs count train_samples
    run.recompute_attention = false;       // the reference keeps the scores for backward
  } else {
    fail(flag, "3-D layouts are modelled for gpt3 and bert only, not '" + benchmark + "'");
  }
  return run;
}

std::string Layout::describe() const {
  return "tp=" + std::to_string(tensor) + " pp=" + std::to_string(pipeline) + " v=" + std::to_string(virtual_stages) +
         " b=" + std::to_string(micro_batch_size);
}

Layout parse_layout(const std::string& text, const std::string& flag) {
  static const std::regex part(R"((tp|pp|v|b)=([0-9]{1,6}))");
  Layout layout;
  bool tensor = false, pipeline = false;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::smatch match;
    const std::string item = text.substr(start, comma - start);
    if (!std::regex_match(item, match, part) || std::stoi(match[2].str()) < 1)
      fail(flag, "'" + item + "' is not one of tp=N, pp=N, v=N, b=N with N at least 1 (e.g. tp=4,pp=8,v=12,b=1)");
    const int value = std::stoi(match[2].str());
    const std::string key = match[1].str();
    if (key == "tp") tensor = true, layout.tensor = value;
    if (key == "pp") pipeline = true, layout.pipeline = value;
    if (key == "v") layout.virtual_stages = value;
    if (key == "b") layout.micro_batch_size = value;
    start = comma + 1;
  }
  if (!tensor || !pipeline) fail(flag, "needs tp=N and pp=N");
  return layout;
}

std::optional<LayoutProblem> layout_problem(const ModelRun& run, const Cluster& cluster, const Layout& layout) {
  const auto& shape = run.shape;
  const int t = layout.tensor, p = layout.pipeline, v = layout.virtual_stages, g = cluster.devices_per_node;
  if (t < 1 || p < 1 || v < 1 || layout.micro_batch_size < 1)
    return LayoutProblem{"--tensor-parallel", "the layout's sizes must be at least 1"};
  if (shape.heads % t != 0 || shape.ffn_hidden % t != 0)
    return LayoutProblem{"--tensor-parallel", std::to_string(t) + " does not divide the " +
                                                  std::to_string(shape.heads) + " heads and feed-forward width " +
                                                  std::to_string(shape.ffn_hidden)};
  if (t < g ? g % t != 0 : t % g != 0)
    return LayoutProblem{"--tensor-parallel", std::to_string(t) + " neither divides nor is a multiple of the " +
                                                  std::to_string(g) + " devices per node"};
  if (cluster.devices() % (t * p) != 0)
    return LayoutProblem{"--pipeline-parallel", "tensor " + std::to_string(t) + " x pipeline " + std::to_string(p) +
                                                    " does not divide the " + std::to_string(cluster.devices()) +
                                                    " devices"};
  if (shape.layers % (static_cast<int64_t>(p) * v) != 0)
    return LayoutProblem{v > 1 ? "--interleave" : "--pipeline-parallel",
                         std::to_string(shape.layers) + " layers do not divide into " + std::to_string(p) +
                             " stages x " + std::to_string(v) + " chunks"};
  const int data = cluster.devices() / (t * p);
  const double per_replica = run.global_batch / data;
  if (per_replica != std::floor(per_replica) || std::fmod(per_replica, layout.micro_batch_size) != 0)
    return LayoutProblem{"--micro-batch", "the global batch " + format_decimals(run.global_batch, 0) + " over " +
                                              std::to_string(data) +
                                              " data-parallel replicas does not divide into "
                                              "micro-batches of " +
                                              std::to_string(layout.micro_batch_size)};
  const int micro_batches = static_cast<int>(per_replica / layout.micro_batch_size);
  if (v > 1 && micro_batches % p != 0)
    return LayoutProblem{"--interleave", "the interleaved schedule needs the " + std::to_string(micro_batches) +
                                             " micro-batches to divide by the " + std::to_string(p) + " stages"};
  return std::nullopt;
}

LayoutCost layout_cost(const ModelRun& run, const Cluster& cluster, const Layout& layout, double flops_per_second) {
  LayoutCost cost;
  cost.layout = layout;
  cost.data = cluster.devices() / (layout.tensor * layout.pipeline);
  cost.micro_batches = static_cast<int>(run.global_batch / cost.data / layout.micro_batch_size);
  const parallel::ParallelPlan plan = plan_of(layout, cost.data);
  const parallel::FootprintOptions options = footprint_options(run, layout, cost.micro_batches);
  const int64_t vocab =
      parallel::padded_vocab_size(run.shape.vocab_size, run.shape.make_vocab_size_divisible_by, layout.tensor);
  cost.flops_per_device =
      parallel::step_flops(run.shape, run.global_batch, vocab, run.recompute_attention).computed / cluster.devices();
  cost.step.compute = cost.flops_per_device / flops_per_second;
  cost.bubble_fraction = parallel::pipeline_bubble_fraction(layout.pipeline, cost.micro_batches, layout.virtual_stages);
  cost.step.bubble = cost.bubble_fraction * cost.step.compute;
  // The pipeline runs at the pace of its slowest stage: each part is the largest over the stages.
  for (int stage = 0; stage < layout.pipeline; ++stage) {
    const parallel::StageFootprint f = parallel::stage_footprint(run.shape, plan, stage, options);
    const double message = f.activation_message_bytes;
    cost.step.tensor = std::max(cost.step.tensor,
                                f.tensor_bytes / message * tensor_all_reduce_seconds(message, layout.tensor, cluster));
    const double pipeline_message = message / (plan.sequence_parallel ? layout.tensor : 1);
    cost.step.pipeline =
        std::max(cost.step.pipeline, f.pipeline_bytes / pipeline_message *
                                         pipeline_message_seconds(pipeline_message, layout.tensor, cost.data, cluster));
    cost.step.data = std::max(cost.step.data, data_all_reduce_seconds(f.data_bytes, layout.tensor, cost.data, cluster));
    if (f.total_bytes() > cost.memory_bytes) {
      cost.memory_bytes = f.total_bytes();
      cost.fullest_stage = stage;
      cost.fullest = f;
    }
  }
  // Gradients are final after the last micro-batch's backward; its bucketed exchange hides behind that backward.
  const double window = run.overlap * cost.step.compute / cost.micro_batches;
  cost.step.data_exposed = std::max(0.0, cost.step.data - window);
  cost.fits = cluster.device_memory_bytes <= 0 || cost.memory_bytes <= cluster.device_memory_bytes;
  return cost;
}

DeviceCalibration calibrate_from_run(const Calibration& logs, ModelRun run, const Layout& layout,
                                     const Cluster& cluster) {
  if (!(logs.samples_per_unit > 0) || !(logs.samples_per_second_per_device > 0) || !logs.units_to_converge)
    fail(logs.source, "holds no converged run with a training time to calibrate from");
  if ((run.unit == ConvergenceUnit::kSamples) != (logs.unit == mllog_keys::kTrainSamples))
    fail(logs.source, "counts convergence in " + logs.unit + ", the model in " + run.unit_name());
  run.global_batch = logs.global_batch;
  if (const auto problem = layout_problem(run, cluster, layout))
    fail("--calibration-layout", problem->what + " (the calibration's " + layout.describe() + ")");
  DeviceCalibration calibration;
  calibration.source = logs.source;
  calibration.run = logs;
  // The logs' units (tokens or samples) per second while training, and so the training time per step of the log's
  // global batch.
  const double units_per_second = logs.samples_per_second_per_device * logs.devices() / logs.samples_per_unit;
  calibration.step_seconds = run.global_batch * run.units_per_sequence() / units_per_second;
  // The communication parts do not depend on the rate: the cost at 1 FLOP/s gives them and the compute's share.
  const LayoutCost unit = layout_cost(run, cluster, layout, 1.0);
  const double window_share = run.overlap / unit.micro_batches;
  const double communication = unit.step.tensor + unit.step.pipeline;
  // step = c·(1 + bubble) + communication + max(0, data − window_share·c), solved for the compute c.
  double compute =
      (calibration.step_seconds - communication - unit.step.data) / (1 + unit.bubble_fraction - window_share);
  if (!(unit.step.data - window_share * compute > 0))
    compute = (calibration.step_seconds - communication) / (1 + unit.bubble_fraction);
  if (!(compute > 0))
    fail(logs.source, "its step (" + format_decimals(calibration.step_seconds, 3) +
                          " s) leaves no compute after the modelled "
                          "communication (" +
                          format_decimals(communication + unit.step.data, 3) + " s)");
  calibration.flops_per_second = unit.flops_per_device / compute;
  calibration.parts = layout_cost(run, cluster, layout, calibration.flops_per_second).step;
  return calibration;
}

DeviceCalibration calibrate_from_bench(const Calibration& bench, const ModelRun& run, int layers) {
  if (layers < 1) fail("--bench-layers", "must be at least 1");
  if (!(bench.samples_per_second_per_device > 0) || !(bench.global_batch > 0))
    fail(bench.source, "holds no step time and batch");
  DeviceCalibration calibration;
  calibration.source = bench.source;
  calibration.run = bench;
  calibration.run.units_to_converge.reset();
  calibration.step_seconds = bench.per_device_batch() / bench.samples_per_second_per_device;
  parallel::TransformerShape benched = run.shape;
  benched.layers = layers;
  const int64_t vocab = parallel::padded_vocab_size(benched.vocab_size, benched.make_vocab_size_divisible_by, 1);
  const double flops = parallel::step_flops(benched, bench.global_batch, vocab, run.recompute_attention).computed;
  calibration.flops_per_second = flops / bench.devices() / calibration.step_seconds;
  calibration.parts.compute = calibration.step_seconds;
  return calibration;
}

Cluster cluster_of(const Calibration& logs) {
  Cluster cluster;
  cluster.nodes = logs.nodes;
  cluster.devices_per_node = logs.devices_per_node;
  cluster.intra = logs.intra;
  cluster.inter = logs.inter;
  return cluster;
}

namespace {

// Units (tokens or samples) to converge at the run's batch: the calibration's scaled by the RCP means, or the RCP
// mean itself.
void converge(const DeviceCalibration& calibration, const ModelRun& run, const review::RcpTable& rcp,
              ThreeDPrediction& prediction) {
  if (rcp.points.empty()) fail("--ruleset", "has no RCP table for this benchmark");
  const double at_new = rcp_mean_units(rcp, run.global_batch);
  if (calibration.run.units_to_converge) {
    const double at_calibration = rcp_mean_units(rcp, calibration.run.global_batch);
    prediction.units = *calibration.run.units_to_converge * at_new / at_calibration;
    prediction.units_source = "calibration " + format_decimals(*calibration.run.units_to_converge, 0) + " x RCP mean " +
                              format_decimals(at_new, 0) + " at batch " + format_decimals(run.global_batch, 0) + " / " +
                              format_decimals(at_calibration, 0) + " at batch " +
                              format_decimals(calibration.run.global_batch, 0);
  } else {
    prediction.units = at_new;
    prediction.units_source = "RCP mean at batch " + format_decimals(run.global_batch, 0);
  }
  if (run.global_batch > rcp.points.back().batch_size)
    prediction.notes.push_back("batch " + format_decimals(run.global_batch, 0) +
                               " is above every RCP: the RCP mean is "
                               "extrapolated");
}

ThreeDPrediction prediction_of(const DeviceCalibration& calibration, const ModelRun& run, const Cluster& cluster,
                               const Layout& layout, const review::RcpTable& rcp) {
  ThreeDPrediction prediction;
  prediction.cost = layout_cost(run, cluster, layout, calibration.flops_per_second);
  prediction.global_batch = run.global_batch;
  prediction.unit = run.unit_name();
  prediction.notes = calibration.run.notes;
  converge(calibration, run, rcp, prediction);
  prediction.steps = std::ceil(prediction.units / (run.global_batch * run.units_per_sequence()));
  const StepParts& step = prediction.cost.step;
  prediction.compute_seconds = prediction.steps * step.compute;
  prediction.bubble_seconds = prediction.steps * step.bubble;
  prediction.tensor_seconds = prediction.steps * step.tensor;
  prediction.pipeline_seconds = prediction.steps * step.pipeline;
  prediction.data_seconds = prediction.steps * step.data_exposed;
  // Evaluations as often per unit as in the calibration, each sharded over the devices.
  prediction.evaluations = prediction.units * calibration.run.evaluations_per_unit;
  prediction.seconds_per_evaluation =
      calibration.run.seconds_per_evaluation * calibration.run.devices() / cluster.devices();
  prediction.evaluation_seconds = prediction.evaluations * prediction.seconds_per_evaluation;
  prediction.fixed_seconds = calibration.run.fixed_seconds;
  prediction.minutes =
      (prediction.fixed_seconds + prediction.compute_seconds + prediction.bubble_seconds + prediction.tensor_seconds +
       prediction.pipeline_seconds + prediction.data_seconds + prediction.evaluation_seconds) /
      60;
  return prediction;
}

std::string gibibytes(double bytes) { return format_decimals(bytes / (1024.0 * 1024.0 * 1024.0), 2) + " GiB"; }

}  // namespace

ThreeDPrediction predict_three_d(const DeviceCalibration& calibration, const ModelRun& run, const Cluster& cluster,
                                 const Layout& layout, const review::RcpTable& rcp) {
  if (const auto problem = layout_problem(run, cluster, layout)) fail(problem->flag, problem->what);
  ThreeDPrediction prediction = prediction_of(calibration, run, cluster, layout, rcp);
  if (!prediction.cost.fits)
    fail("--device-memory-gib", layout.describe() + " does not fit: stage " +
                                    std::to_string(prediction.cost.fullest_stage) + " needs " +
                                    gibibytes(prediction.cost.memory_bytes) + " per device, the device has " +
                                    gibibytes(cluster.device_memory_bytes));
  return prediction;
}

std::vector<ThreeDPrediction> search_layouts(const DeviceCalibration& calibration, const ModelRun& run,
                                             const Cluster& cluster, const review::RcpTable& rcp) {
  std::vector<ThreeDPrediction> found;
  for (int t : divisors(cluster.devices()))
    for (int p : divisors(cluster.devices() / t))
      for (int v : divisors(static_cast<int>(run.shape.layers)))
        for (int b : divisors(static_cast<int>(run.global_batch))) {
          const Layout layout{t, p, v, b};
          if ((p == 1 && v > 1) || layout_problem(run, cluster, layout)) continue;
          ThreeDPrediction prediction = prediction_of(calibration, run, cluster, layout, rcp);
          if (prediction.cost.fits) found.push_back(std::move(prediction));
        }
  std::stable_sort(found.begin(), found.end(),
                   [](const ThreeDPrediction& a, const ThreeDPrediction& b) { return a.minutes < b.minutes; });
  return found;
}

nlohmann::ordered_json to_json(const StepParts& step) {
  return {{"compute", step.compute},        {"pipeline_bubble", step.bubble},
          {"tensor_parallel", step.tensor}, {"pipeline_parallel", step.pipeline},
          {"data_parallel", step.data},     {"data_parallel_exposed", step.data_exposed}};
}

nlohmann::ordered_json to_json(const DeviceCalibration& calibration) {
  return {{"source", calibration.source},
          {"flops_per_second_per_device", calibration.flops_per_second},
          {"step_seconds", calibration.step_seconds},
          {"step_parts", to_json(calibration.parts)},
          {"run", to_json(calibration.run)}};
}

nlohmann::ordered_json to_json(const ThreeDPrediction& prediction) {
  const LayoutCost& cost = prediction.cost;
  return {{"minutes", prediction.minutes},
          {"parts",
           {{"fixed_seconds", prediction.fixed_seconds},
            {"compute_seconds", prediction.compute_seconds},
            {"pipeline_bubble_seconds", prediction.bubble_seconds},
            {"tensor_parallel_seconds", prediction.tensor_seconds},
            {"pipeline_parallel_seconds", prediction.pipeline_seconds},
            {"data_parallel_seconds", prediction.data_seconds},
            {"evaluation_seconds", prediction.evaluation_seconds}}},
          {"layout",
           {{"tensor_parallel", cost.layout.tensor},
            {"pipeline_parallel", cost.layout.pipeline},
            {"data_parallel", cost.data},
            {"virtual_stages", cost.layout.virtual_stages},
            {"micro_batch_size", cost.layout.micro_batch_size},
            {"micro_batches", cost.micro_batches}}},
          {"global_batch", prediction.global_batch},
          {prediction.unit + "_to_converge", prediction.units},
          {prediction.unit + "_source", prediction.units_source},
          {"steps", prediction.steps},
          {"step_seconds", to_json(cost.step)},
          {"bubble_fraction", cost.bubble_fraction},
          {"flops_per_device_per_step", cost.flops_per_device},
          {"memory",
           {{"fullest_stage", cost.fullest_stage},
            {"bytes_per_device", cost.memory_bytes},
            {"weights", cost.fullest.parameter_bytes},
            {"gradients", cost.fullest.gradient_bytes},
            {"optimizer", cost.fullest.optimizer_bytes},
            {"activations", cost.fullest.activation_bytes}}},
          {"evaluations", prediction.evaluations},
          {"seconds_per_evaluation", prediction.seconds_per_evaluation},
          {"notes", prediction.notes}};
}

std::string format_three_d_text(const ThreeDPrediction& prediction) {
  const LayoutCost& cost = prediction.cost;
  const StepParts& step = cost.step;
  std::string text =
      format_decimals(prediction.minutes, 2) + " minutes at " + cost.layout.describe() +
      " dp=" + std::to_string(cost.data) + " (" + std::to_string(cost.micro_batches) + " micro-batches), " +
      format_decimals(prediction.steps, 0) + " steps of " + format_decimals(step.seconds(), 3) + " s: compute " +
      format_decimals(step.compute, 3) + ", bubble " + format_decimals(step.bubble, 3) + ", tp " +
      format_decimals(step.tensor, 3) + ", pp " + format_decimals(step.pipeline, 3) + ", dp " +
      format_decimals(step.data_exposed, 3) + " exposed of " + format_decimals(step.data, 3) + "; evaluation " +
      format_decimals(prediction.evaluation_seconds, 1) + " s, fixed " + format_decimals(prediction.fixed_seconds, 1) +
      " s; stage " + std::to_string(cost.fullest_stage) + " holds " + gibibytes(cost.memory_bytes) + " per device\n";
  for (const auto& note : prediction.notes) text += "  note: " + note + "\n";
  return text;
}

}  // namespace trainbench::predict
