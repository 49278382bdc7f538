#include "harness/setting_rules.h"

#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench {

namespace {

using nlohmann::json;

// The fields each type of rule may carry; anything else is a typo in a settings.json.
const std::set<std::string>& fields_of(const std::string& type) {
  static const std::map<std::string, std::set<std::string>> fields = {
      {"integer", {"type", "about", "min", "max"}},
      {"number", {"type", "about", "min", "max", "above", "below"}},
      {"boolean", {"type", "about"}},
      {"string", {"type", "about", "one_of", "not_empty"}},
      {"list", {"type", "about", "items", "min_length", "max_length", "length", "increasing"}},
      {"object", {"type", "about", "settings"}},
  };
  static const std::set<std::string> none;
  const auto found = fields.find(type);
  return found == fields.end() ? none : found->second;
}

// A rule's own shape, checked once when the rules are read: `where` names it in the message.
void check_rule(const std::string& where, const json& rule, bool needs_about, const json& scope) {
  if (!rule.is_object()) fail(where, "a rule must be an object");
  const std::string type = rule.value("type", "");
  const auto& allowed = fields_of(type);
  if (allowed.empty()) fail(where, "\"type\" must be integer, number, boolean, string, list or object, got '" + type + "'");
  for (const auto& [field, value] : rule.items())
    if (!allowed.count(field)) fail(where, "\"" + field + "\" is not a field of a " + type + " rule");
  if (needs_about && (!rule.contains("about") || !rule["about"].is_string() || rule["about"].get<std::string>().empty()))
    fail(where, "needs an \"about\" line saying what the setting is");
  for (const char* bound : {"min", "max", "above", "below"}) {
    if (!rule.contains(bound)) continue;
    const json& value = rule[bound];
    if (value.is_string()) {
      if (!scope.contains(value.get<std::string>()))
        fail(where, std::string("\"") + bound + "\" names '" + value.get<std::string>() + "', which has no rule beside it");
    } else if (!value.is_number() || (type == "integer" && !value.is_number_integer())) {
      fail(where, std::string("\"") + bound + "\" must be a " + type + " or the name of another setting");
    }
  }
  if (type == "string" && rule.contains("one_of")) {
    const json& options = rule["one_of"];
    if (!options.is_array() || options.empty()) fail(where, "\"one_of\" must be a list of strings");
    for (const auto& option : options)
      if (!option.is_string()) fail(where, "\"one_of\" must be a list of strings");
  }
  for (const char* flag : {"not_empty", "increasing"})
    if (rule.contains(flag) && !rule[flag].is_boolean()) fail(where, std::string("\"") + flag + "\" must be true or false");
  for (const char* length : {"min_length", "max_length"})
    if (rule.contains(length) && !(rule[length].is_number_unsigned() || (rule[length].is_number_integer() && rule[length] >= 0)))
      fail(where, std::string("\"") + length + "\" must be a count");
  if (rule.contains("length")) {
    const json& length = rule["length"];
    if (length.is_string() ? !scope.contains(length.get<std::string>()) : !length.is_number_integer())
      fail(where, "\"length\" must be a count or the name of another list setting beside it");
  }
  if (type == "list") {
    if (!rule.contains("items")) fail(where, "a list rule needs \"items\", the rule of its elements");
    check_rule(where + " items", rule["items"], false, scope);
  }
  if (type == "object") {
    if (!rule.contains("settings") || !rule["settings"].is_object()) fail(where, "an object rule needs \"settings\"");
    for (const auto& [key, nested] : rule["settings"].items()) check_rule(where + "." + key, nested, true, rule["settings"]);
  }
}

std::string number_text(const json& value) {
  if (value.is_number_integer()) return value.dump();
  std::ostringstream text;
  text << value.get<double>();
  return text.str();
}

// A bound as people read it: "30", or "max_epochs (30)" when another setting gives it.
std::string bound_text(const json& bound, const json& scope) {
  if (!bound.is_string()) return number_text(bound);
  const std::string& key = bound.get_ref<const std::string&>();
  return key + (scope.contains(key) && scope[key].is_number() ? " (" + number_text(scope[key]) + ")" : "");
}

// "from 1 to 1048576", "above 0 and at most 10", "at least 0": empty when unbounded.
std::string range_text(const json& rule, const json& scope) {
  std::string lower, upper;
  if (rule.contains("min")) lower = bound_text(rule["min"], scope);
  if (rule.contains("above")) lower = "above " + bound_text(rule["above"], scope);
  if (rule.contains("max")) upper = bound_text(rule["max"], scope);
  if (rule.contains("below")) upper = "below " + bound_text(rule["below"], scope);
  const bool inclusive_lower = rule.contains("min"), inclusive_upper = rule.contains("max");
  if (!lower.empty() && !upper.empty()) {
    if (inclusive_lower && inclusive_upper) return "from " + lower + " to " + upper;
    return (inclusive_lower ? "at least " + lower : lower) + " and " + (inclusive_upper ? "at most " + upper : upper);
  }
  if (!lower.empty()) return inclusive_lower ? "at least " + lower : lower;
  if (!upper.empty()) return inclusive_upper ? "at most " + upper : upper;
  return "";
}

std::string with_article(const std::string& noun) {
  return (noun[0] == 'a' || noun[0] == 'i' || noun[0] == 'o' ? "an " : "a ") + noun;
}

// What a rule allows, as the message and the help text say it: "an integer from 1 to 1048576",
// "one of fp32, bf16, fp16", "a list of 1 to 8 values, each an integer from 1 to 4096".
std::string describe(const json& rule, const json& scope) {
  const std::string type = rule["type"];
  if (type == "integer" || type == "number") {
    const std::string range = range_text(rule, scope);
    return with_article(type) + (range.empty() ? "" : " " + range);
  }
  if (type == "string") {
    if (!rule.contains("one_of")) return rule.value("not_empty", false) ? "a non-empty string" : "a string";
    std::string options;
    for (const auto& option : rule["one_of"]) options += (options.empty() ? "" : ", ") + option.get<std::string>();
    return "one of " + options;
  }
  if (type == "list") {
    std::string count, as_many;
    if (rule.contains("length") && rule["length"].is_string()) {
      as_many = ", as many as " + rule["length"].get<std::string>() + " has";
    } else if (rule.contains("length")) {
      count = rule["length"].dump() + " ";
    } else if (rule.contains("min_length") && rule.contains("max_length")) {
      count = rule["min_length"].dump() + " to " + rule["max_length"].dump() + " ";
    } else if (rule.contains("min_length")) {
      count = "at least " + rule["min_length"].dump() + " ";
    } else if (rule.contains("max_length")) {
      count = "at most " + rule["max_length"].dump() + " ";
    }
    const std::string order = rule.value("increasing", false) ? "increasing " : "";
    return "a list of " + count + order + "values" + as_many + ", each " + describe(rule["items"], scope);
  }
  return with_article(type);
}

bool has_type(const json& value, const std::string& type) {
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "string") return value.is_string();
  if (type == "list") return value.is_array();
  return value.is_object();
}

// Where a value sits, for messages: the user's "--set key=value" when they set it, else the preset's key.
struct Place {
  std::string context;  // "--set batch_size=0" or "resnet/mini: batch_size"
  std::string element;  // "", "element 3" inside a list, or the key a bound of the user's setting rules out
  std::string about;    // what the setting is, from its rule
};

// Every value is first held to its own rule (type, fixed bounds, lengths, choices), and only then to the
// bounds other settings give it, so `--set max_epochs=0` is refused as max_epochs, not as an evaluation epoch
// beyond it.
enum class Pass { kOwnRule, kCrossKey };

class Checker {
 public:
  explicit Checker(const Config& config) : config_(config) {
    for (const std::string& assignment : config.overrides()) {
      const auto equals = assignment.find('=');
      overrides_[assignment.substr(0, equals)] = assignment;
    }
  }

  void check(const json& values, const json& rules) const {
    check_object(values, rules, "", Pass::kOwnRule);
    check_object(values, rules, "", Pass::kCrossKey);
  }

 private:
  void check_object(const json& values, const json& rules, const std::string& prefix, Pass pass) const {
    for (const auto& [key, value] : values.items()) {
      const std::string path = prefix + key;
      if (!rules.contains(key)) fail(config_.name() + ": " + path, "has no rule in the benchmark's settings.json");
      check_value(value, rules[key], values, Place{place_of(path), "", rules[key]["about"]}, prefix, path, pass);
    }
  }

  bool set_by_user(const std::string& path) const { return overrides_.count(path) > 0; }

  std::string place_of(const std::string& path) const {
    const auto found = overrides_.find(path);
    return found != overrides_.end() ? "--set " + found->second : config_.name() + ": " + path;
  }

  [[noreturn]] void refuse(const Place& place, const std::string& expected, const json& value) const {
    fail(place.context, place.element + (place.element.empty() ? "" : ": ") + "expected " + expected + ", got " +
                            json_excerpt(value) + " (" + place.about + ")");
  }

  // A value the bound `key` (another setting of the scope) rules out: named as the user's setting when they
  // set that one and not this one, since their value is what changed.
  [[noreturn]] void refuse_by(const std::string& key, const std::string& prefix, const std::string& path, const Place& place,
                              const std::string& expected, const json& value) const {
    if (!set_by_user(path) && set_by_user(prefix + key)) {
      const std::string element = path + (place.element.empty() ? "" : " " + place.element);
      refuse(Place{place_of(prefix + key), element, place.about}, expected, value);
    }
    refuse(place, expected, value);
  }

  // A bound's value: a number, or the number another setting of the same scope holds.
  double bound_value(const json& bound, const json& scope, const Place& place) const {
    if (!bound.is_string()) return bound.get<double>();
    const std::string& key = bound.get_ref<const std::string&>();
    if (!scope.contains(key) || !scope[key].is_number())
      fail(place.context, "its rule is bounded by '" + key + "', which " + config_.name() + " does not set to a number");
    return scope[key].get<double>();
  }

  void check_number(double number, const json& rule, const json& scope, const Place& place, const std::string& prefix,
                    const std::string& path, Pass pass, const json& value) const {
    if (pass == Pass::kOwnRule && !std::isfinite(number)) refuse(place, describe(rule, scope), value);
    for (const char* bound : {"min", "max", "above", "below"}) {
      if (!rule.contains(bound) || rule[bound].is_string() != (pass == Pass::kCrossKey)) continue;
      const double limit = bound_value(rule[bound], scope, place);
      const std::string which = bound;
      const bool inside = which == "min" ? number >= limit : which == "max" ? number <= limit
                          : which == "above" ? number > limit : number < limit;
      if (inside) continue;
      if (pass == Pass::kOwnRule) refuse(place, describe(rule, scope), value);
      refuse_by(rule[bound].get<std::string>(), prefix, path, place, describe(rule, scope), value);
    }
  }

  void check_value(const json& value, const json& rule, const json& scope, const Place& place, const std::string& prefix,
                   const std::string& path, Pass pass) const {
    const std::string type = rule["type"];
    if (pass == Pass::kOwnRule && !has_type(value, type)) refuse(place, describe(rule, scope), value);
    if (type == "integer" || type == "number") {
      check_number(value.get<double>(), rule, scope, place, prefix, path, pass, value);
    } else if (type == "string" && pass == Pass::kOwnRule) {
      const std::string& text = value.get_ref<const std::string&>();
      bool inside = !(rule.value("not_empty", false) && text.empty());
      if (rule.contains("one_of")) {
        inside = false;
        for (const auto& option : rule["one_of"]) inside = inside || option == text;
      }
      if (!inside) refuse(place, describe(rule, scope), value);
    } else if (type == "list") {
      check_list(value, rule, scope, place, prefix, path, pass);
    } else if (type == "object") {
      check_object(value, rule["settings"], path + ".", pass);
    }
  }

  void check_list(const json& list, const json& rule, const json& scope, const Place& place, const std::string& prefix,
                  const std::string& path, Pass pass) const {
    const auto size = static_cast<int64_t>(list.size());
    if (pass == Pass::kOwnRule) {
      const bool inside = (!rule.contains("min_length") || size >= rule["min_length"].get<int64_t>()) &&
                          (!rule.contains("max_length") || size <= rule["max_length"].get<int64_t>()) &&
                          (!rule.contains("length") || rule["length"].is_string() || size == rule["length"].get<int64_t>());
      if (!inside) refuse(place, describe(rule, scope), list);
    } else if (rule.contains("length") && rule["length"].is_string()) {
      const std::string& key = rule["length"].get_ref<const std::string&>();
      if (!scope.contains(key) || !scope[key].is_array() || scope[key].size() != list.size())
        refuse_by(key, prefix, path, place, describe(rule, scope), list);
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const Place element{place.context, "element " + std::to_string(i + 1), place.about};
      check_value(list[i], rule["items"], scope, element, prefix, path, pass);
      if (pass == Pass::kOwnRule && rule.value("increasing", false) && i > 0 && !(list[i].get<double>() > list[i - 1].get<double>()))
        refuse(element, "a value above the one before it (" + describe(rule, scope) + ")", list[i]);
    }
  }

  const Config& config_;
  std::map<std::string, std::string> overrides_;  // dotted key -> "key=value" as the user gave it
};

void append_help(std::ostringstream& out, const json& values, const json& rules, const std::string& prefix) {
  for (const auto& [key, rule] : rules.items()) {
    if (!values.contains(key)) continue;  // a setting of other presets only
    const json& value = values[key];
    if (rule["type"] == "object") {
      out << "  " << prefix << key << ": " << rule["about"].get<std::string>() << "\n";
      append_help(out, value, rule["settings"], prefix + key + ".");
      continue;
    }
    out << "  " << prefix << key << " = " << json_excerpt(value, 60) << "\n      " << describe(rule, values) << ". "
        << rule["about"].get<std::string>() << "\n";
  }
}

}  // namespace

SettingRules SettingRules::parse(const std::string& source, const std::vector<std::string>& documents) {
  SettingRules rules;
  for (const std::string& text : documents) {
    check_json_nesting(text, source + " settings.json");
    const json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!document.is_object()) fail(source + " settings.json", "is not a JSON object of rules");
    for (const auto& [key, rule] : document.items()) {
      if (rules.rules_.contains(key)) fail(source + " settings.json: " + key, "has a rule in the shared settings.json already");
      rules.rules_[key] = rule;
    }
  }
  for (const auto& [key, rule] : rules.rules_.items()) check_rule(source + " settings.json: " + key, rule, true, rules.rules_);
  return rules;
}

void SettingRules::check(const Config& config) const { Checker(config).check(config.values(), rules_); }

std::vector<std::string> SettingRules::names() const {
  std::vector<std::string> names;
  for (const auto& [key, rule] : rules_.items()) names.push_back(key);
  return names;
}

std::string SettingRules::help_text(const Config& config) const {
  std::ostringstream out;
  out << "Settings of " << config.name() << " (its value, what it may be, what it is); change one with --set KEY=VALUE, "
      << "one inside an object with --set OBJECT.KEY=VALUE:\n";
  append_help(out, config.values(), rules_, "");
  return out.str();
}

}  // namespace trainbench
