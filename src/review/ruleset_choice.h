#pragma once
// Which round's rules review a set of logs. A log does not name its round, but it says when it ran and what
// ran it. A log can belong to any round with rules for its benchmark whose results were not yet published
// when it ran (rules.json "published"; submitters may submit a result again to a later round). Of the rounds
// every log of a review can belong to, the earliest is chosen. trainbench's own logs, and logs dated before
// 2018 (a synthetic clock), say nothing by their date: they belong to the round trainbench implements
// their benchmark for (the round whose rules.json checks it natively: 1.1.0 for the v1.1 benchmarks, 3.0.0
// for gpt3), or else to the newest round with it. `review` and `report` choose the ruleset this way unless
// --ruleset says, and refuse by name logs no one round can hold, or a log reviewed under a round that lacks
// its benchmark or was published before it ran.
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
  std::string benchmark;    // "" when the log names none
  std::string date;         // "2023-05-02": the UTC date of its first :::MLLOG line; "" before 2018 or unread
  bool trainbench = false;  // it logs trainbench_preset
};

// Reads what identifies a log's round (its benchmark, date and writer), up to its run_start line.
LoggedBenchmark identify_log(const std::string& log_path);

// Every result log under these paths (files or folders), identified.
std::vector<LoggedBenchmark> logged_benchmarks(const std::vector<std::string>& paths);

// The embedded round a log alone belongs to, as the header says; "" when its benchmark is in no round.
std::string round_of_log(const LoggedBenchmark& log);

// The embedded ruleset for these logs, as the header says (the newest round when no log names a known
// benchmark). Throws trainbench::Error naming two logs no one round can hold.
std::string choose_ruleset_version(const std::vector<LoggedBenchmark>& logs);

// Every embedded round with rules for this benchmark, oldest first.
std::vector<std::string> rounds_with_benchmark(const std::string& benchmark);

// Throws trainbench::Error naming the log when it cannot be of `ruleset`'s round: its benchmark has no rules
// there but has in another round, or it ran after that round was published. Logs of benchmarks no embedded
// round has are left to the review.
void refuse_logs_of_other_rounds(const Ruleset& ruleset, const std::vector<LoggedBenchmark>& logs);

}  // namespace trainbench::review
