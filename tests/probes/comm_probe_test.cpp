// The comm probe's arithmetic, and a sweep on a world of one (the two-rank sweep runs in tests/parallel).
#include "probes/comm_probe.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "parallel/communicator.h"
#include "support/error_message.h"

namespace trainbench::probes {
namespace {

TEST(CommProbe, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_gather", 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("alltoall", 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("broadcast", 16), 1.0);
  EXPECT_THAT(testing::error_message([] { bus_bandwidth_factor("gather", 2); }),
              ::testing::HasSubstr("--ops gather: expected all_reduce, all_gather, reduce_scatter, broadcast or alltoall"));
}

TEST(CommProbe, SweepSizesAreGeometricAndShareEvenly) {
  EXPECT_EQ(sweep_sizes(8, 256LL << 20, 2, 4, 1).size(), 26u);  // 8 B ... 256 MiB
  EXPECT_EQ(sweep_sizes(8, 64, 2, 4, 2), (std::vector<int64_t>{8, 16, 32, 64}));
  // With 4 ranks of 4-byte floats every size is a multiple of 16 bytes, and never zero.
  EXPECT_EQ(sweep_sizes(8, 100, 2, 4, 4), (std::vector<int64_t>{16, 32, 64}));
  EXPECT_THAT(testing::error_message([] { sweep_sizes(64, 8, 2, 4, 1); }),
              ::testing::HasSubstr("--maxbytes: expected at least --minbytes (64)"));
  EXPECT_THAT(testing::error_message([] { sweep_sizes(8, 64, 1, 4, 1); }), ::testing::HasSubstr("--stepfactor"));
}

TEST(CommProbe, OneRankSweepIsCheckedAndReported) {
  auto communicator = parallel::Communicator::connect(parallel::RankEnvironment{});
  CommProbeOptions options;
  options.min_bytes = 8;
  options.max_bytes = 1024;
  options.factor = 4;
  options.iterations = 2;
  options.warmup_iterations = 1;
  options.device = "cpu";
  std::ostringstream out;
  const CommProbeResult result = run_comm_probe(*communicator, options, out);
  EXPECT_EQ(result.wrong_total, 0);
  EXPECT_EQ(result.rows.size(), 5u * 4 * 2 - 4);  // 8, 32, 128, 512 B; no in-place all-to-all
  EXPECT_THAT(out.str(), ::testing::HasSubstr("# trainbench probe comm: single, 1 rank(s), float on cpu"));
  EXPECT_THAT(out.str(), ::testing::HasSubstr("# Wrong elements: 0"));
  EXPECT_EQ(result.json["rows"].size(), result.rows.size());
  EXPECT_EQ(result.json["environment"]["ranks"], 1);
  options.dtype = "half";
  EXPECT_THAT(testing::error_message([&] { run_comm_probe(*communicator, options, out); }),
              ::testing::HasSubstr("--dtype half: expected float, double or int32"));
}

}  // namespace
}  // namespace trainbench::probes
