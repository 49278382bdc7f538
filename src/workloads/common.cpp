#include "workloads/common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include <torch/csrc/autograd/profiler_legacy.h>
#ifdef TRAINBENCH_CUDA_ALLOCATOR_STATS
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "harness/cpu_contention.h"
#include "parallel/communicator.h"
#include "parallel/context.h"
#include "parallel/device.h"
#include "parallel/gradient_sync.h"
#include "parallel/plan.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/process_memory.h"
#include "workloads/trainer.h"

namespace trainbench {

std::shared_ptr<parallel::Communicator> communicator_or_single(const WorkloadSettings& settings) {
  return settings.communicator ? settings.communicator : parallel::Communicator::connect(parallel::RankEnvironment{});
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "fp32";
}

StepSettings StepSettings::from_config(const Config& config, const torch::Device& device) {
  StepSettings settings;
  settings.accumulation_steps = config.integer_at_least("gradient_accumulation_steps", 1);
  const std::string precision = config.string("precision");
  if (precision == "fp32") {
    settings.precision = Precision::kFp32;
  } else if (precision == "bf16") {
    settings.precision = Precision::kBf16;
  } else if (precision == "fp16") {
    if (!device.is_cuda())
      fail(config.name() + ": precision", "fp16 (autocast with dynamic loss scaling) needs a CUDA device; on " +
                                              device.str() + " use --precision bf16 or fp32");
    settings.precision = Precision::kFp16;
  } else {
    fail(config.name() + ": precision", "expected fp32, bf16 or fp16, got \"" + precision + "\"");
  }
  return settings;
}

int data_parallel_ranks(const Config& config, int world) {
  const auto setting = [&config](const char* key) {
    return config.values().contains(key) ? static_cast<int>(config.integer_at_least(key, 1)) : 1;
  };
  const int tensor = setting("tensor_parallel"), pipeline = setting("pipeline_parallel");
  return parallel::make_plan(world, tensor, pipeline, config.name() + ": tensor_parallel x pipeline_parallel").data;
}

int64_t local_batch_size(const Config& config, const std::string& field, int ranks) {
  const int world = data_parallel_ranks(config, ranks);
  const int64_t global = config.integer_at_least(field, 1);
  const int64_t steps = config.integer_at_least("gradient_accumulation_steps", 1);
  if (global % (static_cast<int64_t>(world) * steps) != 0)
    fail(config.name() + ": " + field,
         std::to_string(global) + " (the global batch) does not divide into " + std::to_string(world) + " rank(s) x " +
             std::to_string(steps) + " (gradient_accumulation_steps) micro-batches");
  return global / world;
}

int loader_threads(const Config& config, const std::string& key) {
  const int64_t threads = config.integer_at_least(key, 1);
  const int64_t cpus = usable_cpu_count();
  if (threads > cpus)
    fail(config.name() + ": " + key, "expected at most " + std::to_string(cpus) +
                                         " (the CPUs this process may run on), got " + std::to_string(threads));
  return static_cast<int>(threads);
}

void seed_torch(const WorkloadSettings& settings) {
  torch::set_num_threads(settings.threads);
  torch::manual_seed(settings.seed);
}

std::string starting_weights(const WorkloadSettings& settings, const std::string& init_checkpoint,
                             TrainerPurpose purpose) {
  if (!settings.weights.empty()) return settings.weights;
  if (purpose != TrainerPurpose::kRun || init_checkpoint.empty()) return "";
  const std::filesystem::path checkpoint(init_checkpoint);
  return (checkpoint.is_absolute() ? checkpoint : std::filesystem::path(settings.data_dir) / checkpoint).string();
}

void require_preset_path(const WorkloadSettings& settings, const std::string& key, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path given(path);
  std::error_code error;
  if (!given.is_absolute() && !std::filesystem::is_directory(settings.data_dir, error)) return;
  const std::filesystem::path resolved = given.is_absolute() ? given : std::filesystem::path(settings.data_dir) / given;
  const std::string where = settings.config.name() + ": " + key + " " + resolved.string();
  std::filesystem::status(resolved, error);  // a loop of links or a name too long to look up is named here
  if (error) fail(where, error == std::errc::no_such_file_or_directory ? "does not exist" : error.message());
}

WorkloadBase::WorkloadBase(WorkloadSettings settings)
    : settings_(std::move(settings)),
      config_(settings_.config),
      device_(resolve_device(settings_.device)),
      communicator_(communicator_or_single(settings_)),
      step_settings_(StepSettings::from_config(config_, device_)) {
  local_batch_size(config_, "batch_size", communicator_->world());
}

parallel::ParallelContext WorkloadBase::parallel_context() const { return {communicator_, device_}; }

void WorkloadBase::save_weights(const std::string& path) const {
  // A split model is gathered from every rank; a whole one is rank 0's.
  if (trainer().model_is_split() || communicator_->rank() == 0) trainer().save_model(path);
}

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

namespace {

// What --memory reads: the process's resident memory on the CPU, the caching allocator's bytes on CUDA (the
// CUDA allocator's statistics need libc10_cuda, which only a CUDA build of LibTorch has).
void reset_peak_memory(const torch::Device& device) {
#ifdef TRAINBENCH_CUDA_ALLOCATOR_STATS
  if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  if (device.is_cuda()) fail("--memory", "this build has no CUDA allocator statistics (libc10_cuda was not found)");
  reset_peak_resident();
}

int64_t current_memory(const torch::Device& device) {
#ifdef TRAINBENCH_CUDA_ALLOCATOR_STATS
  if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).allocated_bytes[0].current;
#endif
  return device.is_cuda() ? 0 : resident_bytes();
}

int64_t peak_memory(const torch::Device& device) {
#ifdef TRAINBENCH_CUDA_ALLOCATOR_STATS
  // allocated_bytes[0]: the aggregate over small and large pools.
  if (device.is_cuda()) return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).allocated_bytes[0].peak;
#endif
  return device.is_cuda() ? 0 : peak_resident_bytes();
}

}  // namespace

BenchRun::BenchRun(const WorkloadSettings& settings, const BenchSettings& bench_settings)
    : settings(settings),
      bench(bench_settings),
      device(resolve_device(settings.device)),
      communicator(communicator_or_single(settings)),
      global_batch(settings.config.integer("batch_size")),
      local_batch(local_batch_size(settings.config, "batch_size", communicator->world())) {
  seed_torch(settings);
  if (bench.memory) {
    reset_peak_memory(device);
    memory_baseline_ = current_memory(device);
  }
}

parallel::ParallelContext BenchRun::parallel_context() const { return {communicator, device}; }

bool BenchRun::measures_data_pipeline(std::ostream& out) const {
  if (communicator->world() > 1) return false;
  if (!settings.data_dir.empty()) return true;
  out << "data pipeline   skipped (no dataset: pass --data)\n";
  return false;
}

double BenchRun::training_step_seconds(const std::function<void()>& step) {
  if (!bench.memory) return median_step_seconds(step);
  // The step's own high-water: not what building the model took on the way (a split model's rank cuts its part
  // from the whole model, which it then frees).
  reset_peak_memory(device);
  const auto begin = std::chrono::steady_clock::now();
  step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  step_peak_bytes_ = peak_memory(device) - memory_baseline_;
  return seconds;
}

namespace {

namespace profiler = torch::autograd::profiler;

// Runs `steps` calls of `step` under LibTorch's profiler (the legacy one: it is in both LibTorch 1.13, which
// Debian builds without Kineto, and 2.x, and it records the host side of every operator, autograd's backward
// nodes included). Writes the Chrome trace to `path` and prints the operator table.
void profile_steps(const std::function<void()>& step, int64_t steps, const std::string& path, std::ostream& out) {
  profiler::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  for (int64_t i = 0; i < steps; ++i) step();
  profiler::thread_event_lists event_lists = profiler::disableProfilerLegacy();

  std::vector<profiler::LegacyEvent*> events;
  std::vector<std::vector<ProfiledRange>> threads;
  for (auto& list : event_lists) {
    std::vector<ProfiledRange>& ranges = threads.emplace_back();
    for (auto& event : list) {
      events.push_back(&event);
      if (event.kind() == profiler::EventKind::PushRange || event.kind() == profiler::EventKind::PopRange)
        ranges.push_back({event.name(), event.handle(), event.kind() == profiler::EventKind::PushRange, event.cpuUs()});
    }
  }
  std::ostringstream trace;
  profiler::writeProfilerEventsToStream(trace, events);
  write_file_atomically(path, trace.str());
  out << "profile: " << steps << " more steps under LibTorch's profiler (not in the timed figures); Chrome trace in "
      << path << " (chrome://tracing or ui.perfetto.dev)\n";
  print_operator_table(out, operator_times(threads), 15, steps);
}

}  // namespace

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

  if (!bench.profile_path.empty()) {
    // Every rank takes the profiled steps, since they hold collectives; rank 0 alone records and prints.
    if (communicator->rank() == 0)
      profile_steps(step, bench.steps, bench.profile_path, std::cout);
    else
      for (int64_t i = 0; i < bench.steps; ++i) step();
  }
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
                static_cast<long long>(bench.memory ? 1 : bench.steps), step_seconds, flops_per_second / 1e9,
                share_of_peak(flops_per_second, bench).c_str());
  out << line;
  if (step_peak_bytes_ < 0) return;
  const StepSettings step = StepSettings::from_config(settings.config, device);
  std::snprintf(line, sizeof line,
                "memory        %10.1f MiB per rank  (peak of one training step: weights, gradients, optimizer state, the "
                "batch and its activations; batch %lld per rank in %lld micro-batch(es), %s, %s; %s)\n",
                static_cast<double>(step_peak_bytes_) / (1024.0 * 1024.0), static_cast<long long>(local_batch),
                static_cast<long long>(step.accumulation_steps), precision_name(step.precision), device.str().c_str(),
                device.is_cuda() ? "the CUDA caching allocator's peak" : "resident high-water above the process before the model");
  out << line;
}

std::string share_of_peak(double flops_per_second, const BenchSettings& settings) {
  if (settings.peak_flops <= 0) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", %.1f%% of measured fp32 peak %.1f GFLOP/s", 100.0 * flops_per_second / settings.peak_flops,
                settings.peak_flops / 1e9);
  return text;
}

std::vector<OperatorTime> operator_times(const std::vector<std::vector<ProfiledRange>>& threads) {
  struct Open {
    const ProfiledRange* range;
    double children_us = 0;
  };
  std::map<std::string, OperatorTime> by_name;
  for (const auto& ranges : threads) {
    std::vector<Open> open;
    for (const ProfiledRange& range : ranges) {
      if (range.opens) {
        open.push_back({&range});
        continue;
      }
      // Close the range this one ends; one left open inside it (a range closed on another thread) ends here too.
      auto match = std::find_if(open.rbegin(), open.rend(), [&](const Open& o) { return o.range->handle == range.handle; });
      if (match == open.rend()) continue;  // opened before the profiler started
      const size_t index = static_cast<size_t>(std::distance(match, open.rend())) - 1;
      const double total = range.time_us - open[index].range->time_us;
      OperatorTime& time = by_name[open[index].range->name];
      time.name = open[index].range->name;
      ++time.calls;
      time.total_us += total;
      time.self_us += total - open[index].children_us;
      open.resize(index);
      if (!open.empty()) open.back().children_us += total;
    }
  }
  std::vector<OperatorTime> sorted;
  for (auto& [name, time] : by_name) sorted.push_back(std::move(time));
  std::stable_sort(sorted.begin(), sorted.end(), [](const OperatorTime& a, const OperatorTime& b) { return a.self_us > b.self_us; });
  return sorted;
}

namespace {

std::string format_duration_us(double us) {
  char text[32];
  if (us >= 1e6)
    std::snprintf(text, sizeof text, "%.3fs", us / 1e6);
  else if (us >= 1e3)
    std::snprintf(text, sizeof text, "%.3fms", us / 1e3);
  else
    std::snprintf(text, sizeof text, "%.3fus", us);
  return text;
}

}  // namespace

void print_operator_table(std::ostream& out, const std::vector<OperatorTime>& operators, size_t rows, int64_t steps) {
  double self_total = 0;
  for (const OperatorTime& time : operators) self_total += time.self_us;
  char line[256];
  std::snprintf(line, sizeof line, "  %-44s %11s %12s %12s %11s\n", "Name", "Self CPU %", "Self CPU", "CPU total", "# of Calls");
  out << line;
  for (size_t i = 0; i < std::min(rows, operators.size()); ++i) {
    const OperatorTime& time = operators[i];
    const std::string name = time.name.size() > 44 ? time.name.substr(0, 41) + "..." : time.name;
    std::snprintf(line, sizeof line, "  %-44s %10.2f%% %12s %12s %11lld\n", name.c_str(),
                  self_total > 0 ? 100.0 * time.self_us / self_total : 0.0, format_duration_us(time.self_us).c_str(),
                  format_duration_us(time.total_us).c_str(), static_cast<long long>(time.calls));
    out << line;
  }
  out << "  Self CPU time total: " << format_duration_us(self_total) << " ("
      << format_duration_us(steps > 0 ? self_total / static_cast<double>(steps) : 0) << " per step)\n";
}

namespace {

// bench over several ranks: the gradient all-reduce of the timed steps, averaged over the ranks (the slowest
// rank sets the pace).
void print_gradient_exchange(std::ostream& out, const BenchRun& run, const parallel::GradientSync& gradients,
                             double step_seconds) {
  std::vector<double> figures{gradients.stats().exposed_wait_seconds, gradients.stats().last_bucket_wait_seconds};
  run.communicator->sum(figures);
  for (double& figure : figures) figure /= run.communicator->world();
  const double steps = static_cast<double>(std::max<int64_t>(1, gradients.stats().steps));
  const double exposed = figures[0] / steps, last_bucket = figures[1] / steps;
  char line[384];
  std::snprintf(
      line, sizeof line,
      "all-reduce    %d bucket(s), %.2f MB/step over %s; waiting after backward %.2f ms/step (%.1f%% of the "
      "step), of which %.2f ms on the last bucket, which cannot overlap; overlappable wait %.1f%% of the step\n",
      gradients.stats().buckets, gradients.stats().bytes_per_step / 1e6, run.communicator->backend(run.device).c_str(),
      exposed * 1e3, 100 * exposed / step_seconds, last_bucket * 1e3, 100 * (exposed - last_bucket) / step_seconds);
  out << line;
}

}  // namespace

void bench_benchmark(const WorkloadEntry& entry, const WorkloadSettings& settings, const BenchSettings& bench,
                     std::ostream& out) {
  BenchRun run(settings, bench);
  WorkloadSettings seeded = settings;  // a bench times the seeded model: --weights is not read
  seeded.weights.clear();
  const std::unique_ptr<Trainer> trainer = entry.make_trainer(seeded, run.parallel_context(), TrainerPurpose::kBench);
  if (!run.memory_only()) trainer->bench_before_training(run, out);
  const SyntheticStep step = trainer->synthetic_step(run);
  parallel::GradientSync* gradients = trainer->gradient_exchange();
  int64_t calls = 0;
  const double step_seconds = run.training_step_seconds([&] {
    if (gradients && calls++ == bench.warmup_steps) gradients->reset_stats();  // the timed steps' communication only
    step.run();
  });
  run.print_training(out, step_seconds, step.sample_unit, step.flops_per_sample, step.details);
  if (run.memory_only()) return;
  if (gradients && run.communicator->world() > 1) print_gradient_exchange(out, run, *gradients, step_seconds);
  trainer->bench_after_training(run, out, step_seconds);
}

void export_model(const WorkloadEntry& entry, const WorkloadSettings& settings, const std::string& out_path) {
  // An export never trains: its trainer's loop is built for fp32 on the CPU, whatever precision the preset
  // trains in (fp16 would be refused there).
  WorkloadSettings on_cpu = settings;
  nlohmann::json values = settings.config.values();
  values["precision"] = "fp32";
  on_cpu.config = Config(settings.config.name(), values);
  const parallel::ParallelContext context{communicator_or_single(on_cpu), torch::kCPU};
  const std::unique_ptr<Trainer> trainer = entry.make_trainer(on_cpu, context, TrainerPurpose::kExport);
  // Under `launch`, a split model is gathered from every rank; a whole one is written by rank 0.
  if (trainer->model_is_split() || context.rank() == 0) trainer->save_model(out_path);
}

}  // namespace trainbench
