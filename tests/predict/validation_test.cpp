#include "predict/validation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

namespace trainbench::predict {
namespace {

const std::string kNvidia = PREDICT_NVIDIA_DIR;

size_t count(const std::string& text, const std::string& part) {
  size_t found = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
  return found;
}

TEST(Validation, NvidiaOneNodeCalibrationPredictsEveryMultiNodeSystem) {
  if (!std::filesystem::is_directory(kNvidia + "/results")) GTEST_SKIP() << kNvidia << " is absent";
  const auto validations = validate_scaling(kNvidia, review::load_ruleset("1.1.0"), {});
  // resnet 8/128/540, bert 8/128/540, ssd 8/128, maskrcnn 4/51, rnnt 16/192, unet3d 9/96, dlrm 8/14, minigo 32/224
  std::map<std::string, std::vector<int>> nodes;
  for (const auto& validation : validations) {
    EXPECT_EQ(validation.calibration.nodes, 1) << validation.benchmark;
    for (const auto& row : validation.rows) {
      nodes[validation.benchmark].push_back(row.prediction.nodes);
      EXPECT_GT(row.prediction.minutes, 0) << validation.benchmark;
      EXPECT_GT(row.published_minutes, 0) << validation.benchmark;
    }
  }
  EXPECT_EQ(nodes["resnet"], (std::vector<int>{8, 128, 540}));
  EXPECT_EQ(nodes["bert"], (std::vector<int>{8, 128, 540}));
  EXPECT_EQ(nodes["ssd"], (std::vector<int>{8, 128}));
  EXPECT_EQ(nodes["maskrcnn"], (std::vector<int>{4, 51}));
  EXPECT_EQ(nodes["rnnt"], (std::vector<int>{16, 192}));
  EXPECT_EQ(nodes["unet3d"], (std::vector<int>{9, 96}));
  EXPECT_EQ(nodes["dlrm"], (std::vector<int>{8, 14}));
  EXPECT_EQ(nodes["minigo"], (std::vector<int>{32, 224}));

  const std::string svg = validation_svg(validations);
  EXPECT_EQ(count(svg, "<polyline"), 2 * validations.size());
  EXPECT_EQ(svg.rfind("</svg>\n"), svg.size() - 7);
  const std::string table = validation_markdown(validations);
  EXPECT_EQ(count(table, "\n"), 2 + validations.size() + 18);
}

}  // namespace
}  // namespace trainbench::predict
