#pragma once
// A benchmark's settings as one struct of typed fields, read from its effective Config once (the Config has
// already been checked against the benchmark's settings.json rules, so each read only converts). A settings
// struct lists its fields in one place, a member template `fields(visit)` calling visit("key", member) for
// each; the same list serves reading (read_settings) and the test that holds the struct to its settings.json
// (setting_names), so a field and its rule cannot drift apart.
//
//   struct Settings {
//     int64_t batch_size = 0;
//     std::optional<int64_t> eval_interval_samples;  // a setting some presets leave out
//     std::optional<DatasetSettings> dataset;         // a nested object, itself with fields()
//     template <typename Visit> void fields(Visit& visit) { visit("batch_size", batch_size); ... }
//   };
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/config.h"

namespace trainbench {

namespace typed_settings_detail {

struct Reader;

template <typename T, typename = void>
constexpr bool has_fields = false;
template <typename T>
constexpr bool has_fields<T, std::void_t<decltype(std::declval<T&>().fields(std::declval<Reader&>()))>> = true;

// Fills each visited field from `config`; the Config names the preset and key in any error.
struct Reader {
  const Config& config;

  void operator()(const char* key, int64_t& value) { value = config.integer(key); }
  void operator()(const char* key, double& value) { value = config.number(key); }
  void operator()(const char* key, bool& value) { value = config.boolean(key); }
  void operator()(const char* key, std::string& value) { value = config.string(key); }
  void operator()(const char* key, std::vector<int64_t>& value) { value = config.integers(key); }
  void operator()(const char* key, std::vector<double>& value) { value = config.numbers(key); }
  void operator()(const char* key, nlohmann::json& value) { value = config.values().at(key); }
  template <typename Nested, std::enable_if_t<has_fields<Nested>, int> = 0>
  void operator()(const char* key, Nested& value) {
    const Config nested(config.name() + ": " + key, config.values().at(key));
    Reader reader{nested};
    value.fields(reader);
  }
  template <typename T>
  void operator()(const char* key, std::optional<T>& value) {
    if (!config.values().contains(key)) return value.reset();
    (*this)(key, value.emplace());
  }
};

// The visited keys, nested objects as "dataset.classes".
struct NameCollector {
  std::string prefix;
  std::vector<std::string> names;

  template <typename T>
  void operator()(const char* key, T& value) {
    names.push_back(prefix + key);
    if constexpr (has_fields<T>) {
      NameCollector nested{prefix + key + ".", {}};
      value.fields(nested);
      names.insert(names.end(), nested.names.begin(), nested.names.end());
    }
  }
  template <typename T>
  void operator()(const char* key, std::optional<T>& value) {
    T inner{};
    (*this)(key, inner);
  }
};

}  // namespace typed_settings_detail

template <typename Settings>
Settings read_settings(const Config& config) {
  Settings settings;
  typed_settings_detail::Reader reader{config};
  settings.fields(reader);
  return settings;
}

// Every key a settings struct reads, in its order ("dataset.classes" for nested ones).
template <typename Settings>
std::vector<std::string> setting_names() {
  Settings settings;
  typed_settings_detail::NameCollector collector;
  settings.fields(collector);
  return collector.names;
}

}  // namespace trainbench
