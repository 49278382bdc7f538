// The general gather (parallel/gather.h): two ranks in two threads over Gloo on loopback.
#include "parallel/gather.h"

#include <numeric>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "support/two_ranks.h"

namespace trainbench::parallel {
namespace {

using testing::run_two_ranks;

std::vector<uint8_t> pattern(size_t size, uint8_t start) {
  std::vector<uint8_t> bytes(size);
  std::iota(bytes.begin(), bytes.end(), start);
  return bytes;
}

const std::vector<std::string> kNoFailures{"", ""};

TEST(GatherBytes, UnequalAndEmptyBuffersReachEveryRankInRankOrder) {
  // Rank 0 sends nothing, rank 1 seven bytes; then the other way round; then both nothing.
  const std::vector<std::pair<size_t, size_t>> sizes{{0, 7}, {7, 0}, {0, 0}, {3, 11}};
  std::vector<std::vector<std::vector<std::vector<uint8_t>>>> received(2);
  EXPECT_EQ(run_two_ranks([&](Communicator& communicator) {
              for (const auto& [size0, size1] : sizes) {
                const size_t mine = communicator.rank() == 0 ? size0 : size1;
                received[static_cast<size_t>(communicator.rank())].push_back(
                    allgather_bytes(communicator, pattern(mine, static_cast<uint8_t>(100 * communicator.rank()))));
              }
            }),
            kNoFailures);
  for (size_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(received[rank].size(), sizes.size());
    for (size_t call = 0; call < sizes.size(); ++call) {
      const std::vector<std::vector<uint8_t>> expected{pattern(sizes[call].first, 0), pattern(sizes[call].second, 100)};
      EXPECT_EQ(received[rank][call], expected) << "rank " << rank << ", call " << call;
    }
  }
}

TEST(GatherBytes, ToOneRankOnlyTheRootReceives) {
  std::vector<std::vector<std::vector<uint8_t>>> received(2);
  for (int root : {0, 1}) {
    EXPECT_EQ(run_two_ranks([&](Communicator& communicator) {
                const std::vector<uint8_t> mine = pattern(communicator.rank() == 0 ? 5 : 2, static_cast<uint8_t>(10 * communicator.rank()));
                received[static_cast<size_t>(communicator.rank())] = gather_bytes(communicator, mine, root);
              }),
              kNoFailures);
    const std::vector<std::vector<uint8_t>> expected{pattern(5, 0), pattern(2, 10)};
    EXPECT_EQ(received[static_cast<size_t>(root)], expected) << "root " << root;
    EXPECT_TRUE(received[static_cast<size_t>(1 - root)].empty()) << "root " << root;
  }
}

TEST(GatherBytes, LargeBuffersArriveIntact) {
  // 24 MiB from rank 0 and 1 byte from rank 1: the padding is 24 MiB on rank 1.
  const size_t large = size_t{24} << 20;
  std::vector<uint8_t> big(large);
  for (size_t i = 0; i < large; ++i) big[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::vector<std::vector<std::vector<uint8_t>>> received(2);
  EXPECT_EQ(run_two_ranks([&](Communicator& communicator) {
              received[static_cast<size_t>(communicator.rank())] =
                  gather_bytes(communicator, communicator.rank() == 0 ? big : std::vector<uint8_t>{42}, 0);
            }),
            kNoFailures);
  ASSERT_EQ(received[0].size(), 2u);
  EXPECT_TRUE(received[0][0] == big);
  EXPECT_EQ(received[0][1], std::vector<uint8_t>{42});
}

TEST(GatherConcat, TensorsOfDifferentFirstDimensionConcatenateInRankOrder) {
  const auto rows_of = [](int rank) {
    return torch::arange(rank == 0 ? 6 : 15, torch::kFloat64).view({-1, 3}) + 1000 * rank;
  };
  const torch::Tensor expected = torch::cat({rows_of(0), rows_of(1)});
  std::vector<torch::Tensor> everywhere(2), at_root(2), empty_rows(2);
  EXPECT_EQ(run_two_ranks([&](Communicator& communicator) {
              const size_t rank = static_cast<size_t>(communicator.rank());
              everywhere[rank] = allgather_concat(communicator, rows_of(communicator.rank()));
              at_root[rank] = gather_concat(communicator, rows_of(communicator.rank()), 1);
              empty_rows[rank] = allgather_concat(communicator, torch::zeros({0, 3}, torch::kFloat64));
            }),
            kNoFailures);
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(torch::equal(everywhere[rank], expected)) << "rank " << rank;
    EXPECT_EQ(empty_rows[rank].sizes(), (std::vector<int64_t>{0, 3})) << "rank " << rank;
  }
  EXPECT_TRUE(torch::equal(at_root[1], expected));
  EXPECT_FALSE(at_root[0].defined());
}

TEST(GatherConcat, RowsOfDifferentShapesAreANamedError) {
  const auto failures = run_two_ranks([](Communicator& communicator) {
    allgather_concat(communicator, torch::zeros({2, communicator.rank() == 0 ? 3 : 4}));
  });
  EXPECT_NE(failures[0].find("rank 1 sends rows of 4 elements, this rank rows of 3"), std::string::npos) << failures[0];
  EXPECT_NE(failures[1].find("rank 0 sends rows of 3 elements, this rank rows of 4"), std::string::npos) << failures[1];
}

TEST(GatherConcat, OneRankGetsItsOwnRows) {
  auto communicator = Communicator::connect(RankEnvironment{});
  const torch::Tensor rows = torch::arange(4).view({2, 2});
  EXPECT_TRUE(torch::equal(gather_concat(*communicator, rows, 0), rows));
  EXPECT_EQ(gather_bytes(*communicator, {1, 2, 3}, 0), (std::vector<std::vector<uint8_t>>{{1, 2, 3}}));
}

}  // namespace
}  // namespace trainbench::parallel
