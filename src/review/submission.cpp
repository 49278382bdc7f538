#include "review/submission.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "review/system_description.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"
#include "util/mllog_format.h"

namespace trainbench::review {

namespace {

namespace fs = std::filesystem;

// result_<N>.txt -> N; any other result_*.txt -> kUnnumbered (the official tools glob that pattern, and
// submitters named runs result_run1.txt or result_<timestamp>_<n>.txt); any other name -> -1.
constexpr long kUnnumbered = std::numeric_limits<long>::max();
long run_number(const std::string& file_name) {
  static const std::regex numbered(R"(result_(\d{1,9})\.txt)");
  std::smatch match;
  if (std::regex_match(file_name, match, numbered)) return std::stol(match[1].str());
  const bool result = file_name.size() > 11 && file_name.rfind("result_", 0) == 0 &&
                      file_name.compare(file_name.size() - 4, 4, ".txt") == 0;
  return result ? kUnnumbered : -1;
}

std::string join(const fs::path& folder, const std::string& name) { return (folder / name).string(); }

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

// Review reads what is inside the tree it was given: a symbolic link there (`results/etc -> /etc`, a
// `result_5.txt -> /etc/passwd`) is not followed, and the finding says so.
Finding symlink_skipped(const fs::path& path) {
  return {Severity::kWarning, path.string(), 0,
          "a symbolic link; not followed (review reads only the tree it is given)"};
}

// The folder's entries in name order, symbolic links left out with a finding each.
std::vector<fs::directory_entry> sorted_entries(const fs::path& folder, std::vector<Finding>& findings) {
  std::vector<fs::directory_entry> entries;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    std::error_code link_error;
    if (entry.is_symlink(link_error))
      findings.push_back(symlink_skipped(entry.path()));
    else
      entries.push_back(entry);
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return entries;
}

std::string string_field(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return "";
  const auto found = object.find(field);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

// Reviews the result_*.txt files of one folder, result_<N>.txt sorted by N first, then the others by name;
// other files are reported.
std::vector<RunReview> review_run_files(const fs::path& folder, const Ruleset& ruleset, const LogCheckOptions& options,
                                        std::vector<Finding>& findings, bool report_other_files) {
  std::vector<std::pair<long, std::string>> files;
  for (const auto& entry : sorted_entries(folder, findings)) {
    const std::string name = entry.path().filename().string();
    const long number = run_number(name);
    std::error_code error;
    if (number >= 0 && entry.is_regular_file(error))
      files.emplace_back(number, entry.path().string());
    else if (report_other_files && name != ruleset.scoring.scaling_file && name != ruleset.package.params_file &&
             name != ruleset.package.power_folder)
      findings.push_back({Severity::kWarning, entry.path().string(), 0, "not a result_*.txt log; ignored"});
  }
  std::sort(files.begin(), files.end());
  std::vector<RunReview> runs;
  for (const auto& [number, path] : files) runs.push_back(review_log_file(path, ruleset, options));
  return runs;
}

// A seed as Python's int() reads it, which is what the v1.1 seed checker does: numbers are truncated,
// booleans are 0 or 1, strings must be an integer literal. The text is the integer in decimal.
std::optional<std::string> seed_as_integer(const nlohmann::json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  if (value.is_number()) {
    const double number = value.get<double>();
    if (!std::isfinite(number)) return std::nullopt;
    char text[64];
    std::snprintf(text, sizeof text, "%.0f", std::trunc(number));
    return std::string(text);
  }
  if (!value.is_string()) return std::nullopt;
  static const std::regex literal(R"(\s*([+-]?)(\d(_?\d)*)\s*)");
  std::smatch match;
  const std::string text = value.get<std::string>();
  if (!std::regex_match(text, match, literal)) return std::nullopt;
  std::string digits;
  for (const char c : match[2].str())
    if (c != '_') digits += c;
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  return (match[1] == "-" && digits != "0" ? "-" : "") + digits;
}

// The package checker's seed checker (closed division): every seed reads as an integer; every run logs a
// seed (4.1.0 on) or, before, every run after the first one that logs one (in file order); no two runs log
// the same seed from the same source line (metadata file and lineno); the same seed from different lines
// passes. It reads a log with its own parser and gives up on one with unparsable lines, which fails it.
void check_seeds(const std::vector<RunReview>& runs, const Ruleset& ruleset, std::vector<Finding>& findings) {
  const std::string round = ruleset.round_name();
  std::map<std::string, std::string> run_of_seed;  // "file:lineno:seed" -> the run that logged it first
  std::string first_seeded_run;
  std::vector<std::string> unseeded_before_first;
  for (const auto& run : runs) {
    const std::string name = file_name(run.path);
    if (run.unparsed_lines > 0) {
      findings.push_back({Severity::kError, run.path, 0,
                          "the " + round + " seed checker cannot read this log's seeds: it stops at parsing errors"});
      continue;
    }
    if (run.seeds.empty() && ruleset.package.seed_in_every_run) {
      findings.push_back(
          {Severity::kError, run.path, 0, "logs no seed; the " + round + " seed checker wants one in every run"});
      continue;
    }
    if (run.seeds.empty()) {
      if (!first_seeded_run.empty())
        findings.push_back({Severity::kError, run.path, 0,
                            "logs no seed, but " + first_seeded_run + " does; the " + round +
                                " seed checker wants a seed in every run after the first one that logs one"});
      else
        unseeded_before_first.push_back(name);
      continue;
    }
    if (first_seeded_run.empty()) first_seeded_run = name;
    if (run.seeds.size() > 1)
      findings.push_back(
          {Severity::kWarning, run.path, run.seeds[1].line,
           "logs " + std::to_string(run.seeds.size()) + " seeds; the seed checker warns about more than one"});
    for (const auto& seed : run.seeds) {
      const auto integer = seed_as_integer(seed.value);
      const auto source_file = seed.metadata.find(mllog_format::kFile);
      const auto source_line = seed.metadata.find(mllog_format::kLineno);
      if (!integer) {
        findings.push_back(
            {Severity::kError, run.path, seed.line,
             "seed " + describe(seed.value) + " is not an integer (the seed checker reads it with int())"});
        continue;
      }
      if (seed.value.is_number() && seed.value.get<double>() != std::trunc(seed.value.get<double>()))
        findings.push_back({Severity::kWarning, run.path, seed.line,
                            "seed " + describe(seed.value) + " is not a whole number; the seed checker reads it as " +
                                *integer});
      if (source_file == seed.metadata.end() || source_line == seed.metadata.end()) {
        findings.push_back(
            {Severity::kError, run.path, seed.line,
             "the seed line has no metadata 'file' and 'lineno', which the " + round + " seed checker needs"});
        continue;
      }
      const std::string source = printable(source_file->is_string() ? source_file->get<std::string>()
                                                                    : source_file->dump(), 120) +
                                 ":" + source_line->dump();
      const auto [existing, inserted] = run_of_seed.emplace(source + ":" + *integer, name);
      if (!inserted && existing->second != name)
        findings.push_back({Severity::kError, run.path, seed.line,
                            "seed " + *integer + " is also used by " + existing->second + " (logged from " + source +
                                "); every run needs its own seed"});
    }
  }
  if (!first_seeded_run.empty() && !unseeded_before_first.empty()) {
    std::string names;
    for (const auto& name : unseeded_before_first) names += (names.empty() ? "" : ", ") + name;
    findings.push_back({Severity::kWarning, runs.front().path, 0,
                        names + " log no seed but " + first_seeded_run + " does; the " + round +
                            " seed checker only asks it of runs after the first seeded one"});
  }
}

std::string rcp_table_name(const BenchmarkRules& rules, const Ruleset& ruleset, const std::string& preset) {
  if (preset.empty()) return rules.rcp_table;
  std::string name = ruleset.preset.rcp_table;
  for (const auto& [field, value] :
       {std::pair<std::string, std::string>{"{benchmark}", rules.name}, {"{preset}", preset}}) {
    const size_t at = name.find(field);
    if (at != std::string::npos) name.replace(at, field.size(), value);
  }
  return name;
}

// The batch size a pre-3.0 rcp_checker compares runs that log different ones at: the last file's in the
// order the file system lists the folder, as Python's glob returns them there. The verdict then depends on
// that order, which the warning says.
std::optional<double> batch_size_of_last_listed(BenchmarkReview& review, const Ruleset& ruleset) {
  std::map<std::string, const RunReview*> by_file;
  for (const auto& run : review.runs) by_file[fs::path(run.path).filename().string()] = &run;
  const RunReview* last = nullptr;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(review.directory, error)) {  // unsorted on purpose
    const auto found = by_file.find(entry.path().filename().string());
    if (found != by_file.end() && found->second->global_batch_size) last = found->second;
  }
  if (!last) return std::nullopt;
  std::string sizes;
  for (const auto& run : review.runs)
    if (run.global_batch_size)
      sizes += (sizes.empty() ? "" : ", ") + file_name(run.path) + " " + format_number(*run.global_batch_size);
  review.findings.push_back({Severity::kWarning, review.directory, 0,
                             "the runs log different global_batch_size (" + sizes + "); the " + ruleset.round_name() +
                                 " rcp_checker takes the last file's in the order the file system lists them, here " +
                                 file_name(last->path) +
                                 "'s, so this RCP verdict can differ on another machine (rcp_checker.py@2.0.0:74-77)"});
  return last->global_batch_size;
}

// The rcp_checker's verdict for every set of runs. It counts for the benchmark's verdict where the v1.1
// package checker runs it: closed division (as the system description says) and a benchmark with RCPs.
void check_rcp_for(BenchmarkReview& review, const BenchmarkRules& rules, const Ruleset& ruleset,
                   const ReviewOptions& options, const RunSetContext& context) {
  const std::string& division = context.division;
  const bool rcp_bypass = options.rcp_bypass || context.rcp_bypass;
  const auto add = [&](Severity severity, const std::string& message) {
    review.findings.push_back({severity, review.directory, 0, message});
  };
  std::set<std::string> log_divisions, presets;
  for (const auto& run : review.runs) log_divisions.insert(run.division), presets.insert(run.preset);
  if (presets.size() > 1)
    return add(Severity::kError, "the runs mix trainbench presets; they cannot be scored together");
  const std::string preset = *presets.begin();
  const bool closed = division.empty() ? !log_divisions.count("open") : division == "closed";

  RcpParameters parameters;
  parameters.submission_runs = rules.runs;
  parameters.drop_each_side = rules.drop_each_side;
  parameters.alpha = ruleset.rcp.alpha;
  parameters.tolerance = ruleset.rcp.tolerance;
  parameters.prune_on_mean = ruleset.rcp.prune_on_mean;
  parameters.stdev_of_all_runs = ruleset.rcp.stdev_of_all_runs;
  parameters.minimum_offset = rules.rcp_minimum_offset;
  RcpTable table;  // no points: "Cannot find any RCPs"
  const std::string table_name = rcp_table_name(rules, ruleset, preset);
  if (!table_name.empty()) {
    const auto text = read_ruleset_file(ruleset, table_name);
    if (!text) {
      return add(preset.empty() ? Severity::kError : Severity::kWarning,
                 "ruleset " + ruleset.version + " has no RCP table " + table_name + "; RCP not checked" +
                     (preset.empty() ? "" : " (see docs/review.md for making one from preset runs)"));
    }
    try {
      table = parse_rcp_table(*text, ruleset.folder + "/" + table_name, parameters);
      if (ruleset.rcp.prune) table = prune_rcp_table(table, parameters);
    } catch (const Error& error) {
      return add(Severity::kError, std::string("unusable RCP table: ") + error.what());
    }
    if (table.benchmark != rules.name)
      add(Severity::kWarning, "RCP table " + table_name + " is for '" + table.benchmark + "'");
  }

  std::set<double> batch_sizes;
  std::vector<std::optional<double>> convergence;
  for (const auto& run : review.runs) {
    if (run.global_batch_size) batch_sizes.insert(*run.global_batch_size);
    convergence.push_back(run.rcp_convergence());
  }
  std::optional<double> batch_size;
  if (batch_sizes.size() == 1)
    batch_size = *batch_sizes.begin();
  else if (batch_sizes.size() > 1 && ruleset.rcp.batch_size_of_last_file_listed)
    batch_size = batch_size_of_last_listed(review, ruleset);
  if (batch_size) {
    review.rcp = check_rcp(table, *batch_size, convergence, parameters, rcp_bypass, ruleset.rcp.bypass_covers_missing);
  } else {
    review.rcp = RcpVerdict();
    review.rcp->outcome = batch_sizes.empty() ? "Could not detect global_batch_size"
                                              : "global_batch_size differs between runs";
  }
  RcpVerdict& verdict = *review.rcp;
  verdict.unit = review.runs.front().convergence_unit;
  verdict.required = closed && !table.points.empty();
  if (!verdict.required)
    add(Severity::kNote,
        std::string("RCP check not required: ") +
            (closed ? "ruleset " + ruleset.version + " has no RCPs for " + rules.name
                    : "the " + ruleset.round_name() + " package checker checks RCPs in the closed division only"));
  const std::string bypass_source = options.rcp_bypass ? "--rcp-bypass" : ruleset.package.params_file + " rcp-bypass";
  if (verdict.required && verdict.bypassed)
    add(Severity::kWarning,
        "RCP check failed, accepted with " + bypass_source + " (the submitter must notify the chair)");
  else if (verdict.required && !verdict.passed && rcp_bypass)
    add(Severity::kNote, bypass_source + " does not cover this outcome in ruleset " + ruleset.version);
}

std::string fixed_text(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// The factor the summarizer applies: scaling_factor from the folder's scaling file, or nothing without one.
std::optional<double> read_scaling_factor(const BenchmarkReview& review, const std::string& file) {
  const fs::path path = fs::path(review.directory) / file;
  std::error_code error;
  if (fs::symlink_status(path, error).type() != fs::file_type::regular) return std::nullopt;
  nlohmann::json contents;
  try {
    const std::string text = read_file(path.string());
    check_json_nesting(text, path.string());
    contents = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    fail(path.string(), "not JSON; the result summarizer cannot read it");
  }
  const auto factor = contents.is_object() ? contents.find("scaling_factor") : contents.end();
  if (!contents.is_object() || factor == contents.end() || !factor->is_number())
    fail(path.string(), "needs a number 'scaling_factor', which the result summarizer multiplies the score by");
  return factor->get<double>();
}

// From 3.0.0 the result summarizer multiplies the olympic mean by the folder's scaling.json, which the
// package checker writes when the RCP checker normalizes a faster-than-reference submission. The score is
// the summarizer's on the folder as it is; a normalization the folder does not carry is a warning.
void apply_score_scaling(BenchmarkReview& review, const Ruleset& ruleset) {
  const auto add = [&](Severity severity, const std::string& message) {
    review.findings.push_back({severity, review.directory, 0, message});
  };
  const std::string& file = ruleset.scoring.scaling_file;
  std::optional<double> factor;
  try {
    if (!file.empty()) factor = read_scaling_factor(review, file);
  } catch (const Error& error) {
    return add(Severity::kError, error.what());
  }
  const double unscaled = *review.score.mean_minutes;
  if (factor) {
    review.score.scaling_factor = *factor;
    review.score.mean_minutes = unscaled * *factor;
    add(Severity::kNote, "score " + fixed_text(unscaled, 3) + " min x scaling_factor " + fixed_text(*factor, 6) +
                             " from " + file + " = " + fixed_text(*review.score.mean_minutes, 3) + " min");
  }
  const auto normalization =
      review.rcp && ruleset.rcp.score_normalization ? review.rcp->normalization_factor : std::nullopt;
  if (!normalization || (factor && std::fabs(*factor - *normalization) <= 1e-9 * *normalization)) return;
  add(Severity::kWarning,
      "the RCP checker normalizes this score by " + fixed_text(*normalization, 6) +
          " (RCP mean / submission mean; rules: \"normalized to (potentially interpolated) RCP mean epochs\") and "
          "the package checker writes that to " +
          file + ", giving " + fixed_text(unscaled * *normalization, 3) + " min; this folder " +
          (factor ? "has " + file + " with " + fixed_text(*factor, 6) : "has no " + file) +
          ", so the score is the result summarizer's on the folder as it is");
}

// The power checker's reading of a power file's number: int() of the name's stem after its last '_'.
std::optional<long> power_file_number(const std::string& file) {
  const std::string stem = fs::path(file).stem().string();
  static const std::regex integer(R"(\s*[+-]?\d+\s*)");
  const std::string last = stem.substr(stem.rfind('_') == std::string::npos ? 0 : stem.rfind('_') + 1);
  if (!std::regex_match(last, integer) || last.size() > 18) return std::nullopt;
  return std::stol(last);
}

// The 5.0.0 power checker (package_checker/power_checker.py@5.0.0-rc3), run where a benchmark folder has a
// power folder: each run needs power/<run>/, whose node* and sw* files are numbered 0 to count - 1, and the
// runs the most common node and sw counts (ties: the count seen first). Kept as it decides verdicts: runs are
// taken in file name order, and a count that differs names the run at its position among all runs, those
// without a folder included. A failure is an error on the run, which then counts as a failed log.
void check_power(const fs::path& power, std::vector<RunReview>& runs, std::vector<Finding>& findings,
                 const std::string& round) {
  std::map<std::string, RunReview*> by_file;
  for (auto& run : runs) by_file[fs::path(run.path).filename().string()] = &run;
  std::vector<RunReview*> in_order;
  for (const auto& [file, run] : by_file) in_order.push_back(run);
  const auto fail_run = [&](size_t index, const std::string& why) {
    in_order[index]->findings.push_back(
        {Severity::kError, in_order[index]->path, 0, "the " + round + " power checker: " + why});
  };
  std::map<std::string, std::vector<size_t>> counts;  // "node", "sw" -> per run with a folder, in name order
  for (size_t index = 0; index < in_order.size(); ++index) {
    const fs::path folder = power / fs::path(in_order[index]->path).stem();
    std::error_code error;
    if (!fs::is_directory(folder, error)) {
      fail_run(index, "no " + folder.string() + "/ with this run's power logs");
      continue;
    }
    const std::vector<fs::directory_entry> entries = sorted_entries(folder, findings);
    for (const std::string kind : {"node", "sw"}) {
      std::vector<long> numbers;
      for (const auto& entry : entries) {
        if (entry.path().filename().string().rfind(kind, 0) != 0) continue;
        const auto number = power_file_number(entry.path().filename().string());
        if (!number)
          return findings.push_back({Severity::kError, entry.path().string(), 0,
                                     "the " + round + " power checker stops here: no number after the last '_'"});
        numbers.push_back(*number);
      }
      const long count = static_cast<long>(numbers.size());
      if (std::any_of(numbers.begin(), numbers.end(), [&](long n) { return n < 0 || n >= count; }))
        fail_run(index, kind + " files are not numbered " + kind + "_0 to " + kind + "_" + std::to_string(count - 1));
      counts[kind].push_back(numbers.size());
    }
  }
  if (counts.empty())
    return findings.push_back({Severity::kError, power.string(), 0,
                               "no run has its power folder; the " + round + " power checker crashes on that"});
  for (const auto& [kind, per_run] : counts) {
    std::map<size_t, int> seen;
    for (const size_t count : per_run) ++seen[count];
    size_t most_common = per_run.front();
    for (const size_t count : per_run)
      if (seen[count] > seen[most_common]) most_common = count;
    for (size_t i = 0; i < per_run.size(); ++i)
      if (per_run[i] != most_common)
        fail_run(i, "a run's count of " + kind + " files differs from most runs' " + std::to_string(most_common) +
                        " (the checker names the run at that run's position among all runs)");
  }
}

// The round's package_checker_params in a system or benchmark folder, added to what `inherited` turns on.
// The checker compares each line as Python's readlines() gives it, newline included, so only a last line
// without one turns a bypass on (package_checker.py@4.0.0-rc3-rcp-prunning:61-72,103-116); a bypass line it
// ignores for its newline is reported.
RunSetContext with_package_params(RunSetContext inherited, const fs::path& folder, const Ruleset& ruleset,
                                  std::vector<Finding>& findings) {
  if (ruleset.package.params_file.empty()) return inherited;
  const fs::path path = folder / ruleset.package.params_file;
  std::error_code error;
  if (!fs::exists(fs::symlink_status(path, error))) return inherited;
  std::string text;
  try {
    text = read_file(path.string());
  } catch (const Error& problem) {
    findings.push_back({Severity::kError, path.string(), 0, problem.what()});
    return inherited;
  }
  size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    const size_t end = text.find('\n', start);
    std::string content = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    bool newline = end != std::string::npos;
    start = newline ? end + 1 : text.size();
    if (!content.empty() && content.back() == '\r') {  // Python's universal newlines read "\r" as one too
      content.pop_back();
      newline = true;
    }
    bool* bypass = content == "rcp-bypass"            ? &inherited.rcp_bypass
                   : content == "seed-checker-bypass" ? &inherited.seed_bypass
                                                      : nullptr;
    if (bypass && newline)
      findings.push_back({Severity::kWarning, path.string(), line,
                          "'" + content + "' is ignored: the " + ruleset.round_name() +
                              " package checker compares the line with its newline, so only a last line "
                              "without one counts"});
    else if (bypass)
      *bypass = true;
  }
  return inherited;
}

void review_package(SubmissionReview& review, const fs::path& root, const Ruleset& ruleset,
                    const ReviewOptions& options) {
  review.package_layout = true;
  std::map<std::string, SystemReview> systems;
  for (const fs::path folder : {root / "systems", root / "results"})
    if (fs::is_symlink(folder)) review.findings.push_back(symlink_skipped(folder));
  const auto inside = [&](const fs::path& folder) {
    return fs::is_symlink(folder) ? std::vector<fs::directory_entry>{} : sorted_entries(folder, review.findings);
  };
  for (const auto& entry : inside(root / "systems")) {
    const std::string name = entry.path().filename().string();
    std::error_code error;
    if (entry.path().extension() != ".json" || !entry.is_regular_file(error)) {
      review.findings.push_back({Severity::kWarning, entry.path().string(), 0, "not a <system>.json file; ignored"});
      continue;
    }
    SystemReview& system = systems[entry.path().stem().string()];
    system.name = entry.path().stem().string();
    system.description_path = entry.path().string();
    system.findings =
        check_system_description_file(system.description_path, ruleset.system_description, &system.description);
  }
  std::set<std::string> benchmarks_with_results;
  bool any_results = false;
  for (const auto& system_entry : inside(root / "results")) {
    std::error_code error;
    if (!system_entry.is_directory(error)) {
      review.findings.push_back({Severity::kWarning, system_entry.path().string(), 0, "not a system folder; ignored"});
      continue;
    }
    const std::string name = system_entry.path().filename().string();
    SystemReview& system = systems[name];
    system.name = name;
    if (system.description_path.empty())
      system.findings.push_back(
          {Severity::kError, system_entry.path().string(), 0, "no systems/" + name + ".json describes this system"});
    const std::string division = string_field(system.description, "division");
    const std::string submitter = string_field(system.description, "submitter");
    const RunSetContext system_context =
        with_package_params({true, division}, system_entry.path(), ruleset, system.findings);
    for (const auto& benchmark_entry : sorted_entries(system_entry.path(), system.findings)) {
      const std::string benchmark = benchmark_entry.path().filename().string();
      if (!benchmark_entry.is_directory(error)) {
        if (benchmark == ruleset.package.params_file) continue;
        system.findings.push_back(
            {Severity::kWarning, benchmark_entry.path().string(), 0, "not a benchmark folder; ignored"});
        continue;
      }
      if (!ruleset.benchmark(benchmark)) {
        system.findings.push_back(
            {Severity::kError, benchmark_entry.path().string(), 0,
             "'" + printable(benchmark, 60) + "' is not a benchmark of ruleset " + ruleset.version});
        continue;
      }
      std::vector<Finding> folder_findings;
      std::vector<RunReview> runs =
          review_run_files(benchmark_entry.path(), ruleset, options.checks, folder_findings, true);
      const fs::path power = benchmark_entry.path() / ruleset.package.power_folder;
      if (!ruleset.package.power_folder.empty() && fs::exists(fs::symlink_status(power, error)))
        check_power(power, runs, folder_findings, ruleset.round_name());
      // The official tools do not compare these: the compliance checker takes the benchmark and division
      // from the log, the package checker from the folder and the system description.
      const Severity layout_severity = options.checks.strict ? Severity::kError : Severity::kWarning;
      const std::string layout_note = options.checks.strict ? " (--strict)" : "; an error with --strict";
      for (auto& run : runs) {
        if (!run.benchmark.empty() && run.benchmark != benchmark)
          run.findings.push_back(
              {layout_severity, run.path, 0,
               "submission_benchmark is '" + printable(run.benchmark, 40) + "' but the log is in " + benchmark +
                   "/: the submission rules put logs in \"results/<system_desc_id>/<benchmark>/result_<i>.txt\" "
                   "(submission_rules.adoc @e5d2c1f, Directory structure); the " +
                   ruleset.round_name() + " tools check the log as " + printable(run.benchmark, 40) +
                   " and score it as " + benchmark + layout_note});
        if (!division.empty() && !run.division.empty() && run.division != division)
          run.findings.push_back({layout_severity, run.path, 0,
                                  "submission_division is '" + printable(run.division, 40) + "' but systems/" + name +
                                      ".json says '" + printable(division, 40) + "'; the " + ruleset.round_name() +
                                      " compliance checker uses the log's, the package checker the "
                                      "system's (for seeds and RCPs)" +
                                      layout_note});
        if (!submitter.empty() && !run.org.empty() && run.org != submitter)
          run.findings.push_back({Severity::kWarning, run.path, 0,
                                  "submission_org is '" + printable(run.org, 40) + "' but the system's submitter is '" +
                                      printable(submitter, 40) + "'"});
      }
      any_results = any_results || !runs.empty();
      benchmarks_with_results.insert(benchmark);
      const RunSetContext context =
          with_package_params(system_context, benchmark_entry.path(), ruleset, folder_findings);
      BenchmarkReview result = review_benchmark_runs(name, benchmark, benchmark_entry.path().string(), std::move(runs),
                                                     ruleset, options, context);
      result.findings.insert(result.findings.begin(), folder_findings.begin(), folder_findings.end());
      system.benchmarks.push_back(std::move(result));
    }
  }
  for (auto& [name, system] : systems) {
    if (system.benchmarks.empty() && system.findings.empty() && !system.description_path.empty())
      system.findings.push_back(
          {Severity::kWarning, system.description_path, 0, "no results/" + name + "/ for this system"});
    review.systems.push_back(std::move(system));
  }
  for (const auto& benchmark : benchmarks_with_results) {
    if (!fs::is_directory(root / "benchmarks" / benchmark))
      review.findings.push_back({Severity::kWarning, join(root / "benchmarks", benchmark), 0,
                                 "missing: the package has no implementation folder for " + benchmark});
  }
  if (!any_results)
    review.findings.push_back({Severity::kError, join(root, "results"), 0,
                               fs::is_directory(root / "results") ? "no result_<N>.txt logs" : "no results/ folder"});
}

// trainbench writes results/<name>/result_<N>.txt or results/<system>/<benchmark>/result_<N>.txt.
void review_loose_results(SubmissionReview& review, const fs::path& root, const Ruleset& ruleset,
                          const ReviewOptions& options) {
  std::set<fs::path> folders;
  std::error_code error;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, error), end;
  for (; !error && it != end; it.increment(error)) {
    if (it.depth() > 6) it.disable_recursion_pending();
    std::error_code type_error;
    if (it->is_symlink(type_error)) {
      if (run_number(it->path().filename().string()) >= 0) review.findings.push_back(symlink_skipped(it->path()));
    } else if (it->is_regular_file(type_error) && run_number(it->path().filename().string()) >= 0) {
      folders.insert(it->path().parent_path());
    }
  }
  if (folders.empty()) fail(root.string(), "no results/ folder and no result_<N>.txt logs below it");
  review.findings.push_back(
      {Severity::kNote, root.string(), 0,
       "not a submission tree (no results/ inside): reviewed as loose result folders; package layout and "
       "system descriptions not checked"});
  std::map<std::string, SystemReview> systems;
  for (const auto& folder : folders) {
    std::vector<Finding> folder_findings;
    std::vector<RunReview> runs = review_run_files(folder, ruleset, options.checks, folder_findings, false);
    std::map<std::string, int> logged;
    for (const auto& run : runs) ++logged[run.benchmark];
    const auto most = std::max_element(logged.begin(), logged.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    const std::string folder_name =
        (folder == root ? fs::absolute(root).lexically_normal() : folder).filename().string();
    const std::string benchmark = most == logged.end() || most->first.empty() ? folder_name : most->first;
    const std::string system =
        folder_name == benchmark && folder != root ? folder.parent_path().filename().string() : folder_name;
    SystemReview& entry = systems[system];
    entry.name = system;
    entry.benchmarks.push_back(
        review_benchmark_runs(system, benchmark, folder.string(), std::move(runs), ruleset, options));
  }
  for (auto& [name, system] : systems) review.systems.push_back(std::move(system));
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kValid:
      return "VALID";
    case Verdict::kRcpFailed:
      return "RCP FAILED";
    case Verdict::kInvalid:
      return "INVALID";
  }
  return "INVALID";
}

Verdict BenchmarkReview::verdict() const {
  // Failed logs are not checked here: the score counts them as dropped runs, and more of them than the
  // olympic drop is an error of the set (the v1.1 package checker allows one failed log, UNet3D four).
  if (has_errors(findings)) return Verdict::kInvalid;
  if (rcp && rcp->required && !rcp->passed) return Verdict::kRcpFailed;
  return Verdict::kValid;
}

std::vector<std::string> BenchmarkReview::invalid_reasons() const {
  std::vector<std::string> reasons;
  for (const auto& finding : findings)
    if (finding.severity == Severity::kError) reasons.push_back(finding.message);
  // Without a score, every run that does not count is part of why: say how far each got.
  if (!score.mean_minutes)
    for (const auto& run : runs)
      if (const std::string why = run.not_converged_reason(); !why.empty())
        reasons.push_back(fs::path(run.path).filename().string() + ": " + why);
  if (rcp && rcp->required && !rcp->passed)
    reasons.push_back(rcp->summary() + (rcp->explanation.empty() ? "" : ": " + rcp->explanation));
  return reasons;
}

Verdict SystemReview::verdict() const {
  Verdict worst = has_errors(findings) ? Verdict::kInvalid : Verdict::kValid;
  for (const auto& benchmark : benchmarks) worst = std::max(worst, benchmark.verdict());
  return worst;
}

Verdict SubmissionReview::verdict() const {
  Verdict worst = has_errors(findings) || systems.empty() ? Verdict::kInvalid : Verdict::kValid;
  for (const auto& system : systems) worst = std::max(worst, system.verdict());
  return worst;
}

BenchmarkReview review_benchmark_runs(const std::string& system, const std::string& benchmark,
                                      const std::string& directory, std::vector<RunReview> runs, const Ruleset& ruleset,
                                      const ReviewOptions& options, const RunSetContext& context) {
  BenchmarkReview review;
  review.system = system;
  review.benchmark = benchmark;
  review.directory = directory;
  review.runs = std::move(runs);
  const auto add = [&](Severity severity, const std::string& message) {
    review.findings.push_back({severity, directory, 0, message});
  };
  const BenchmarkRules* rules = ruleset.benchmark(benchmark);
  if (!rules) {
    add(Severity::kError, "no rules for benchmark '" + printable(benchmark, 60) + "' in ruleset " + ruleset.version);
    review.score = olympic_score({}, 1);
    return review;
  }
  const int count = static_cast<int>(review.runs.size());
  if (count < rules->runs)
    add(Severity::kError,
        benchmark + " needs " + std::to_string(rules->runs) + " runs; found " + std::to_string(count));
  else if (count > rules->runs && context.package)
    add(Severity::kError, std::to_string(count) + " runs found; the " + ruleset.round_name() +
                              " package checker requires exactly " + std::to_string(rules->runs) +
                              " (run more if you like, and submit " + std::to_string(rules->runs) +
                              " consecutive ones)");
  else if (count > rules->runs)
    add(Severity::kWarning, std::to_string(count) + " runs found; the rules require " + std::to_string(rules->runs) +
                                " (consecutive runs, no cherry-picking); all are scored");
  std::set<std::string> log_divisions;
  for (const auto& run : review.runs) log_divisions.insert(run.division);
  const bool closed = context.division.empty() ? !log_divisions.count("open") : context.division == "closed";
  if (closed && context.seed_bypass)
    add(Severity::kWarning, "seed check bypassed by " + ruleset.package.params_file + " seed-checker-bypass");
  else if (closed)
    check_seeds(review.runs, ruleset, review.findings);

  std::vector<RunTime> times;
  for (const auto& run : review.runs) {
    const bool counted = run.converged() && run.minutes.has_value();
    times.push_back({run.minutes.value_or(0), counted});
  }
  review.score = olympic_score(times, rules->drop_each_side);
  if (!review.score.mean_minutes && count > 2 * rules->drop_each_side) {
    add(Severity::kError, std::to_string(review.score.non_converged) + " of " + std::to_string(count) +
                              " runs did not converge or failed their checks; at most " +
                              std::to_string(rules->drop_each_side) + " may be dropped");
  } else if (!review.score.mean_minutes && count > 0) {
    add(Severity::kError,
        "too few runs for an olympic score (" + std::to_string(rules->drop_each_side) + " dropped at each end)");
  } else if (review.score.non_converged > 0) {
    const auto failed = std::count_if(review.runs.begin(), review.runs.end(),
                                      [](const RunReview& run) { return !run.compliant(); });
    add(failed > 0 ? Severity::kWarning : Severity::kNote,
        std::to_string(review.score.non_converged) + " run(s) did not converge or failed their checks and count as " +
            "dropped" +
            (failed > 0 ? "; the " + ruleset.round_name() + " package checker allows " +
                              std::to_string(rules->drop_each_side) + " failed log(s) under olympic scoring"
                        : ""));
  }
  if (count > 0) check_rcp_for(review, *rules, ruleset, options, context);
  if (review.score.mean_minutes) apply_score_scaling(review, ruleset);
  return review;
}

SubmissionReview review_submission(const std::string& folder, const Ruleset& ruleset, const ReviewOptions& options) {
  const fs::path root(folder);
  std::error_code error;
  if (!fs::is_directory(root, error)) fail(folder, "not a folder");
  SubmissionReview review;
  review.root = folder;
  review.ruleset_version = ruleset.version;
  try {
    if (fs::is_directory(root / "results", error) || fs::is_directory(root / "systems", error))
      review_package(review, root, ruleset, options);
    else
      review_loose_results(review, root, ruleset, options);
  } catch (const fs::filesystem_error& problem) {  // e.g. a folder that cannot be listed
    fail(folder, problem.what());
  }
  return review;
}

}  // namespace trainbench::review
