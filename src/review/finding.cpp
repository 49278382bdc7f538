#include "review/finding.h"

#include <algorithm>

namespace trainbench::review {

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::kWarning:
      return "warning";
    case Severity::kNote:
      return "note";
    case Severity::kError:
      break;
  }
  return "error";
}

std::string format_finding(const Finding& finding) {
  std::string text = finding.file;
  if (finding.line > 0) text += ":" + std::to_string(finding.line);
  if (!text.empty()) text += ": ";
  return text + severity_name(finding.severity) + ": " + finding.message;
}

bool has_errors(const std::vector<Finding>& findings) { return count_findings(findings, Severity::kError) > 0; }

int count_findings(const std::vector<Finding>& findings, Severity severity) {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(),
                                        [&](const Finding& finding) { return finding.severity == severity; }));
}

}  // namespace trainbench::review
