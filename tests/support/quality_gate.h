#pragma once
// For the workloads' quality-gate tests: generate a preset's dataset (dataset seed 1), train it through
// run_benchmark exactly as `trainbench run` does, and hold the result log to the project's own compliance checks
// (v1.1's, or the round the benchmark belongs to) (no errors, converged, reviewed as the preset it ran, its time split
// adding up). The gate uses the benchmark's `tiny` preset, sized to reach its target in well under 60 s on 2 cores
// (docs/testing.md says how each was chosen); the full mini convergence is a benchmark command, not a test. The files
// live until the object dies.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "harness/runner.h"
#include "probes/environment.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "util/allocator.h"
#include "util/mllog_format.h"
#include "util/mllog_keys.h"
#include "workloads/registry.h"

namespace trainbench::testing {

// The evaluations a result log wrote, in order: [[epoch_num, value], ...] as the log spells them (the writer's
// doubles round-trip, so equal text is equal bits).
inline nlohmann::json logged_evaluations(const std::string& log_path, const std::string& metric_key) {
  nlohmann::json evaluations = nlohmann::json::array();
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    const auto record = mllog_format::record_text(line);
    if (!record) continue;
    const auto event = nlohmann::json::parse(*record);
    if (event.value(mllog_format::kKey, "") == metric_key)
      evaluations.push_back({event[mllog_format::kMetadata][mllog_keys::kEpochNum], event[mllog_format::kValue]});
  }
  return evaluations;
}

// This CPU's model name and an FNV-1a digest of its flags: floating-point sums round the same way only on the
// same kernels, so recorded evaluations are held bit for bit where they were recorded.
inline std::string cpu_signature() {
  const std::string cpuinfo = probes::read_cpuinfo();
  uint64_t digest = 1469598103934665603ull;
  for (const unsigned char c : probes::cpuinfo_field(cpuinfo, "flags")) digest = (digest ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
  return probes::cpuinfo_field(cpuinfo, "model name") + " / flags " + hex;
}

class QualityGateRun {
 public:
  // `ruleset`: the round whose rules the log is held to (GPT-3 first appeared in 3.0.0).
  explicit QualityGateRun(const std::string& benchmark, int64_t seed, const std::string& preset = "tiny",
                          const std::string& ruleset = "1.1.0")
      : dir_(std::filesystem::temp_directory_path() /
             ("trainbench_" + benchmark + "_gate_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    keep_freed_memory_for_reuse();  // as trainbench's main() does, so the gate trains at `trainbench run`'s speed
    const WorkloadEntry& entry = find_workload(benchmark);
    WorkloadSettings settings;
    settings.config = preset_config(entry, preset, {});
    settings.threads = 2;
    settings.seed = seed;
    if (entry.make_dataset) {
      settings.data_dir = data_dir().string();
      entry.make_dataset(settings.config, settings.data_dir, 1);
    }

    RunOptions options;
    options.seed = seed;
    options.submission.platform = "ci";
    options.result_path = (dir_ / "results" / "result_0.txt").string();
    options.show_progress = false;
    auto workload = entry.create(settings);
    const auto begin = std::chrono::steady_clock::now();
    outcome_ = run_benchmark(*workload, options);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::printf("%s %s gate: %s at %s in %.1f s (build, data and training), %.3f timed minutes\n", benchmark.c_str(),
                preset.c_str(), outcome_.last_metric.parts().empty() ? "no evaluation" : outcome_.last_metric.text().c_str(),
                describe_position(outcome_.unit, outcome_.convergence_epoch).c_str(), seconds_, outcome_.minutes);
    std::printf("  timed region: %s\n", outcome_.time_split.text().c_str());

    EXPECT_TRUE(outcome_.converged) << benchmark << " " << preset << ": " << outcome_.target.text() << " not reached; "
                                    << (outcome_.last_metric.parts().empty() ? "no evaluation" : outcome_.last_metric.text())
                                    << " at " << describe_position(outcome_.unit, outcome_.convergence_epoch);
    const review::RunReview review = review::review_log_file(options.result_path, review::load_ruleset(ruleset));
    for (const auto& finding : review.findings)
      if (finding.severity == review::Severity::kError) ADD_FAILURE() << review::format_finding(finding);
    EXPECT_TRUE(review.converged());
    EXPECT_EQ(review.preset, preset);
    // The log's time split, as the review reads it, adds up to run_start..run_stop.
    double split_seconds = 0;
    for (const auto& part : review.time_split) split_seconds += part.second;
    EXPECT_EQ(review.time_split.size(), 5u);
    EXPECT_NEAR(split_seconds, review.minutes.value_or(0) * 60, 1e-6);
    EXPECT_GT(outcome_.time_split.training_compute, 0);
    hold_to_recorded_evaluations(benchmark + "/" + preset + "/" + std::to_string(seed), options.result_path);
  }
  ~QualityGateRun() { std::filesystem::remove_all(dir_); }
  QualityGateRun(const QualityGateRun&) = delete;
  QualityGateRun& operator=(const QualityGateRun&) = delete;

  const RunOutcome& outcome() const { return outcome_; }
  double seconds() const { return seconds_; }  // build, data opening and training, without dataset generation
  std::filesystem::path data_dir() const { return dir_ / "data"; }

 private:
  // Refactoring must not change what a benchmark computes: the tiny runs' evaluations are held to those recorded
  // (tests/workloads/tiny_evaluations.json) before the change, bit for bit on the CPU they were recorded on.
  // TRAINBENCH_RECORD_TINY_EVALUATIONS=FILE records them into FILE instead (docs/testing.md).
  void hold_to_recorded_evaluations(const std::string& run_key, const std::string& log_path) const {
    const nlohmann::json evaluations = logged_evaluations(log_path, outcome_.target.metric);
    if (const char* record_path = std::getenv("TRAINBENCH_RECORD_TINY_EVALUATIONS")) {
      nlohmann::json recorded = nlohmann::json::object();
      if (std::ifstream existing(record_path); existing) existing >> recorded;
      recorded["cpu"] = cpu_signature();
      recorded["runs"][run_key] = evaluations;
      std::ofstream(record_path) << recorded.dump(2) << "\n";
      return;
    }
    std::ifstream in(TRAINBENCH_TINY_EVALUATIONS);
    ASSERT_TRUE(in) << TRAINBENCH_TINY_EVALUATIONS << " is missing";
    const nlohmann::json recorded = nlohmann::json::parse(in);
    ASSERT_TRUE(recorded["runs"].contains(run_key)) << TRAINBENCH_TINY_EVALUATIONS << " has no run " << run_key;
    if (recorded["cpu"] != cpu_signature()) {
      std::printf("  evaluations not compared: recorded on %s, this is %s\n", recorded["cpu"].dump().c_str(),
                  cpu_signature().c_str());
      return;
    }
    EXPECT_EQ(evaluations, recorded["runs"][run_key])
        << run_key << ": the evaluations differ from those recorded in " << TRAINBENCH_TINY_EVALUATIONS;
  }

  std::filesystem::path dir_;
  RunOutcome outcome_;
  double seconds_ = 0;
};

}  // namespace trainbench::testing
