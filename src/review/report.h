#pragma once
// `trainbench report`: a results page built from reviewed result folders. Systems are rows and benchmarks
// columns (olympic minutes), with each system's accelerators; per benchmark a chart of the target metric
// against minutes since run_start for every run; and, for two folders, a comparison with the speedup per
// benchmark. The HTML is one self-contained file (inline CSS and SVG, no scripts or external assets) and
// every text that comes from a log or a system description is escaped. Markdown and CSV carry the same
// tables. Output is deterministic, so it can be compared byte for byte.
#include <string>
#include <vector>

#include "review/submission.h"

namespace trainbench::review {

struct ReportInput {
  std::string label;  // how the folder is named in the page, e.g. its path
  SubmissionReview review;
};

struct ReportOptions {
  std::string title = "trainbench results";
  bool compare = false;  // needs exactly two inputs: speedup of the second over the first
};

struct ReportFiles {
  std::string html;
  std::string markdown;
  std::string csv;             // one row per folder, system and benchmark
  std::string comparison_csv;  // empty unless comparing
};

ReportFiles render_report(const std::vector<ReportInput>& inputs, const ReportOptions& options);

// Writes report.html, report.md, report.csv (and comparison.csv) into `folder`, creating it.
std::vector<std::string> write_report(const ReportFiles& files, const std::string& folder);

std::string html_escape(const std::string& text);

// The colours of the report's chart lines, in order (other charts use them to look the same).
const std::vector<std::string>& chart_palette();

}  // namespace trainbench::review
