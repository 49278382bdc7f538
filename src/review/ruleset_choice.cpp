#include "review/ruleset_choice.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "review/log_parser.h"
#include "util/error.h"
#include "util/mllog_keys.h"

namespace trainbench::review {

namespace {

namespace fs = std::filesystem;

// The benchmarks each embedded ruleset has rules for, parsed once.
const std::map<std::string, std::set<std::string>>& embedded_benchmarks() {
  static const std::map<std::string, std::set<std::string>> benchmarks = [] {
    std::map<std::string, std::set<std::string>> result;
    for (const auto& version : embedded_ruleset_versions())
      for (const auto& [name, rules] : load_ruleset(version).benchmarks) result[version].insert(name);
    return result;
  }();
  return benchmarks;
}

bool is_result_log(const fs::path& path) {
  static const std::regex pattern(R"(result_\d{1,9}\.txt)");
  return std::regex_match(path.filename().string(), pattern);
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

std::vector<std::string> result_logs_under(const std::string& path) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) return {path};
  std::vector<std::string> logs;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (it.depth() > 8) it.disable_recursion_pending();
    std::error_code type_error;
    // Links are not followed, as the review itself does not follow them (submission.cpp).
    if (!it->is_symlink(type_error) && it->is_regular_file(type_error) && is_result_log(it->path()))
      logs.push_back(it->path().string());
  }
  std::sort(logs.begin(), logs.end());
  return logs;
}

std::string logged_benchmark(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(mllog_keys::kSubmissionBenchmark) == std::string::npos) continue;
    const ParsedLog parsed = parse_log_text(line, log_path);
    for (const auto& event : parsed.events)
      if (event.key == mllog_keys::kSubmissionBenchmark && event.value.is_string())
        return event.value.get<std::string>();
  }
  return "";
}

std::vector<std::string> rounds_with_benchmark(const std::string& benchmark) {
  std::vector<std::string> rounds;
  for (const auto& [version, names] : embedded_benchmarks())
    if (names.count(benchmark)) rounds.push_back(version);
  return rounds;
}

std::vector<LoggedBenchmark> logged_benchmarks(const std::vector<std::string>& paths) {
  std::vector<LoggedBenchmark> logs;
  for (const auto& path : paths)
    for (auto& log : result_logs_under(path)) {
      const std::string benchmark = logged_benchmark(log);
      logs.push_back({std::move(log), benchmark});
    }
  return logs;
}

std::string choose_ruleset_version(const std::vector<LoggedBenchmark>& logs) {
  std::vector<std::string> candidates = embedded_ruleset_versions();  // oldest first
  // The first log that ruled a round out.
  std::string narrowed_by;
  for (const auto& [path, benchmark] : logs) {
    const std::vector<std::string> rounds = rounds_with_benchmark(benchmark);
    if (rounds.empty()) continue;  // not a benchmark of any round: the review says so
    std::vector<std::string> common;
    std::set_intersection(candidates.begin(), candidates.end(), rounds.begin(), rounds.end(),
                          std::back_inserter(common));
    if (common.empty())
      fail(path, "submission_benchmark '" + printable(benchmark, 60) + "' has rules in ruleset " + joined(rounds) +
                     ", but " + narrowed_by + " needs ruleset " + joined(candidates) +
                     ": the logs mix rounds; review each round on its own (--ruleset)");
    if (common.size() < candidates.size() && narrowed_by.empty()) narrowed_by = path;
    candidates = common;
  }
  if (candidates.empty()) fail("review", "this build has no embedded rulesets");
  return candidates.back();
}

void refuse_logs_of_other_rounds(const Ruleset& ruleset, const std::vector<LoggedBenchmark>& logs) {
  for (const auto& [path, benchmark] : logs) {
    if (benchmark.empty() || ruleset.benchmark(benchmark)) continue;
    const std::vector<std::string> rounds = rounds_with_benchmark(benchmark);
    if (rounds.empty()) continue;
    fail(path, "submission_benchmark '" + printable(benchmark, 60) + "' has no rules in ruleset " + ruleset.version +
                   "; it is a benchmark of ruleset " + joined(rounds) +
                   ": a log of one round is not reviewed under another (give --ruleset " + rounds.back() +
                   ", or no --ruleset to pick it from the logs)");
  }
}

}  // namespace trainbench::review
