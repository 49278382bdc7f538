#include "review/scoring.h"

#include <gtest/gtest.h>

namespace trainbench::review {
namespace {

TEST(OlympicScore, DropsFastestAndSlowest) {
  // Hand-computed: sorted 10, 11, 12, 13, 20 -> mean of 11, 12, 13 = 12.
  const OlympicScore score = olympic_score({{12, true}, {20, true}, {10, true}, {13, true}, {11, true}});
  ASSERT_TRUE(score.mean_minutes.has_value());
  EXPECT_DOUBLE_EQ(*score.mean_minutes, 12.0);
  EXPECT_EQ(score.runs, 5);
  EXPECT_EQ(score.non_converged, 0);
}

TEST(OlympicScore, NonConvergedRunIsTheSlowestAndDropped) {
  // 9.0 never converged: sorted 10, 11, 12, 13, inf -> mean of 11, 12, 13.
  const OlympicScore score = olympic_score({{10, true}, {11, true}, {12, true}, {13, true}, {9, false}});
  ASSERT_TRUE(score.mean_minutes.has_value());
  EXPECT_DOUBLE_EQ(*score.mean_minutes, 12.0);
  EXPECT_EQ(score.non_converged, 1);
}

TEST(OlympicScore, TooManyNonConvergedRunsMakeItInvalid) {
  const OlympicScore score = olympic_score({{10, true}, {11, false}, {12, true}, {13, true}, {9, false}});
  EXPECT_FALSE(score.mean_minutes.has_value());
  EXPECT_EQ(score.non_converged, 2);
}

TEST(OlympicScore, Unet3dDropsFourAtEachEnd) {
  std::vector<RunTime> runs;
  for (int minutes = 1; minutes <= 40; ++minutes) runs.push_back({static_cast<double>(minutes), true});
  runs[39].converged = runs[38].converged = runs[37].converged = runs[36].converged = false;  // up to 4 may fail
  const OlympicScore score = olympic_score(runs, 4);
  ASSERT_TRUE(score.mean_minutes.has_value());
  EXPECT_DOUBLE_EQ(*score.mean_minutes, (5.0 + 36.0) / 2);  // 5..36: drops 1..4 and the four infinite runs
  runs[35].converged = false;
  EXPECT_FALSE(olympic_score(runs, 4).mean_minutes.has_value());
}

TEST(OlympicScore, NeedsMoreRunsThanItDrops) {
  EXPECT_FALSE(olympic_score({{1, true}, {2, true}}, 1).mean_minutes.has_value());
  EXPECT_DOUBLE_EQ(*olympic_score({{1, true}, {2, true}, {4, true}}, 1).mean_minutes, 2.0);
}

}  // namespace
}  // namespace trainbench::review
