#include "workloads/common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "dist/communicator.h"
#include "dist/device.h"
#include "dist/gradient_sync.h"
#include "util/error.h"

namespace trainbench {

std::shared_ptr<dist::Communicator> communicator_or_single(const WorkloadSettings& settings) {
  return settings.communicator ? settings.communicator : dist::Communicator::connect(dist::RankEnvironment{});
}

int64_t local_batch_size(const Config& config, const std::string& field, int world) {
  const int64_t global = config.integer_at_least(field, 1);
  if (global % world != 0)
    fail(config.name() + ": " + field, std::to_string(global) + " (the global batch) is not divisible by the " +
                                           std::to_string(world) + " ranks");
  return global / world;
}

void seed_torch(const WorkloadSettings& settings) {
  torch::set_num_threads(settings.threads);
  torch::manual_seed(settings.seed);
}

WorkloadBase::WorkloadBase(WorkloadSettings settings)
    : settings_(std::move(settings)),
      config_(settings_.config),
      device_(resolve_device(settings_.device)),
      communicator_(communicator_or_single(settings_)) {}

WorkloadDescription WorkloadBase::base_description(const std::string& sample_unit) const {
  WorkloadDescription description;
  description.benchmark = config_.name().substr(0, config_.name().find('/'));
  description.preset = config_.preset();
  description.sample_unit = sample_unit;
  description.target = QualityTarget::from_config(config_);
  description.threads = settings_.threads;
  description.device = device_.str();
  description.effective_config = config_.values();
  description.overrides = config_.overrides();
  return description;
}

int64_t WorkloadBase::local_batch(const std::string& field) const {
  return local_batch_size(config_, field, communicator_->world());
}

void WorkloadBase::require_data_dir(const std::string& expected) const {
  if (!std::filesystem::is_directory(settings_.data_dir))
    fail("--data " + settings_.data_dir, "dataset directory does not exist (expected " + expected + ")");
}

double WorkloadBase::fraction_over_ranks(double count, double total, const std::string& where,
                                         const std::string& what_is_empty) const {
  std::vector<double> counts{count, total};
  communicator_->sum(counts);
  if (counts[1] == 0) fail(where, what_is_empty);
  return counts[0] / counts[1];
}

void LossMeter::add(double loss, int64_t step) {
  if (!std::isfinite(loss))
    fail(config_.name(), "training diverged (loss " + std::to_string(loss) + " at step " + std::to_string(step) + ")");
  sum_ += loss;
  ++steps_;
}

RankWaitReport::RankWaitReport(const dist::GradientSync& gradients, RunControl& control)
    : gradients_(gradients), control_(control), waited_before_(gradients.stats().exposed_wait_seconds) {}

RankWaitReport::~RankWaitReport() { control_.add_rank_wait(gradients_.stats().exposed_wait_seconds - waited_before_); }

BenchRun::BenchRun(const WorkloadSettings& settings, const BenchSettings& bench_settings)
    : settings(settings),
      bench(bench_settings),
      device(resolve_device(settings.device)),
      communicator(communicator_or_single(settings)),
      global_batch(settings.config.integer("batch_size")),
      local_batch(local_batch_size(settings.config, "batch_size", communicator->world())) {
  seed_torch(settings);
}

double BenchRun::median_step_seconds(const std::function<void()>& step) {
  std::vector<double> seconds;
  for (int64_t i = 0; i < bench.warmup_steps + bench.steps; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    step();
    if (i >= bench.warmup_steps)
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const size_t middle = seconds.size() / 2;
  std::vector<double> median{seconds.size() % 2 ? seconds[middle] : (seconds[middle - 1] + seconds[middle]) / 2};
  communicator->sum(median);
  return median[0] / communicator->world();
}

void BenchRun::print_training(std::ostream& out, double step_seconds, const std::string& sample_unit,
                              double flops_per_sample, const std::string& details) const {
  const double flops_per_second = flops_per_sample * static_cast<double>(global_batch) / step_seconds;
  char line[512];
  std::snprintf(line, sizeof line,
                "training      %10.1f %s/s  (batch %lld over %d rank(s), %s, %s, %d threads/rank, median of %lld steps: "
                "%.5f s/step, %.1f GFLOP/s%s)\n",
                static_cast<double>(global_batch) / step_seconds, sample_unit.c_str(), static_cast<long long>(global_batch),
                communicator->world(), details.c_str(), device.str().c_str(), settings.threads,
                static_cast<long long>(bench.steps), step_seconds, flops_per_second / 1e9,
                share_of_peak(flops_per_second, bench).c_str());
  out << line;
}

std::string share_of_peak(double flops_per_second, const BenchSettings& settings) {
  if (settings.peak_flops <= 0) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", %.1f%% of measured fp32 peak %.1f GFLOP/s", 100.0 * flops_per_second / settings.peak_flops,
                settings.peak_flops / 1e9);
  return text;
}

}  // namespace trainbench
