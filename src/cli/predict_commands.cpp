// `trainbench predict` and `trainbench predict-check`: thin glue over src/predict (torch-free). predict takes
// a calibration (published result logs or a `bench --json`), links (given, from `probe comm --json`, or the
// system description beside the logs) and prints the predicted minutes with their parts; predict-check
// runs the model against a submission's own multi-node results. `predict gpt3` (and `predict bert` given a layout,
// --plan or --sweep) is the 3-D model (predict/three_d.h): one tensor × pipeline × data layout, the search over
// layouts, or that search per link speed; `predict-check --calibrate` checks it against published results.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "predict/calibrate.h"
#include "predict/measurements.h"
#include "predict/three_d.h"
#include "predict/validation.h"
#include "probes/storage_probe.h"
#include "review/ruleset.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench::cli {

namespace {

namespace fs = std::filesystem;

std::string json_text(const nlohmann::ordered_json& value) { return value.dump(2) + "\n"; }

struct LinkFlags {
  std::string comm_json;
  double gigabytes_per_second = 0;
  double latency_us = -1;  // -1: not given

  void add_to(CLI::App* command, const std::string& name, const std::string& what) {
    command->add_option("--" + name + "-comm", comm_json,
                        "A `trainbench probe comm --json` file measured over the " + what + " link")
        ->check(CLI::ExistingFile);
    command->add_option("--" + name + "-bandwidth", gigabytes_per_second,
                        "The " + what + " link's bandwidth, GB/s in one direction (replaces the measured or described one)")
        ->check(number_above(0));
    command->add_option("--" + name + "-latency-us", latency_us, "The " + what + " link's latency per hop, microseconds")
        ->check(number_at_least(0));
  }

  // Given numbers win over a probe file, which wins over the system description.
  predict::Link resolve(const predict::Link& described) const {
    predict::Link link = comm_json.empty() ? described : predict::link_from_comm_json(comm_json);
    if (gigabytes_per_second > 0) link.bytes_per_second = gigabytes_per_second * 1e9;
    if (latency_us >= 0) link.latency_seconds = latency_us * 1e-6;
    return link;
  }
};

struct ExchangeFlags {
  std::string gradient_bytes, all_to_all_bytes;
  double overlap = 2.0 / 3.0;
  double step_overhead_ms = 0;

  void add_to(CLI::App* command) {
    command->add_option("--gradient-bytes", gradient_bytes,
                        "Bytes all-reduced every step (parameters x bytes per gradient element), e.g. 51M; default: "
                        "the exchange is not modelled");
    command->add_option("--all-to-all-bytes-per-sample", all_to_all_bytes,
                        "Bytes each sample sends through all-to-all every step (DLRM's embedding exchange)");
    command->add_option("--overlap", overlap, "Share of the compute an exchange hides behind")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    command->add_option("--step-overhead-ms", step_overhead_ms,
                        "Part of a step that does not shrink with the per-device batch (measured, e.g. from two bench "
                        "runs at different batches)")
        ->check(number_at_least(0));
  }

  void apply(predict::ScaleOut& scale_out) const {
    if (!gradient_bytes.empty())
      scale_out.gradient_bytes = static_cast<double>(probes::parse_byte_size(gradient_bytes, "--gradient-bytes"));
    if (!all_to_all_bytes.empty())
      scale_out.all_to_all_bytes_per_sample =
          static_cast<double>(probes::parse_byte_size(all_to_all_bytes, "--all-to-all-bytes-per-sample"));
    scale_out.overlap = overlap;
    scale_out.step_overhead_seconds = step_overhead_ms / 1e3;
  }
};

// The 3-D model of a transformer (predict/three_d.h): a layout, or the search over layouts.
struct ThreeDFlags {
  int tensor = 0, pipeline = 0, micro_batch = 1, interleave = 1;
  std::string calibration_layout, sweep, published;
  int bench_layers = 0;
  double global_batch = 0, device_memory_gib = 0, switch_latency_us = 0;
  bool in_network = false, distributed_optimizer = false, plan = false;

  void add_to(CLI::App* command) {
    command->add_option("--tensor-parallel", tensor, "gpt3, bert: tensor-parallel size T")
        ->check(whole_number(1, 1 << 20));
    command->add_option("--pipeline-parallel", pipeline, "gpt3, bert: pipeline stages P")
        ->check(whole_number(1, 1 << 20));
    command->add_option("--micro-batch", micro_batch, "gpt3, bert: sequences per micro-batch")
        ->capture_default_str()
        ->check(whole_number(1, 1 << 20));
    command->add_option("--interleave", interleave, "gpt3, bert: model chunks per pipeline rank (interleaved 1F1B's v)")
        ->capture_default_str()
        ->check(whole_number(1, 1 << 20));
    command->add_option("--calibration-layout", calibration_layout,
                        "gpt3, bert with --calibrate: the published run's layout, e.g. tp=4,pp=8,v=12,b=1");
    command->add_option("--bench-layers", bench_layers, "gpt3, bert with --bench: the layers the bench ran")
        ->check(whole_number(1, 1 << 20));
    command->add_option("--global-batch", global_batch, "gpt3, bert: sequences per step (default: the calibration's)")
        ->check(whole_number(1, 1 << 24));
    command->add_option("--device-memory-gib", device_memory_gib, "gpt3, bert: memory of one device, GiB")
        ->check(number_above(0));
    command->add_flag(
        "--in-network", in_network,
        "gpt3, bert: the data-parallel all-reduce is summed in the switches (SHARP): each device sends and "
        "receives its shard once");
    command->add_option("--switch-latency-us", switch_latency_us, "gpt3, bert with --in-network: the switches' latency")
        ->check(number_at_least(0));
    command->add_flag(
        "--distributed-optimizer", distributed_optimizer,
        "gpt3, bert: the fp32 master weights and the optimizer's moments are sharded over the data-parallel ranks");
    command
        ->add_option(
            "--published", published,
            "gpt3, bert: the published results of the predicted configuration (a results/<system>/<benchmark>/ "
            "folder): their olympic score, as review scores it, and the prediction's error")
        ->check(CLI::ExistingPath);
    command->add_flag("--plan", plan, "gpt3, bert: search every layout that divides the model and batch and fits");
    command->add_option("--sweep", sweep,
                        "gpt3, bert: the search at each inter-node bandwidth, e.g. inter-bandwidth=25,50,100");
  }

  // bert takes the 3-D model only when asked for one; without these it is the data-parallel model.
  bool layout_given() const { return tensor > 0 || pipeline > 0 || plan || !sweep.empty(); }

  bool given() const {
    return tensor > 0 || pipeline > 0 || micro_batch != 1 || interleave != 1 || !calibration_layout.empty() ||
           !sweep.empty() || !published.empty() || bench_layers > 0 || global_batch > 0 || device_memory_gib > 0 ||
           switch_latency_us > 0 || in_network || distributed_optimizer || plan;
  }
};

struct PredictFlags {
  std::string benchmark;
  int nodes = 1;
  int devices_per_node = 1;
  double per_device_batch = 0;
  std::string calibrate, storage_json;
  std::vector<std::string> bench_json;
  double input_rate = 0;
  double samples_per_epoch = 0;
  double converge_at = 0;
  std::string evaluation_scaling;
  std::string ruleset = "1.1.0";
  LinkFlags intra, inter;
  ExchangeFlags exchange;
  ThreeDFlags three_d;
  bool json = false;
};

// "inter-bandwidth=25,50,100": the inter-node bandwidths in GB/s.
std::vector<double> sweep_bandwidths(const std::string& sweep) {
  const std::string prefix = "inter-bandwidth=";
  if (sweep.rfind(prefix, 0) != 0) fail("--sweep", "expected inter-bandwidth=GB/s,GB/s,..., got '" + sweep + "'");
  std::vector<double> values;
  std::stringstream list(sweep.substr(prefix.size()));
  for (std::string item; std::getline(list, item, ',');) {
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || !std::isfinite(value) || !(value > 0))
      fail("--sweep", "'" + item + "' is not a bandwidth above 0 GB/s");
    values.push_back(value);
  }
  if (values.empty()) fail("--sweep", "lists no bandwidth");
  return values;
}

predict::DeviceCalibration three_d_calibration(const PredictFlags& flags, const review::Ruleset& ruleset,
                                               const predict::ModelRun& model) {
  if (flags.bench_json.empty()) {
    if (flags.three_d.calibration_layout.empty())
      fail("--calibration-layout", "give the published run's layout with --calibrate, e.g. tp=4,pp=8,v=12,b=1");
    const predict::Calibration logs = predict::calibrate_from_logs(flags.calibrate, ruleset);
    if (logs.benchmark != flags.benchmark)
      fail("predict", "the calibration is " + logs.benchmark + ", not " + flags.benchmark);
    predict::Cluster cluster = predict::cluster_of(logs);
    cluster.intra = flags.intra.resolve(logs.intra);
    cluster.inter = flags.inter.resolve(logs.inter);
    return predict::calibrate_from_run(
        logs, model, predict::parse_layout(flags.three_d.calibration_layout, "--calibration-layout"), cluster);
  }
  if (flags.three_d.bench_layers < 1) fail("--bench-layers", "give the layers the bench ran with --bench");
  const predict::Calibration bench = predict::calibration_from_bench_json(flags.bench_json.front());
  if (bench.benchmark != flags.benchmark)
    fail("predict", "the calibration is " + bench.benchmark + ", not " + flags.benchmark);
  return predict::calibrate_from_bench(bench, model, flags.three_d.bench_layers);
}

// The search at each inter-node bandwidth: the best layout, and the best whose tensor group leaves the node.
void print_sweep(const PredictFlags& flags, const predict::DeviceCalibration& calibration,
                 const predict::ModelRun& model, predict::Cluster cluster, const review::RcpTable& rcp) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string table =
      "| inter-node GB/s per node | best layout | minutes | best with tp > devices per node | minutes |\n"
      "|---:|---|---:|---|---:|\n";
  for (double bandwidth : sweep_bandwidths(flags.three_d.sweep)) {
    cluster.inter.bytes_per_second = bandwidth * 1e9;
    const auto found = predict::search_layouts(calibration, model, cluster, rcp);
    if (found.empty()) fail("--device-memory-gib", "no layout fits at " + std::to_string(bandwidth) + " GB/s");
    const auto across = std::find_if(found.begin(), found.end(), [&](const predict::ThreeDPrediction& p) {
      return p.cost.layout.tensor > cluster.devices_per_node;
    });
    const std::string across_layout = across == found.end() ? "none fits" : across->cost.layout.describe();
    const double across_minutes = across == found.end() ? 0 : across->minutes;
    rows.push_back({{"inter_bandwidth_gb_per_s", bandwidth},
                    {"best", predict::to_json(found.front())},
                    {"best_with_tensor_across_nodes", across == found.end() ? nullptr : predict::to_json(*across)}});
    char line[256];
    std::snprintf(line, sizeof line, "| %g | %s dp=%d | %.2f | %s | %.2f |\n", bandwidth,
                  found.front().cost.layout.describe().c_str(), found.front().cost.data, found.front().minutes,
                  across_layout.c_str(), across_minutes);
    table += line;
  }
  std::cout << (flags.json ? json_text(rows) : table);
}

void print_plan(const PredictFlags& flags, const predict::DeviceCalibration& calibration,
                const predict::ModelRun& model, const predict::Cluster& cluster, const review::RcpTable& rcp) {
  const auto found = predict::search_layouts(calibration, model, cluster, rcp);
  if (found.empty()) fail("--device-memory-gib", "no layout of the model fits the devices");
  const size_t shown = std::min<size_t>(found.size(), 6);
  if (flags.json) {
    nlohmann::ordered_json out = {{"best", predict::to_json(found.front())}, {"runners_up", nlohmann::json::array()}};
    for (size_t i = 1; i < shown; ++i) out["runners_up"].push_back(predict::to_json(found[i]));
    out["layouts_that_fit"] = found.size();
    out["calibration"] = predict::to_json(calibration);
    std::cout << json_text(out);
    return;
  }
  std::cout << "best of " << found.size() << " layouts that fit: " << predict::format_three_d_text(found.front());
  for (size_t i = 1; i < shown; ++i) std::cout << "  runner-up: " << predict::format_three_d_text(found[i]);
}

void predict_three_d(const PredictFlags& flags, const review::Ruleset& ruleset) {
  if (flags.calibrate.empty() == flags.bench_json.empty())
    fail("predict", "give one calibration: --calibrate PATH (result logs) or --bench FILE (bench --json)");
  if (flags.per_device_batch > 0)
    fail("--per-device-batch", "the 3-D model takes the batch as --global-batch and --micro-batch");
  const ThreeDFlags& three_d = flags.three_d;
  predict::ModelRun model = predict::mlperf_model_run(flags.benchmark, "predict");
  model.distributed_optimizer = three_d.distributed_optimizer;
  const predict::DeviceCalibration calibration = three_d_calibration(flags, ruleset, model);
  model.global_batch = three_d.global_batch > 0 ? three_d.global_batch : calibration.run.global_batch;
  predict::Cluster cluster;
  cluster.nodes = flags.nodes;
  cluster.devices_per_node = flags.devices_per_node;
  cluster.intra = flags.intra.resolve(calibration.run.intra);
  cluster.inter = flags.inter.resolve(calibration.run.inter);
  cluster.in_network = three_d.in_network;
  cluster.switch_latency_seconds = three_d.switch_latency_us * 1e-6;
  if (!(three_d.device_memory_gib > 0)) fail("--device-memory-gib", "give the memory of one device (e.g. 80)");
  cluster.device_memory_bytes = three_d.device_memory_gib * 1024 * 1024 * 1024;
  const review::RcpTable rcp = predict::rcp_table_for(ruleset, flags.benchmark);
  if (!three_d.published.empty() && (three_d.plan || !three_d.sweep.empty()))
    fail("--published", "compares one layout's prediction with its results: give it without --plan and --sweep");
  if (!three_d.sweep.empty()) return print_sweep(flags, calibration, model, cluster, rcp);
  if (three_d.plan) return print_plan(flags, calibration, model, cluster, rcp);
  if (three_d.tensor < 1 || three_d.pipeline < 1)
    fail("--tensor-parallel", "give the layout (--tensor-parallel and --pipeline-parallel) or --plan");
  const predict::Layout layout{three_d.tensor, three_d.pipeline, three_d.interleave, three_d.micro_batch};
  const predict::ThreeDPrediction prediction = predict::predict_three_d(calibration, model, cluster, layout, rcp);
  nlohmann::ordered_json out = predict::to_json(prediction);
  std::string text = predict::format_three_d_text(prediction);
  if (!three_d.published.empty()) {
    const predict::Calibration published = predict::calibrate_from_logs(three_d.published, ruleset);
    const double minutes = published.published_minutes.value_or(0);
    if (!(minutes > 0)) fail(three_d.published, "has no olympic score to compare with");
    const double error = prediction.minutes / minutes - 1;
    out["published_minutes"] = minutes;
    out["error"] = error;
    char line[160];
    std::snprintf(line, sizeof line, "  published: %.3f minutes (the olympic score of %d runs), error %+.1f%%\n",
                  minutes, published.runs, 100 * error);
    text += line;
  }
  out["calibration"] = predict::to_json(calibration);
  std::cout << (flags.json ? json_text(out) : text);
}

void add_predict(CLI::App& app) {
  auto flags = std::make_shared<PredictFlags>();
  CLI::App* command = app.add_subcommand("predict", "Predict time-to-train at N nodes from a calibration (docs/predict.md)");
  command
      ->add_option("benchmark", flags->benchmark,
                   "Benchmark (resnet, bert, ssd, maskrcnn, rnnt, unet3d, dlrm, minigo; gpt3 under a tensor x pipeline "
                   "x data layout, and bert too given one, --plan or --sweep)")
      ->required();
  command->add_option("--nodes", flags->nodes, "Nodes")->required()->check(whole_number(1, 1 << 20));
  command->add_option("--devices-per-node", flags->devices_per_node, "Devices (ranks) per node")
      ->required()
      ->check(whole_number(1, 1024));
  command
      ->add_option("--per-device-batch", flags->per_device_batch,
                   "Samples per device per step (default: the calibration's)")
      ->check(number_between(0, 1e12));
  command->add_option("--calibrate", flags->calibrate,
                      "A result log or a folder of them (results/<system>/<benchmark>/; systems/<system>.json is read "
                      "when found beside it)")
      ->check(CLI::ExistingPath);
  command->add_option("--bench", flags->bench_json,
                      "A `trainbench bench --json` file as the calibration; a second one at another batch gives the "
                      "step overhead")
      ->expected(1, 2)
      ->check(CLI::ExistingFile);
  command->add_option("--storage", flags->storage_json, "A `trainbench probe storage --json` file: the node's input rate")
      ->check(CLI::ExistingFile);
  command->add_option("--input-rate", flags->input_rate, "Samples per second one node can read (replaces --storage)")
      ->check(number_between(0, 1e12));
  command
      ->add_option("--samples-per-epoch", flags->samples_per_epoch,
                   "Samples in an epoch, when the calibration does not log train_samples (a bench)")
      ->check(number_between(0, 1e12));
  command
      ->add_option("--converge-at", flags->converge_at,
                   "Units to converge (epochs; samples for BERT) instead of the RCP tables' estimate")
      ->check(number_between(0, 1e12));
  command->add_option("--evaluation-scaling", flags->evaluation_scaling,
                      "devices (evaluation shards over the devices) or fixed (host-side scoring); default by benchmark")
      ->check(CLI::IsMember({"devices", "fixed"}));
  command->add_option("--ruleset", flags->ruleset, "Ruleset whose RCP tables say how epochs grow with the batch")
      ->capture_default_str();
  flags->intra.add_to(command, "intra", "intra-node");
  flags->inter.add_to(command, "inter", "inter-node");
  flags->exchange.add_to(command);
  flags->three_d.add_to(command);
  command->add_flag("--json", flags->json, "Print the prediction as JSON ({\"minutes\", \"parts\", ...})");
  command->callback([flags, command] {
    if (flags->benchmark == "gpt3" || (flags->benchmark == "bert" && flags->three_d.layout_given())) {
      // GPT-3 is a round-3.0 benchmark: its RCPs are that ruleset's. BERT's are v1.1's, the default.
      const bool round_3 = flags->benchmark == "gpt3" && !command->count("--ruleset");
      return predict_three_d(*flags, review::load_ruleset(round_3 ? "3.0.0" : flags->ruleset));
    }
    if (flags->three_d.given())
      fail("--tensor-parallel",
           "3-D layouts are modelled for gpt3 and bert only (bert: with --tensor-parallel and --pipeline-parallel, "
           "--plan or --sweep)");
    if (flags->calibrate.empty() == flags->bench_json.empty())
      fail("predict", "give one calibration: --calibrate PATH (result logs) or --bench FILE (bench --json)");
    const review::Ruleset ruleset = review::load_ruleset(flags->ruleset);
    predict::Calibration calibration = flags->calibrate.empty()
                                           ? predict::calibration_from_bench_json(flags->bench_json.front())
                                           : predict::calibrate_from_logs(flags->calibrate, ruleset);
    if (calibration.benchmark != flags->benchmark)
      fail("predict", "the calibration is " + calibration.benchmark + ", not " + flags->benchmark);
    const review::BenchmarkRules* rules = ruleset.benchmark(flags->benchmark);
    if (!flags->bench_json.empty() && rules && rules->train_samples_convergence) {
      calibration.unit = mllog_keys::kTrainSamples;  // BERT's RCPs count samples, so an epoch's size does not matter
      calibration.samples_per_unit = 1;
    }
    if (flags->samples_per_epoch > 0) calibration.samples_per_unit = flags->samples_per_epoch;

    predict::ScaleOut scale_out;
    scale_out.nodes = flags->nodes;
    scale_out.devices_per_node = flags->devices_per_node;
    scale_out.per_device_batch = flags->per_device_batch > 0 ? flags->per_device_batch : calibration.per_device_batch();
    scale_out.intra = flags->intra.resolve(calibration.intra);
    scale_out.inter = flags->inter.resolve(calibration.inter);
    flags->exchange.apply(scale_out);
    if (flags->bench_json.size() == 2) {
      if (flags->exchange.step_overhead_ms > 0) fail("--step-overhead-ms", "give it or a second --bench, not both");
      scale_out.step_overhead_seconds =
          predict::step_overhead_seconds(calibration, predict::calibration_from_bench_json(flags->bench_json.back()));
    }
    scale_out.evaluation_scales = flags->evaluation_scaling.empty()
                                      ? predict::evaluation_scales_with_devices(flags->benchmark)
                                      : flags->evaluation_scaling == "devices";
    if (flags->input_rate > 0)
      scale_out.input_samples_per_second_per_node = flags->input_rate;
    else if (!flags->storage_json.empty())
      scale_out.input_samples_per_second_per_node = predict::input_rate_from_storage_json(flags->storage_json);
    if (flags->converge_at > 0) scale_out.units_to_converge = flags->converge_at;

    const review::RcpTable rcp = predict::rcp_table_for(ruleset, flags->benchmark);
    const predict::Prediction prediction = predict::predict_time_to_train(calibration, scale_out, &rcp);
    // Every input is in range, yet a product of them may not be: no NaN or infinite minutes are printed.
    if (!std::isfinite(prediction.minutes) || !(prediction.minutes > 0))
      fail("predict", "the inputs give no finite time to train (" + std::to_string(prediction.minutes) +
                          " minutes): a count or rate from the flags or the calibration files is out of proportion");
    if (flags->json) {
      nlohmann::ordered_json out = predict::to_json(prediction);
      out["calibration"] = predict::to_json(calibration);
      std::cout << json_text(out);
    } else {
      std::cout << predict::format_prediction_text(prediction);
    }
  });
}

// predict-check --calibrate: the 3-D model against published results at one layout (predict/validation.h).
struct LayoutCheckFlags {
  std::string calibrate, calibration_layout, layout;
  double device_memory_gib = 0, switch_latency_us = 0;
  bool in_network = false, distributed_optimizer = false;

  void add_to(CLI::App* command) {
    command
        ->add_option("--calibrate", calibrate,
                     "Check the 3-D model (gpt3, bert) instead: the published results folder to calibrate on, e.g. "
                     "NVIDIA/results/dgxh100_n64_nemo/gpt3")
        ->check(CLI::ExistingPath);
    command->add_option("--calibration-layout", calibration_layout,
                        "With --calibrate: its runs' layout, e.g. tp=4,pp=8,v=12,b=1");
    command->add_option("--layout", layout, "With --calibrate: the layout every folder is predicted at");
    command->add_option("--device-memory-gib", device_memory_gib, "With --calibrate: memory of one device, GiB")
        ->check(number_above(0));
    command->add_flag("--distributed-optimizer", distributed_optimizer,
                      "With --calibrate: the fp32 master weights and the optimizer's state are sharded over the "
                      "data-parallel ranks");
    command->add_flag("--in-network", in_network,
                      "With --calibrate: the data-parallel all-reduce is summed in the "
                      "switches");
    command->add_option("--switch-latency-us", switch_latency_us, "With --in-network: the switches' latency")
        ->check(number_at_least(0));
  }

  bool given(const CLI::App& command) const {
    for (const char* flag : {"--calibration-layout", "--layout", "--device-memory-gib", "--distributed-optimizer",
                             "--in-network", "--switch-latency-us"})
      if (command.count(flag)) return true;
    return false;
  }

  // The benchmark is the calibration folder's name (results/<system>/<benchmark>/, or a result log's folder).
  std::string benchmark() const {
    const fs::path path(calibrate);
    return (fs::is_directory(path) ? path : path.parent_path()).filename().string();
  }

  predict::LayoutCheck check(double overlap) const {
    if (calibration_layout.empty())
      fail("--calibration-layout", "give the calibration's layout, e.g. tp=4,pp=8,v=12,b=1");
    if (layout.empty()) fail("--layout", "give the layout to predict every folder at, e.g. tp=4,pp=8,v=12,b=1");
    if (!(device_memory_gib > 0)) fail("--device-memory-gib", "give the memory of one device (e.g. 80)");
    predict::LayoutCheck result;
    result.calibrate = calibrate;
    result.calibration_layout = predict::parse_layout(calibration_layout, "--calibration-layout");
    result.layout = predict::parse_layout(layout, "--layout");
    result.run = predict::mlperf_model_run(benchmark(), "--calibrate");
    result.run.distributed_optimizer = distributed_optimizer;
    result.run.overlap = overlap;
    result.cluster.in_network = in_network;
    result.cluster.switch_latency_seconds = switch_latency_us * 1e-6;
    result.cluster.device_memory_bytes = device_memory_gib * 1024 * 1024 * 1024;
    return result;
  }
};

struct CheckFlags {
  std::string organization;
  std::string markdown, svg;
  std::string ruleset = "1.1.0";
  ExchangeFlags exchange;
  LayoutCheckFlags layout_check;
  bool json = false;
};

// What predict-check writes: the table on stdout (or the JSON) and, where asked, the table and chart in files.
void write_check(const CheckFlags& flags, const std::string& table, const std::string& svg,
                 const nlohmann::ordered_json& json) {
  if (!flags.markdown.empty()) write_file_atomically(flags.markdown, table);
  if (!flags.svg.empty()) write_file_atomically(flags.svg, svg);
  std::cout << (flags.json ? json_text(json) : table);
}

void check_layout(const CheckFlags& flags, const CLI::App& command) {
  for (const char* flag : {"--gradient-bytes", "--all-to-all-bytes-per-sample", "--step-overhead-ms"})
    if (command.count(flag)) fail(flag, "is the data-parallel check's; the 3-D model (--calibrate) computes its own");
  const LayoutCheckFlags& layout_check = flags.layout_check;
  const predict::LayoutCheck check = layout_check.check(flags.exchange.overlap);
  // GPT-3 is a round-3.0 benchmark: its RCPs are that ruleset's.
  const bool round_3 = layout_check.benchmark() == "gpt3" && !command.count("--ruleset");
  const review::Ruleset ruleset = review::load_ruleset(round_3 ? "3.0.0" : flags.ruleset);
  const predict::LayoutValidation validation = predict::validate_layout(flags.organization, ruleset, check);
  write_check(flags, predict::layout_validation_markdown(validation), predict::layout_validation_svg(validation),
              predict::to_json(validation));
}

void add_predict_check(CLI::App& app) {
  auto flags = std::make_shared<CheckFlags>();
  CLI::App* command = app.add_subcommand(
      "predict-check",
      "Check the prediction model against a submission: calibrate on its one-node results, predict its multi-node "
      "ones (with --calibrate: the 3-D model, at one layout, against every results folder of the benchmark)");
  command
      ->add_option("organization", flags->organization,
                   "A submission's <org> folder (results/, systems/); with --calibrate, also a folder of them")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--markdown", flags->markdown, "Also write the table as Markdown to FILE")->check(output_file());
  command->add_option("--svg", flags->svg, "Also write the chart of minutes against nodes to FILE")
      ->check(output_file());
  command->add_option("--ruleset", flags->ruleset, "Ruleset (scoring and RCP tables; gpt3's default 3.0.0)")
      ->capture_default_str();
  flags->exchange.add_to(command);
  flags->layout_check.add_to(command);
  command->add_flag("--json", flags->json, "Print the rows as JSON");
  command->callback([flags, command] {
    if (!flags->layout_check.calibrate.empty()) return check_layout(*flags, *command);
    if (flags->layout_check.given(*command))
      fail("--layout", "--calibration-layout, --layout and the other 3-D flags check the 3-D model: give --calibrate");
    const review::Ruleset ruleset = review::load_ruleset(flags->ruleset);
    predict::ScaleOut scale_out;
    flags->exchange.apply(scale_out);
    const auto validations = predict::validate_scaling(flags->organization, ruleset, scale_out);
    write_check(*flags, predict::validation_markdown(validations), predict::validation_svg(validations),
                predict::to_json(validations));
  });
}

}  // namespace

void add_predict_commands(CLI::App& app, CommandContext&) {
  add_predict(app);
  add_predict_check(app);
}

}  // namespace trainbench::cli
