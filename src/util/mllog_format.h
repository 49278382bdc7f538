#pragma once
// The line format of an MLPerf result log, shared by its writer (harness/mllog.h) and its reader
// (review/log_parser.h): `:::MLLOG ` and one JSON object whose fields are named below. The keys a log holds are
// util/mllog_keys.h.
#include <optional>
#include <string_view>

namespace trainbench::mllog_format {

inline constexpr std::string_view kToken = ":::MLLOG";

// The record's fields, in the order mllog writes them.
inline constexpr const char* kNamespace = "namespace";
inline constexpr const char* kTimeMs = "time_ms";
inline constexpr const char* kEventType = "event_type";
inline constexpr const char* kKey = "key";
inline constexpr const char* kValue = "value";
inline constexpr const char* kMetadata = "metadata";

// The metadata every line carries: the source file and line that wrote it.
inline constexpr const char* kFile = "file";
inline constexpr const char* kLineno = "lineno";

// The values of event_type.
inline constexpr const char* kPointInTime = "POINT_IN_TIME";
inline constexpr const char* kIntervalStart = "INTERVAL_START";
inline constexpr const char* kIntervalEnd = "INTERVAL_END";

// The JSON text of a log line: what follows the token, less the blanks between. Anything before the token (a
// rank prefix, a timestamp) is skipped, as the v1.1 checker does; a line without the token has none.
inline std::optional<std::string_view> record_text(std::string_view line) {
  const size_t token = line.find(kToken);
  if (token == std::string_view::npos) return std::nullopt;
  std::string_view body = line.substr(token + kToken.size());
  while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
  return body;
}

}  // namespace trainbench::mllog_format
