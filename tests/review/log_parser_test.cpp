#include "review/log_parser.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace trainbench::review {
namespace {

using testing::dump;
using testing::find_finding;

const std::string kGoodLine =
    R"(:::MLLOG {"namespace": "", "time_ms": 1634349950364, "event_type": "POINT_IN_TIME", "key": "submission_benchmark", "value": "resnet", "metadata": {"file": "x.py", "lineno": 70}})";

TEST(LogParser, ReadsEventsAndIgnoresOtherLines) {
  const ParsedLog log = parse_log_text("hello\n" + kGoodLine + "\n\nplain output\n", "log.txt");
  ASSERT_EQ(log.events.size(), 1u) << dump(log.findings);
  EXPECT_TRUE(log.findings.empty());
  const LogEvent& event = log.events[0];
  EXPECT_EQ(event.line, 2);
  EXPECT_EQ(event.key, "submission_benchmark");
  EXPECT_EQ(event.value, "resnet");
  EXPECT_EQ(event.event_type, "POINT_IN_TIME");
  EXPECT_DOUBLE_EQ(event.time_ms, 1634349950364.0);
  EXPECT_EQ(event.metadata["lineno"], 70);
}

TEST(LogParser, SkipsRankPrefixesAndCarriageReturns) {
  const ParsedLog log = parse_log_text("[1,0]<stdout>:" + kGoodLine + "\r\n0: " + kGoodLine + "\r\n", "log.txt");
  EXPECT_EQ(log.events.size(), 2u) << dump(log.findings);
  EXPECT_TRUE(log.findings.empty());
}

TEST(LogParser, AcceptsRecordsWithoutNamespaceOrEventType) {
  const ParsedLog log =
      parse_log_text(R"(:::MLLOG {"time_ms": 5, "key": "k", "value": null, "metadata": {}})", "log.txt");
  ASSERT_EQ(log.events.size(), 1u);
  EXPECT_EQ(log.events[0].event_type, "");
}

TEST(LogParser, ReportsEachBrokenLineWithItsNumber) {
  const std::string text =
      kGoodLine + "\n" + R"(:::MLLOG {"time_ms": 1, "key": "a", "value": 1, "metadata": {)" + "\n" +  // truncated
      R"(:::MLLOG {"time_ms": "1", "key": "a", "value": 1, "metadata": {}})" + "\n" +                 // wrong type
      R"(:::MLLOG {"time_ms": 1, "key": "a", "value": 1})" + "\n" +                                   // no metadata
      R"(:::MLLOG {"time_ms": 1, "key": "a", "value": 1, "metadata": []})" + "\n" +                   // not an object
      R"(:::MLLOG {"time_ms": 1, "key": null, "value": 1, "metadata": {}})" + "\n" +  // key not a string
      ":::MLLOG 42\n" + kGoodLine;
  const ParsedLog log = parse_log_text(text, "log.txt");
  EXPECT_EQ(log.events.size(), 2u);
  ASSERT_EQ(log.findings.size(), 6u) << dump(log.findings);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(log.findings[i].line, i + 2);
    EXPECT_EQ(log.findings[i].severity, Severity::kError);
    EXPECT_EQ(log.findings[i].file, "log.txt");
  }
  EXPECT_NE(log.findings[0].message.find("invalid JSON"), std::string::npos);
  EXPECT_NE(log.findings[1].message.find("'time_ms' of 'a' must be a number, not string"), std::string::npos);
  EXPECT_NE(log.findings[2].message.find("has no metadata"), std::string::npos);
  EXPECT_NE(log.findings[3].message.find("'metadata' of 'a' must be an object, not array"), std::string::npos);
  EXPECT_NE(log.findings[4].message.find("'key' must be a string, not null"), std::string::npos);
  EXPECT_NE(log.findings[5].message.find("not a JSON object"), std::string::npos);
}

TEST(LogParser, SaysWhenTheFileEndsMidLine) {
  const ParsedLog log = parse_log_text(kGoodLine + "\n:::MLLOG {\"time_ms\": 1, \"ke", "log.txt");
  ASSERT_EQ(log.findings.size(), 1u);
  EXPECT_EQ(log.findings[0].line, 2);
  EXPECT_NE(log.findings[0].message.find("truncated log?"), std::string::npos);
}

TEST(LogParser, ReadsPythonNonFiniteNumbersAsStrings) {
  const ParsedLog log = parse_log_text(
      R"(:::MLLOG {"time_ms": 1, "key": "k", "value": [NaN, Infinity, -Infinity, "NaN in a string"], "metadata": {}})",
      "log.txt");
  ASSERT_EQ(log.events.size(), 1u) << dump(log.findings);
  EXPECT_EQ(log.events[0].value, nlohmann::json({"NaN", "Infinity", "-Infinity", "NaN in a string"}));
  EXPECT_EQ(quote_non_finite_numbers(R"({"a": "Infinity\" NaN", "b": NaN})"), R"({"a": "Infinity\" NaN", "b": "NaN"})");
}

TEST(LogParser, RefusesDeepNesting) {
  const std::string deep =
      ":::MLLOG {\"time_ms\": 1, \"key\": \"k\", \"metadata\": {}, \"value\": " + std::string(10000, '[') +
      std::string(10000, ']') + "}";
  const ParsedLog log = parse_log_text(deep, "log.txt");
  EXPECT_TRUE(log.events.empty());
  ASSERT_NE(find_finding(log.findings, Severity::kError, "nested deeper than 64"), nullptr) << dump(log.findings);
}

TEST(LogParser, SurvivesBinaryJunkAndInvalidUtf8) {
  std::string junk = ":::MLLOG {\"time_ms\": 1, \"key\": \"k\xff\xfe\", \"value\": 1, \"metadata\": {}}\n";
  junk += std::string("\0\x01\x02:::MLLOG \x80\x81{\0}\n", 18);
  junk += kGoodLine;
  const ParsedLog log = parse_log_text(junk, "log.txt");
  EXPECT_EQ(log.events.size(), 1u);
  ASSERT_EQ(log.findings.size(), 2u) << dump(log.findings);
  for (const auto& finding : log.findings) {
    // Findings are printable: no raw control bytes or broken UTF-8 reach a terminal or a report.
    EXPECT_EQ(printable(finding.message, 1000), finding.message);
  }
}

TEST(LogParser, CapsTheNumberOfFindings) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += ":::MLLOG {\n";
  ParseLimits limits;
  limits.max_findings = 10;
  const ParsedLog log = parse_log_text(text, "log.txt", limits);
  ASSERT_EQ(log.findings.size(), 11u);
  EXPECT_EQ(log.findings.back().message, "990 more problems in this file not shown");
}

TEST(LogParser, StreamsFilesAndReportsOverlongLines) {
  testing::ScratchFolder folder;
  const std::string path = folder / "result_0.txt";
  std::string text = kGoodLine + "\n:::MLLOG {\"pad\": \"" + std::string(300000, 'x') + "\"}\n" + kGoodLine + "\n";
  testing::write_text(path, text);
  ParseLimits limits;
  limits.max_line_bytes = 1000;
  const ParsedLog log = parse_log_file(path, limits);
  EXPECT_EQ(log.events.size(), 2u);
  ASSERT_EQ(log.findings.size(), 1u) << dump(log.findings);
  EXPECT_EQ(log.findings[0].line, 2);
  EXPECT_NE(log.findings[0].message.find("line longer than 1000 bytes"), std::string::npos);
  EXPECT_EQ(log.events[1].line, 3);

  // The streaming reader and the in-memory parser agree.
  const ParsedLog in_memory = parse_log_text(text, path, limits);
  EXPECT_EQ(in_memory.events.size(), log.events.size());
  EXPECT_EQ(in_memory.findings.size(), log.findings.size());
}

TEST(LogParser, RefusesFilesOverTheSizeLimitAndMissingFiles) {
  testing::ScratchFolder folder;
  testing::write_text(folder / "big.txt", std::string(5000, 'x'));
  ParseLimits limits;
  limits.max_file_bytes = 4096;
  const ParsedLog big = parse_log_file(folder / "big.txt", limits);
  ASSERT_EQ(big.findings.size(), 1u);
  EXPECT_NE(big.findings[0].message.find("file larger than 4096 bytes"), std::string::npos);
  const ParsedLog missing = parse_log_file(folder / "missing.txt");
  ASSERT_EQ(missing.findings.size(), 1u);
  EXPECT_EQ(missing.findings[0].message, "not a readable file");
}

TEST(Printable, EscapesControlBytesAndBrokenUtf8ButKeepsUtf8) {
  EXPECT_EQ(printable("a\tb\x01"), "a\\x09b\\x01");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(printable("\xc3\x28"), "\\xC3(");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a UTF-16 surrogate is not UTF-8
  EXPECT_EQ(printable(std::string(10, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace trainbench::review
