#include "harness/config.h"

#include <algorithm>

#include "util/error.h"
#include "util/json_limits.h"

namespace trainbench {

namespace {

const char* type_name(const nlohmann::json& value) {
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "null";
}

bool same_kind(const nlohmann::json& preset_value, const nlohmann::json& override_value) {
  if (preset_value.is_number_float()) return override_value.is_number();  // 1 is a fine value for 1.0
  if (preset_value.is_number_integer()) return override_value.is_number_integer();
  return preset_value.type() == override_value.type();
}

nlohmann::json parse_override_value(const std::string& key, const std::string& text) {
  check_json_nesting(text, "--set " + key);
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? nlohmann::json(text) : parsed;
}

nlohmann::json parse_presets(const std::string& workload, const std::string& presets_json) {
  nlohmann::json presets = nlohmann::json::parse(presets_json, nullptr, false);
  if (!presets.is_object()) fail("the presets of " + workload, "are not a JSON object of presets");
  return presets;
}

}  // namespace

Config::Config(std::string name, nlohmann::json values) : name_(std::move(name)), values_(std::move(values)) {}

std::vector<std::string> Config::preset_names(const std::string& workload, const std::string& presets_json) {
  std::vector<std::string> names;
  const nlohmann::json presets = parse_presets(workload, presets_json);  // items() must not outlive it
  for (const auto& [name, values] : presets.items()) names.push_back(name);
  return names;
}

Config Config::from_presets(const std::string& workload, const std::string& presets_json, const std::string& preset,
                            const std::vector<std::string>& overrides) {
  const nlohmann::json presets = parse_presets(workload, presets_json);
  if (!presets.contains(preset)) {
    std::string known;
    for (const auto& [name, values] : presets.items()) known += (known.empty() ? "" : ", ") + name;
    fail("--preset", "'" + preset + "' is not a preset of " + workload + " (expected one of: " + known + ")");
  }
  Config config(workload + "/" + preset, presets.at(preset));
  for (const std::string& assignment : overrides) {
    const auto equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      fail("--set " + assignment, "expected key=value");
    const std::string key = assignment.substr(0, equals);
    const nlohmann::json value = parse_override_value(key, assignment.substr(equals + 1));
    // "dataset.train_per_class" names a setting inside a nested object.
    std::string pointer_text = "/" + key;
    std::replace(pointer_text.begin(), pointer_text.end(), '.', '/');
    nlohmann::json::json_pointer pointer;
    try {  // a key with '~' may not be a JSON pointer at all
      pointer = nlohmann::json::json_pointer(pointer_text);
      if (!config.values_.contains(pointer)) fail("--set " + key, "not a setting of " + config.name_);
    } catch (const nlohmann::json::exception&) {
      fail("--set " + key, "not a setting of " + config.name_);
    }
    if (!same_kind(config.values_[pointer], value))
      fail("--set " + key, std::string("expected ") + type_name(config.values_[pointer]) + ", got " + type_name(value));
    config.values_[pointer] = value;
    config.overrides_.push_back(assignment);
  }
  return config;
}

const nlohmann::json& Config::at(const std::string& key) const {
  if (!values_.contains(key)) fail(name_, "missing setting '" + key + "'");
  return values_.at(key);
}

double Config::number(const std::string& key) const {
  const auto& value = at(key);
  if (!value.is_number()) fail(name_ + ": " + key, std::string("expected a number, got ") + type_name(value));
  return value.get<double>();
}

int64_t Config::integer(const std::string& key) const {
  const auto& value = at(key);
  if (!value.is_number_integer()) fail(name_ + ": " + key, std::string("expected an integer, got ") + type_name(value));
  return value.get<int64_t>();
}

bool Config::boolean(const std::string& key) const {
  const auto& value = at(key);
  if (!value.is_boolean()) fail(name_ + ": " + key, std::string("expected a boolean, got ") + type_name(value));
  return value.get<bool>();
}

std::string Config::string(const std::string& key) const {
  const auto& value = at(key);
  if (!value.is_string()) fail(name_ + ": " + key, std::string("expected a string, got ") + type_name(value));
  return value.get<std::string>();
}

std::vector<int64_t> Config::integers(const std::string& key) const {
  const auto& value = at(key);
  std::vector<int64_t> result;
  if (value.is_array())
    for (const auto& item : value)
      if (item.is_number_integer()) result.push_back(item.get<int64_t>());
  if (!value.is_array() || result.size() != value.size())
    fail(name_ + ": " + key, "expected a list of integers");
  return result;
}

int64_t Config::integer_at_least(const std::string& key, int64_t minimum) const {
  const int64_t value = integer(key);
  if (value < minimum)
    fail(name_ + ": " + key, "expected at least " + std::to_string(minimum) + ", got " + std::to_string(value));
  return value;
}

std::vector<int64_t> Config::integers_at_least(const std::string& key, int64_t minimum) const {
  const std::vector<int64_t> values = integers(key);
  if (values.empty()) fail(name_ + ": " + key, "expected a list of at least one integer, got []");
  for (const int64_t value : values)
    if (value < minimum)
      fail(name_ + ": " + key, "expected every value to be at least " + std::to_string(minimum) + ", got " + std::to_string(value));
  return values;
}

std::vector<double> Config::numbers(const std::string& key) const {
  const auto& value = at(key);
  std::vector<double> result;
  if (value.is_array())
    for (const auto& item : value)
      if (item.is_number()) result.push_back(item.get<double>());
  if (!value.is_array() || result.size() != value.size())
    fail(name_ + ": " + key, "expected a list of numbers");
  return result;
}

}  // namespace trainbench
