#pragma once
// Reads an MLPerf result log into events. Lines without `:::MLLOG` are ignored and anything before the token
// (a rank prefix, a timestamp) is skipped, as the v1.1 checker does. Each `:::MLLOG` line must hold one JSON
// object with `key` (string), `time_ms` (number), `value` (any) and `metadata` (object); a line that does not
// becomes a finding with its line number and is left out of the events. Nothing in a log can make the parser
// throw or crash: truncated lines, invalid JSON or UTF-8, binary junk, absurd nesting and huge files are all
// findings.
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "review/finding.h"
#include "util/json_limits.h"

namespace trainbench::review {

struct LogEvent {
  int line = 0;  // 1-based line in the file
  double time_ms = 0;
  std::string key;
  std::string event_type;  // INTERVAL_START, INTERVAL_END, POINT_IN_TIME, or empty when not logged
  nlohmann::json value;
  nlohmann::json metadata;  // always an object
};

struct ParsedLog {
  std::string path;
  std::vector<LogEvent> events;
  std::vector<Finding> findings;  // problems found while parsing; all errors
};

struct ParseLimits {
  size_t max_line_bytes = size_t{1} << 20;  // longer lines are reported, not parsed
  size_t max_file_bytes = size_t{1} << 30;  // larger files are refused with one finding
  int max_nesting = kMaxJsonNesting;                    // deeper JSON is reported (keeps every later step shallow)
  size_t max_findings = 200;                // then one "N more problems" finding
  // When set, only events whose key it accepts are kept (every line is still validated), so a log of
  // millions of tracked_stats lines costs memory only for the keys a check reads.
  std::function<bool(const std::string& key)> keep_key;
};

ParsedLog parse_log_text(std::string_view text, const std::string& path, const ParseLimits& limits = {});

// Streams the file, so a multi-gigabyte log or one endless line does not need its size in memory.
ParsedLog parse_log_file(const std::string& path, const ParseLimits& limits = {});

// Python's json module writes NaN, Infinity and -Infinity as bare words, which are not JSON. They are
// rewritten to the strings "NaN", "Infinity" and "-Infinity" so such lines still parse; number_of()
// (review/json_checks.h) reads them back as numbers.
std::string quote_non_finite_numbers(std::string_view json_text);

}  // namespace trainbench::review
