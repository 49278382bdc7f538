// The bootstrap's random model (minigo's RandomDualNet with loader.cc's 0.4 standard deviations): move
// probabilities that sum to 1 with log-probabilities spread by 0.4, values in [-1, 1] spread by about 0.4
// around 0, the same outputs for the same planes and others for other planes.
#include "go/random_evaluator.h"

#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

namespace trainbench::go {
namespace {

TEST(GoRandomEvaluator, DrawsTheReferenceRandomModelsOutputsPerPosition) {
  constexpr int kSize = 9, kMoves = kSize * kSize + 1, kPositions = 400;
  const int feature_size = Position::kPlanes * kSize * kSize;
  data::Rng rng(7);
  std::vector<uint8_t> planes(static_cast<size_t>(kPositions) * feature_size);
  for (auto& value : planes) value = static_cast<uint8_t>(rng.below(2));
  std::vector<float> policy(static_cast<size_t>(kPositions) * kMoves), values(kPositions);
  const BatchEvaluator evaluate = random_evaluator(kSize, 1);
  evaluate(0, planes.data(), kPositions, policy.data(), values.data());

  double log_spread = 0, value_sum = 0, value_squares = 0;
  for (int b = 0; b < kPositions; ++b) {
    const float* p = policy.data() + static_cast<size_t>(b) * kMoves;
    EXPECT_NEAR(std::accumulate(p, p + kMoves, 0.0), 1.0, 1e-5);
    double mean = 0, squares = 0;
    for (int m = 0; m < kMoves; ++m) mean += std::log(p[m]) / kMoves;
    for (int m = 0; m < kMoves; ++m) squares += (std::log(p[m]) - mean) * (std::log(p[m]) - mean);
    log_spread += std::sqrt(squares / (kMoves - 1)) / kPositions;
    EXPECT_GE(values[b], -1.0f);
    EXPECT_LE(values[b], 1.0f);
    value_sum += values[b];
    value_squares += values[b] * values[b];
  }
  EXPECT_NEAR(log_spread, 0.4, 0.02);
  const double value_mean = value_sum / kPositions;
  EXPECT_NEAR(value_mean, 0.0, 0.06);
  EXPECT_NEAR(std::sqrt(value_squares / kPositions - value_mean * value_mean), 0.39, 0.04);

  // The first position again, alone: the same outputs; a different seed: others.
  std::vector<float> again(kMoves), value(1);
  evaluate(0, planes.data(), 1, again.data(), value.data());
  EXPECT_EQ(std::vector<float>(policy.begin(), policy.begin() + kMoves), again);
  EXPECT_EQ(value[0], values[0]);
  random_evaluator(kSize, 2)(0, planes.data(), 1, again.data(), value.data());
  EXPECT_NE(std::vector<float>(policy.begin(), policy.begin() + kMoves), again);
  EXPECT_NE(std::vector<float>(policy.begin(), policy.begin() + kMoves),
            std::vector<float>(policy.begin() + kMoves, policy.begin() + 2 * kMoves));
}

}  // namespace
}  // namespace trainbench::go
