#pragma once
// Which round's rules review a set of logs. A log names no round, but its benchmark does while only one
// embedded ruleset has rules for it (gpt3: 3.0.0; the v1.1 benchmarks: 1.1.0), so `review` and `report`
// pick the ruleset from the logs' submission_benchmark unless --ruleset says, and refuse by name a log
// reviewed under a round that does not have its benchmark when another round does.
#include <optional>
#include <string>
#include <vector>

#include "review/ruleset.h"

namespace trainbench::review {

// The result_<N>.txt logs under a folder (searched 8 levels deep), or the path itself when it is a file.
std::vector<std::string> result_logs_under(const std::string& path);

// The first submission_benchmark a log names, read up to that line only; "" when it names none.
std::string logged_benchmark(const std::string& log_path);

struct LoggedBenchmark {
  std::string log;
  std::string benchmark;  // "" when the log names none
};

// Every result log under these paths (files or folders) with the benchmark it names.
std::vector<LoggedBenchmark> logged_benchmarks(const std::vector<std::string>& paths);

// The embedded ruleset for these logs: the one with rules for every benchmark they name, the newest when
// several have (or when the logs name none). Throws trainbench::Error naming two logs whose benchmarks only
// different rounds have.
std::string choose_ruleset_version(const std::vector<LoggedBenchmark>& logs);

// Every embedded round with rules for this benchmark, oldest first.
std::vector<std::string> rounds_with_benchmark(const std::string& benchmark);

// Throws trainbench::Error naming the log when `ruleset` has no rules for a log's benchmark but another
// embedded round has: a log of one round reviewed under another. Unknown benchmarks are left to the review.
void refuse_logs_of_other_rounds(const Ruleset& ruleset, const std::vector<LoggedBenchmark>& logs);

}  // namespace trainbench::review
