#include "review/submission.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "review/system_description.h"
#include "util/error.h"

namespace trainbench::review {

namespace {

namespace fs = std::filesystem;

// result_<N>.txt -> N, or -1 for any other name.
long run_number(const std::string& file_name) {
  static const std::regex pattern(R"(result_(\d{1,9})\.txt)");
  std::smatch match;
  return std::regex_match(file_name, match, pattern) ? std::stol(match[1].str()) : -1;
}

std::string join(const fs::path& folder, const std::string& name) { return (folder / name).string(); }

std::string file_name(const std::string& path) { return fs::path(path).filename().string(); }

std::vector<fs::directory_entry> sorted_entries(const fs::path& folder) {
  std::vector<fs::directory_entry> entries;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(folder, error)) entries.push_back(entry);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return entries;
}

std::string string_field(const nlohmann::json& object, const char* field) {
  if (!object.is_object()) return "";
  const auto found = object.find(field);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

// Reviews the result_<N>.txt files of one folder, sorted by N; other files are reported.
std::vector<RunReview> review_run_files(const fs::path& folder, const Ruleset& ruleset, std::vector<Finding>& findings,
                                        bool report_other_files) {
  std::vector<std::pair<long, std::string>> files;
  for (const auto& entry : sorted_entries(folder)) {
    const std::string name = entry.path().filename().string();
    const long number = run_number(name);
    std::error_code error;
    if (number >= 0 && entry.is_regular_file(error))
      files.emplace_back(number, entry.path().string());
    else if (report_other_files)
      findings.push_back({Severity::kWarning, entry.path().string(), 0, "not a result_<N>.txt log; ignored"});
  }
  std::sort(files.begin(), files.end());
  std::vector<RunReview> runs;
  for (const auto& [number, path] : files) runs.push_back(review_log_file(path, ruleset));
  return runs;
}

void check_seeds(const std::vector<RunReview>& runs, std::vector<Finding>& findings, const std::string& directory) {
  std::vector<std::string> with_seed, without_seed;
  std::map<std::string, std::string> first_run_of_seed;
  for (const auto& run : runs) {
    (run.seeds.empty() ? without_seed : with_seed).push_back(file_name(run.path));
    std::set<std::string> seen_in_run;
    for (const auto& seed : run.seeds) {
      const std::string text = describe(seed.value);
      if (!seen_in_run.insert(text).second) continue;
      const auto [existing, inserted] = first_run_of_seed.emplace(text, file_name(run.path));
      if (!inserted)
        findings.push_back(
            {Severity::kError, run.path, seed.line,
             "seed " + text + " is also used by " + existing->second + "; every run needs its own seed"});
    }
  }
  if (!with_seed.empty() && !without_seed.empty()) {
    std::string missing;
    for (const auto& name : without_seed) missing += (missing.empty() ? "" : ", ") + name;
    findings.push_back({Severity::kError, directory, 0,
                        "seed is logged in " + std::to_string(with_seed.size()) + " of " + std::to_string(runs.size()) +
                            " runs; log it in all runs or none (missing in " + missing + ")"});
  }
}

void check_rcp_for(BenchmarkReview& review, const BenchmarkRules& rules, const Ruleset& ruleset,
                   const ReviewOptions& options) {
  auto& findings = review.findings;
  const auto add = [&](Severity severity, const std::string& message) {
    findings.push_back({severity, review.directory, 0, message});
  };
  std::set<std::string> divisions, presets;
  for (const auto& run : review.runs) divisions.insert(run.division), presets.insert(run.preset);
  if (divisions.count("open")) return add(Severity::kNote, "open division: no RCP check");
  if (presets.size() > 1)
    return add(Severity::kError, "the runs mix trainbench presets; they cannot be scored together");
  const std::string preset = *presets.begin();
  std::string table_name = rules.rcp_table;
  if (!preset.empty()) {
    table_name = ruleset.preset.rcp_table;
    for (const auto& [field, value] :
         {std::pair<std::string, std::string>{"{benchmark}", rules.name}, {"{preset}", preset}}) {
      const size_t at = table_name.find(field);
      if (at != std::string::npos) table_name.replace(at, field.size(), value);
    }
  }
  if (table_name.empty())
    return add(Severity::kNote, "no RCP check for " + rules.name + " in ruleset " + ruleset.version);
  const auto text = read_ruleset_file(ruleset, table_name);
  if (!text) {
    return add(preset.empty() ? Severity::kError : Severity::kWarning,
               "ruleset " + ruleset.version + " has no RCP table " + table_name + "; RCP not checked" +
                   (preset.empty() ? "" : " (see docs/review.md for making one from preset runs)"));
  }
  RcpParameters parameters;
  parameters.submission_runs = rules.runs;
  parameters.drop_each_side = rules.drop_each_side;
  parameters.alpha = ruleset.rcp.alpha;
  parameters.tolerance = ruleset.rcp.tolerance;
  RcpTable table;
  try {
    table = parse_rcp_table(*text, ruleset.folder + "/" + table_name, parameters);
  } catch (const Error& error) {
    return add(Severity::kError, std::string("unusable RCP table: ") + error.what());
  }
  if (table.benchmark != rules.name)
    add(Severity::kWarning, "RCP table " + table_name + " is for '" + table.benchmark + "'");

  std::set<double> batch_sizes;
  std::vector<std::optional<double>> convergence;
  for (const auto& run : review.runs) {
    if (run.global_batch_size) batch_sizes.insert(*run.global_batch_size);
    convergence.push_back(run.converged() ? run.convergence : std::nullopt);
  }
  if (batch_sizes.size() != 1) {
    return add(Severity::kError, batch_sizes.empty() ? "RCP check failed: could not detect global_batch_size"
                                                     : "RCP check failed: global_batch_size differs between runs");
  }
  review.rcp = check_rcp(table, *batch_sizes.begin(), convergence, parameters, options.rcp_bypass,
                         ruleset.rcp.bypass_covers_missing);
  const RcpVerdict& verdict = *review.rcp;
  const std::string unit = rules.convergence == "train_samples" ? " (samples)" : " (epochs)";
  const std::string summary = verdict.outcome + unit + (verdict.explanation.empty() ? "" : ": " + verdict.explanation);
  if (verdict.bypassed)
    add(Severity::kWarning,
        "RCP check failed, accepted with --rcp-bypass (the submitter must notify the chair): " + summary);
  else if (!verdict.passed)
    add(Severity::kError, "RCP check failed: " + summary);
  else
    add(Severity::kNote, "RCP check passed: " + summary);
}

void review_package(SubmissionReview& review, const fs::path& root, const Ruleset& ruleset,
                    const ReviewOptions& options) {
  review.package_layout = true;
  std::map<std::string, SystemReview> systems;
  for (const auto& entry : sorted_entries(root / "systems")) {
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
  for (const auto& system_entry : sorted_entries(root / "results")) {
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
    for (const auto& benchmark_entry : sorted_entries(system_entry.path())) {
      const std::string benchmark = benchmark_entry.path().filename().string();
      if (!benchmark_entry.is_directory(error)) {
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
      std::vector<RunReview> runs = review_run_files(benchmark_entry.path(), ruleset, folder_findings, true);
      for (auto& run : runs) {
        if (!run.benchmark.empty() && run.benchmark != benchmark)
          run.findings.push_back(
              {Severity::kError, run.path, 0,
               "submission_benchmark is '" + printable(run.benchmark, 40) + "' but the log is in " + benchmark + "/"});
        if (!division.empty() && !run.division.empty() && run.division != division)
          run.findings.push_back({Severity::kError, run.path, 0,
                                  "submission_division is '" + printable(run.division, 40) + "' but systems/" + name +
                                      ".json says '" + printable(division, 40) + "'"});
        if (!submitter.empty() && !run.org.empty() && run.org != submitter)
          run.findings.push_back({Severity::kWarning, run.path, 0,
                                  "submission_org is '" + printable(run.org, 40) + "' but the system's submitter is '" +
                                      printable(submitter, 40) + "'"});
      }
      any_results = any_results || !runs.empty();
      benchmarks_with_results.insert(benchmark);
      BenchmarkReview result =
          review_benchmark_runs(name, benchmark, benchmark_entry.path().string(), std::move(runs), ruleset, options);
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
  if (!any_results) review.findings.push_back({Severity::kError, join(root, "results"), 0, "no result_<N>.txt logs"});
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
    if (it->is_regular_file(type_error) && run_number(it->path().filename().string()) >= 0)
      folders.insert(it->path().parent_path());
  }
  if (folders.empty()) fail(root.string(), "no results/ folder and no result_<N>.txt logs below it");
  review.findings.push_back(
      {Severity::kNote, root.string(), 0,
       "not a submission tree (no results/ inside): reviewed as loose result folders; package layout and "
       "system descriptions not checked"});
  std::map<std::string, SystemReview> systems;
  for (const auto& folder : folders) {
    std::vector<Finding> folder_findings;
    std::vector<RunReview> runs = review_run_files(folder, ruleset, folder_findings, false);
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

bool BenchmarkReview::valid() const {
  return !has_errors(findings) &&
         std::all_of(runs.begin(), runs.end(), [](const RunReview& run) { return run.compliant(); });
}

std::vector<std::string> BenchmarkReview::invalid_reasons() const {
  std::vector<std::string> reasons;
  for (const auto& run : runs) {
    const int errors = count_findings(run.findings, Severity::kError);
    if (errors == 0) continue;
    const auto first = std::find_if(run.findings.begin(), run.findings.end(),
                                    [](const Finding& finding) { return finding.severity == Severity::kError; });
    reasons.push_back(file_name(run.path) + ": " + std::to_string(errors) + (errors == 1 ? " error" : " errors") +
                      " (" + (first->line > 0 ? "line " + std::to_string(first->line) + ": " : "") + first->message +
                      ")");
  }
  for (const auto& finding : findings)
    if (finding.severity == Severity::kError) reasons.push_back(finding.message);
  return reasons;
}

bool SystemReview::valid() const {
  return !has_errors(findings) && std::all_of(benchmarks.begin(), benchmarks.end(),
                                              [](const BenchmarkReview& review) { return review.valid(); });
}

bool SubmissionReview::valid() const {
  return !has_errors(findings) && !systems.empty() &&
         std::all_of(systems.begin(), systems.end(), [](const SystemReview& system) { return system.valid(); });
}

BenchmarkReview review_benchmark_runs(const std::string& system, const std::string& benchmark,
                                      const std::string& directory, std::vector<RunReview> runs, const Ruleset& ruleset,
                                      const ReviewOptions& options) {
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
  else if (count > rules->runs)
    add(Severity::kWarning, std::to_string(count) + " runs found; the rules require " + std::to_string(rules->runs) +
                                " (consecutive runs, no cherry-picking); all are scored");
  check_seeds(review.runs, review.findings, directory);

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
    add(Severity::kNote, std::to_string(review.score.non_converged) +
                             " run(s) did not converge or failed their checks and count as dropped");
  }
  if (count > 0) check_rcp_for(review, *rules, ruleset, options);
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
    if (fs::is_directory(root / "results", error))
      review_package(review, root, ruleset, options);
    else
      review_loose_results(review, root, ruleset, options);
  } catch (const fs::filesystem_error& problem) {  // e.g. a folder that cannot be listed
    fail(folder, problem.what());
  }
  return review;
}

}  // namespace trainbench::review
