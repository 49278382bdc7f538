#include "review/ruleset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "review/embedded_rules.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_limits.h"
#include "util/mllog_keys.h"

namespace trainbench::review {

namespace {

using nlohmann::json;

// Rule files are strict: an unknown field is a typo that would silently disable a check.
void allow_only(const json& object, std::initializer_list<const char*> names, const std::string& where) {
  if (!object.is_object()) fail(where, "must be an object");
  for (const auto& item : object.items()) {
    const std::string& name = item.key();
    if (name == "note") continue;
    if (std::none_of(names.begin(), names.end(), [&](const char* allowed) { return name == allowed; }))
      fail(where, "unknown field '" + name + "'");
  }
}

std::string string_field(const json& object, const char* name, const std::string& where, bool required = true) {
  const auto found = object.find(name);
  if (found == object.end()) {
    if (required) fail(where, std::string("missing '") + name + "'");
    return "";
  }
  if (!found->is_string()) fail(where + "." + name, "must be a string");
  return found->get<std::string>();
}

std::vector<std::string> string_list(const json& object, const char* name, const std::string& where) {
  std::vector<std::string> result;
  const auto found = object.find(name);
  if (found == object.end()) return result;
  if (!found->is_array()) fail(where + "." + name, "must be a list of strings");
  for (const auto& item : *found) {
    if (!item.is_string()) fail(where + "." + name, "must be a list of strings");
    result.push_back(item.get<std::string>());
  }
  return result;
}

Severity severity_field(const json& object, const std::string& where, Severity fallback) {
  const std::string name = string_field(object, "severity", where, false);
  if (name.empty()) return fallback;
  if (name == "error") return Severity::kError;
  if (name == "warning") return Severity::kWarning;
  fail(where + ".severity", "must be \"error\" or \"warning\"");
}

bool bool_field(const json& object, const char* name, const std::string& where) {
  const auto found = object.find(name);
  if (found == object.end()) return false;
  if (!found->is_boolean()) fail(where + "." + name, "must be true or false");
  return found->get<bool>();
}

// {"key": K, "ms": N}: at most N ms after the first K.
std::pair<std::string, double> parse_time_limit(const json& limit, const std::string& where) {
  allow_only(limit, {"key", "ms"}, where);
  const std::string key = string_field(limit, "key", where);
  if (!limit.contains("ms") || !limit["ms"].is_number()) fail(where + ".ms", "must be a number");
  return {key, limit["ms"].get<double>()};
}

KeyRule parse_key_rule(const std::string& key, const json& spec, const std::string& config, const std::string& where) {
  allow_only(spec,
             {"req", "or", "value", "metadata", "after", "not_after", "within_ms_of_first", "enqueue", "rules_text",
              "preset_scaled"},
             where);
  KeyRule rule;
  rule.key = key;
  rule.config = config;
  const std::string requirement = string_field(spec, "req", where, false);
  if (requirement == "exactly_one")
    rule.requirement = Requirement::kExactlyOne;
  else if (requirement == "at_least_one")
    rule.requirement = Requirement::kAtLeastOne;
  else if (requirement == "at_least_one_or")
    rule.requirement = Requirement::kAtLeastOneOr;
  else if (!requirement.empty())
    fail(where + ".req", "must be exactly_one, at_least_one or at_least_one_or");
  rule.alternative_key = string_field(spec, "or", where, rule.requirement == Requirement::kAtLeastOneOr);
  if (spec.contains("value")) rule.value = ValueCheck::from_json(spec["value"], where + ".value");
  if (spec.contains("metadata")) {
    if (!spec["metadata"].is_object()) fail(where + ".metadata", "must be an object");
    for (const auto& [field, check] : spec["metadata"].items())
      rule.metadata[field] = ValueCheck::from_json(check, where + ".metadata." + field);
  }
  rule.after = string_list(spec, "after", where);
  rule.not_after = string_list(spec, "not_after", where);
  if (spec.contains("within_ms_of_first"))
    std::tie(rule.within_ms_of_first_key, rule.within_ms) =
        parse_time_limit(spec["within_ms_of_first"], where + ".within_ms_of_first");
  rule.enqueue = string_field(spec, "enqueue", where, false);
  if (spec.contains("preset_scaled")) {
    if (!spec["preset_scaled"].is_boolean()) fail(where + ".preset_scaled", "must be true or false");
    rule.preset_scaled = spec["preset_scaled"].get<bool>();
  }
  if (spec.contains("rules_text")) {
    const json& text = spec["rules_text"];
    const std::string text_where = where + ".rules_text";
    allow_only(text, {"source", "quote", "within_ms_of_first"}, text_where);
    RulesTextLimit limit;
    limit.source = string_field(text, "source", text_where);
    limit.quote = string_field(text, "quote", text_where);
    if (!text.contains("within_ms_of_first")) fail(text_where, "missing 'within_ms_of_first'");
    std::tie(limit.within_ms_of_first_key, limit.within_ms) =
        parse_time_limit(text["within_ms_of_first"], text_where + ".within_ms_of_first");
    rule.rules_text = limit;
  }
  return rule;
}

TargetRule parse_target(const json& spec, const std::string& where) {
  allow_only(spec, {"key", "higher_is_better", "threshold", "fields", "bound", "severity"}, where);
  TargetRule target;
  target.key = string_field(spec, "key", where);
  if (!spec.contains("higher_is_better") || !spec["higher_is_better"].is_boolean())
    fail(where + ".higher_is_better", "must be true or false");
  target.higher_is_better = spec["higher_is_better"].get<bool>();
  if (spec.contains("threshold")) {
    if (!spec["threshold"].is_number()) fail(where + ".threshold", "must be a number");
    target.threshold = spec["threshold"].get<double>();
  }
  if (spec.contains("fields")) {
    if (!spec["fields"].is_object()) fail(where + ".fields", "must be an object of numbers");
    for (const auto& [field, threshold] : spec["fields"].items()) {
      if (!threshold.is_number()) fail(where + ".fields." + field, "must be a number");
      target.field_thresholds[field] = threshold.get<double>();
    }
  }
  if (target.threshold.has_value() == !target.field_thresholds.empty())
    fail(where, "needs exactly one of 'threshold' and 'fields'");
  if (spec.contains("bound")) {
    if (!spec["bound"].is_number()) fail(where + ".bound", "must be a number");
    target.bound = spec["bound"].get<double>();
  }
  target.severity = severity_field(spec, where, Severity::kError);
  return target;
}

TensorSetRule parse_tensors(const json& spec, const std::string& where) {
  allow_only(spec, {"key", "metadata_field", "expected", "severity"}, where);
  TensorSetRule rule;
  rule.key = string_field(spec, "key", where);
  rule.metadata_field = string_field(spec, "metadata_field", where);
  for (const auto& pattern : string_list(spec, "expected", where)) {
    try {
      for (auto& name : expand_braces(pattern)) rule.expected.push_back(std::move(name));
    } catch (const std::logic_error&) {  // std::stoi on a malformed {a..b}
      fail(where + ".expected", "malformed pattern '" + pattern + "'");
    }
  }
  rule.severity = severity_field(spec, where, Severity::kWarning);
  return rule;
}

RuleConfig parse_config(const std::string& name, const json& spec, const std::string& where) {
  allow_only(spec, {"keys", "target", "tensors"}, where);
  RuleConfig config;
  config.name = name;
  if (spec.contains("keys")) {
    if (!spec["keys"].is_object()) fail(where + ".keys", "must be an object");
    for (const auto& [key, rule] : spec["keys"].items())
      config.keys.push_back(parse_key_rule(key, rule, name, where + ".keys." + key));
  }
  if (spec.contains("target")) config.target = parse_target(spec["target"], where + ".target");
  if (spec.contains("tensors")) config.tensors = parse_tensors(spec["tensors"], where + ".tensors");
  return config;
}

int positive_int(const json& object, const char* name, const std::string& where) {
  const auto found = object.find(name);
  if (found == object.end() || !found->is_number_integer() || found->get<int>() < 0)
    fail(where + "." + name, "must be a non-negative integer");
  return found->get<int>();
}

const std::string kRulesFile = "rules.json";

// {"FID": {"at_most": 90}, "CLIP": {"at_least": 0.15}}
std::map<std::string, MetricBound> parse_metric_bounds(const json& spec, const std::string& where) {
  if (!spec.is_object() || spec.empty()) fail(where, "must be an object naming at least one metric");
  std::map<std::string, MetricBound> bounds;
  for (const auto& [metric, bound] : spec.items()) {
    const std::string bound_where = where + "." + metric;
    allow_only(bound, {"at_most", "at_least"}, bound_where);
    if (bound.size() != 1 || !bound.begin()->is_number())
      fail(bound_where, "must hold one number, \"at_most\" or \"at_least\"");
    bounds[metric] = {bound.contains("at_most"), bound.begin()->get<double>()};
  }
  return bounds;
}

BenchmarkRules parse_benchmark(const std::string& name, const json& spec, const std::string& where) {
  allow_only(spec,
             {"runs", "drop_each_side", "rcp_table", "convergence", "train_samples_convergence",
              "evaluated_after_training", "first_passing_step", "rcp_minimum_offset"},
             where);
  BenchmarkRules rules;
  rules.name = name;
  rules.runs = positive_int(spec, "runs", where);
  rules.drop_each_side = positive_int(spec, "drop_each_side", where);
  rules.rcp_table = string_field(spec, "rcp_table", where, false);
  rules.convergence = string_field(spec, "convergence", where, false);
  if (rules.convergence.empty()) rules.convergence = mllog_keys::kEpochNum;
  if (rules.convergence != mllog_keys::kEpochNum && rules.convergence != mllog_keys::kTrainSamples &&
      rules.convergence != kSamplesCountUnit && rules.convergence != kStepNumUnit)
    fail(where + ".convergence", "must be \"epoch_num\", \"samples_count\", \"step_num\" or \"train_samples\"");
  rules.train_samples_convergence = bool_field(spec, "train_samples_convergence", where);
  rules.evaluated_after_training = bool_field(spec, "evaluated_after_training", where);
  if (spec.contains("first_passing_step")) {
    rules.first_passing_step = parse_metric_bounds(spec["first_passing_step"], where + ".first_passing_step");
    if (rules.convergence == mllog_keys::kTrainSamples)
      fail(where + ".first_passing_step", "needs an evaluation's step as the convergence, not train_samples");
  }
  if (spec.contains("rcp_minimum_offset")) {
    const json& offset = spec["rcp_minimum_offset"];
    if (!offset.is_number() || !std::isfinite(offset.get<double>()))
      fail(where + ".rcp_minimum_offset", "must be a number");
    rules.rcp_minimum_offset = offset.get<double>();
  }
  return rules;
}

PresetRule parse_preset(const json& spec, const std::string& where) {
  allow_only(spec, {"key", "target_key", "reference_values", "rcp_table", "own_dataset_keys"}, where);
  PresetRule preset;
  preset.key = string_field(spec, "key", where);
  preset.target_key = string_field(spec, "target_key", where);
  preset.reference_values = string_list(spec, "reference_values", where);
  preset.rcp_table = string_field(spec, "rcp_table", where, false);
  preset.own_dataset_keys = string_list(spec, "own_dataset_keys", where);
  return preset;
}

RcpSettings parse_rcp_settings(const json& spec, const std::string& where) {
  allow_only(spec,
             {"alpha", "tolerance", "epoch_decimals", "bypass_covers_missing", "prune", "score_normalization",
              "prune_on_mean", "stdev_of_all_runs", "batch_size_of_last_file_listed"},
             where);
  RcpSettings rcp;
  rcp.alpha = spec.value("alpha", rcp.alpha);
  rcp.tolerance = spec.value("tolerance", rcp.tolerance);
  if (spec.contains("epoch_decimals")) rcp.epoch_decimals = positive_int(spec, "epoch_decimals", where);
  rcp.bypass_covers_missing = bool_field(spec, "bypass_covers_missing", where);
  rcp.prune = bool_field(spec, "prune", where);
  rcp.score_normalization = bool_field(spec, "score_normalization", where);
  rcp.prune_on_mean = bool_field(spec, "prune_on_mean", where);
  rcp.stdev_of_all_runs = bool_field(spec, "stdev_of_all_runs", where);
  rcp.batch_size_of_last_file_listed = bool_field(spec, "batch_size_of_last_file_listed", where);
  if (!(rcp.alpha > 0 && rcp.alpha < 1) || !(rcp.tolerance > 0))
    fail(where, "alpha must be in (0, 1) and tolerance positive");
  return rcp;
}

json parse_rules_json(const std::string& text, const std::string& origin) {
  check_json_nesting(text, origin);
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    fail(origin, std::string("invalid JSON: ") + error.what());
  }
}

// The text of rules/training_<version>/rules.json: from rules_dir when given, else embedded.
std::optional<std::string> rules_text_of(const std::string& version, const std::string& rules_dir) {
  const std::string relative = "training_" + version + "/" + kRulesFile;
  if (!rules_dir.empty()) {
    const std::string path = rules_dir + "/" + relative;
    if (!std::filesystem::is_regular_file(path)) return std::nullopt;
    return read_file(path);
  }
  for (const auto& file : embedded_rule_files())
    if (file.path == relative) return std::string(file.text);
  return std::nullopt;
}

// A round's file names its base round and what changed ("changes", a JSON merge patch); the result is the
// base's full rules with the changes applied and this round's name. A file without a base is returned as is.
json with_base_applied(const json& root, const std::string& origin, const std::string& rules_dir, int depth) {
  if (!root.is_object() || !root.contains("base")) return root;
  allow_only(root, {"ruleset", "description", "base", "changes"}, origin);
  const std::string base = string_field(root, "base", origin);
  if (depth >= 16) fail(origin + ".base", "rulesets change one another more than 16 deep");
  const auto base_text = rules_text_of(base, rules_dir);
  if (!base_text) fail(origin + ".base", "no ruleset " + base + " to apply the changes to");
  const std::string base_origin = "rules/training_" + base + "/" + kRulesFile;
  json merged = with_base_applied(parse_rules_json(*base_text, base_origin), base_origin, rules_dir, depth + 1);
  if (!root.contains("changes") || !root["changes"].is_object()) fail(origin, "missing 'changes' (an object)");
  for (const char* field : {"ruleset", "description", "base"})
    if (root["changes"].contains(field)) fail(origin + ".changes", std::string("may not change '") + field + "'");
  merged.merge_patch(root["changes"]);
  for (const char* field : {"ruleset", "description", "base", "note"})
    if (root.contains(field)) merged[field] = root[field];
  return merged;
}

}  // namespace

bool Ruleset::checked_natively(const std::string& name) const {
  const auto named = [&](const std::string& entry) {
    return std::find(native_rules.begin(), native_rules.end(), entry) != native_rules.end();
  };
  return named("*") || (!native_rules.empty() && (name.empty() || named(name)));
}

const BenchmarkRules* Ruleset::benchmark(const std::string& name) const {
  const auto found = benchmarks.find(name);
  return found == benchmarks.end() ? nullptr : &found->second;
}

std::string Ruleset::round_name() const {
  const size_t second_dot = version.find('.', version.find('.') + 1);
  return "v" + version.substr(0, second_dot);
}

Ruleset parse_ruleset(const std::string& json_text, const std::string& origin, const std::string& rules_dir) {
  const json root = with_base_applied(parse_rules_json(json_text, origin), origin, rules_dir, 0);
  allow_only(root,
             {"ruleset", "description", "base", "entry_configs", "preset", "rcp", "scoring", "package", "benchmarks",
              "system_description", "configs", "native_rules", "published"},
             origin);
  Ruleset ruleset;
  ruleset.version = string_field(root, "ruleset", origin);
  ruleset.folder = "training_" + ruleset.version;
  ruleset.base = string_field(root, "base", origin, false);
  ruleset.description = string_field(root, "description", origin, false);
  ruleset.published = string_field(root, "published", origin, false);
  ruleset.native_rules = string_list(root, "native_rules", origin);
  if (!ruleset.native_rules.empty()) {
    ruleset.entry_configs = string_list(root, "entry_configs", origin);
    if (!root.contains("configs") || !root["configs"].is_object()) fail(origin, "missing 'configs'");
    for (const auto& [name, spec] : root["configs"].items())
      ruleset.configs[name] = parse_config(name, spec, origin + ": configs." + name);
  } else if (root.contains("configs") || root.contains("entry_configs")) {
    fail(origin, "'configs' without 'native_rules' naming the benchmarks they check");
  }
  for (const auto& entry : ruleset.entry_configs)
    if (!ruleset.configs.count(entry)) fail(origin + ": entry_configs", "no config named '" + entry + "'");

  if (!root.contains("benchmarks") || !root["benchmarks"].is_object()) fail(origin, "missing 'benchmarks'");
  for (const auto& [name, spec] : root["benchmarks"].items())
    ruleset.benchmarks[name] = parse_benchmark(name, spec, origin + ": benchmarks." + name);
  if (root.contains("preset")) ruleset.preset = parse_preset(root["preset"], origin + ": preset");
  if (root.contains("rcp")) ruleset.rcp = parse_rcp_settings(root["rcp"], origin + ": rcp");
  if (root.contains("scoring")) {
    allow_only(root["scoring"], {"scaling_file"}, origin + ": scoring");
    ruleset.scoring.scaling_file = string_field(root["scoring"], "scaling_file", origin + ": scoring", false);
  }
  if (root.contains("package")) {
    const std::string where = origin + ": package";
    allow_only(root["package"], {"seed_in_every_run", "params_file", "power_folder"}, where);
    ruleset.package.power_folder = string_field(root["package"], "power_folder", where, false);
    ruleset.package.seed_in_every_run = bool_field(root["package"], "seed_in_every_run", where);
    ruleset.package.params_file = string_field(root["package"], "params_file", where, false);
  }
  if (root.contains("system_description")) {
    const json& spec = root["system_description"];
    const std::string where = origin + ": system_description";
    allow_only(spec, {"fields", "structured_fields", "count_fields", "allowed_values"}, where);
    ruleset.system_description.fields = string_list(spec, "fields", where);
    ruleset.system_description.structured_fields = string_list(spec, "structured_fields", where);
    ruleset.system_description.count_fields = string_list(spec, "count_fields", where);
    if (spec.contains("allowed_values")) {
      if (!spec["allowed_values"].is_object()) fail(where + ".allowed_values", "must be an object");
      for (const auto& [field, allowed] : spec["allowed_values"].items()) {
        if (field == "note") continue;
        const std::string field_where = where + ".allowed_values." + field;
        allow_only(allowed, {"values", "or_lowercased"}, field_where);
        auto& entry = ruleset.system_description.allowed_values[field];
        entry.values = string_list(allowed, "values", field_where);
        entry.or_lowercased = bool_field(allowed, "or_lowercased", field_where);
        if (entry.values.empty()) fail(field_where + ".values", "must list at least one value");
      }
    }
  }
  return ruleset;
}

Ruleset load_ruleset(const std::string& version, const std::string& rules_dir) {
  const std::string relative = "training_" + version + "/" + kRulesFile;
  if (const auto text = rules_text_of(version, rules_dir)) {
    const std::string origin = rules_dir.empty() ? "rules/" + relative : rules_dir + "/" + relative;
    Ruleset ruleset = parse_ruleset(*text, origin, rules_dir);
    ruleset.rules_dir = rules_dir;
    return ruleset;
  }
  if (!rules_dir.empty()) fail("--ruleset " + version, "no " + rules_dir + "/" + relative);
  std::string known;
  for (const auto& name : embedded_ruleset_versions()) known += (known.empty() ? "" : ", ") + name;
  fail("--ruleset " + version, "unknown ruleset; this build has: " + known);
}

std::optional<std::string> read_rules_file(const std::string& rules_dir, const std::string& path) {
  if (path.empty() || path.find("..") != std::string::npos) return std::nullopt;
  if (!rules_dir.empty()) {
    const std::string full = rules_dir + "/" + path;
    if (!std::filesystem::is_regular_file(full)) return std::nullopt;
    return read_file(full);
  }
  for (const auto& embedded : embedded_rule_files())
    if (embedded.path == path) return std::string(embedded.text);
  return std::nullopt;
}

std::optional<std::string> read_round_file(const std::string& version, const std::string& file,
                                           const std::string& rules_dir) {
  std::string round = version;
  for (int depth = 0; depth < 32 && !round.empty(); ++depth) {
    const std::string folder = "training_" + round + "/";
    if (auto text = read_rules_file(rules_dir, folder + file)) return text;
    // The round it builds on: checker/checker.json "base" (scripts/import-checker-rules.py).
    const auto manifest = read_rules_file(rules_dir, folder + "checker/checker.json");
    const json parsed = manifest ? json::parse(*manifest, nullptr, false) : json();
    round = parsed.is_object() && parsed.value("base", json()).is_string() ? parsed["base"].get<std::string>() : "";
  }
  return std::nullopt;
}

std::optional<std::string> read_ruleset_file(const Ruleset& ruleset, const std::string& file) {
  return read_round_file(ruleset.version, file, ruleset.rules_dir);
}

std::vector<std::string> embedded_ruleset_versions() {
  std::vector<std::string> versions;
  const std::string prefix = "training_", suffix = "/" + kRulesFile;
  for (const auto& file : embedded_rule_files()) {
    const std::string& path = file.path;
    if (path.rfind(prefix, 0) == 0 && path.size() > prefix.size() + suffix.size() &&
        path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
      versions.push_back(path.substr(prefix.size(), path.size() - prefix.size() - suffix.size()));
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  const size_t close = open == std::string::npos ? std::string::npos : pattern.find('}', open);
  if (close == std::string::npos) return {pattern};
  const std::string head = pattern.substr(0, open);
  const std::string body = pattern.substr(open + 1, close - open - 1);
  std::vector<std::string> choices;
  const size_t range = body.find("..");
  if (range != std::string::npos) {
    const int first = std::stoi(body.substr(0, range));
    const int last = std::stoi(body.substr(range + 2));
    for (int i = first; i <= last; ++i) choices.push_back(std::to_string(i));
  } else {
    size_t start = 0;
    while (true) {
      const size_t comma = body.find(',', start);
      choices.push_back(body.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  std::vector<std::string> result;
  for (const auto& tail : expand_braces(pattern.substr(close + 1)))
    for (const auto& choice : choices) result.push_back(head + choice + tail);
  return result;
}

}  // namespace trainbench::review
