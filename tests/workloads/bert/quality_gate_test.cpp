// Quality gate: the mini preset, exactly as `trainbench run bert --preset mini` runs it (KJV dataset,
// model, LAMB, schedule and target from presets/bert.json), must reach its target, and its result log must
// pass the project's own v1.1 compliance checks.
#include <filesystem>

#include <gtest/gtest.h>

#include "harness/runner.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

TEST(BertQualityGate, MiniPresetReachesItsTargetWithACompliantLog) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_bert_gate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const WorkloadEntry& entry = find_workload("bert");
  WorkloadSettings settings;
  settings.config = Config::from_presets("bert", entry.presets_json, "mini", {});
  settings.data_dir = (dir / "data").string();
  settings.threads = 2;
  settings.seed = 1234;
  entry.make_dataset(settings.config, settings.data_dir, 1);

  RunOptions options;
  options.seed = settings.seed;
  options.submission.platform = "ci";
  options.result_path = (dir / "results" / "result_0.txt").string();
  options.show_progress = false;
  auto workload = entry.create(settings);
  const RunOutcome outcome = run_benchmark(*workload, options);

  EXPECT_TRUE(outcome.converged) << "masked-LM accuracy " << outcome.last_metric << " at sample " << outcome.convergence_epoch;
  EXPECT_GE(outcome.last_metric, settings.config.number("target"));
  const review::RunReview review = review::review_log_file(options.result_path, review::load_ruleset("1.1.0"));
  for (const auto& finding : review.findings)
    if (finding.severity == review::Severity::kError) ADD_FAILURE() << review::format_finding(finding);
  EXPECT_TRUE(review.converged());
  EXPECT_EQ(review.preset, "mini");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench
