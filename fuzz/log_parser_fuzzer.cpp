// libFuzzer target: any bytes as a result log are parsed and checked against the v1.1 rules and against
// round 4.0.0's official rule files (run by the rule-code interpreter, stable diffusion's BEGIN code
// included). The review must never crash, hang or read out of bounds, and every finding must stay
// printable. See docs/review.md.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "review/compliance.h"
#include "review/log_parser.h"
#include "review/ruleset.h"

using namespace trainbench::review;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Ruleset v11 = load_ruleset("1.1.0", TRAINBENCH_RULES_DIR);
  static const Ruleset v40 = load_ruleset("4.0.0", TRAINBENCH_RULES_DIR);
  const ParsedLog log = parse_log_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.txt");
  for (const Ruleset* ruleset : {&v11, &v40})
    for (const auto& finding : review_log(log, *ruleset).findings)
      if (printable(finding.message, 1 << 20) != finding.message) std::abort();  // a finding leaked raw bytes
  for (const auto& event : log.events) (void)describe(event.value);
  return 0;
}
