// The nesting cap every JSON reader applies before parsing (issue 32: 100,000 nested brackets crashed coco-eval),
// and the bounded excerpt error messages quote.
#include "util/json_limits.h"

#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench {
namespace {

using testing::error_message;

TEST(JsonLimits, CountsNestingOutsideStringsAndStopsPastTheLimit) {
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}]})", 64), 4);
  EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[["])", 64), 1);  // brackets inside strings, escaped quote
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(json_nesting_depth(deep, 64), 65);
  check_json_nesting(std::string(64, '[') + std::string(64, ']'), "ok.json");
  EXPECT_EQ(error_message([&] { check_json_nesting(deep, "dt.json"); }), "dt.json: JSON nested deeper than 64 levels");
}

TEST(JsonLimits, ExcerptsStayShort) {
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[1,2]")), "[1,2]");
  const std::string excerpt = json_excerpt(nlohmann::json(std::vector<int>(20000, 7)));
  EXPECT_EQ(excerpt.size(), 83u);
  EXPECT_EQ(excerpt.substr(excerpt.size() - 3), "...");
}

}  // namespace
}  // namespace trainbench
