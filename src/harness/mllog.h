#pragma once
// The :::MLLOG writer. Each line is `:::MLLOG ` plus one JSON object with the keys in mllog's order:
// namespace, time_ms, event_type, key, value, metadata (which always carries the caller's file and lineno);
// util/mllog_format.h names them for the reader, util/mllog_keys.h the keys.
// The clock is injectable so tests can check exact lines.
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace trainbench {

enum class EventType { kPointInTime, kIntervalStart, kIntervalEnd };

class MlLogger {
 public:
  using Sink = std::function<void(const std::string& line)>;
  using Clock = std::function<int64_t()>;  // milliseconds since the Unix epoch

  explicit MlLogger(Sink sink, Clock clock = system_clock_ms);

  // Each call returns the time_ms the line carries, so durations computed from it match the log.
  int64_t event(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::ordered_json& metadata = nlohmann::ordered_json::object(),
             const char* file = __builtin_FILE(), int line = __builtin_LINE());
  int64_t start(const std::string& key, const nlohmann::json& value = nullptr,
             const nlohmann::ordered_json& metadata = nlohmann::ordered_json::object(),
             const char* file = __builtin_FILE(), int line = __builtin_LINE());
  int64_t end(const std::string& key, const nlohmann::json& value = nullptr,
           const nlohmann::ordered_json& metadata = nlohmann::ordered_json::object(),
           const char* file = __builtin_FILE(), int line = __builtin_LINE());

  // An INTERVAL_END dated `time_ms` rather than now: MiniGo's run_stop is dated when the first passing
  // generation was saved, although its evaluation ran later.
  int64_t end_at(int64_t time_ms, const std::string& key, const nlohmann::json& value = nullptr,
                 const nlohmann::ordered_json& metadata = nlohmann::ordered_json::object(),
                 const char* file = __builtin_FILE(), int line = __builtin_LINE());

  // The time the next line would carry; the harness uses it so printed durations match the log.
  int64_t now_ms() const { return clock_(); }

  static int64_t system_clock_ms();
  static std::string format_line(int64_t time_ms, EventType type, const std::string& key,
                                 const nlohmann::json& value, const nlohmann::ordered_json& metadata,
                                 const char* file, int line);

 private:
  int64_t write(EventType type, const std::string& key, const nlohmann::json& value,
             const nlohmann::ordered_json& metadata, const char* file, int line);
  Sink sink_;
  Clock clock_;
};

}  // namespace trainbench
