#pragma once
// Checks one result log against a ruleset, the way the v1.1 compliance checker does: start with the entry
// configs (common), let submission_division / submission_benchmark / opt_name pull in the configs for the
// division, benchmark and optimizer (a later config's rule for a key replaces an earlier one), then check
// every key rule over the whole log, the quality target and the initialized tensors. It also extracts what
// scoring needs: minutes from run_start to run_stop, the convergence point for RCP checks, seeds, and the
// accuracy curve for reports.
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "review/finding.h"
#include "review/log_parser.h"
#include "review/ruleset.h"

namespace trainbench::review {

struct CurvePoint {
  double minutes = 0;  // since run_start
  double value = 0;
};

struct LoggedSeed {
  nlohmann::json value;
  int line = 0;
};

struct RunReview {
  std::string path;
  std::vector<Finding> findings;
  std::string benchmark, division, org, platform, submission_status;  // as logged ("" when absent)
  std::string preset;                      // a trainbench preset checked against its own target; "" otherwise
  std::string target_description;          // e.g. "eval_accuracy >= 0.759 and < 1"
  std::optional<double> target_threshold;  // the scalar target the run was held to (for charts)
  bool higher_is_better = true;
  bool target_reached = false;
  std::string run_stop_status;  // "success", "aborted", ... ("" when missing)
  std::optional<double> minutes;
  std::optional<double> convergence;  // epoch_num (or train_samples for BERT) of the last eval before run_stop
  std::string convergence_unit;       // "epoch_num" or "train_samples"
  std::optional<double> global_batch_size;
  std::vector<LoggedSeed> seeds;
  std::vector<CurvePoint> curve;     // the target metric against minutes since run_start
  std::vector<std::string> configs;  // rule configs applied, in order

  bool compliant() const { return !has_errors(findings); }
  // What scoring counts: a compliant log whose run_stop says success and that reached its target.
  bool converged() const { return compliant() && run_stop_status == "success" && target_reached; }
};

RunReview review_log(const ParsedLog& log, const Ruleset& ruleset);

// Parses the file keeping only the events review_log reads (see keys_read_by_review), then reviews it.
RunReview review_log_file(const std::string& path, const Ruleset& ruleset);

// Every key a review with this ruleset looks at: the rule files' keys plus those scoring extracts.
std::set<std::string> keys_read_by_review(const Ruleset& ruleset);

}  // namespace trainbench::review
