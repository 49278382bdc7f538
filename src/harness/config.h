#pragma once
// A workload's effective configuration: its preset (data embedded at build time, src/workloads/<workload>/presets.json)
// with the user's `--set key=value` overrides applied. Every lookup names the preset and key in its error,
// and an override must name a key the preset has, with a value of the same JSON type.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainbench {

class Config {
 public:
  Config() = default;
  Config(std::string name, nlohmann::json values);

  // Loads preset `preset` from a presets document `{ "<preset>": { ... }, ... }` and applies overrides of
  // the form "key=value" (value parsed as JSON when it parses, else taken as a string).
  static Config from_presets(const std::string& workload, const std::string& presets_json,
                             const std::string& preset, const std::vector<std::string>& overrides);
  static std::vector<std::string> preset_names(const std::string& workload, const std::string& presets_json);

  const std::string& name() const { return name_; }  // "resnet/mini"
  std::string preset() const { return name_.substr(name_.find('/') + 1); }  // "mini"
  const nlohmann::json& values() const { return values_; }
  // The user's --set overrides as given, logged beside the effective values.
  const std::vector<std::string>& overrides() const { return overrides_; }

  double number(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;
  std::vector<double> numbers(const std::string& key) const;
  // Sizes and counts: each value at least `minimum`, and the list not empty; the error names the key.
  int64_t integer_at_least(const std::string& key, int64_t minimum) const;
  std::vector<int64_t> integers_at_least(const std::string& key, int64_t minimum) const;

 private:
  const nlohmann::json& at(const std::string& key) const;
  std::string name_;
  nlohmann::json values_;
  std::vector<std::string> overrides_;
};

}  // namespace trainbench
