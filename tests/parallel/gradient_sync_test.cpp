// Batch-norm statistics averaged over the ranks (parallel/gradient_sync.h): two ranks in two threads over Gloo.
#include "parallel/gradient_sync.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/two_ranks.h"

namespace trainbench::parallel {
namespace {

using testing::run_two_ranks;

// SSD's reference sums every rank's running mean and variance and divides by the world before evaluating.
TEST(AverageOverRanks, EveryRankKeepsTheMeanOfTheRanksValues) {
  std::vector<torch::Tensor> means(2), variances(2), halves(2);
  EXPECT_EQ(run_two_ranks([&](Communicator& communicator) {
              const size_t rank = static_cast<size_t>(communicator.rank());
              means[rank] = torch::full({3}, rank == 0 ? 1.0 : 4.0);
              variances[rank] = torch::tensor({rank == 0 ? 2.0 : 6.0}, torch::kFloat64);  // a second dtype
              halves[rank] = torch::full({2, 2}, rank == 0 ? 0.5 : 1.5);
              average_over_ranks(communicator, {means[rank], variances[rank], halves[rank]});
            }),
            (std::vector<std::string>{"", ""}));
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(torch::equal(means[rank], torch::full({3}, 2.5))) << means[rank];
    EXPECT_TRUE(torch::equal(variances[rank], torch::tensor({4.0}, torch::kFloat64))) << variances[rank];
    EXPECT_TRUE(torch::equal(halves[rank], torch::full({2, 2}, 1.0))) << halves[rank];
  }
}

TEST(AverageOverRanks, IntegerTensorsAreRefusedByName) {
  const auto failures = run_two_ranks([](Communicator& communicator) {
    torch::Tensor batches_tracked = torch::tensor({3}, torch::kLong);
    average_over_ranks(communicator, {batches_tracked});
  });
  EXPECT_EQ(failures[0], "average_over_ranks: expected floating-point tensors, got Long");
}

}  // namespace
}  // namespace trainbench::parallel
