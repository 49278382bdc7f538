#include "predict/collectives.h"

#include <gtest/gtest.h>

namespace trainbench::predict {
namespace {

TEST(Collectives, RingAllReduceSendsTwiceTheDataLessOneShareOverTwoHopsPerRank) {
  // p = 4: 2(p-1) = 6 hops of 10 us, and 6/4 x 1 GB at 1 GB/s.
  EXPECT_NEAR(ring_all_reduce_seconds(1e9, 4, {1e9, 1e-5}), 6e-5 + 1.5, 1e-12);
  EXPECT_EQ(ring_all_reduce_seconds(1e9, 1, {1e9, 1e-5}), 0);
}

TEST(Collectives, TreeAllReduceCrossesTwiceTheTreeDepth) {
  // p = 5: depth ceil(log2 5) = 3, so 6 hops; every rank moves 2S.
  EXPECT_NEAR(tree_all_reduce_seconds(1e9, 5, {1e9, 1e-5}), 6e-5 + 2.0, 1e-12);
}

TEST(Collectives, RingGatherMovesAllButOwnShare) {
  EXPECT_NEAR(ring_gather_seconds(1e9, 4, {1e9, 1e-5}), 3e-5 + 0.75, 1e-12);
}

TEST(Collectives, HierarchicalAllReduceOnFourNodesTakesTheRingAcrossNodes) {
  // Inside: reduce-scatter + all-gather, 2 x 7/8 x 800 MB at 300 GB/s = 4.667 ms. Across: the 100 MB shard
  // on 200/8 = 25 GB/s: ring 2 x 3/4 x 100 MB / 25 GB/s = 6 ms, tree 2 x 100 MB / 25 GB/s = 8 ms.
  const double seconds = hierarchical_all_reduce_seconds(8e8, 4, 8, {3e11, 0}, {2e11, 0});
  EXPECT_NEAR(seconds, 2 * 7.0 / 8 * 8e8 / 3e11 + 6e-3, 1e-12);
}

TEST(Collectives, HierarchicalAllReduceOnManyNodesTakesTheTreeWhenLatencyDominates) {
  // 64 nodes, 1 ms per hop: ring 126 hops = 126 ms + 7.875 ms; tree 12 hops = 12 ms + 8 ms.
  const double seconds = hierarchical_all_reduce_seconds(8e8, 64, 8, {3e11, 0}, {2e11, 1e-3});
  EXPECT_NEAR(seconds, 2 * 7.0 / 8 * 8e8 / 3e11 + 12e-3 + 8e-3, 1e-12);
}

TEST(Collectives, OneNodeHasNoInterNodePart) {
  EXPECT_NEAR(hierarchical_all_reduce_seconds(8e8, 1, 8, {3e11, 0}, {2e11, 1}), 2 * 7.0 / 8 * 8e8 / 3e11, 1e-12);
}

TEST(Collectives, UnknownLinksCostNothing) {
  EXPECT_EQ(hierarchical_all_reduce_seconds(8e8, 4, 8, {}, {}), 0);
}

TEST(Collectives, AllToAllIsBoundByTheShareLeavingTheNode) {
  // 2 nodes x 4 devices, 1 MB per device: half of each device's bytes leave the node, 4 x 0.5 MB = 2 MB per
  // node at 1 GB/s = 2 ms; inside, 3/8 MB at 10 GB/s = 37.5 us.
  EXPECT_NEAR(all_to_all_seconds(1e6, 2, 4, {1e10, 0}, {1e9, 0}), 2e-3, 1e-12);
  EXPECT_NEAR(all_to_all_seconds(1e6, 1, 4, {1e10, 0}, {1e9, 0}), 3.0 / 4 * 1e6 / 1e10, 1e-12);
}

TEST(Collectives, ExposedIsWhatTheOverlappedComputeDoesNotHide) {
  EXPECT_NEAR(exposed_seconds(10, 9, 2.0 / 3), 4, 1e-12);
  EXPECT_EQ(exposed_seconds(1, 9, 2.0 / 3), 0);
  EXPECT_EQ(exposed_seconds(10, 9, 0), 10);
}

}  // namespace
}  // namespace trainbench::predict
