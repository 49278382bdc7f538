// `trainbench predict` and `trainbench predict-check`: thin glue over src/predict (torch-free). predict takes
// a calibration (published result logs or a `bench --json`), links (given, from `probe comm --json`, or the
// system description beside the logs) and prints the predicted minutes with their parts; predict-check
// runs the model against a submission's own multi-node results.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "predict/calibrate.h"
#include "predict/measurements.h"
#include "predict/validation.h"
#include "probes/storage_probe.h"
#include "review/ruleset.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench::cli {

namespace {

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
  bool json = false;
};

void add_predict(CLI::App& app) {
  auto flags = std::make_shared<PredictFlags>();
  CLI::App* command = app.add_subcommand("predict", "Predict time-to-train at N nodes from a calibration (docs/predict.md)");
  command->add_option("benchmark", flags->benchmark, "Benchmark (resnet, bert, ssd, maskrcnn, rnnt, unet3d, dlrm, minigo)")
      ->required();
  command->add_option("--nodes", flags->nodes, "Nodes")->required()->check(whole_number(1, 1 << 20));
  command->add_option("--devices-per-node", flags->devices_per_node, "Devices (ranks) per node")
      ->required()
      ->check(whole_number(1, 1024));
  command->add_option("--per-device-batch", flags->per_device_batch, "Samples per device per step (default: the calibration's)")
      ->check(number_above(0));
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
      ->check(number_above(0));
  command->add_option("--samples-per-epoch", flags->samples_per_epoch,
                      "Samples in an epoch, when the calibration does not log train_samples (a bench)")
      ->check(number_above(0));
  command->add_option("--converge-at", flags->converge_at,
                      "Units to converge (epochs; samples for BERT) instead of the RCP tables' estimate")
      ->check(number_above(0));
  command->add_option("--evaluation-scaling", flags->evaluation_scaling,
                      "devices (evaluation shards over the devices) or fixed (host-side scoring); default by benchmark")
      ->check(CLI::IsMember({"devices", "fixed"}));
  command->add_option("--ruleset", flags->ruleset, "Ruleset whose RCP tables say how epochs grow with the batch")
      ->capture_default_str();
  flags->intra.add_to(command, "intra", "intra-node");
  flags->inter.add_to(command, "inter", "inter-node");
  flags->exchange.add_to(command);
  command->add_flag("--json", flags->json, "Print the prediction as JSON ({\"minutes\", \"parts\", ...})");
  command->callback([flags] {
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
    if (flags->json) {
      nlohmann::ordered_json out = predict::to_json(prediction);
      out["calibration"] = predict::to_json(calibration);
      std::cout << json_text(out);
    } else {
      std::cout << predict::format_prediction_text(prediction);
    }
  });
}

struct CheckFlags {
  std::string organization;
  std::string markdown, svg;
  std::string ruleset = "1.1.0";
  ExchangeFlags exchange;
  bool json = false;
};

void add_predict_check(CLI::App& app) {
  auto flags = std::make_shared<CheckFlags>();
  CLI::App* command = app.add_subcommand(
      "predict-check",
      "Check the prediction model against a submission: calibrate on its one-node results, predict its multi-node ones");
  command->add_option("organization", flags->organization, "A submission's <org> folder (results/, systems/)")
      ->required()
      ->check(CLI::ExistingDirectory);
  command->add_option("--markdown", flags->markdown, "Also write the table as Markdown to FILE");
  command->add_option("--svg", flags->svg, "Also write the chart of minutes against nodes to FILE");
  command->add_option("--ruleset", flags->ruleset, "Ruleset (scoring and RCP tables)")->capture_default_str();
  flags->exchange.add_to(command);
  command->add_flag("--json", flags->json, "Print the rows as JSON");
  command->callback([flags] {
    const review::Ruleset ruleset = review::load_ruleset(flags->ruleset);
    predict::ScaleOut scale_out;
    flags->exchange.apply(scale_out);
    const auto validations = predict::validate_scaling(flags->organization, ruleset, scale_out);
    const std::string table = predict::validation_markdown(validations);
    if (!flags->markdown.empty()) write_file_atomically(flags->markdown, table);
    if (!flags->svg.empty()) write_file_atomically(flags->svg, predict::validation_svg(validations));
    std::cout << (flags->json ? json_text(predict::to_json(validations)) : table);
  });
}

}  // namespace

void add_predict_commands(CLI::App& app, CommandContext&) {
  add_predict(app);
  add_predict_check(app);
}

}  // namespace trainbench::cli
