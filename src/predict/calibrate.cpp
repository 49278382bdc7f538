#include "predict/calibrate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <regex>

#include "predict/time_to_train.h"
#include "review/compliance.h"
#include "review/json_checks.h"
#include "review/log_parser.h"
#include "review/rcp.h"
#include "review/scoring.h"
#include "util/error.h"
#include "util/json_limits.h"
#include "util/mllog_keys.h"

namespace trainbench::predict {

namespace fs = std::filesystem;

namespace {

struct RunTiming {
  double run_seconds = 0;
  double fixed_seconds = 0;
  double evaluation_seconds = 0;
  int evaluations = 0;  // timed ones (eval_start to eval_stop inside the run)
  int accuracies = 0;   // eval_accuracy lines inside the run
  bool evaluations_timed = false;
  std::optional<double> train_samples;
};

RunTiming time_run(const review::ParsedLog& log) {
  RunTiming timing;
  std::optional<double> run_start, run_stop, first_step;
  double eval_start = std::nan("");  // NaN while no evaluation is open
  for (const auto& event : log.events) {
    if (event.key == mllog_keys::kRunStop) run_stop = event.time_ms;
    if (event.key == mllog_keys::kTrainSamples)  // some log it at init
      timing.train_samples = review::number_of(event.value);
  }
  for (const auto& event : log.events) {
    if (event.key == mllog_keys::kRunStart) run_start = event.time_ms;
    if (!run_start) continue;
    if (run_stop && event.time_ms > *run_stop) continue;  // MiniGo scores its generations after run_stop
    if ((event.key == mllog_keys::kBlockStart || event.key == mllog_keys::kEpochStart) && !first_step)
      first_step = event.time_ms;
    if (event.key == mllog_keys::kEvalAccuracy) ++timing.accuracies;
    if (event.key == mllog_keys::kEvalStart) eval_start = event.time_ms;
    if (event.key == mllog_keys::kEvalStop && !std::isnan(eval_start)) {
      timing.evaluation_seconds += (event.time_ms - eval_start) / 1000.0;
      ++timing.evaluations;
      eval_start = std::nan("");
    }
  }
  if (run_start && run_stop) timing.run_seconds = (*run_stop - *run_start) / 1000.0;
  if (run_start && first_step) timing.fixed_seconds = (*first_step - *run_start) / 1000.0;
  timing.evaluations_timed = timing.evaluations > 0;
  return timing;
}

std::vector<std::string> result_logs(const std::string& path) {
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path)) fail(path, "no such result log or folder");
  std::vector<std::string> logs;
  for (const auto& entry : fs::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind("result_", 0) == 0 && entry.path().extension() == ".txt")
      logs.push_back(entry.path().string());
  }
  std::sort(logs.begin(), logs.end());
  if (logs.empty()) fail(path, "holds no result_<N>.txt logs");
  return logs;
}

// results/<system>/<benchmark>/ sits beside systems/<system>.json in a submission.
fs::path system_description_path(const std::string& path) {
  fs::path folder = fs::is_regular_file(path) ? fs::path(path).parent_path() : fs::path(path);
  folder = fs::weakly_canonical(folder);
  const fs::path system_folder = folder.parent_path();
  return system_folder.parent_path().parent_path() / "systems" / (system_folder.filename().string() + ".json");
}

std::optional<int> whole_field(const nlohmann::json& description, const char* field) {
  const auto it = description.find(field);
  if (it == description.end()) return std::nullopt;
  constexpr int64_t kMost = 1'000'000;  // nodes or devices per node; beyond any system, within int
  if (it->is_number_integer()) {
    const int64_t value = it->get<int64_t>();
    return value > 0 && value <= kMost ? std::optional<int>(static_cast<int>(value)) : std::nullopt;
  }
  if (it->is_string()) {
    try {
      size_t used = 0;
      const int value = std::stoi(it->get<std::string>(), &used);
      if (used == it->get<std::string>().size() && value > 0 && value <= kMost) return value;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

double mean(const std::vector<double>& values) {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

}  // namespace

double link_bytes_per_second(const std::string& text) {
  static const std::regex speed(R"((?:(\d+)\s*x\s*[^,;]*?)?(\d+(?:\.\d+)?)\s*(GB|Gb)/s)", std::regex::icase);
  std::smatch match;
  if (!std::regex_search(text, match, speed)) return 0;
  const double count = match[1].matched ? std::stod(match[1].str()) : 1;
  const double value = std::stod(match[2].str());
  const bool bytes = match[3].str() == "GB" || match[3].str() == "gB";
  return count * value * (bytes ? 1e9 : 1e9 / 8);
}

void links_from_system_description(const nlohmann::json& description, Link& intra, Link& inter,
                                   std::vector<std::string>& notes) {
  const auto text = [&](const char* field) {
    const auto it = description.find(field);
    return it != description.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  // NVLink/NVSwitch figures ("600GB/s") count both directions; a ring sends one way.
  intra.bytes_per_second = link_bytes_per_second(text("accelerator_interconnect")) / 2;
  if (intra.bytes_per_second <= 0) notes.push_back("no speed in accelerator_interconnect: intra-node link unknown");
  std::string networking = text("host_networking");
  const size_t compute = networking.find("Compute:");
  if (compute != std::string::npos) networking = networking.substr(compute);
  inter.bytes_per_second = link_bytes_per_second(networking);
  if (inter.bytes_per_second <= 0) notes.push_back("no speed in host_networking: inter-node link unknown");
}

Calibration calibrate_from_logs(const std::string& path, const review::Ruleset& ruleset) {
  Calibration calibration;
  calibration.source = path;
  review::LogCheckOptions options;
  std::vector<review::RunTime> run_times;
  std::vector<std::optional<double>> convergence;
  std::vector<double> throughputs, evaluations_per_unit, seconds_per_evaluation, fixed_seconds;
  std::vector<RunTiming> timings;
  std::vector<review::RunReview> reviews;
  bool unit_is_step = false;
  for (const auto& log_path : result_logs(path)) {
    const review::ParsedLog log = review::parse_log_file(log_path);
    review::RunReview run = review::review_log(log, ruleset, options);
    const review::BenchmarkRules* rules = ruleset.benchmark(run.benchmark);
    if (rules && rules->train_samples_convergence && !options.bert_train_samples) {
      // BERT's RCPs count samples: review again reading the logged train_samples.
      options.bert_train_samples = true;
      run = review::review_log(log, ruleset, options);
    }
    if (calibration.benchmark.empty()) calibration.benchmark = run.benchmark;
    if (run.benchmark != calibration.benchmark)
      fail(log_path, "benchmark '" + run.benchmark + "' differs from the folder's '" + calibration.benchmark + "'");
    timings.push_back(time_run(log));
    reviews.push_back(std::move(run));
  }
  const review::BenchmarkRules* rules = ruleset.benchmark(calibration.benchmark);
  if (!rules) fail(path, "benchmark '" + calibration.benchmark + "' is not in ruleset " + ruleset.version);

  const fs::path description_path = system_description_path(path);
  nlohmann::json description;
  if (fs::is_regular_file(description_path)) {
    std::ifstream in(description_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check_json_nesting(text, description_path.string());
    try {
      description = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& error) {
      fail(description_path.string(), std::string("invalid JSON: ") + error.what());
    }
    calibration.system = description_path.stem().string();
    const auto nodes = whole_field(description, "number_of_nodes");
    const auto devices = whole_field(description, "accelerators_per_node");
    if (!nodes || !devices)
      fail(description_path.string(),
           "number_of_nodes and accelerators_per_node must be whole numbers from 1 to 1000000");
    calibration.nodes = *nodes;
    calibration.devices_per_node = *devices;
    links_from_system_description(description, calibration.intra, calibration.inter, calibration.notes);
    const auto accelerator = description.find("accelerator_model_name");
    if (accelerator != description.end() && accelerator->is_string()) calibration.accelerator = *accelerator;
  } else {
    calibration.notes.push_back("no system description at " + description_path.string() +
                                ": one node of one device assumed, links unknown");
  }

  for (size_t i = 0; i < reviews.size(); ++i) {
    const review::RunReview& run = reviews[i];
    const RunTiming& timing = timings[i];
    run_times.push_back({run.minutes.value_or(0), run.converged()});
    convergence.push_back(run.rcp_convergence());
    if (!run.converged() || !run.convergence) continue;
    calibration.unit = run.convergence_unit.empty() ? mllog_keys::kEpochNum : run.convergence_unit;
    if (run.global_batch_size && timing.train_samples) {
      calibration.global_batch = *run.global_batch_size;
      calibration.samples_per_unit = calibration.unit == mllog_keys::kTrainSamples ? 1 : *timing.train_samples;
    } else {
      // MiniGo logs neither: a generation is one step, and its self-play work divides over the devices.
      calibration.global_batch = 1;
      calibration.samples_per_unit = 1;
      unit_is_step = true;
    }
    const double training_seconds = timing.run_seconds - timing.fixed_seconds - timing.evaluation_seconds;
    const double samples = *run.convergence * calibration.samples_per_unit;
    if (training_seconds > 0 && samples > 0) throughputs.push_back(samples / training_seconds / calibration.devices());
    const int evaluations = timing.evaluations_timed ? timing.evaluations : timing.accuracies;
    evaluations_per_unit.push_back(evaluations / *run.convergence);
    if (timing.evaluations_timed) seconds_per_evaluation.push_back(timing.evaluation_seconds / timing.evaluations);
    fixed_seconds.push_back(timing.fixed_seconds);
    ++calibration.runs;
  }
  if (unit_is_step)
    calibration.notes.push_back("no global_batch_size and train_samples logged: one " + calibration.unit +
                                " is taken as one step whose work divides over the devices");
  if (calibration.runs == 0) fail(path, "no run converged with a compliant log, so nothing to calibrate from");
  // A sample may be split over devices (NVIDIA's v1.1 Mask R-CNN at 51 nodes: 408 devices, batch 272), but over no
  // more than a model-parallel group; 64 devices a sample refuses a claim of 1e6 nodes for a batch of 3264.
  constexpr double kMostDevicesPerSample = 64;
  if (!unit_is_step && calibration.devices() > kMostDevicesPerSample * calibration.global_batch)
    fail(description_path.string(), "number_of_nodes x accelerators_per_node is " +
                                        std::to_string(calibration.devices()) + " devices for the logs' global batch " +
                                        format_decimals(calibration.global_batch, 0) +
                                        ": more than 64 devices a sample");
  if (throughputs.empty())
    fail(path, "no converged run trained for a positive time to compute its throughput from");
  calibration.samples_per_second_per_device = mean(throughputs);
  calibration.evaluations_per_unit = mean(evaluations_per_unit);
  calibration.seconds_per_evaluation = mean(seconds_per_evaluation);
  calibration.fixed_seconds = mean(fixed_seconds);
  if (seconds_per_evaluation.empty())
    calibration.notes.push_back("the logs do not time their evaluations (no eval_start/eval_stop): evaluation "
                                "stays inside the training throughput");
  const review::OlympicStats units = review::olympic_stats(
      [&] {
        std::vector<double> values;
        for (const auto& value : convergence)
          if (value) values.push_back(*value);
        return values;
      }(),
      static_cast<int>(convergence.size()) > 2 * rules->drop_each_side ? rules->drop_each_side : 0);
  calibration.units_to_converge = units.mean;
  const review::OlympicScore score = review::olympic_score(run_times, rules->drop_each_side);
  calibration.published_minutes = score.mean_minutes;
  return calibration;
}

}  // namespace trainbench::predict
