// libFuzzer target: any bytes as a system description (systems/<system>.json), checked against the v1.1
// rules and labelled as the report labels it. Findings must stay printable.
#include <cstdlib>

#include "fuzz_entry.h"
#include "review/finding.h"
#include "review/ruleset.h"
#include "review/system_description.h"

using namespace trainbench::review;

extern "C" int TRAINBENCH_FUZZ_ENTRY(const uint8_t* data, size_t size) {
  static const Ruleset ruleset = load_ruleset("1.1.0", TRAINBENCH_RULES_DIR);
  const std::string path = trainbench::fuzz::write_scratch_file("system.json", data, size);
  nlohmann::json description;
  for (const auto& finding : check_system_description_file(path, ruleset.system_description, &description))
    if (printable(finding.message, 1 << 20) != finding.message) std::abort();
  (void)accelerator_count(description);
  (void)hardware_label(description);
  return 0;
}
