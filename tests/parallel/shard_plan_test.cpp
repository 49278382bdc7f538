// DLRM's table shards over ranks (parallel/shard_plan.h).
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "parallel/shard_plan.h"

namespace trainbench::parallel {
namespace {

TEST(ShardPlan, EveryRowIsHeldOnceTheLargestTablesAreCutAndTheRanksBalanced) {
  std::vector<int64_t> tables(26);  // one table far larger than the others
  for (size_t t = 0; t < tables.size(); ++t) tables[t] = 3 + static_cast<int64_t>(t * 7 % 20);
  tables[0] = 3000;
  const ShardPlan plan = plan_table_shards(tables, 2);
  std::vector<int64_t> held(tables.size(), 0), next_row(tables.size(), 0);
  for (const TableShard& shard : plan.shards) {
    EXPECT_EQ(shard.first_row, next_row[static_cast<size_t>(shard.table)]) << "table " << shard.table;
    next_row[static_cast<size_t>(shard.table)] += shard.rows;
    held[static_cast<size_t>(shard.table)] += shard.rows;
  }
  EXPECT_EQ(held, tables);
  const std::vector<TableShard> rank0 = plan.on_rank(0), rank1 = plan.on_rank(1);
  EXPECT_EQ(rank0.front().table, 0);
  EXPECT_EQ(rank0.front().rows, 1500);
  EXPECT_EQ(rank1.front().first_row, 1500);
  EXPECT_LE(std::abs(plan.rows_on_rank(0) - plan.rows_on_rank(1)), 22) << "more apart than the largest whole table";

  const ShardPlan alone = plan_table_shards(tables, 1);
  ASSERT_EQ(alone.shards.size(), tables.size());
  for (const TableShard& shard : alone.shards) EXPECT_EQ(shard.rows, tables[static_cast<size_t>(shard.table)]);

  // The reference preset's tables over 8 ranks: the five of more than 25 M rows are cut, and every rank holds
  // within 15% of an even share.
  const std::vector<int64_t> reference{39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10,
                                       2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36};
  const ShardPlan eight = plan_table_shards(reference, 8);
  const double even = 187767399.0 / 8;
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_LT(std::abs(static_cast<double>(eight.rows_on_rank(rank)) - even), 0.15 * even) << "rank " << rank;
    int64_t cut = 0;
    for (const TableShard& shard : eight.on_rank(rank)) cut += shard.rows < reference[static_cast<size_t>(shard.table)];
    EXPECT_EQ(cut, 5) << "rank " << rank;
  }
}

}  // namespace
}  // namespace trainbench::parallel
