// Typed settings (harness/typed_settings.h): each field read once from the Config, optional and nested
// settings, and the list of names the struct reads.
#include <gtest/gtest.h>

#include "harness/typed_settings.h"
#include "support/error_message.h"

namespace trainbench {
namespace {

struct Nested {
  int64_t classes = 0;
  template <typename Visit>
  void fields(Visit& visit) {
    visit("classes", classes);
  }
};

struct Example {
  int64_t batch_size = 0;
  double rate = 0;
  bool flag = false;
  std::string name;
  std::vector<int64_t> widths;
  std::optional<int64_t> interval;
  std::optional<Nested> dataset;
  template <typename Visit>
  void fields(Visit& visit) {
    visit("batch_size", batch_size);
    visit("rate", rate);
    visit("flag", flag);
    visit("name", name);
    visit("widths", widths);
    visit("interval", interval);
    visit("dataset", dataset);
  }
};

TEST(TypedSettings, ReadsEveryFieldWithOptionalAndNestedSettings) {
  const Config config("bench/mini", nlohmann::json::parse(
                                        R"({"batch_size": 64, "rate": 0.5, "flag": true, "name": "lars",
                                            "widths": [16, 32], "dataset": {"classes": 10}})"));
  const auto settings = read_settings<Example>(config);
  EXPECT_EQ(settings.batch_size, 64);
  EXPECT_EQ(settings.rate, 0.5);
  EXPECT_TRUE(settings.flag);
  EXPECT_EQ(settings.name, "lars");
  EXPECT_EQ(settings.widths, (std::vector<int64_t>{16, 32}));
  EXPECT_FALSE(settings.interval.has_value());
  ASSERT_TRUE(settings.dataset.has_value());
  EXPECT_EQ(settings.dataset->classes, 10);
}

TEST(TypedSettings, AMissingOrMistypedSettingIsRefusedByName) {
  const Config missing("bench/mini", nlohmann::json::parse(R"({"batch_size": 64})"));
  EXPECT_NE(testing::error_message([&] { read_settings<Example>(missing); }).find("rate"), std::string::npos);
  const Config nested("bench/mini", nlohmann::json::parse(R"({"batch_size": 64, "rate": 0.5, "flag": true,
      "name": "x", "widths": [1], "dataset": {"classes": "ten"}})"));
  EXPECT_NE(testing::error_message([&] { read_settings<Example>(nested); }).find("bench/mini: dataset"),
            std::string::npos);
}

TEST(TypedSettings, NamesListEveryFieldNestedOnesWithTheirObject) {
  EXPECT_EQ(setting_names<Example>(), (std::vector<std::string>{"batch_size", "rate", "flag", "name", "widths",
                                                                "interval", "dataset", "dataset.classes"}));
}

}  // namespace
}  // namespace trainbench
