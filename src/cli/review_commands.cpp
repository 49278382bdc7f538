// The review side of the CLI: review, system, report and rcp-table. Thin: each command parses its flags,
// calls src/review and prints; verdicts go to CommandContext::exit_code, bad input throws trainbench::Error.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "review/compliance.h"
#include "review/rcp_builder.h"
#include "review/report.h"
#include "review/review_output.h"
#include "review/ruleset.h"
#include "review/ruleset_choice.h"
#include "review/submission.h"
#include "review/system_description.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace trainbench::cli {

namespace {

namespace fs = std::filesystem;
using review::Ruleset;

// The newest embedded ruleset is the default and names the system description flags.
std::string default_ruleset_version() {
  const auto versions = review::embedded_ruleset_versions();
  return versions.empty() ? "" : versions.back();
}

struct RulesetFlags {
  std::string version;  // empty: the round the logs' benchmarks belong to
  std::string rules_dir;

  void add_to(CLI::App* command) {
    command->add_option("--ruleset", version,
                        "Ruleset version to check against, 1.0.0 to 6.1.0 (default: the round the logs belong to: "
                        "for trainbench's own logs the round it implements their benchmark for, for others the "
                        "first round published after they ran that has their benchmark)");
    command
        ->add_option("--rules-dir", rules_dir,
                     "Read rule files from DIR/training_<version>/ (and its checker/ folder) instead of the "
                     "embedded ones")
        ->check(CLI::ExistingDirectory);
  }

  // The ruleset for the logs in these paths (files or folders); a log of another round is refused by name.
  Ruleset load_for(const std::vector<std::string>& paths) const {
    const auto logs = review::logged_benchmarks(paths);
    const Ruleset ruleset =
        review::load_ruleset(version.empty() ? review::choose_ruleset_version(logs) : version, rules_dir);
    review::refuse_logs_of_other_rounds(ruleset, logs);
    return ruleset;
  }
};

std::string json_text(const nlohmann::ordered_json& value) {
  return value.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string without_trailing_slash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The choices the official tools offer as flags (--rcp_bypass, --bert_train_samples) plus --strict.
struct VerdictFlags {
  review::ReviewOptions options;

  void add_to(CLI::App* command) {
    command->add_flag("--rcp-bypass", options.rcp_bypass,
                      "Accept failed RCP checks, except a missing RCP (the submitter must notify the chair; "
                      "reported as warnings)");
    command->add_flag("--bert-train-samples", options.checks.bert_train_samples,
                      "BERT converges at the logged train_samples, not at the eval epoch_num (the RCP checker's "
                      "--bert_train_samples)");
    command->add_flag("--strict", options.checks.strict,
                      "Where the rules text is stricter than the round's official tools, fail instead of warning");
  }
};

struct ReviewFlags {
  RulesetFlags ruleset;
  VerdictFlags verdict;
  std::string folder;
  std::vector<std::string> logs;
  bool json = false;
};

void add_review(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<ReviewFlags>();
  CLI::App* command = app.add_subcommand(
      "review", "Check a submission folder (systems/, results/, benchmarks/) or single logs against the MLPerf rules");
  command->add_option("folder", flags->folder, "Submission (org) folder, or any folder holding result_<N>.txt logs");
  command->add_option("--log", flags->logs, "Check one result log (repeatable) instead of a folder")
      ->check(CLI::ExistingFile);
  flags->ruleset.add_to(command);
  flags->verdict.add_to(command);
  command->add_flag("--json", flags->json, "Print the review as JSON instead of text");
  command->callback([flags, &context] {
    if (flags->folder.empty() == flags->logs.empty())
      fail("review", "give a submission folder or --log FILE, not both");
    const Ruleset ruleset =
        flags->ruleset.load_for(flags->logs.empty() ? std::vector<std::string>{flags->folder} : flags->logs);
    if (!flags->logs.empty()) {
      nlohmann::ordered_json runs = nlohmann::ordered_json::array();
      for (const auto& path : flags->logs) {
        const review::RunReview run = review::review_log_file(path, ruleset, flags->verdict.options.checks);
        if (!run.compliant() || !run.converged()) context.exit_code = 1;
        if (flags->json)
          runs.push_back(review::run_to_json(run));
        else
          std::cout << review::format_run_text(run);
      }
      if (flags->json) std::cout << json_text(runs);
      return;
    }
    const review::SubmissionReview result =
        review::review_submission(without_trailing_slash(flags->folder), ruleset, flags->verdict.options);
    // A failed RCP check alone gets its own status: the review committee may accept it (--rcp-bypass).
    if (result.verdict() == review::Verdict::kInvalid) context.exit_code = 1;
    if (result.verdict() == review::Verdict::kRcpFailed) context.exit_code = 3;
    std::cout << (flags->json ? json_text(review::submission_to_json(result)) : review::format_submission_text(result));
  });
}

std::string flag_name(const std::string& field) {
  std::string name = field;
  for (char& c : name)
    if (c == '_') c = '-';
  return "--" + name;
}

struct SystemFlags {
  std::string out;
  bool print = false;
  std::map<std::string, std::string> fields;  // filled by the per-field flags
  std::vector<std::string> assignments;       // --set FIELD=VALUE
};

void add_system(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<SystemFlags>();
  CLI::App* command = app.add_subcommand(
      "system",
      "Write a system description (systems/<name>.json) with every required field; hardware and software are detected");
  command
      ->add_option("--out", flags->out,
                   "Where to write it, e.g. systems/my_box.json (the file name is the system name)")
      ->check(output_file());
  command->add_flag("--print", flags->print, "Print the description instead of (or as well as) writing it");
  command->add_option("--set", flags->assignments, "FIELD=VALUE for any field (repeatable)");
  // One flag per required field of the default ruleset, so the help lists exactly what a description holds.
  const Ruleset ruleset = review::load_ruleset(default_ruleset_version());
  for (const auto& field : ruleset.system_description.fields) {
    if (field == "other_software_stack") continue;  // an object of versions; detected
    auto* option =
        command->add_option(flag_name(field), flags->fields[field], "system description field '" + field + "'");
    option->group(field == "submitter" || field == "division" || field == "status" || field == "cooling" ||
                          field.find("topology") != std::string::npos
                      ? "Not detectable (give them)"
                      : "Other fields (override what is detected)");
    if (field == "division") option->check(CLI::IsMember({"closed", "open"}));
    if (const auto allowed = ruleset.system_description.allowed_values.find(field);
        allowed != ruleset.system_description.allowed_values.end())
      option->check(CLI::IsMember(allowed->second.values));  // the status availabilities
  }
  command->callback([flags, &context, command, ruleset] {
    if (flags->out.empty() && !flags->print) fail("system", "give --out systems/<name>.json or --print");
    std::map<std::string, std::string> given;
    for (const auto& [field, value] : flags->fields)
      if (command->count(flag_name(field)) > 0) given[field] = value;
    const auto& known = ruleset.system_description.fields;
    for (const auto& assignment : flags->assignments) {
      const size_t equals = assignment.find('=');
      const std::string field = assignment.substr(0, equals);
      if (equals == std::string::npos || std::find(known.begin(), known.end(), field) == known.end())
        fail("--set " + assignment,
             "expected FIELD=VALUE with one of the " + std::to_string(known.size()) + " required fields");
      given[field] = assignment.substr(equals + 1);
    }
    if (!flags->out.empty() && !given.count("system_name")) given["system_name"] = fs::path(flags->out).stem().string();
    review::HostProbe probe;
    const nlohmann::ordered_json description = review::describe_host(probe, ruleset.system_description, given);
    const std::string text = json_text(description);
    if (flags->print) std::cout << text;
    if (flags->out.empty()) return;
    write_file_atomically(flags->out, text);
    std::vector<std::string> empty;
    for (const auto& [field, value] : description.items())
      if (value.is_string() && value.get<std::string>().empty()) empty.push_back(field);
    std::cout << "wrote " << flags->out << ": " << description.size() << " fields, " << empty.size() << " empty\n";
    for (const auto& field : empty) std::cout << "  empty: " << field << " (" << flag_name(field) << ")\n";
    const auto findings =
        review::check_system_description(nlohmann::json::parse(text), flags->out, ruleset.system_description);
    for (const auto& finding : findings) std::cout << review::format_finding(finding) << "\n";
    if (review::has_errors(findings)) context.exit_code = 1;
  });
}

struct ReportFlags {
  RulesetFlags ruleset;
  std::vector<std::string> folders;
  std::string out;
  std::string title = "trainbench results";
  bool compare = false;
  VerdictFlags verdict;
};

void add_report(CLI::App& app, CommandContext& context) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Write a results page (HTML, Markdown, CSV): minutes per system and benchmark, convergence curves, comparisons");
  command->add_option("folders", flags->folders, "Submission or result folders")->required();
  command->add_option("--out", flags->out, "Folder for report.html, report.md and report.csv")
      ->required()
      ->check(output_folder());
  command->add_option("--title", flags->title, "Page title")->capture_default_str();
  command->add_flag("--compare", flags->compare,
                    "Compare two folders: the speedup of the second over the first per benchmark");
  flags->verdict.add_to(command);
  flags->ruleset.add_to(command);
  command->callback([flags, &context] {
    if (flags->compare && flags->folders.size() != 2) fail("report --compare", "needs exactly two folders");
    const Ruleset ruleset = flags->ruleset.load_for(flags->folders);
    std::vector<review::ReportInput> inputs;
    for (const auto& folder : flags->folders) {
      const std::string path = without_trailing_slash(folder);
      inputs.push_back({path, review::review_submission(path, ruleset, flags->verdict.options)});
      if (!inputs.back().review.valid()) context.exit_code = 1;
    }
    review::ReportOptions report_options;
    report_options.title = flags->title;
    report_options.compare = flags->compare;
    for (const auto& path : review::write_report(review::render_report(inputs, report_options), flags->out))
      std::cout << "wrote " << path << "\n";
    if (context.exit_code != 0)
      std::cout << "some results are INVALID or failed their RCP check; `trainbench review <folder>` says why\n";
  });
}

struct RcpTableFlags {
  RulesetFlags ruleset;
  std::vector<std::string> folders;
  std::string out;
  std::string benchmark = "resnet";
  std::string preset;
  std::string creator = "trainbench";
  std::string platform;
};

void add_rcp_table(CLI::App& app) {
  auto flags = std::make_shared<RcpTableFlags>();
  CLI::App* command = app.add_subcommand(
      "rcp-table", "Make a reference convergence point table from compliant, converged runs (e.g. of a preset)");
  command->add_option("folders", flags->folders, "Folders holding result_<N>.txt logs")->required();
  command->add_option("--out", flags->out, "Table to write, e.g. rules/training_1.1.0/rcps_resnet_mini.json")
      ->required()
      ->check(output_file());
  command->add_option("--benchmark", flags->benchmark, "Benchmark of the runs")->capture_default_str();
  command->add_option("--preset", flags->preset, "trainbench preset of the runs (empty: reference runs)");
  command->add_option("--creator", flags->creator, "Who made the runs")->capture_default_str();
  command->add_option("--platform", flags->platform, "What they ran on (default: the logs' submission_platform)");
  flags->ruleset.add_to(command);
  command->callback([flags] {
    const Ruleset ruleset = flags->ruleset.load_for(flags->folders);
    const review::BenchmarkRules* rules = ruleset.benchmark(flags->benchmark);
    if (!rules) fail("--benchmark " + flags->benchmark, "not a benchmark of ruleset " + ruleset.version);
    std::vector<review::RunReview> runs;
    for (const auto& folder : flags->folders) {
      const auto result = review::review_submission(without_trailing_slash(folder), ruleset);
      for (const auto& system : result.systems)
        for (const auto& benchmark : system.benchmarks)
          runs.insert(runs.end(), benchmark.runs.begin(), benchmark.runs.end());
    }
    std::string platform = flags->platform;
    for (const auto& run : runs)
      if (platform.empty() && run.converged()) platform = run.platform;
    const review::RcpTableDraft draft =
        review::make_rcp_table(runs, flags->benchmark, flags->preset, flags->creator, platform, 2 * rules->runs);
    for (const auto& finding : draft.findings) std::cout << review::format_finding(finding) << "\n";
    if (draft.json.empty())
      fail("rcp-table", "no compliant, converged " + flags->benchmark + " runs to make a table from");
    write_file_atomically(flags->out, draft.json);
    std::cout << "wrote " << flags->out << "\n";
  });
}

}  // namespace

void add_review_commands(CLI::App& app, CommandContext& context) {
  add_review(app, context);
  add_system(app, context);
  add_report(app, context);
  add_rcp_table(app);
}

}  // namespace trainbench::cli
