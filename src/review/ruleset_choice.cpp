#include "review/ruleset_choice.h"

#include <algorithm>
#include <ctime>
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

// What the chooser needs of each embedded round, parsed once; oldest first.
struct RoundFacts {
  std::string version, published;
  std::set<std::string> benchmarks, native;
};

const std::vector<RoundFacts>& embedded_rounds() {
  static const std::vector<RoundFacts> rounds = [] {
    std::vector<RoundFacts> result;
    for (const auto& version : embedded_ruleset_versions()) {
      const Ruleset ruleset = load_ruleset(version);
      RoundFacts facts{version, ruleset.published, {}, {}};
      for (const auto& [name, rules] : ruleset.benchmarks) facts.benchmarks.insert(name);
      for (const auto& name : facts.benchmarks)
        if (ruleset.checked_natively(name)) facts.native.insert(name);
      result.push_back(std::move(facts));
    }
    return result;
  }();
  return rounds;
}

// 2018-01-01T00:00:00Z: MLPerf Training's first round ran in 2018; earlier clocks are synthetic.
constexpr double kFirstRoundMs = 1514764800000.0;

std::string utc_date(double time_ms) {
  if (!(time_ms >= kFirstRoundMs) || time_ms > 4102444800000.0) return "";  // before 2018 or after 2100
  const std::time_t seconds = static_cast<std::time_t>(time_ms / 1000.0);
  std::tm parts{};
  gmtime_r(&seconds, &parts);
  char text[16];
  std::strftime(text, sizeof text, "%Y-%m-%d", &parts);
  return text;
}

bool is_result_log(const fs::path& path) {
  // As the official tools glob: result_*.txt (result_run1.txt and result_<timestamp>_<n>.txt were published).
  static const std::regex pattern(R"(result_.+\.txt)");
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

std::string logged_benchmark(const std::string& log_path) { return identify_log(log_path).benchmark; }

LoggedBenchmark identify_log(const std::string& log_path) {
  LoggedBenchmark identity{log_path, "", "", false};
  std::ifstream in(log_path, std::ios::binary);
  std::string line;
  bool dated = false;
  while (std::getline(in, line)) {
    if (line.find(":::MLLOG") == std::string::npos) continue;
    const bool wanted = !dated || line.find(mllog_keys::kSubmissionBenchmark) != std::string::npos ||
                        line.find(mllog_keys::kTrainbenchPreset) != std::string::npos ||
                        line.find(mllog_keys::kRunStart) != std::string::npos;
    if (!wanted) continue;
    for (const auto& event : parse_log_text(line, log_path).events) {
      if (!dated) identity.date = utc_date(event.time_ms), dated = true;
      if (event.key == mllog_keys::kSubmissionBenchmark && event.value.is_string() && identity.benchmark.empty())
        identity.benchmark = event.value.get<std::string>();
      if (event.key == mllog_keys::kTrainbenchPreset) identity.trainbench = true;
      if (event.key == mllog_keys::kRunStart) return identity;
    }
  }
  return identity;
}

std::vector<std::string> rounds_with_benchmark(const std::string& benchmark) {
  std::vector<std::string> rounds;
  for (const auto& round : embedded_rounds())
    if (round.benchmarks.count(benchmark)) rounds.push_back(round.version);
  return rounds;
}

namespace {

bool dated(const LoggedBenchmark& log) { return !log.trainbench && !log.date.empty(); }

// The rounds a log may belong to, oldest first: those with its benchmark that were not published before it
// ran (a result is submitted to a round still open, or again to a later one); trainbench's own and undated
// logs: the rounds that check the benchmark natively, where there are any.
std::vector<std::string> admissible_rounds(const LoggedBenchmark& log) {
  std::vector<std::string> rounds, native, newest;
  for (const auto& round : embedded_rounds()) {
    if (!round.benchmarks.count(log.benchmark)) continue;
    newest = {round.version};
    if (dated(log) && !round.published.empty() && round.published < log.date) continue;
    rounds.push_back(round.version);
    if (round.native.count(log.benchmark)) native.push_back(round.version);
  }
  if (!dated(log) && !native.empty()) return native;
  // A log newer than every round with its benchmark (a retired benchmark run again): the last such round.
  return rounds.empty() ? newest : rounds;
}

// "(submission_benchmark 'resnet', run on 2021-10-16)"
std::string describe(const LoggedBenchmark& log) {
  return "(submission_benchmark '" + printable(log.benchmark, 60) + "'" +
         (dated(log) ? ", run on " + log.date : std::string(log.trainbench ? ", written by trainbench" : "")) + ")";
}

}  // namespace

std::string choose_ruleset_version(const std::vector<LoggedBenchmark>& logs) {
  std::vector<std::string> candidates;
  const LoggedBenchmark* narrowed_by = nullptr;
  bool any_dated = false, any_known = false;
  for (const auto& log : logs) {
    if (rounds_with_benchmark(log.benchmark).empty()) continue;  // not a benchmark of any round: the review says so
    const std::vector<std::string> rounds = admissible_rounds(log);
    if (!any_known) candidates = rounds;
    std::vector<std::string> common;
    std::set_intersection(candidates.begin(), candidates.end(), rounds.begin(), rounds.end(),
                          std::back_inserter(common));
    if (common.empty())
      fail(log.log,
           describe(log) + " can be of round " + joined(rounds) + ", but " +
               (narrowed_by ? narrowed_by->log + " " + describe(*narrowed_by) : std::string("an earlier log")) +
               " only of round " + joined(candidates) +
               ": the logs mix rounds; review each round on its own (--ruleset)");
    if (common.size() < candidates.size() || !narrowed_by) narrowed_by = &log;
    candidates = std::move(common);
    any_known = true;
    any_dated = any_dated || dated(log);
  }
  if (!candidates.empty()) return any_dated ? candidates.front() : candidates.back();
  if (embedded_rounds().empty()) fail("review", "this build has no embedded rulesets");
  return embedded_rounds().back().version;
}

std::string round_of_log(const LoggedBenchmark& log) {
  if (rounds_with_benchmark(log.benchmark).empty()) return "";
  return choose_ruleset_version({log});
}

std::vector<LoggedBenchmark> logged_benchmarks(const std::vector<std::string>& paths) {
  std::vector<LoggedBenchmark> logs;
  for (const auto& path : paths)
    for (const auto& log : result_logs_under(path)) logs.push_back(identify_log(log));
  return logs;
}

void refuse_logs_of_other_rounds(const Ruleset& ruleset, const std::vector<LoggedBenchmark>& logs) {
  for (const auto& log : logs) {
    const std::vector<std::string> rounds = rounds_with_benchmark(log.benchmark);
    if (rounds.empty()) continue;
    if (!ruleset.benchmark(log.benchmark))
      fail(log.log, "submission_benchmark '" + printable(log.benchmark, 60) + "' has no rules in ruleset " +
                        ruleset.version + "; it is a benchmark of ruleset " + joined(rounds) +
                        ": a log of one round is not reviewed under another (give --ruleset " + round_of_log(log) +
                        ", or no --ruleset to pick it from the logs)");
    const std::vector<std::string> admissible = admissible_rounds(log);
    if (dated(log) && std::find(admissible.begin(), admissible.end(), ruleset.version) == admissible.end())
      fail(log.log, describe(log) + ": it ran after round " + ruleset.version + "'s results were published (" +
                        ruleset.published + "): a log of round " + round_of_log(log) +
                        " is not reviewed under another (give --ruleset " + round_of_log(log) +
                        ", or no --ruleset to pick it from the logs)");
  }
}

}  // namespace trainbench::review
