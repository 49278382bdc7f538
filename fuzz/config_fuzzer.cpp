// libFuzzer target: presets and `--set` overrides. The first input line is a presets document (JSON), each
// further line one `--set key=value`; then every setting is read as each type. Bad input must be an Error
// naming the preset, key or flag; any other exception (a JSON pointer that does not parse, a type error) is
// a bug.
#include <cstdlib>
#include <sstream>

#include "fuzz_entry.h"
#include "harness/config.h"
#include "util/error.h"

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  std::string presets;
  std::getline(lines, presets);
  std::vector<std::string> overrides;
  for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  try {
    for (const std::string& name : trainbench::Config::preset_names("fuzz", presets)) {
      try {
        const trainbench::Config config = trainbench::Config::from_presets("fuzz", presets, name, overrides);
        if (!config.values().is_object()) continue;
        for (const auto& [key, value] : config.values().items()) {
          for (const auto& read : std::initializer_list<void (*)(const trainbench::Config&, const std::string&)>{
                   [](const trainbench::Config& c, const std::string& k) { (void)c.number(k); },
                   [](const trainbench::Config& c, const std::string& k) { (void)c.integer_at_least(k, 1); },
                   [](const trainbench::Config& c, const std::string& k) { (void)c.boolean(k); },
                   [](const trainbench::Config& c, const std::string& k) { (void)c.string(k); },
                   [](const trainbench::Config& c, const std::string& k) { (void)c.integers_at_least(k, 1); },
                   [](const trainbench::Config& c, const std::string& k) { (void)c.numbers(k); }}) {
            try {
              read(config, key);
            } catch (const trainbench::Error&) {
            }
          }
        }
      } catch (const trainbench::Error&) {
      }
    }
  } catch (const trainbench::Error&) {
  }
  return 0;
}
