#include "harness/mllog.h"

#include <gtest/gtest.h>

namespace trainbench {
namespace {

TEST(MlLog, LineMatchesTheMllogFormatExactly) {
  const std::string line = MlLogger::format_line(1634350179572, EventType::kPointInTime, "eval_accuracy", 0.31642,
                                                 {{"epoch_num", 3}}, "/workspace/common/fit.py", 1044);
  EXPECT_EQ(line,
            ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1634350179572, \"event_type\": \"POINT_IN_TIME\", "
            "\"key\": \"eval_accuracy\", \"value\": 0.31642, \"metadata\": {\"file\": \"fit.py\", \"lineno\": 1044, "
            "\"epoch_num\": 3}}\n");
}

TEST(MlLog, IntervalEventsAndNullValues) {
  std::vector<std::string> lines;
  int64_t now = 1000;
  MlLogger log([&](const std::string& line) { lines.push_back(line); }, [&] { return now++; });
  log.start("run_start");
  log.end("run_stop", nullptr, {{"status", "success"}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("\"time_ms\": 1000, \"event_type\": \"INTERVAL_START\", \"key\": \"run_start\", \"value\": null"),
            std::string::npos);
  EXPECT_NE(lines[1].find("\"event_type\": \"INTERVAL_END\", \"key\": \"run_stop\""), std::string::npos);
  EXPECT_NE(lines[1].find("\"status\": \"success\"}}"), std::string::npos);
}

TEST(MlLog, RecordsTheCallersFileAndLine) {
  std::string captured;
  MlLogger log([&](const std::string& line) { captured = line; }, [] { return int64_t{0}; });
  const int expected_line = __LINE__ + 1;
  log.event("seed", 7);
  EXPECT_NE(captured.find("\"file\": \"mllog_test.cpp\", \"lineno\": " + std::to_string(expected_line)), std::string::npos)
      << captured;
}

TEST(MlLog, EscapesStringsAsJson) {
  const std::string line = MlLogger::format_line(0, EventType::kPointInTime, "submission_platform", "a \"quoted\"\nname",
                                                 nlohmann::ordered_json::object(), "x.cpp", 1);
  EXPECT_NE(line.find(R"("value": "a \"quoted\"\nname")"), std::string::npos) << line;
  const auto parsed = nlohmann::json::parse(line.substr(std::string(":::MLLOG ").size()));
  EXPECT_EQ(parsed["value"], "a \"quoted\"\nname");
}

}  // namespace
}  // namespace trainbench
