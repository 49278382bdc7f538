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
#include "util/mllog_keys.h"

namespace trainbench::review {

struct CurvePoint {
  double minutes = 0;  // since run_start
  double value = 0;
};

// The evaluation that came closest to the target: the one whose part furthest short of its threshold was
// nearest to it (a scalar metric has one part), the earliest of equals.
struct BestEvaluation {
  std::string value;                // "0.959", or for named parts "BBOX 0.37, SEGM 0.335"
  std::optional<double> epoch_num;  // as logged in its metadata
  int line = 0;
  // "0.959 at epoch 14 on line 812"
  std::string text() const;
};

struct LoggedSeed {
  nlohmann::json value;
  nlohmann::json metadata;  // the seed checker tells seeds apart by the source file and line logged here
  int line = 0;
};

// Choices a reviewer makes that the official tools also offer as flags.
struct LogCheckOptions {
  // Where the rules text is stricter than the official checker, fail instead of warning.
  bool strict = false;
  // The rcp_checker's --bert_train_samples: BERT converges at the logged train_samples, not at the eval
  // epoch_num (v1.1 BERT submitters used one or the other).
  bool bert_train_samples = false;
};

struct RunReview {
  std::string path;
  std::vector<Finding> findings;
  std::string benchmark, division, org, platform, submission_status;  // as logged ("" when absent)
  std::string preset;                      // a trainbench preset checked against its own target; "" otherwise
  std::string target_description;          // e.g. "eval_accuracy >= 0.759 and < 1"
  // The scalar target the run was held to, or with named parts the plotted part's (for charts).
  std::optional<double> target_threshold;
  bool higher_is_better = true;
  bool target_reached = false;
  std::optional<BestEvaluation> best_evaluation;  // empty when no evaluation logged a number for every part
  std::string run_stop_status;  // "success", "aborted", ... ("" when missing)
  std::optional<double> minutes;
  // What the v1.1 rcp_checker reads as the convergence point: epoch_num of the last eval_accuracy before
  // run_stop (rounded as the ruleset says), or with --bert-train-samples BERT's last train_samples value.
  std::optional<double> convergence;
  std::string convergence_unit;  // "epoch_num" or "train_samples"
  std::optional<double> global_batch_size;
  std::vector<LoggedSeed> seeds;  // in file order
  int unparsed_lines = 0;         // the parser's problems with the file (the seed checker gives up on such a log)
  std::vector<CurvePoint> curve;     // the target metric against minutes since run_start
  // trainbench's split of the timed region (trainbench_time_split): each part's name and seconds, training
  // compute first as the harness orders them.
  std::vector<std::pair<std::string, double>> time_split;
  // What other processes and the hypervisor took of the run's CPUs over the timed region
  // (trainbench_cpu_contention), in CPU seconds; empty when not logged.
  struct CpuContention {
    double other_processes = 0, steal = 0, capacity = 0;
    std::string cpus;           // "0-1", as logged
    double warning_share = 0;   // the share above which the run warned (0 when not logged)
    double share() const { return capacity > 0 ? (other_processes + steal) / capacity : 0; }
    bool warned() const { return warning_share > 0 && share() > warning_share; }
  };
  std::optional<CpuContention> cpu_contention;
  std::vector<std::string> configs;  // rule configs applied, in order

  bool compliant() const { return !has_errors(findings); }
  // What scoring counts: a compliant log whose run_stop says success and that reached its target.
  bool converged() const { return compliant() && run_stop_status == mllog_keys::kSuccess && target_reached; }
  // Why scoring does not count this run, "" when it does: "failed its checks (3 errors)", "did not reach
  // eval_accuracy >= 0.96: best 0.959 at epoch 14 on line 812", or that run_stop did not say success.
  std::string not_converged_reason() const;
  // What the RCP checker counts: run_stop says success, whatever else the log fails.
  std::optional<double> rcp_convergence() const {
    return run_stop_status == mllog_keys::kSuccess ? convergence : std::nullopt;
  }
};

RunReview review_log(const ParsedLog& log, const Ruleset& ruleset, const LogCheckOptions& options = {});

// Parses the file keeping only the events review_log reads (see keys_read_by_review), then reviews it.
RunReview review_log_file(const std::string& path, const Ruleset& ruleset, const LogCheckOptions& options = {});

// Every key a review with this ruleset looks at: the rule files' keys plus those scoring extracts.
std::set<std::string> keys_read_by_review(const Ruleset& ruleset);

}  // namespace trainbench::review
