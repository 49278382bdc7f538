#include "review/log_parser.h"

#include <filesystem>
#include <fstream>

#include "util/json_limits.h"
#include "util/mllog_format.h"

namespace trainbench::review {

namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; the user needs only the rest.
std::string without_exception_tag(const std::string& message) {
  const size_t end = message.find("] ");
  return message.rfind("[json.exception", 0) == 0 && end != std::string::npos ? message.substr(end + 2) : message;
}

// Turns lines into events and findings; shared by the in-memory and the streaming reader.
class LineParser {
 public:
  LineParser(ParsedLog& log, const ParseLimits& limits) : log_(log), limits_(limits) {}

  void add_finding(int line, const std::string& message) {
    if (log_.findings.size() < limits_.max_findings) {
      log_.findings.push_back({Severity::kError, log_.path, line, printable(message, 300)});
    } else {
      ++suppressed_;
    }
  }

  void parse_line(std::string_view line, int line_number, bool ends_file_without_newline) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::optional<std::string_view> body = mllog_format::record_text(line);
    if (!body) return;
    if (json_nesting_depth(*body, limits_.max_nesting) > limits_.max_nesting) {
      add_finding(line_number, "JSON nested deeper than " + std::to_string(limits_.max_nesting) + " levels");
      return;
    }
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(quote_non_finite_numbers(*body));
    } catch (const nlohmann::json::exception& error) {
      std::string message = "invalid JSON after :::MLLOG: " + without_exception_tag(error.what());
      if (ends_file_without_newline) message += " (the file ends mid-line: truncated log?)";
      add_finding(line_number, message);
      return;
    }
    add_event(record, line_number);
  }

  void report_overlong_line(int line_number) {
    add_finding(line_number, "line longer than " + std::to_string(limits_.max_line_bytes) + " bytes; not parsed");
  }

  void finish() {
    if (suppressed_ > 0) {
      log_.findings.push_back(
          {Severity::kError, log_.path, 0, std::to_string(suppressed_) + " more problems in this file not shown"});
    }
  }

 private:
  void add_event(const nlohmann::json& record, int line_number) {
    if (!record.is_object()) return add_finding(line_number, "the :::MLLOG record is not a JSON object");
    const auto field = [&](const char* name) { return record.find(name); };
    const auto key = field(mllog_format::kKey);
    const auto time = field(mllog_format::kTimeMs);
    const auto value = field(mllog_format::kValue);
    const auto metadata = field(mllog_format::kMetadata);
    std::string missing;
    for (const auto& [name, found] : {std::pair{mllog_format::kKey, key}, {mllog_format::kTimeMs, time},
                                      {mllog_format::kValue, value}, {mllog_format::kMetadata, metadata}}) {
      if (found == record.end()) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
    if (!missing.empty()) return add_finding(line_number, "the :::MLLOG record has no " + missing);
    if (!key->is_string())
      return add_finding(line_number, "'key' must be a string, not " + std::string(key->type_name()));
    if (!time->is_number())
      return add_finding(line_number,
                         "'time_ms' of '" + key->get<std::string>() + "' must be a number, not " + time->type_name());
    if (!metadata->is_object())
      return add_finding(line_number, "'metadata' of '" + key->get<std::string>() + "' must be an object, not " +
                                          metadata->type_name());
    if (limits_.keep_key && !limits_.keep_key(key->get_ref<const std::string&>())) return;
    LogEvent event;
    event.line = line_number;
    event.time_ms = time->get<double>();
    event.key = key->get<std::string>();
    if (const auto type = field(mllog_format::kEventType); type != record.end() && type->is_string())
      event.event_type = type->get<std::string>();
    event.value = *value;
    event.metadata = *metadata;
    log_.events.push_back(std::move(event));
  }

  ParsedLog& log_;
  const ParseLimits& limits_;
  size_t suppressed_ = 0;
};

}  // namespace

std::string quote_non_finite_numbers(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  JsonStringState strings;
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    if (strings.consume(c)) {
      out += c;
      continue;
    }
    bool replaced = false;
    for (const std::string_view word : {"-Infinity", "Infinity", "NaN"}) {
      if (json_text.substr(i, word.size()) == word) {
        out += '"';
        out += word;
        out += '"';
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

ParsedLog parse_log_text(std::string_view text, const std::string& path, const ParseLimits& limits) {
  ParsedLog log;
  log.path = path;
  LineParser parser(log, limits);
  if (text.size() > limits.max_file_bytes) {
    parser.add_finding(0, "file larger than " + std::to_string(limits.max_file_bytes) + " bytes; not read");
    return log;
  }
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const bool last = end == std::string_view::npos;
    const std::string_view line = text.substr(start, last ? std::string_view::npos : end - start);
    ++line_number;
    if (line.size() > limits.max_line_bytes)
      parser.report_overlong_line(line_number);
    else
      parser.parse_line(line, line_number, last);
    if (last) break;
    start = end + 1;
  }
  parser.finish();
  return log;
}

ParsedLog parse_log_file(const std::string& path, const ParseLimits& limits) {
  ParsedLog log;
  log.path = path;
  LineParser parser(log, limits);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    parser.add_finding(0, "not a readable file");
    return log;
  }
  if (std::filesystem::file_size(path, error) > limits.max_file_bytes && !error) {
    parser.add_finding(0, "file larger than " + std::to_string(limits.max_file_bytes) + " bytes; not read");
    return log;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    parser.add_finding(0, "cannot open the file");
    return log;
  }
  std::string line;
  bool overlong = false;
  int line_number = 1;
  std::vector<char> chunk(size_t{1} << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const std::string_view data(chunk.data(), static_cast<size_t>(in.gcount()));
    size_t start = 0;
    while (start < data.size()) {
      const size_t end = data.find('\n', start);
      const std::string_view piece =
          data.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      // A line past the limit stops growing; the rest of it is skipped up to its newline.
      if (!overlong && line.size() + piece.size() > limits.max_line_bytes) {
        overlong = true;
        line.clear();
      }
      if (!overlong) line.append(piece);
      if (end == std::string_view::npos) break;
      if (overlong)
        parser.report_overlong_line(line_number);
      else
        parser.parse_line(line, line_number, false);
      line.clear();
      overlong = false;
      ++line_number;
      start = end + 1;
    }
  }
  if (overlong)
    parser.report_overlong_line(line_number);
  else if (!line.empty())
    parser.parse_line(line, line_number, true);
  parser.finish();
  return log;
}

}  // namespace trainbench::review
