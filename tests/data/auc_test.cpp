#include "data/auc.h"

#include <gtest/gtest.h>

#include "support/error_message.h"

namespace trainbench::data {
namespace {

double auc_of(const std::vector<float>& scores, const std::vector<float>& labels) {
  AucAccumulator accumulator;
  accumulator.add(scores.data(), labels.data(), static_cast<int64_t>(scores.size()));
  return accumulator.auc();
}

TEST(Auc, PerfectReversedAndHandCountedOrderings) {
  EXPECT_DOUBLE_EQ(auc_of({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auc_of({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  // Positives 0.35 and 0.8; negatives 0.1, 0.4, 0.9. Pairs won: 0.35 > 0.1; 0.8 > 0.1, 0.4 -> 3 of 6.
  EXPECT_DOUBLE_EQ(auc_of({0.1f, 0.35f, 0.4f, 0.8f, 0.9f}, {0, 1, 0, 1, 0}), 0.5);
}

TEST(Auc, TiedScoresCountHalf) {
  // Positives {0.5, 0.7}, negatives {0.5, 0.2, 0.5}: 0.5 vs (0.2 win, two ties) = 2; 0.7 beats all 3 = 3.
  // (2 + 3) / 6.
  EXPECT_DOUBLE_EQ(auc_of({0.5f, 0.5f, 0.2f, 0.7f, 0.5f}, {1, 0, 0, 1, 0}), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(auc_of({0.3f, 0.3f, 0.3f, 0.3f}, {1, 0, 1, 0}), 0.5);  // all equal
}

TEST(Auc, AccumulatesAcrossBatchesAsOneSet) {
  AucAccumulator accumulator;
  const std::vector<float> scores{0.5f, 0.5f, 0.2f, 0.7f, 0.5f}, labels{1, 0, 0, 1, 0};
  accumulator.add(scores.data(), labels.data(), 2);
  accumulator.add(scores.data() + 2, labels.data() + 2, 3);
  EXPECT_EQ(accumulator.size(), 5);
  EXPECT_DOUBLE_EQ(accumulator.auc(), 5.0 / 6.0);
  accumulator.clear();
  EXPECT_EQ(accumulator.size(), 0);
}

TEST(Auc, SingleClassIsAnError) {
  EXPECT_EQ(testing::error_message([] { auc_of({0.1f, 0.2f}, {1, 1}); }),
            "AUC: undefined: the 2 evaluated samples are all positive");
  EXPECT_EQ(testing::error_message([] { auc_of({0.1f}, {0}); }), "AUC: undefined: the 1 evaluated samples are all negative");
}

}  // namespace
}  // namespace trainbench::data
