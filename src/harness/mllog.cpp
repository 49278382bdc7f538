#include "harness/mllog.h"

#include <chrono>
#include <filesystem>

#include "util/mllog_format.h"

namespace trainbench {

namespace {

const char* event_type_name(EventType type) {
  switch (type) {
    case EventType::kIntervalStart: return mllog_format::kIntervalStart;
    case EventType::kIntervalEnd: return mllog_format::kIntervalEnd;
    case EventType::kPointInTime: break;
  }
  return mllog_format::kPointInTime;
}

}  // namespace

MlLogger::MlLogger(Sink sink, Clock clock) : sink_(std::move(sink)), clock_(std::move(clock)) {}

int64_t MlLogger::system_clock_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::string MlLogger::format_line(int64_t time_ms, EventType type, const std::string& key,
                                  const nlohmann::json& value, const nlohmann::ordered_json& metadata,
                                  const char* file, int line) {
  nlohmann::ordered_json record;
  record[mllog_format::kNamespace] = "";
  record[mllog_format::kTimeMs] = time_ms;
  record[mllog_format::kEventType] = event_type_name(type);
  record[mllog_format::kKey] = key;
  record[mllog_format::kValue] = value;
  // Only the file name: absolute build paths would leak the build machine's layout into every result.
  nlohmann::ordered_json meta;
  meta[mllog_format::kFile] = std::filesystem::path(file).filename().string();
  meta[mllog_format::kLineno] = line;
  for (const auto& [name, item] : metadata.items()) meta[name] = item;
  record[mllog_format::kMetadata] = std::move(meta);
  // mllog separates items with ", " and ": "; nlohmann's dump() is compact, so spell it out to match.
  // Text that is not UTF-8 (a path, an error message quoting one) is written with U+FFFD in place of the
  // bad bytes: a log line must never fail to be written.
  const auto dump = [](const nlohmann::ordered_json& item) {
    return item.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  };
  std::string text = std::string(mllog_format::kToken) + " {";
  bool first = true;
  for (const auto& [name, item] : record.items()) {
    if (!first) text += ", ";
    first = false;
    text += dump(name) + ": ";
    if (item.is_object()) {
      text += "{";
      bool first_meta = true;
      for (const auto& [meta_name, meta_item] : item.items()) {
        if (!first_meta) text += ", ";
        first_meta = false;
        text += dump(meta_name) + ": " + dump(meta_item);
      }
      text += "}";
    } else {
      text += dump(item);
    }
  }
  return text + "}\n";
}

int64_t MlLogger::write(EventType type, const std::string& key, const nlohmann::json& value,
                        const nlohmann::ordered_json& metadata, const char* file, int line) {
  const int64_t time_ms = clock_();
  sink_(format_line(time_ms, type, key, value, metadata, file, line));
  return time_ms;
}

int64_t MlLogger::event(const std::string& key, const nlohmann::json& value,
                     const nlohmann::ordered_json& metadata, const char* file, int line) {
  return write(EventType::kPointInTime, key, value, metadata, file, line);
}

int64_t MlLogger::start(const std::string& key, const nlohmann::json& value,
                     const nlohmann::ordered_json& metadata, const char* file, int line) {
  return write(EventType::kIntervalStart, key, value, metadata, file, line);
}

int64_t MlLogger::end(const std::string& key, const nlohmann::json& value,
                   const nlohmann::ordered_json& metadata, const char* file, int line) {
  return write(EventType::kIntervalEnd, key, value, metadata, file, line);
}

int64_t MlLogger::end_at(int64_t time_ms, const std::string& key, const nlohmann::json& value,
                         const nlohmann::ordered_json& metadata, const char* file, int line) {
  sink_(format_line(time_ms, EventType::kIntervalEnd, key, value, metadata, file, line));
  return time_ms;
}

}  // namespace trainbench
