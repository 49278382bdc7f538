#pragma once
// Model parallelism for embedding tables (DLRM): which rank holds which rows of which table. Plain C++, so
// `bench --shard-plan` can print a plan without building the model.
#include <cstdint>
#include <vector>

namespace trainbench::parallel {

// Rows [first_row, first_row + rows) of table `table`, held by `rank`.
struct TableShard {
  int64_t table = 0;
  int64_t first_row = 0;
  int64_t rows = 0;
  int rank = 0;
};

// Where the tables' rows live over `world` ranks. A table with more rows than an even share of all rows
// (their sum / world) cannot sit whole on one rank without unbalancing it, so it is cut into `world` row
// ranges, one per rank; the other tables stay whole and go, largest first, to the rank holding the fewest
// rows so far (ties: the lowest rank).
struct ShardPlan {
  int world = 1;
  std::vector<TableShard> shards;  // by rank, then in the order the rank holds them
  std::vector<TableShard> on_rank(int rank) const;
  int64_t rows_on_rank(int rank) const;
  int64_t max_shards_per_rank() const;
};
ShardPlan plan_table_shards(const std::vector<int64_t>& table_sizes, int world);

}  // namespace trainbench::parallel
