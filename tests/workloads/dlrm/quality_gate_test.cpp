// Quality gate: a shortened mini run (the mini preset's model and optimizer on a smaller generated dataset,
// a target just below what that dataset allows) must reach its target through run_benchmark, and its log
// must pass the project's own v1.1 compliance checks.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/runner.h"
#include "review/compliance.h"
#include "review/ruleset.h"
#include "util/atomic_file.h"
#include "workloads/registry.h"

namespace trainbench {
namespace {

namespace fs = std::filesystem;

TEST(DlrmQualityGate, ShortMiniRunReachesItsTargetWithACompliantLog) {
  const fs::path dir = fs::temp_directory_path() / ("trainbench_dlrm_gate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const WorkloadEntry& entry = find_workload("dlrm");
  WorkloadSettings settings;
  nlohmann::json values = Config::from_presets("dlrm", entry.presets_json, "mini", {}).values();
  values["dataset"]["samples_per_day"] = 60000;
  values["dataset"]["eval_samples"] = 20000;
  values["target"] = 0.76;
  settings.config = Config("dlrm/mini", values);
  settings.data_dir = (dir / "data").string();
  settings.threads = 2;
  settings.seed = 4321;
  entry.make_dataset(settings.config, settings.data_dir, 1);
  const double ceiling =
      nlohmann::json::parse(read_file((dir / "data" / "days" / "planted.json").string())).at("eval_auc_ceiling");

  RunOptions options;
  options.seed = settings.seed;
  options.submission.platform = "ci";
  options.result_path = (dir / "results" / "result_0.txt").string();
  options.show_progress = false;
  auto workload = entry.create(settings);
  const RunOutcome outcome = run_benchmark(*workload, options);

  EXPECT_TRUE(outcome.converged) << "AUC " << outcome.last_metric << " at epoch " << outcome.convergence_epoch
                                 << " (planted ceiling " << ceiling << ")";
  EXPECT_LT(outcome.last_metric, ceiling + 0.01);
  const review::RunReview review = review::review_log_file(options.result_path, review::load_ruleset("1.1.0"));
  for (const auto& finding : review.findings)
    if (finding.severity == review::Severity::kError) ADD_FAILURE() << review::format_finding(finding);
  EXPECT_TRUE(review.converged());
  EXPECT_EQ(review.preset, "mini");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trainbench
