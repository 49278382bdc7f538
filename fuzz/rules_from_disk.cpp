// The fuzz build reads rule files from rules/ (TRAINBENCH_RULES_DIR) instead of embedding them.
#include "review/embedded_rules.h"

namespace trainbench::review {

std::vector<EmbeddedRuleFile> embedded_rule_files() { return {}; }

}  // namespace trainbench::review
