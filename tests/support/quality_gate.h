#pragma once
// For the workloads' quality-gate tests: generate a preset's dataset (dataset seed 1), train it through
// run_benchmark exactly as `trainbench run` does, and hold the result log to the project's own v1.1
// compliance checks (no errors, converged, reviewed as the mini preset). The files live until the object dies.
#include <filesystem>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>

#include "harness/runner.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "workloads/registry.h"

namespace trainbench::testing {

class QualityGateRun {
 public:
  QualityGateRun(const std::string& benchmark, const Config& config, int64_t seed)
      : dir_(std::filesystem::temp_directory_path() / ("trainbench_" + benchmark + "_gate_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    const WorkloadEntry& entry = find_workload(benchmark);
    WorkloadSettings settings;
    settings.config = config;
    settings.data_dir = data_dir().string();
    settings.threads = 2;
    settings.seed = seed;
    entry.make_dataset(settings.config, settings.data_dir, 1);

    RunOptions options;
    options.seed = seed;
    options.submission.platform = "ci";
    options.result_path = (dir_ / "results" / "result_0.txt").string();
    options.show_progress = false;
    auto workload = entry.create(settings);
    outcome_ = run_benchmark(*workload, options);

    const review::RunReview review = review::review_log_file(options.result_path, review::load_ruleset("1.1.0"));
    for (const auto& finding : review.findings)
      if (finding.severity == review::Severity::kError) ADD_FAILURE() << review::format_finding(finding);
    EXPECT_TRUE(review.converged());
    EXPECT_EQ(review.preset, "mini");
  }
  ~QualityGateRun() { std::filesystem::remove_all(dir_); }
  QualityGateRun(const QualityGateRun&) = delete;
  QualityGateRun& operator=(const QualityGateRun&) = delete;

  const RunOutcome& outcome() const { return outcome_; }
  std::filesystem::path data_dir() const { return dir_ / "data"; }

 private:
  std::filesystem::path dir_;
  RunOutcome outcome_;
};

}  // namespace trainbench::testing
