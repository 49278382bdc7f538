#pragma once
// What a review says about a file: one finding per problem, each pinned to a file and line so a user can
// jump to it. Errors make a run or package invalid; warnings and notes do not.
#include <string>
#include <vector>

#include "util/printable.h"

namespace trainbench::review {

enum class Severity { kError, kWarning, kNote };

struct Finding {
  Severity severity = Severity::kError;
  std::string file;  // as the user named it
  int line = 0;      // 1-based; 0 when the finding is about the whole file or folder
  std::string message;
};

const char* severity_name(Severity severity);  // "error", "warning", "note"

// "file:line: error: message" (the line is left out when it is 0), the shape compilers use.
std::string format_finding(const Finding& finding);

// Logs are untrusted: findings quote them through printable() (util/printable.h).
using trainbench::printable;

bool has_errors(const std::vector<Finding>& findings);
int count_findings(const std::vector<Finding>& findings, Severity severity);

}  // namespace trainbench::review
