#pragma once
// A ruleset is data: rules/training_<version>/rules.json plus its RCP tables, embedded in the binary at build
// time (or read from a folder with --rules-dir). This header is the in-memory form of that file; the
// schema is described in docs/review.md. A later round's rules are a new folder, not new code.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "review/finding.h"
#include "review/json_checks.h"
#include "util/mllog_keys.h"

namespace trainbench::review {

// The language models' RCP unit from 4.0.0: an evaluation's metadata.samples_count.
inline constexpr const char* kSamplesCountUnit = "samples_count";
// Stable diffusion's RCP unit in 3.1.0: an evaluation's metadata.step_num.
inline constexpr const char* kStepNumUnit = "step_num";

enum class Requirement { kNone, kExactlyOne, kAtLeastOne, kAtLeastOneOr };

// A limit the rules text sets where the official checker sets a looser one (e.g. 20 minutes of
// initialization in the text, 30 in the checker's code). The checker decides the verdict; breaking only the
// text's limit is a warning that quotes it, or an error when the review is strict.
struct RulesTextLimit {
  std::string source;  // where the text says it, e.g. "training_rules.adoc @ebfe13f, Run Results"
  std::string quote;   // the sentence itself
  std::string within_ms_of_first_key;
  double within_ms = 0;
};

// The rule for one log key within a config (the YAML KEY records).
struct KeyRule {
  std::string key;
  std::string config;  // the config that declared it, for messages
  Requirement requirement = Requirement::kNone;
  std::string alternative_key;  // satisfies kAtLeastOneOr in place of `key`
  std::optional<ValueCheck> value;
  std::map<std::string, ValueCheck> metadata;  // required metadata fields and checks on them
  std::vector<std::string> after;              // each must have been logged on an earlier line
  std::vector<std::string> not_after;          // none may have been logged on an earlier line
  std::string within_ms_of_first_key;          // time_ms - first time of this key < within_ms
  double within_ms = 0;
  std::string enqueue;  // config to apply next, "{value}" replaced by this key's value
  std::optional<RulesTextLimit> rules_text;
  // The value is a size a trainbench preset scales down (MiniGo's 8192 self-play games per generation):
  // its value checks hold for the reference configuration only, the requirement for every log.
  bool preset_scaled = false;
};

// The quality target: at least one logged metric must reach it (the YAML ATLEAST_ONE_CHECK).
struct TargetRule {
  std::string key = mllog_keys::kEvalAccuracy;
  bool higher_is_better = true;
  std::optional<double> threshold;                 // a scalar metric
  std::map<std::string, double> field_thresholds;  // an object metric, e.g. {BBOX, SEGM}
  std::optional<double> bound;                     // exclusive far end: value < bound (or > bound)
  Severity severity = Severity::kError;
};

// The set of tensors weights_initialization lines must name (a warning in v1.1).
struct TensorSetRule {
  std::string key;
  std::string metadata_field;
  std::vector<std::string> expected;  // brace patterns already expanded
  Severity severity = Severity::kWarning;
};

struct RuleConfig {
  std::string name;
  std::vector<KeyRule> keys;
  std::optional<TargetRule> target;
  std::optional<TensorSetRule> tensors;
};

// A bound one metric must meet for an evaluation to pass: value <= bound, or >= bound.
struct MetricBound {
  bool at_most = false;
  double bound = 0;
  bool met_by(double value) const { return at_most ? value <= bound : value >= bound; }
};

struct BenchmarkRules {
  std::string name;
  int runs = 5;
  int drop_each_side = 1;
  std::string rcp_table;                  // file next to rules.json; empty: no RCP check
  // What the RCP checker reads by default: "epoch_num", "samples_count", "step_num" or "train_samples".
  std::string convergence = mllog_keys::kEpochNum;
  // When set, the run converges at the smallest step (its evaluations' metadata `convergence`) at which every
  // named metric (metadata.metric) meets its bound, not at the last evaluation before run_stop: stable
  // diffusion's FID <= 90 and CLIP >= 0.15, which its rcp_checker hardcodes.
  std::map<std::string, MetricBound> first_passing_step;
  // Subtracted from the RCP's minimum acceptable mean when a submission is compared with it (llama31_405b in
  // 5.0.0 and 5.1.0: 46080 samples, rcp_checker.py@5.0.0-rc3:443-444).
  double rcp_minimum_offset = 0;
  bool train_samples_convergence = false;  // --bert-train-samples switches it to the logged train_samples
  // The rules evaluate saved models after training and date run_stop at the passing one's save (MiniGo), so
  // run_stop may precede the evaluation lines.
  bool evaluated_after_training = false;
};

// How a trainbench preset log names its preset and its own target.
struct PresetRule {
  std::string key;
  std::string target_key;
  std::vector<std::string> reference_values;  // preset values that mean "the rules' own target"
  std::string rcp_table;                      // pattern with {benchmark} and {preset}
  // Keys whose fixed values describe the rules' dataset (RNN-T's eval_samples 2703); a preset trains on its
  // own dataset, so their value checks do not apply to it.
  std::vector<std::string> own_dataset_keys;
};

struct RcpSettings {
  double alpha = 0.05;
  double tolerance = 1e-4;
  int epoch_decimals = -1;  // eval epoch_num is rounded to this many decimals first (-1: not rounded)
  bool bypass_covers_missing = false;
  // From 3.0.0 the package checker compares with the pruned table (rcp_checker --rcp_pass pruned_rcps): the
  // batch sizes that converge no faster than their neighbours' interpolation allows.
  bool prune = false;
  // From 3.0.0 a passing submission faster than the RCP mean gets the factor RCP mean / its mean, which the
  // package checker writes to scaling.json for the result summarizer.
  bool score_normalization = false;
  bool prune_on_mean = false;      // 4.0.0: pruning ranks points by RCP mean (before: minimum acceptable mean)
  bool stdev_of_all_runs = false;  // 4.1.0: a point's stdev over all its runs (its mean stays olympic)
  // Before 3.0.0 the checker never compares the runs' batch sizes: it keeps the last global_batch_size it
  // reads, so that of the last file the file system lists (rcp_checker.py@2.0.0:74-77).
  bool batch_size_of_last_file_listed = false;
};

// How the round's result summarizer turns runs into a score beyond the olympic mean.
struct ScoringRules {
  // The summarizer multiplies the olympic mean by scaling_factor from this file in the benchmark folder
  // ("scaling.json" from 3.0.0); empty: no scaling.
  std::string scaling_file;
};

// What the round's package checker does beyond per-log and RCP checks.
struct PackageRules {
  // 4.1.0 on: every run logs a seed (before: every run after the first one that logs one).
  bool seed_in_every_run = false;
  // 4.0.0 on: a file of this name in a system or benchmark folder whose line "rcp-bypass" or
  // "seed-checker-bypass" turns that check's bypass on for the folder; "" when the round reads none.
  std::string params_file;
  // 5.0.0 on: a benchmark folder's subfolder of this name holds each run's power logs (power_checker.py).
  std::string power_folder;
};

struct SystemDescriptionRules {
  std::vector<std::string> fields;         // required, in the order `trainbench system` writes them
  std::vector<std::string> structured_fields;  // may hold any JSON value instead of a string
  std::vector<std::string> count_fields;   // must hold a whole number (nodes, accelerators per node)
  // Fields whose text must be one of a list (status from 4.0.0); with or_lowercased a value whose lower case
  // is listed passes too (4.0.0's checker).
  struct AllowedValues {
    std::vector<std::string> values;
    bool or_lowercased = false;
  };
  std::map<std::string, AllowedValues> allowed_values;
};

struct Ruleset {
  std::string version;    // "1.1.0"
  std::string base;       // the round this one's rules.json changes ("1.1.0" for 3.0.0); "" for a full file
  std::string folder;     // "training_1.1.0"
  std::string rules_dir;  // empty: embedded files; otherwise the folder the files were read from
  std::string description;
  std::string published;  // "2023-11-07": when the round's results were published; "" when not yet
  // Benchmarks whose logs `configs` (trainbench's own encoding of the round, which knows its presets)
  // check, "*" for every log; every other log is checked by the round's official rule files
  // (review/checker_configs.h).
  std::vector<std::string> native_rules;
  std::vector<std::string> entry_configs;
  std::map<std::string, RuleConfig> configs;
  std::map<std::string, BenchmarkRules> benchmarks;
  PresetRule preset;
  RcpSettings rcp;
  ScoringRules scoring;
  PackageRules package;
  SystemDescriptionRules system_description;

  const BenchmarkRules* benchmark(const std::string& name) const;
  // Whether a log of this benchmark ("" when it names none) is checked by `configs`.
  bool checked_natively(const std::string& benchmark) const;
  // The round as messages name its official tools: "v1.1" for 1.1.0, "v3.0" for 3.0.0.
  std::string round_name() const;
};

// Parses a rules.json text; throws trainbench::Error naming `origin` and the offending field. A file with a
// "base" holds only what changed from that round, as a JSON merge patch under "changes" (RFC 7386: objects
// merge, null removes); the base is read from `rules_dir` when given, else from the embedded files.
Ruleset parse_ruleset(const std::string& json_text, const std::string& origin, const std::string& rules_dir = "");

// The ruleset for a version ("1.1.0"): embedded, or from <rules_dir>/training_<version>/rules.json.
Ruleset load_ruleset(const std::string& version, const std::string& rules_dir = "");

// A file next to the ruleset's rules.json (an RCP table), or nothing when there is none.
std::optional<std::string> read_ruleset_file(const Ruleset& ruleset, const std::string& file);

// A file under rules/ (`path` relative to it), embedded or read from rules_dir when that is given.
std::optional<std::string> read_rules_file(const std::string& rules_dir, const std::string& path);

// A file of rules/training_<version>/ (e.g. "rcps_bert.json", "checker/common.yaml"): a round stores a file
// only when it changed, so one it lacks is read from the round it builds on (checker/checker.json "base").
std::optional<std::string> read_round_file(const std::string& version, const std::string& file,
                                           const std::string& rules_dir = "");

// Versions of the embedded rulesets, e.g. {"1.1.0"}.
std::vector<std::string> embedded_ruleset_versions();

// Shell-style brace expansion used by tensor lists: "a{1..3}_{x,y}" gives a1_x, a1_y, a2_x, ...
std::vector<std::string> expand_braces(const std::string& pattern);

}  // namespace trainbench::review
