#pragma once
// For the workloads' quality-gate tests: generate a preset's dataset (dataset seed 1), train it through
// run_benchmark exactly as `trainbench run` does, and hold the result log to the project's own v1.1
// compliance checks (no errors, converged, reviewed as the preset it ran, its time split adding up). The gate uses the benchmark's
// `tiny` preset, sized to reach its target in well under 60 s on 2 cores (docs/testing.md says how each was
// chosen); the full mini convergence is a benchmark command, not a test. The files live until the object dies.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "harness/runner.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "util/allocator.h"
#include "workloads/registry.h"

namespace trainbench::testing {

class QualityGateRun {
 public:
  explicit QualityGateRun(const std::string& benchmark, int64_t seed, const std::string& preset = "tiny")
      : dir_(std::filesystem::temp_directory_path() / ("trainbench_" + benchmark + "_gate_" + std::to_string(::getpid()))) {
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
    const review::RunReview review = review::review_log_file(options.result_path, review::load_ruleset("1.1.0"));
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
  }
  ~QualityGateRun() { std::filesystem::remove_all(dir_); }
  QualityGateRun(const QualityGateRun&) = delete;
  QualityGateRun& operator=(const QualityGateRun&) = delete;

  const RunOutcome& outcome() const { return outcome_; }
  double seconds() const { return seconds_; }  // build, data opening and training, without dataset generation
  std::filesystem::path data_dir() const { return dir_ / "data"; }

 private:
  std::filesystem::path dir_;
  RunOutcome outcome_;
  double seconds_ = 0;
};

}  // namespace trainbench::testing
