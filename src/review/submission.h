#pragma once
// Reviews a submission tree (submission rules §5):
//   <org>/systems/<system>.json
//   <org>/results/<system>/<benchmark>/result_<N>.txt
//   <org>/benchmarks/<benchmark>/...
// Per system and benchmark it checks every log, the run count, seeds, the olympic score (non-converged and
// non-compliant runs count as dropped; more than the rules drop makes it invalid) and the RCP check, and it
// checks the system descriptions. The verdicts are the official v1.1 tools' (docs/review.md). A folder
// without results/ or systems/ (e.g. trainbench's own results folder) is reviewed as loose results: every
// result_<N>.txt below it, grouped by folder, without package checks.
#include <optional>
#include <string>
#include <vector>

#include "review/compliance.h"
#include "review/rcp.h"
#include "review/ruleset.h"
#include "review/scoring.h"

namespace trainbench::review {

struct ReviewOptions {
  LogCheckOptions checks;
  // The package checker's --rcp_bypass: a failed "RCP found" or "RCP Interpolation" check passes with a
  // warning (the submitter must tell the chair); a missing RCP does not in v1.1.
  bool rcp_bypass = false;
};

// A failed RCP check is its own verdict, as in the official package checker: the review committee can
// accept it (--rcp-bypass), unlike a compliance failure. Ordered from best to worst.
enum class Verdict { kValid, kRcpFailed, kInvalid };
const char* verdict_name(Verdict verdict);  // "VALID", "RCP FAILED", "INVALID"

struct BenchmarkReview {
  std::string system;
  std::string benchmark;
  std::string directory;
  std::vector<RunReview> runs;  // sorted by run number
  OlympicScore score;
  std::optional<RcpVerdict> rcp;
  std::vector<Finding> findings;  // about the set of runs (count, seeds, score, how the RCP was checked)

  Verdict verdict() const;
  bool valid() const { return verdict() == Verdict::kValid; }
  // The reasons it is not valid, one line each ("resnet needs 5 runs; found 1", and without a score each run
  // that does not count: "result_0.txt: did not reach eval_accuracy >= 0.96: best 0.959 at epoch 14 on line
  // 812", "result_2.txt: failed its checks (3 errors)"), then a failed RCP check.
  std::vector<std::string> invalid_reasons() const;
};

struct SystemReview {
  std::string name;
  std::string description_path;   // "" when there is none
  nlohmann::json description;     // null when missing or unreadable
  std::vector<Finding> findings;  // about the description and the folder
  std::vector<BenchmarkReview> benchmarks;

  Verdict verdict() const;
  bool valid() const { return verdict() == Verdict::kValid; }
};

struct SubmissionReview {
  std::string root;
  std::string ruleset_version;
  bool package_layout = false;    // reviewed as <org>/systems + results, not as loose results
  std::vector<Finding> findings;  // about the tree itself
  std::vector<SystemReview> systems;

  Verdict verdict() const;
  bool valid() const { return verdict() == Verdict::kValid; }
};

SubmissionReview review_submission(const std::string& folder, const Ruleset& ruleset,
                                   const ReviewOptions& options = {});

// Where a set of runs was found.
struct RunSetContext {
  bool package = false;  // in a submission package, held to the package checker's rules (exact run count)
  std::string division;  // the system description's; "" when there is none (then the logs' division counts)
  // Turned on for this folder by the round's package_checker_params (PackageRules::params_file).
  bool rcp_bypass = false;
  bool seed_bypass = false;
};

// The checks over a set of runs of one benchmark: run count, seeds, olympic score and RCP.
BenchmarkReview review_benchmark_runs(const std::string& system, const std::string& benchmark,
                                      const std::string& directory, std::vector<RunReview> runs, const Ruleset& ruleset,
                                      const ReviewOptions& options, const RunSetContext& context = {});

}  // namespace trainbench::review
