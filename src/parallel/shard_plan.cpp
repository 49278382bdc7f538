#include "parallel/shard_plan.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace trainbench::parallel {

std::vector<TableShard> ShardPlan::on_rank(int rank) const {
  std::vector<TableShard> result;
  for (const TableShard& shard : shards)
    if (shard.rank == rank) result.push_back(shard);
  return result;
}

int64_t ShardPlan::rows_on_rank(int rank) const {
  int64_t rows = 0;
  for (const TableShard& shard : shards)
    if (shard.rank == rank) rows += shard.rows;
  return rows;
}

int64_t ShardPlan::max_shards_per_rank() const {
  int64_t most = 0;
  for (int rank = 0; rank < world; ++rank) most = std::max(most, static_cast<int64_t>(on_rank(rank).size()));
  return most;
}

ShardPlan plan_table_shards(const std::vector<int64_t>& table_sizes, int world) {
  if (world < 1) fail("dlrm table shards", "need at least one rank");
  const int64_t total = std::accumulate(table_sizes.begin(), table_sizes.end(), int64_t{0});
  const int64_t even_share = (total + world - 1) / world;
  std::vector<std::vector<TableShard>> by_rank(static_cast<size_t>(world));
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  std::vector<int64_t> whole;
  for (int64_t table = 0; table < static_cast<int64_t>(table_sizes.size()); ++table) {
    const int64_t rows = table_sizes[static_cast<size_t>(table)];
    if (rows <= even_share || rows < world) {
      whole.push_back(table);
      continue;
    }
    for (int rank = 0; rank < world; ++rank) {  // row ranges differing by at most one row
      const int64_t first = rows * rank / world, last = rows * (rank + 1) / world;
      by_rank[static_cast<size_t>(rank)].push_back({table, first, last - first, rank});
      load[static_cast<size_t>(rank)] += last - first;
    }
  }
  std::stable_sort(whole.begin(), whole.end(),
                   [&](int64_t a, int64_t b) { return table_sizes[static_cast<size_t>(a)] > table_sizes[static_cast<size_t>(b)]; });
  for (const int64_t table : whole) {
    const auto rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    by_rank[static_cast<size_t>(rank)].push_back({table, 0, table_sizes[static_cast<size_t>(table)], rank});
    load[static_cast<size_t>(rank)] += table_sizes[static_cast<size_t>(table)];
  }
  ShardPlan plan;
  plan.world = world;
  for (auto& shards : by_rank) plan.shards.insert(plan.shards.end(), shards.begin(), shards.end());
  return plan;
}

}  // namespace trainbench::parallel
