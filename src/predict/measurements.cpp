#include "predict/measurements.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>

#include "predict/time_to_train.h"
#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench::predict {

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot be read");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  check_json_nesting(text, path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail(path, std::string("invalid JSON: ") + error.what());
  }
}

// A measured quantity: above `minimum` and at most 1e15 (JSON has no infinity, but 1e308 divides to nothing).
double positive_number(const nlohmann::json& object, const std::string& field, const std::string& path,
                       double minimum = 0) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_number() || !(it->get<double>() > minimum) || !(it->get<double>() <= 1e15))
    fail(path, "field '" + field + "' must be a number above " + format_decimals(minimum, minimum > 0 ? 3 : 0) +
                   " and at most 1e15" + (it != object.end() ? ", got " + it->dump() : ""));
  return it->get<double>();
}

// A count of ranks: a whole number from 1 to 1,000,000.
int rank_count(const nlohmann::json& object, const std::string& field, const std::string& path) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1'000'000)
    fail(path, "field '" + field + "' must be a whole number of ranks from 1 to 1000000" +
                   (it != object.end() ? ", got " + it->dump() : ""));
  return static_cast<int>(it->get<int64_t>());
}

std::string text_field(const nlohmann::json& object, const std::string& field, const std::string& path) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_string() || it->get<std::string>().empty())
    fail(path, "field '" + field + "' must be a non-empty string");
  return it->get<std::string>();
}

}  // namespace

std::optional<BenchMeasurement> parse_bench_output(const std::string& output, const std::string& benchmark,
                                                   const std::string& preset) {
  static const std::regex line(
      R"(training\s+([0-9.]+) (\S+)/s\s+\(batch (\d+) over (\d+) rank\(s\),.*median of (\d+) steps: ([0-9.]+) s/step)");
  std::smatch match;
  if (!std::regex_search(output, match, line)) return std::nullopt;
  BenchMeasurement measurement;
  measurement.benchmark = benchmark;
  measurement.preset = preset;
  measurement.samples_per_second = std::stod(match[1].str());
  measurement.sample_unit = match[2].str();
  measurement.global_batch = std::stod(match[3].str());
  measurement.ranks = std::stoi(match[4].str());
  measurement.steps = std::stoi(match[5].str());
  measurement.step_seconds = std::stod(match[6].str());
  return measurement;
}

nlohmann::ordered_json to_json(const BenchMeasurement& measurement) {
  return {{"benchmark", measurement.benchmark},
          {"preset", measurement.preset},
          {"samples_per_second", measurement.samples_per_second},
          {"sample_unit", measurement.sample_unit},
          {"global_batch", measurement.global_batch},
          {"ranks", measurement.ranks},
          {"per_rank_batch", measurement.global_batch / measurement.ranks},
          {"steps", measurement.steps},
          {"step_seconds", measurement.step_seconds}};
}

Calibration calibration_from_bench_json(const std::string& path) {
  const nlohmann::json json = read_json(path);
  if (!json.is_object()) fail(path, "must be a `trainbench bench --json` object");
  Calibration calibration;
  calibration.source = path;
  calibration.benchmark = text_field(json, "benchmark", path);
  calibration.global_batch = positive_number(json, "global_batch", path);
  calibration.devices_per_node = rank_count(json, "ranks", path);
  const double step_seconds = positive_number(json, "step_seconds", path);
  calibration.samples_per_second_per_device = calibration.global_batch / step_seconds / calibration.devices_per_node;
  calibration.notes.push_back("calibrated from a bench: no start-up, evaluation or convergence measured");
  return calibration;
}

double step_overhead_seconds(const Calibration& first, const Calibration& second) {
  const double first_batch = first.per_device_batch(), second_batch = second.per_device_batch();
  if (first_batch == second_batch)
    fail(second.source, "has the same per-device batch as " + first.source + ": two batches are needed for a step overhead");
  const double first_step = first_batch / first.samples_per_second_per_device;
  const double second_step = second_batch / second.samples_per_second_per_device;
  const double seconds_per_sample = (second_step - first_step) / (second_batch - first_batch);
  return std::max(0.0, first_step - seconds_per_sample * first_batch);
}

Link link_from_comm_json(const std::string& path) {
  const nlohmann::json json = read_json(path);
  const auto rows = json.find("rows");
  if (rows == json.end() || !rows->is_array()) fail(path, "field 'rows' must be the list `probe comm --json` writes");
  const auto environment = json.find("environment");
  if (environment == json.end() || !environment->is_object()) fail(path, "field 'environment' must be an object");
  const int ranks = rank_count(*environment, "ranks", path);
  if (ranks < 2) fail(path, "environment.ranks is 1: a probe over one rank measures no link");
  const nlohmann::json* smallest = nullptr;
  const nlohmann::json* largest = nullptr;
  for (const auto& row : *rows) {
    if (!row.is_object() || row.value("operation", "") != "all_reduce") continue;
    const double bytes = positive_number(row, "bytes", path);
    if (!smallest || bytes < (*smallest)["bytes"].get<double>()) smallest = &row;
    if (!largest || bytes > (*largest)["bytes"].get<double>()) largest = &row;
  }
  if (!largest) fail(path, "holds no all_reduce rows (run `probe comm` with --ops all_reduce)");
  Link link;
  link.bytes_per_second = positive_number(*largest, "busbw_GBps", path) * 1e9;
  link.latency_seconds = positive_number(*smallest, "time_us", path) * 1e-6 / (2.0 * (ranks - 1));
  return link;
}

double input_rate_from_storage_json(const std::string& path) {
  const nlohmann::json json = read_json(path);
  const auto reads = json.find("dataset_read");
  if (reads == json.end() || !reads->is_object())
    fail(path, "field 'dataset_read' must be the object `probe storage --json` writes");
  return positive_number(*reads, "files_per_second", path, 1e-3);  // below it no dataset is read in a run's time
}

}  // namespace trainbench::predict
