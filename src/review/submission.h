#pragma once
// Reviews a submission tree (submission rules §5):
//   <org>/systems/<system>.json
//   <org>/results/<system>/<benchmark>/result_<N>.txt
//   <org>/benchmarks/<benchmark>/...
// Per system and benchmark it checks every log, the run count, seeds, the olympic score (non-converged and
// non-compliant runs count as dropped; more than the rules drop makes it invalid) and the RCP check, and it
// checks the system descriptions. A folder without results/ (e.g. trainbench's own results folder) is
// reviewed as loose results: every result_<N>.txt below it, grouped by folder, without package checks.
#include <optional>
#include <string>
#include <vector>

#include "review/compliance.h"
#include "review/rcp.h"
#include "review/ruleset.h"
#include "review/scoring.h"

namespace trainbench::review {

struct ReviewOptions {
  bool rcp_bypass = false;
};

struct BenchmarkReview {
  std::string system;
  std::string benchmark;
  std::string directory;
  std::vector<RunReview> runs;  // sorted by run number
  OlympicScore score;
  std::optional<RcpVerdict> rcp;
  std::vector<Finding> findings;  // about the set of runs (count, seeds, score, RCP)

  bool valid() const;
  // The reasons it is invalid, one line each ("result_2.txt: 3 errors", "5 runs required, 4 found", ...).
  std::vector<std::string> invalid_reasons() const;
};

struct SystemReview {
  std::string name;
  std::string description_path;   // "" when there is none
  nlohmann::json description;     // null when missing or unreadable
  std::vector<Finding> findings;  // about the description and the folder
  std::vector<BenchmarkReview> benchmarks;

  bool valid() const;
};

struct SubmissionReview {
  std::string root;
  std::string ruleset_version;
  bool package_layout = false;    // reviewed as <org>/systems + results, not as loose results
  std::vector<Finding> findings;  // about the tree itself
  std::vector<SystemReview> systems;

  bool valid() const;
};

SubmissionReview review_submission(const std::string& folder, const Ruleset& ruleset,
                                   const ReviewOptions& options = {});

// The checks over a set of runs of one benchmark: run count, seeds, olympic score and RCP.
BenchmarkReview review_benchmark_runs(const std::string& system, const std::string& benchmark,
                                      const std::string& directory, std::vector<RunReview> runs, const Ruleset& ruleset,
                                      const ReviewOptions& options);

}  // namespace trainbench::review
