#include "review/ruleset.h"

#include <algorithm>
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

}  // namespace

const BenchmarkRules* Ruleset::benchmark(const std::string& name) const {
  const auto found = benchmarks.find(name);
  return found == benchmarks.end() ? nullptr : &found->second;
}

Ruleset parse_ruleset(const std::string& json_text, const std::string& origin) {
  json root;
  check_json_nesting(json_text, origin);
  try {
    root = json::parse(json_text);
  } catch (const json::exception& error) {
    fail(origin, std::string("invalid JSON: ") + error.what());
  }
  allow_only(
      root, {"ruleset", "description", "entry_configs", "preset", "rcp", "benchmarks", "system_description", "configs"},
      origin);
  Ruleset ruleset;
  ruleset.version = string_field(root, "ruleset", origin);
  ruleset.folder = "training_" + ruleset.version;
  ruleset.description = string_field(root, "description", origin, false);
  ruleset.entry_configs = string_list(root, "entry_configs", origin);

  if (!root.contains("configs") || !root["configs"].is_object()) fail(origin, "missing 'configs'");
  for (const auto& [name, spec] : root["configs"].items())
    ruleset.configs[name] = parse_config(name, spec, origin + ": configs." + name);
  for (const auto& entry : ruleset.entry_configs)
    if (!ruleset.configs.count(entry)) fail(origin + ": entry_configs", "no config named '" + entry + "'");

  if (!root.contains("benchmarks") || !root["benchmarks"].is_object()) fail(origin, "missing 'benchmarks'");
  for (const auto& [name, spec] : root["benchmarks"].items()) {
    const std::string where = origin + ": benchmarks." + name;
    allow_only(spec, {"runs", "drop_each_side", "rcp_table", "convergence", "train_samples_convergence"}, where);
    BenchmarkRules rules;
    rules.name = name;
    rules.runs = positive_int(spec, "runs", where);
    rules.drop_each_side = positive_int(spec, "drop_each_side", where);
    rules.rcp_table = string_field(spec, "rcp_table", where, false);
    rules.convergence = string_field(spec, "convergence", where, false);
    if (rules.convergence.empty()) rules.convergence = mllog_keys::kEpochNum;
    if (rules.convergence != mllog_keys::kEpochNum && rules.convergence != mllog_keys::kTrainSamples)
      fail(where + ".convergence", "must be \"epoch_num\" or \"train_samples\"");
    if (spec.contains("train_samples_convergence")) {
      if (!spec["train_samples_convergence"].is_boolean())
        fail(where + ".train_samples_convergence", "must be true or false");
      rules.train_samples_convergence = spec["train_samples_convergence"].get<bool>();
    }
    ruleset.benchmarks[name] = rules;
  }

  if (root.contains("preset")) {
    const json& spec = root["preset"];
    const std::string where = origin + ": preset";
    allow_only(spec, {"key", "target_key", "reference_values", "rcp_table", "own_dataset_keys"}, where);
    ruleset.preset.key = string_field(spec, "key", where);
    ruleset.preset.target_key = string_field(spec, "target_key", where);
    ruleset.preset.reference_values = string_list(spec, "reference_values", where);
    ruleset.preset.rcp_table = string_field(spec, "rcp_table", where, false);
    if (spec.contains("own_dataset_keys")) ruleset.preset.own_dataset_keys = string_list(spec, "own_dataset_keys", where);
  }
  if (root.contains("rcp")) {
    const json& spec = root["rcp"];
    const std::string where = origin + ": rcp";
    allow_only(spec, {"alpha", "tolerance", "epoch_decimals", "bypass_covers_missing"}, where);
    ruleset.rcp.alpha = spec.value("alpha", ruleset.rcp.alpha);
    ruleset.rcp.tolerance = spec.value("tolerance", ruleset.rcp.tolerance);
    if (spec.contains("epoch_decimals")) ruleset.rcp.epoch_decimals = positive_int(spec, "epoch_decimals", where);
    ruleset.rcp.bypass_covers_missing = spec.value("bypass_covers_missing", false);
    if (!(ruleset.rcp.alpha > 0 && ruleset.rcp.alpha < 1) || !(ruleset.rcp.tolerance > 0))
      fail(where, "alpha must be in (0, 1) and tolerance positive");
  }
  if (root.contains("system_description")) {
    const json& spec = root["system_description"];
    const std::string where = origin + ": system_description";
    allow_only(spec, {"fields", "structured_fields", "count_fields"}, where);
    ruleset.system_description.fields = string_list(spec, "fields", where);
    ruleset.system_description.structured_fields = string_list(spec, "structured_fields", where);
    ruleset.system_description.count_fields = string_list(spec, "count_fields", where);
  }
  return ruleset;
}

Ruleset load_ruleset(const std::string& version, const std::string& rules_dir) {
  const std::string folder = "training_" + version;
  if (!rules_dir.empty()) {
    const std::string path = rules_dir + "/" + folder + "/" + kRulesFile;
    if (!std::filesystem::is_regular_file(path)) fail("--ruleset " + version, "no " + path);
    Ruleset ruleset = parse_ruleset(read_file(path), path);
    ruleset.rules_dir = rules_dir;
    return ruleset;
  }
  for (const auto& file : embedded_rule_files()) {
    if (file.path == folder + "/" + kRulesFile) return parse_ruleset(file.text, "rules/" + file.path);
  }
  std::string known;
  for (const auto& name : embedded_ruleset_versions()) known += (known.empty() ? "" : ", ") + name;
  fail("--ruleset " + version, "unknown ruleset; this build has: " + known);
}

std::optional<std::string> read_ruleset_file(const Ruleset& ruleset, const std::string& file) {
  if (file.empty() || file.find("..") != std::string::npos) return std::nullopt;
  if (!ruleset.rules_dir.empty()) {
    const std::string path = ruleset.rules_dir + "/" + ruleset.folder + "/" + file;
    if (!std::filesystem::is_regular_file(path)) return std::nullopt;
    return read_file(path);
  }
  for (const auto& embedded : embedded_rule_files())
    if (embedded.path == ruleset.folder + "/" + file) return std::string(embedded.text);
  return std::nullopt;
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
